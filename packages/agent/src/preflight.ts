/**
 * The optional preflight request: one bounded, tool-less model call, before the prompt is
 * compiled, whose strict JSON answer names the hidden tools this turn needs.
 */
import * as z from "zod/mini";
import { errorMessage, preview } from "@keel/kernel";
import type { Message } from "@keel/kernel";
import { complete } from "@keel/kernel";
import type { ModelProvider } from "@keel/kernel";
import type { ToolDefinition } from "@keel/kernel";
import type { Usage } from "@keel/kernel";
import { wellFormedProvider } from "@keel/kernel";
import { truncate } from "@keel/text";

/**
 * How the preflight runs. Contract: it runs only when the turn has hidden tools; it never
 * fails a turn (timeout, error or an invalid answer reveal nothing and are logged).
 */
export interface PreflightOptions {
  /** The model to ask; default: the agent's sideModel, else its provider. */
  model?: ModelProvider;
  /** Deadline for the whole request (ms). Default 10,000. */
  timeoutMs?: number;
  /** Answer length cap (tokens). Default 512. */
  maxTokens?: number;
  /** Most tools one preflight may reveal. Default 8. */
  maxReveal?: number;
}

/** What the preflight found. */
export interface PreflightOutcome {
  status: "ok" | "timeout" | "failed" | "invalid";
  revealed: string[];
  plan?: string;
  /** Names the model gave that are not hidden tools of this turn (ignored). */
  ignored: string[];
  durationMs: number;
  usage: Partial<Usage>;
  error?: string;
}

const AnswerSchema = z.object({
  plan: z.optional(z.string().check(z.maxLength(2000))),
  reveal: z.array(z.string()).check(z.maxLength(64)),
});

const SYSTEM = [
  "You plan which optional tools a task needs before an assistant starts working on it.",
  "Reply with one JSON object and nothing else:",
  '{"plan": "<one or two sentences: the steps>", "reveal": ["<tool name>", ...]}',
  "List only names from the catalogue, most useful first; an empty list is fine.",
].join("\n");

/** Run the preflight for `input` over the turn's hidden tools. */
export async function runPreflight(
  model: ModelProvider,
  input: string,
  hidden: readonly ToolDefinition[],
  options: PreflightOptions,
  signal: AbortSignal,
): Promise<PreflightOutcome> {
  const t0 = performance.now();
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxReveal = options.maxReveal ?? 8;
  const catalogue = hidden
    .slice(0, 400)
    .map((t) => `- ${t.name}: ${truncate(t.description.replace(/\s+/g, " "), 200)}`)
    .join("\n");
  const messages: Message[] = [
    {
      role: "user",
      content: [
        { type: "text", text: `Catalogue of optional tools:\n${catalogue}\n\nTask:\n${truncate(input, 8000)}` },
      ],
    },
  ];
  const ctrl = new AbortController();
  const onAbort = () => ctrl.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => ctrl.abort(new Error(`preflight ran past ${timeoutMs} ms`)), timeoutMs);
  const done = (o: Omit<PreflightOutcome, "durationMs">): PreflightOutcome => ({
    ...o,
    durationMs: Math.round(performance.now() - t0),
  });
  try {
    const answer = await Promise.race([
      complete(
        wellFormedProvider(model),
        { system: SYSTEM, messages, options: { maxTokens: options.maxTokens ?? 512, temperature: 0 } },
        { signal: ctrl.signal },
      ),
      new Promise<never>((_, reject) =>
        ctrl.signal.addEventListener("abort", () => reject(ctrl.signal.reason), { once: true }),
      ),
    ]);
    const parsed = z.safeParse(AnswerSchema, firstJsonObject(answer.text));
    if (!parsed.success)
      return done({
        status: "invalid",
        revealed: [],
        ignored: [],
        usage: answer.usage,
        error: `the answer is not {"plan", "reveal"} JSON: ${preview(answer.text, 200)}`,
      });
    const names = new Set(hidden.map((t) => t.name));
    const revealed = [...new Set(parsed.data.reveal.filter((n) => names.has(n)))].slice(0, maxReveal);
    const ignored = parsed.data.reveal.filter((n) => !names.has(n));
    return done({
      status: "ok",
      revealed,
      ignored,
      usage: answer.usage,
      ...(parsed.data.plan ? { plan: parsed.data.plan } : {}),
    });
  } catch (err) {
    const timedOut = ctrl.signal.aborted && !signal.aborted;
    return done({
      status: timedOut ? "timeout" : "failed",
      revealed: [],
      ignored: [],
      usage: {},
      error: errorMessage(timedOut ? ctrl.signal.reason : err),
    });
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
  }
}

/** The first balanced `{...}` in `text`, parsed; undefined when there is none. */
function firstJsonObject(text: string): unknown {
  const start = text.indexOf("{");
  if (start < 0) return undefined;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) {
      try {
        return JSON.parse(text.slice(start, i + 1));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}
