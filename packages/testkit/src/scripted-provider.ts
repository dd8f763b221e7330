/**
 * A provider that replays a JSON script of model turns: deterministic tests, the offline
 * demo and benchmarks. Each `stream` call consumes the next step.
 */
import { z } from "zod";
import { KeelError, errorMessage, messageText, ProviderError } from "@keel/kernel";
import type {
  AssistantBlock,
  AssistantMessage,
  Message,
  ModelEvent,
  ModelProvider,
  ModelRequest,
  StopReason,
  Usage,
} from "@keel/kernel";
import { estimateTokens, fileTokens } from "@keel/tokens";
import { truncate } from "@keel/text";
import { readRegularFile } from "@keel/safe-path";

const count = z.number().int().nonnegative();

/** Zod schema of one scripted model response. */
export const ScriptStepSchema = z.strictObject({
  text: z.string().optional(),
  thinking: z.string().optional(),
  toolCalls: z
    .array(z.strictObject({ id: z.string().min(1).optional(), name: z.string().min(1), args: z.unknown().optional() }))
    .optional(),
  stopReason: z.enum(["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]).optional(),
  usage: z
    .strictObject({
      inputTokens: count.optional(),
      outputTokens: count.optional(),
      cacheReadTokens: count.optional(),
      cacheWriteTokens: count.optional(),
    })
    .optional(),
  /** Milliseconds to wait before the first delta. */
  delayMs: count.optional(),
  /** Characters per text/thinking delta. Default 16. */
  chunkSize: z.number().int().positive().optional(),
  /** Never answer; end only when the request is aborted. */
  hang: z.boolean().optional(),
  error: z
    .strictObject({
      class: z.enum([
        "rate_limited",
        "overloaded",
        "auth",
        "context_too_long",
        "invalid_request",
        "network",
        "timeout",
        "aborted",
        "unknown",
      ]),
      message: z.string().optional(),
      status: z.number().int().optional(),
      /** Throw after this many deltas (mid-stream); 0 = before streaming. */
      afterDeltas: count.optional(),
    })
    .optional(),
  /**
   * Only answer a request whose last user message includes this text: the step is skipped
   * (left for later) otherwise. Lets one offline script serve several conversations.
   */
  when: z.strictObject({ lastUserIncludes: z.string() }).optional(),
  /** Assertions on the request; a mismatch throws ProviderError("invalid_request"). */
  expect: z
    .strictObject({
      lastUserIncludes: z.string().optional(),
      toolsInclude: z.array(z.string()).optional(),
      noTools: z.boolean().optional(),
    })
    .optional(),
});

/** Zod schema of a provider script (a bare array of steps is also accepted by the parser). */
export const ProviderScriptSchema = z.strictObject({
  model: z.string().min(1).optional(),
  contextWindow: z.number().int().positive().optional(),
  steps: z.array(ScriptStepSchema),
});

/** One scripted model response. */
export type ScriptStep = z.infer<typeof ScriptStepSchema>;
/** A validated provider script. */
export type ProviderScript = z.infer<typeof ProviderScriptSchema>;
/** What the parser accepts: a script object or a bare array of steps. */
export type ProviderScriptInput = z.input<typeof ProviderScriptSchema> | z.input<typeof ScriptStepSchema>[];

/**
 * Validate a script. Contract: a bare array becomes `{ steps }`; an invalid script throws
 * KeelError KEEL_SCRIPT_INVALID whose `location.path` is the zod path of the first issue
 * (e.g. `steps.2.toolCalls.0.name`, also for bare arrays).
 */
export function parseProviderScript(input: unknown, source?: string): ProviderScript {
  const result = ProviderScriptSchema.safeParse(Array.isArray(input) ? { steps: input } : input);
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ path: i.path.map(String).join("."), message: i.message }));
  const problem = issues.map((i) => `${i.path || "(root)"}: ${i.message}`).join("; ");
  throw new KeelError(
    "KEEL_SCRIPT_INVALID",
    `${source ? `${source}: ` : ""}${problem}.`,
    { path: issues[0]?.path ?? "" },
    { details: issues },
  );
}

/** Options of a ScriptedProvider; they override the script's own fields. */
export interface ScriptedProviderOptions {
  model?: string;
  contextWindow?: number;
}

