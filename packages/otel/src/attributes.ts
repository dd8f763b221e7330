/**
 * Attribute values from Keel events: GenAI semantic-convention names, provider ids split into
 * provider and model, and content made safe to export (redacted, well-formed, cut by code points).
 */
import type { Attributes } from "@opentelemetry/api";
import type { PromptManifest, Usage } from "@keel/kernel";
import { headOf, truncate } from "@keel/text";
import { redactData, redactDeep } from "@keel/secrets";

/** GenAI provider names (`gen_ai.provider.name`) for Keel's provider prefixes. */
const PROVIDER_NAMES: Record<string, string> = {
  anthropic: "anthropic",
  openai: "openai",
  "openai-compatible": "openai",
  scripted: "keel.scripted",
  echo: "keel.echo",
};

/** `anthropic:claude-sonnet-4-6` → provider and model; a fallback chain (`fallback:a|b`) → its first member. */
export function splitProviderId(id: unknown): { provider: string; model: string } | undefined {
  if (typeof id !== "string" || !id) return undefined;
  const first = id.startsWith("fallback:") ? (id.slice("fallback:".length).split("|")[0] ?? "") : id;
  const colon = first.indexOf(":");
  if (colon <= 0) return { provider: first, model: first };
  const prefix = first.slice(0, colon);
  return { provider: PROVIDER_NAMES[prefix] ?? prefix, model: first.slice(colon + 1) };
}

/** GenAI usage attributes. Keel's `inputTokens` excludes cached tokens; the convention's input count includes them. */
export function usageAttributes(usage: Partial<Usage> | undefined): Attributes {
  if (!usage || typeof usage !== "object") return {};
  const n = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  const out: Attributes = {
    "gen_ai.usage.input_tokens": n(usage.inputTokens) + n(usage.cacheReadTokens) + n(usage.cacheWriteTokens),
    "gen_ai.usage.output_tokens": n(usage.outputTokens),
  };
  if (n(usage.cacheReadTokens)) out["gen_ai.usage.cache_read.input_tokens"] = n(usage.cacheReadTokens);
  if (n(usage.cacheWriteTokens)) out["gen_ai.usage.cache_creation.input_tokens"] = n(usage.cacheWriteTokens);
  if (n(usage.costUsd)) out["keel.usage.cost_usd"] = n(usage.costUsd);
  return out;
}

/** What the prompt manifest says about one request, as attributes of its `chat` span. */
export function manifestAttributes(m: PromptManifest): Attributes {
  const out: Attributes = {
    "keel.prompt.sections": m.sections.map((s) => `${s.sectionId}: ${s.plugins.join(", ") || "kernel"}`),
    "keel.prompt.context": m.context.map((c) => `${c.id} (${c.domain}): ${c.plugin}`),
    "keel.prompt.tools": m.tools.map((t) => t.name),
    "keel.prompt.message_count": m.messageCount,
    "keel.prompt.tokens.system": m.tokenEstimate.system,
    "keel.prompt.tokens.tools": m.tokenEstimate.tools,
    "keel.prompt.tokens.messages": m.tokenEstimate.messages,
    "keel.prompt.tokens.total": m.tokenEstimate.total,
    "keel.prompt.tokens.exact": m.tokenEstimate.exact,
    "keel.round.final": m.finalRound,
  };
  if (m.route) {
    // The routed member is the model asked for: the GenAI attributes name it, the keel ones say who routed and why.
    const asked = splitProviderId(m.route.provider);
    if (asked) {
      out["gen_ai.provider.name"] = asked.provider;
      out["gen_ai.request.model"] = asked.model;
    }
    out["keel.route.model"] = m.route.model;
    out["keel.route.provider"] = m.route.provider;
    out["keel.route.reason"] = short(m.route.reason);
    out["keel.route.plugin"] = m.route.plugin;
  }
  const o = m.options ?? {};
  if (typeof o.maxTokens === "number") out["gen_ai.request.max_tokens"] = o.maxTokens;
  if (typeof o.temperature === "number") out["gen_ai.request.temperature"] = o.temperature;
  return out;
}

/**
 * Content for export: secrets redacted as the session log redacts them, well-formed, at most
 * `max` code points. `prose` (messages, results): every string is scanned as free text; `data`
 * (tool arguments): as values of their fields, so identifiers are kept.
 */
export function content(value: unknown, max: number, as: "prose" | "data" = "prose"): string {
  const redacted = as === "data" ? redactData(value) : redactDeep(value);
  let text: string;
  try {
    text = typeof redacted === "string" ? redacted : (JSON.stringify(redacted) ?? "");
  } catch {
    text = "[unserializable]";
  }
  return truncate(text, max);
}

/** Free text that may quote anything (reasons, error messages): redacted, well-formed, cut. */
export function short(value: unknown, max = 500): string {
  return content(typeof value === "string" ? value : String(value), max);
}

/** A name (plugin, tool, kind, id): well-formed and cut, not scanned for secrets. */
export function label(value: unknown, max = 200): string {
  return headOf(typeof value === "string" ? value : String(value), max);
}
