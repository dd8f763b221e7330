/** AI SDK stream parts (specification v3/v4) → Keel ModelEvents and the final `response`. */
import type { AssistantBlock, ModelEvent, StopReason, Usage } from "@keel/kernel";
import { ProviderError, preview } from "@keel/kernel";
import { costOf, fromFacts, type ModelPrice, parseArgs } from "@keel/providers";
import { classifyAiSdkError, factsOf } from "./errors.ts";
import type { AiSdkReasoningData } from "./prompt.ts";

type Meta = Record<string, Record<string, unknown>>;
type Slot =
  | { kind: "text"; text: string }
  | { kind: "thinking"; text: string; meta: Meta }
  | { kind: "call"; id: string; name: string; args: string; done: boolean };

type Part = Record<string, unknown> & { type?: unknown };
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const count = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);

/** Provider metadata merged key by key (a signature arrives on a delta, encrypted content at the end). */
function mergeMeta(into: Meta, meta: unknown): void {
  if (typeof meta !== "object" || meta === null) return;
  for (const [k, v] of Object.entries(meta))
    if (typeof v === "object" && v !== null) into[k] = { ...into[k], ...(v as Record<string, unknown>) };
}

/** What a stream says about its model, its price and id (the `response` event carries them). */
export interface CollectorOptions {
  /** The Keel provider id, `<provider>:<model>`. */
  id: string;
  /** The model's `provider` string, stamped on reasoning blocks so they go back only to it. */
  model: string;
  price: ModelPrice | undefined;
  /** Shared by one provider's streams: what it has already been told once (unreported usage). */
  told: { usage?: boolean };
}

/**
 * Collects one attempt's stream parts. Contract: `push` maps a part to zero or more deltas and
 * throws a classified ProviderError for an `error` part; `finish` gives the one `response` event,
 * or throws `network` when the stream ended without a completed `finish` (cut short).
 */
export class PartCollector {
  private readonly slots: Slot[] = [];
  private readonly byId = new Map<string, Slot>();
  private finish_:
    | { reason: string; raw: string | undefined; usage: Usage; counted: boolean; write1h: number }
    | undefined;
  private served: string | undefined;

  private readonly o: CollectorOptions;

  constructor(o: CollectorOptions) {
    this.o = o;
  }

  push(part: Part): ModelEvent | ModelEvent[] | undefined {
    // Whatever a provider package emits is read field by field: a malformed part is skipped, never a crash.
    if (typeof part !== "object" || part === null) return undefined;
    switch (part.type) {
      case "text-start":
      case "reasoning-start":
        this.open(part);
        return undefined;
      case "text-delta":
      case "reasoning-delta":
        return this.delta(part);
      case "reasoning-end":
        this.reasoning(part);
        return undefined;
      case "tool-input-start":
        return this.toolStart(part);
      case "tool-input-delta": {
        const slot = this.byId.get(`call:${str(part.id)}`);
        if (slot?.kind !== "call" || slot.done || !str(part.delta)) return undefined;
        slot.args += str(part.delta);
        return { type: "tool_call_delta", id: slot.id, argsText: str(part.delta) };
      }
      case "tool-call":
        return this.toolCall(part);
      case "stream-start":
        return this.warned(part.warnings);
      case "response-metadata":
        this.served ??= str(part.modelId) || undefined;
        return undefined;
      case "finish":
        return this.finished(part);
      case "error":
        throw this.inBand(part.error);
    }
    return undefined;
  }

  private open(part: Part): Slot {
    const thinking = part.type?.toString().startsWith("reasoning") === true;
    const key = `${thinking ? "thinking" : "text"}:${str(part.id)}`;
    let slot = this.byId.get(key);
    if (!slot) {
      slot = thinking ? { kind: "thinking", text: "", meta: {} } : { kind: "text", text: "" };
      this.byId.set(key, slot);
      this.slots.push(slot);
    }
    if (slot.kind === "thinking") mergeMeta(slot.meta, part.providerMetadata);
    return slot;
  }

  private delta(part: Part): ModelEvent | undefined {
    const slot = this.open(part);
    const text = str(part.delta);
    if (slot.kind === "call" || !text) return undefined;
    slot.text += text;
    return { type: slot.kind === "text" ? "text_delta" : "thinking_delta", text };
  }

  private reasoning(part: Part): void {
    const slot = this.byId.get(`thinking:${str(part.id)}`);
    if (slot?.kind === "thinking") mergeMeta(slot.meta, part.providerMetadata);
  }

  private toolStart(part: Part): ModelEvent | undefined {
    // Tools the provider runs itself (web search…) are not Keel's to call.
    if (part.providerExecuted === true) return undefined;
    const id = str(part.id);
    const slot: Slot = { kind: "call", id, name: str(part.toolName), args: "", done: false };
    this.byId.set(`call:${id}`, slot);
    this.slots.push(slot);
    return { type: "tool_call_delta", id, name: slot.name, argsText: "" };
  }

  private toolCall(part: Part): ModelEvent | undefined {
    if (part.providerExecuted === true) return undefined;
    const id = str(part.toolCallId);
    const input = typeof part.input === "string" ? part.input : JSON.stringify(part.input ?? {});
    const slot = this.byId.get(`call:${id}`);
    const name = str(part.toolName);
    // The finished call is authoritative; a call that came whole (no input parts) streams as one delta.
    if (slot?.kind === "call" && !slot.done) {
      Object.assign(slot, { name: name || slot.name, args: input, done: true });
      return undefined;
    }
    // The same call sent twice is one call; another call reusing a finished call's id is its own (not lost).
    if (slot?.kind === "call" && slot.name === name && slot.args === input) return undefined;
    const fresh: Slot = { kind: "call", id, name, args: input, done: true };
    this.byId.set(`call:${id}`, fresh);
    this.slots.push(fresh);
    return { type: "tool_call_delta", id, name: fresh.name, argsText: input };
  }