/**
 * Replays a script of model turns.
 * Contract: every `stream` call records its request and consumes one step (also steps that
 * error); no step left throws KEEL_SCRIPT_EXHAUSTED from the iterator; abort (also during
 * `delayMs` or `hang`) throws ProviderError `aborted` at once.
 */
export class ScriptedProvider implements ModelProvider {
  readonly id: string;
  readonly contextWindow: number;
  /** Every request received, in order (messages and tools copied at call time). */
  readonly requests: ModelRequest[] = [];
  readonly script: ProviderScript;
  #next = 0;
  readonly #used = new Set<number>();

  constructor(script: ProviderScriptInput | ProviderScript, options: ScriptedProviderOptions = {}) {
    this.script = parseProviderScript(script);
    this.id = `scripted:${options.model ?? this.script.model ?? "script"}`;
    this.contextWindow = options.contextWindow ?? this.script.contextWindow ?? 200_000;
  }

  /** Load a script from a JSON file. Contract: unreadable or invalid JSON, or not a regular file (a FIFO is not waited on), is KEEL_SCRIPT_INVALID. */
  static fromFile(path: string, options?: ScriptedProviderOptions): ScriptedProvider {
    let data: unknown;
    try {
      data = JSON.parse(readRegularFile(path).toString("utf8"));
    } catch (err) {
      throw new KeelError(
        "KEEL_SCRIPT_INVALID",
        `Cannot read script file ${path}: ${errorMessage(err)}.`,
        { path: "" },
        { cause: err },
      );
    }
    return new ScriptedProvider(parseProviderScript(data, path), options);
  }

  /** Steps not yet consumed. */
  get remaining(): number {
    return this.script.steps.length - this.#used.size;
  }

  stream(request: ModelRequest, options: { signal: AbortSignal }): AsyncIterable<ModelEvent> {
    this.requests.push({ ...request, messages: [...request.messages], tools: [...request.tools] });
    const index = this.#pick(request);
    if (index >= 0) this.#used.add(index);
    while (this.#used.has(this.#next)) this.#next++;
    return this.#run(index, request, options.signal);
  }

  /** The first unused step this request may take (steps with a `when` that does not match wait). */
  #pick(request: ModelRequest): number {
    const steps = this.script.steps;
    const last = request.messages.findLast((m) => m.role === "user");
    const text = last ? messageText(last) : "";
    for (let i = this.#next; i < steps.length; i++) {
      if (this.#used.has(i)) continue;
      const when = steps[i]!.when;
      if (!when || text.includes(when.lastUserIncludes)) return i;
    }
    return -1;
  }

  async *#run(index: number, request: ModelRequest, signal: AbortSignal): AsyncGenerator<ModelEvent> {
    const steps = this.script.steps;
    const step = index >= 0 ? steps[index] : undefined;
    if (!step) {
      throw new KeelError(
        "KEEL_SCRIPT_EXHAUSTED",
        `Request ${this.requests.length} arrived but the script has no step left for it (${steps.length} step${steps.length === 1 ? "" : "s"}, ${this.#used.size} used).`,
      );
    }
    throwIfAborted(signal);
    checkExpect(step, index, request);
    if (step.delayMs) await waitFor(signal, step.delayMs);
    if (step.hang) await waitFor(signal);

    const { message, deltas, outputChars } = buildResponse(step, index);
    const error = step.error;
    const failAt = error ? (error.afterDeltas ?? 0) : -1;
    for (let i = 0; i < deltas.length; i++) {
      if (i === failAt) throw stepError(step, index);
      throwIfAborted(signal);
      yield deltas[i]!;
    }
    if (error) throw stepError(step, index);
    throwIfAborted(signal);
    const hasCalls = (step.toolCalls?.length ?? 0) > 0;
    const usage: Usage = {
      inputTokens:
        step.usage?.inputTokens ??
        Math.max(1, estimateTokens(request.system) + Math.ceil(requestChars(request.messages) / 4)),
      outputTokens: step.usage?.outputTokens ?? Math.max(1, Math.ceil(outputChars / 4)),
      cacheReadTokens: step.usage?.cacheReadTokens ?? 0,
      cacheWriteTokens: step.usage?.cacheWriteTokens ?? 0,
    };
    const stopReason: StopReason = step.stopReason ?? (hasCalls ? "tool_use" : "end_turn");
    yield { type: "response", message, stopReason, usage };
  }
}

/** Create a ScriptedProvider from a script object or a bare array of steps. */
export function scriptedProvider(
  script: ProviderScriptInput | ProviderScript,
  options?: ScriptedProviderOptions,
): ScriptedProvider {
  return new ScriptedProvider(script, options);
}

function buildResponse(
  step: ScriptStep,
  index: number,
): { message: AssistantMessage; deltas: ModelEvent[]; outputChars: number } {
  const size = step.chunkSize ?? 16;
  const content: AssistantBlock[] = [];
  const deltas: ModelEvent[] = [];
  let outputChars = 0;
  if (step.thinking) {
    content.push({ type: "thinking", text: step.thinking });
    for (const text of chunks(step.thinking, size)) deltas.push({ type: "thinking_delta", text });
    outputChars += step.thinking.length;
  }
  if (step.text) {
    content.push({ type: "text", text: step.text });
    for (const text of chunks(step.text, size)) deltas.push({ type: "text_delta", text });
    outputChars += step.text.length;
  }
  step.toolCalls?.forEach((call, i) => {
    const id = call.id ?? `call_${index}_${i}`;
    const args = call.args ?? {};
    const argsText = JSON.stringify(args);
    content.push({ type: "tool_call", id, name: call.name, args });
    deltas.push({ type: "tool_call_delta", id, name: call.name, argsText });
    outputChars += call.name.length + argsText.length;
  });
  return { message: { role: "assistant", content }, deltas, outputChars };
}

/** Split into pieces of `size` UTF-16 units without cutting a surrogate pair. */
function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; ) {
    let end = Math.min(text.length, i + size);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
    out.push(text.slice(i, end));
    i = end;
  }
  return out;
}

function requestChars(messages: readonly Message[]): number {
  let n = 0;
  for (const m of messages) {
    for (const b of m.content) {
      if (b.type === "image") n += 4_000;
      else if (b.type === "file") n += 4 * fileTokens(b.data);
      else if (b.type === "tool_call") n += b.name.length + JSON.stringify(b.args ?? {}).length;
      else n += b.text.length;
    }
  }
  return n;
}

function checkExpect(step: ScriptStep, index: number, request: ModelRequest): void {
  const expect = step.expect;
  if (!expect) return;
  const fail = (what: string) => {
    throw new ProviderError("invalid_request", `Scripted step ${index} expected ${what}.`);
  };
  if (expect.lastUserIncludes !== undefined) {
    const last = request.messages.findLast((m) => m.role === "user");
    const text = last ? messageText(last) : undefined;
    if (text === undefined || !text.includes(expect.lastUserIncludes)) {
      const got = text === undefined ? "no user message" : JSON.stringify(truncate(text, 201));
      fail(`the last user message to include ${JSON.stringify(expect.lastUserIncludes)}, got ${got}`);
    }
  }
  const names = request.tools.map((t) => t.name);
  const missing = (expect.toolsInclude ?? []).filter((n) => !names.includes(n));
  if (missing.length) fail(`tools ${missing.join(", ")} to be offered, got [${names.join(", ")}]`);
  if (expect.noTools && names.length) fail(`no tools (a final round), got [${names.join(", ")}]`);
}

function stepError(step: ScriptStep, index: number): ProviderError {
  const e = step.error!;
  return new ProviderError(
    e.class,
    e.message ?? `Scripted ${e.class} error at step ${index}.`,
    e.status === undefined ? {} : { status: e.status },
  );
}

function abortError(signal: AbortSignal): ProviderError {
  return new ProviderError("aborted", "The scripted request was aborted.", { cause: signal.reason });
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw abortError(signal);
}

/** Resolve after `ms` (never when undefined); reject with an `aborted` ProviderError on abort. */
function waitFor(signal: AbortSignal, ms?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer =
      ms === undefined
        ? undefined
        : setTimeout(() => {
            signal.removeEventListener("abort", onAbort);
            resolve();
          }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