  /** Records the finish; a notice when the provider reported no token counts (its cost is then unknown, not $0). */
  private finished(part: Part): ModelEvent | undefined {
    const fr = (part.finishReason ?? {}) as Record<string, unknown>;
    // Specification v2 gave the reason as a plain string.
    const reason = typeof part.finishReason === "string" ? part.finishReason : str(fr.unified) || "other";
    const raw = typeof fr.raw === "string" ? fr.raw : undefined;
    const u = (part.usage ?? {}) as Record<string, Record<string, unknown> | undefined>;
    const read = count(u.inputTokens?.cacheRead);
    const write = count(u.inputTokens?.cacheWrite);
    const noCache = u.inputTokens?.noCache;
    const usage: Usage = {
      inputTokens: noCache === undefined ? Math.max(0, count(u.inputTokens?.total) - read - write) : count(noCache),
      outputTokens: count(u.outputTokens?.total),
      cacheReadTokens: read,
      cacheWriteTokens: write,
    };
    // Anthropic's raw usage splits cache writes by tier: the 1 h ones are priced as such.
    const creation = (u.raw as { cache_creation?: Record<string, unknown> } | undefined)?.cache_creation;
    const counted = [u.inputTokens?.total, noCache, u.outputTokens?.total].some((v) => Number.isFinite(v));
    this.finish_ = {
      reason,
      raw,
      usage,
      counted,
      write1h: Math.min(write, count(creation?.ephemeral_1h_input_tokens)),
    };
    // A cut stream's finish (no reason, no usage) is reported as the truncation finish() raises.
    if (counted || cutShort(reason, raw) || this.o.told.usage) return undefined;
    this.o.told.usage = true;
    return {
      type: "notice",
      kind: "info",
      provider: this.o.id,
      message: `${this.o.id}: the provider reports no token usage, so its calls' tokens and cost are unknown to budgets (said once). Ask the AI SDK provider for usage (e.g. createOpenAICompatible({ includeUsage: true })).`,
      data: { reason: "usage_unreported" },
    };
  }

  /** The provider's call warnings (a setting it dropped or changed) as one `info` notice, so none passes silently. */
  private warned(warnings: unknown): ModelEvent | undefined {
    if (!Array.isArray(warnings) || !warnings.length) return undefined;
    const said = warnings.map((w: Record<string, unknown> | null) => {
      const what = [str(w?.type), str(w?.feature) || str(w?.setting)].filter(Boolean).join(" ");
      const why = str(w?.details) || str(w?.message);
      return preview(why ? `${what || "warning"} (${why})` : what || "warning", 300);
    });
    return {
      type: "notice",
      kind: "info",
      provider: this.o.id,
      message: `${this.o.id}: the provider did not apply the request as asked: ${said.join("; ")}. Check the AI SDK provider's settings (e.g. createOpenAICompatible({ supportsStructuredOutputs: true }) for an output schema).`,
      data: { reason: "provider_warnings", warnings: said },
    };
  }

  private inBand(error: unknown): ProviderError {
    const facts = factsOf(error);
    return facts ? fromFacts(facts, this.o.id, error) : classifyAiSdkError(error, this.o.id);
  }

  finish(signal: AbortSignal): ModelEvent {
    const { id } = this.o;
    if (signal.aborted) throw new ProviderError("aborted", `${id}: the request was aborted.`);
    const f = this.finish_;
    if (!f || cutShort(f.reason, f.raw))
      throw new ProviderError("network", `${id}: the stream ended before the model finished (truncated).`);
    if (f.reason === "error") throw new ProviderError("unknown", `${id}: the model stopped with an error.`);
    const content: AssistantBlock[] = [];
    let calls = 0;
    for (const s of this.slots) {
      if (s.kind === "text") {
        if (s.text) content.push({ type: "text", text: s.text });
      } else if (s.kind === "thinking") {
        const providerData: AiSdkReasoningData = {
          provider: "ai-sdk",
          model: this.o.model,
          ...(Object.keys(s.meta).length ? { metadata: s.meta } : {}),
        };
        // A redacted block (Anthropic) has no text but must travel back.
        if (s.text || providerData.metadata) content.push({ type: "thinking", text: s.text, providerData });
      } else {
        calls++;
        content.push({ type: "tool_call", id: s.id, name: s.name, args: parseArgs(s.args) });
      }
    }
    const usage = f.usage;
    if (this.o.price && f.counted) usage.costUsd = costOf(this.o.price, usage, f.write1h);
    return {
      type: "response",
      message: { role: "assistant", content },
      stopReason: stopOf(f.reason, f.raw, calls),
      usage,
      provider: id,
      ...(this.served ? { model: this.served } : {}),
    };
  }
}

/** `interrupted` (v4), or `other` with no raw reason: the stream ended without its finishing event. */
function cutShort(reason: string, raw: string | undefined): boolean {
  return reason === "interrupted" || (reason === "other" && raw === undefined);
}

function stopOf(reason: string, raw: string | undefined, calls: number): StopReason {
  if (calls) return "tool_use";
  if (reason === "length") return "max_tokens";
  if (reason === "content-filter") return "refusal";
  if (reason === "stop") return raw === "stop_sequence" ? "stop_sequence" : "end_turn";
  // A forced structured-output tool that the provider turned into text.
  if (reason === "tool-calls") return "end_turn";
  return "other";
}
