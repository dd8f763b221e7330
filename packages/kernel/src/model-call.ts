/**
 * One provider call of a round: the request is streamed, live deltas go to listeners whole
 * (a surrogate pair split across two deltas is joined), a turn stream's back-pressure is
 * honoured, and the call settles promptly on abort even when the provider ignores its signal.
 */
import * as z from "zod/mini";
import { whenAborted } from "./abort-watch.ts";
import { MessageSchema } from "./contributions.ts";
import { errorMessage, isKeelError, plainThrown } from "./errors.ts";
import type { AssistantMessage, Message } from "./messages.ts";
import type { ModelEvent, ModelRequest, StopReason } from "./provider.ts";
import { ProviderError } from "./provider.ts";
import { codePointSlice, deltaJoiner, wellFormedDeep, wellFormedOnce } from "./text.ts";
import type { Turn } from "./turn-state.ts";
import type { Usage } from "./usage.ts";
import { addUsage } from "./usage.ts";
import { chargedUsage } from "./usage.ts";

/** What a provider call returns. */
export interface ModelAnswer {
  message: AssistantMessage;
  stopReason: StopReason;
  usage: Partial<Usage>;
}

/** Why a call was cut: the turn's wall time, or its cancellation. */
function cutDuringCall(t: Turn): string {
  return t.wallCut()
    ? `The turn's wall-time limit (${t.limits.wallTimeMs} ms) ran out during the model call; it was cut.`
    : "The turn was cancelled during the model call.";
}

/** Send `request` and read its stream to the final response. Contract: settles promptly on abort; records model.responded or model.failed. */
export async function callModel(t: Turn, request: ModelRequest, attempt: number): Promise<ModelAnswer> {
  const { session, signal } = t;
  const started = performance.now();
  const provider = t.route?.provider ?? t.agent.options.provider;
  let iterator: AsyncIterator<ModelEvent> | undefined;
  let unwatch: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    const onAbort = () => reject(new ProviderError("aborted", cutDuringCall(t)));
    if (signal.aborted) onAbort();
    else unwatch = whenAborted(signal, onAbort);
  });
  aborted.catch(() => {});
  let finished = false;
  const joiners = new Map<string, ReturnType<typeof deltaJoiner>>();
  let firstChunkAt: number | undefined;
  try {
    iterator = provider.stream(wellFormedRequest(t, request), { signal })[Symbol.asyncIterator]();
    for (;;) {
      const next = await Promise.race([iterator.next(), aborted]);
      if (next.done) break;
      const e = next.value;
      if (e.type === "response") {
        finished = true;
        return responded(t, e, joiners, attempt, started, firstChunkAt);
      }
      if (e.type !== "notice" && firstChunkAt === undefined) firstChunkAt = performance.now();
      if (e.type === "notice") {
        if (e.kind === "retry") firstChunkAt = undefined;
        void session.emit(
          {
            type: "model.notice",
            round: t.rounds,
            kind: e.kind,
            message: e.message,
            ...(e.provider !== undefined ? { provider: e.provider } : {}),
            ...(e.data !== undefined ? { data: e.data } : {}),
          },
          t.turnId,
        );
        continue;
      }
      if (t.agent.hasListeners) await delta(t, e, joiners, aborted);
    }
    finished = true;
    throw new ProviderError("network", "The provider stream ended without a final response.");
  } catch (thrown) {
    const err = plainThrown(thrown);
    const pe =
      err instanceof ProviderError
        ? err
        : signal.aborted
          ? new ProviderError("aborted", "aborted", { cause: err })
          : isKeelError(err)
            ? undefined
            : new ProviderError("unknown", errorMessage(err), { cause: err });
    if (pe)
      void session.emit(
        {
          type: "model.failed",
          round: t.rounds,
          errorClass: pe.errorClass,
          message: pe.message,
          ...(pe.status !== undefined ? { status: pe.status } : {}),
        },
        t.turnId,
      );
    if (signal.aborted) throw new ProviderError("aborted", cutDuringCall(t), { cause: err });
    throw pe ?? err;
  } finally {
    unwatch?.();
    if (!finished && iterator?.return) {
      // Stop a stream we walked away from (abort or error); a provider that throws here is ignored.
      try {
        void Promise.resolve(iterator.return()).catch(() => {});
      } catch {
        // ignored, see above
      }
    }
  }
}

/**
 * True for an assistant message of text and tool-call blocks only, each as MessageSchema
 * wants it: MessageSchema would accept it (what this does not vouch for, zod checks).
 */
export function plainAssistant(m: unknown): boolean {
  if (typeof m !== "object" || m === null || Array.isArray(m)) return false;
  const { role, content } = m as { role?: unknown; content?: unknown };
  if (role !== "assistant" || !Array.isArray(content)) return false;
  for (let i = 0; i < content.length; i++) {
    const b: unknown = content[i];
    if (typeof b !== "object" || b === null || Array.isArray(b)) return false;
    const x = b as { type?: unknown; text?: unknown; id?: unknown; name?: unknown };
    if (x.type === "text") {
      if (typeof x.text !== "string") return false;
    } else if (x.type !== "tool_call" || typeof x.id !== "string" || !x.id || typeof x.name !== "string" || !x.name)
      return false;
  }
  return true;
}

/** Per session: the messages of its last request that were well-formed as they were, in order from the first. */
const checkedHistory = new WeakMap<object, { messages: readonly Message[] }>();
const NO_MESSAGES: readonly Message[] = Object.freeze([]);

/**
 * wellFormedDeep(request), walking only the messages that were not in the session's last request:
 * the history grows by appending frozen messages, so each is checked once, not once a round,
 * and no cache entry is made per message.
 * Contract: the same value as wellFormedDeep(request) (the request itself when nothing needed a repair).
 */
function wellFormedRequest(t: Turn, request: ModelRequest): ModelRequest {
  const { messages } = request;
  let known = checkedHistory.get(t.session);
  if (!known) checkedHistory.set(t.session, (known = { messages: NO_MESSAGES }));
  const prev = known.messages;
  let i = 0;
  for (const n = Math.min(prev.length, messages.length); i < n && messages[i] === prev[i]; ) i++;
  let fixed: Message[] | undefined;
  let clean = messages.length;
  for (; i < messages.length; i++) {
    const m = messages[i]!;
    const w = Object.isFrozen(m) ? wellFormedOnce(m) : wellFormedDeep(m);
    if (w !== m || !Object.isFrozen(m)) clean = Math.min(clean, i);
    if (w !== m) (fixed ??= messages.slice())[i] = w;
  }
  known.messages = clean === messages.length ? messages : messages.slice(0, clean);
  const shell = { ...request, messages: NO_MESSAGES };
  const rest = wellFormedDeep(shell);
  if (rest === shell && !fixed) return request;
  return { ...rest, messages: fixed ?? messages };
}

/** The final response: checked, its usage counted, recorded. */
function responded(
  t: Turn,
  e: Extract<ModelEvent, { type: "response" }>,
  joiners: Map<string, ReturnType<typeof deltaJoiner>>,
  attempt: number,
  started: number,
  firstChunkAt: number | undefined,
): ModelAnswer {
  const valid = plainAssistant(e.message) ? { success: true as const } : z.safeParse(MessageSchema, e.message);
  if (!valid.success || e.message.role !== "assistant") {
    throw new ProviderError(
      "unknown",
      `The provider returned a malformed response message (${valid.success ? "not an assistant message" : `${valid.error.issues[0]!.path.join(".")}: ${valid.error.issues[0]!.message}`}).`,
    );
  }
  for (const [key, j] of joiners) {
    const rest = j.flush();
    if (rest && t.agent.hasListeners)
      t.session.live({
        type: "model.delta",
        sessionId: t.session.id,
        turnId: t.turnId,
        round: t.rounds,
        channel: key.startsWith("tool_args") ? "tool_args" : (key as "text" | "thinking"),
        text: rest,
      });
  }
  const provider = t.route?.provider ?? t.agent.options.provider;
  const usage = chargedUsage(e.usage, t.route ? t.route.price : provider.price);
  addUsage(t.usage, usage);
  addUsage(t.session.spend, usage);
  const answered = typeof e.provider === "string" ? e.provider : provider.id;
  const model = typeof e.model === "string" && e.model ? { model: codePointSlice(e.model, 0, 200) } : {};
  const firstChunk = firstChunkAt !== undefined ? { firstChunkMs: Math.round(firstChunkAt - started) } : {};
  void t.session.emit(
    {
      type: "model.responded",
      round: t.rounds,
      stopReason: e.stopReason,
      usage,
      durationMs: Math.round(performance.now() - started),
      attempt,
      ...(typeof answered === "string" ? { provider: answered } : {}),
      ...model,
      ...firstChunk,
    },
    t.turnId,
  );
  return { message: e.message, stopReason: e.stopReason, usage };
}

/** A streamed delta to listeners, whole characters only; waits while a turn stream's reader is behind. */
async function delta(
  t: Turn,
  e: Exclude<ModelEvent, { type: "response" | "notice" }>,
  joiners: Map<string, ReturnType<typeof deltaJoiner>>,
  aborted: Promise<never>,
): Promise<void> {
  const channel = e.type === "text_delta" ? "text" : e.type === "thinking_delta" ? "thinking" : "tool_args";
  const key = e.type === "tool_call_delta" ? `tool_args:${e.id}` : channel;
  if (!joiners.has(key)) joiners.set(key, deltaJoiner());
  const text = joiners.get(key)!.push(e.type === "tool_call_delta" ? e.argsText : e.text);
  if (text)
    t.session.live({ type: "model.delta", sessionId: t.session.id, turnId: t.turnId, round: t.rounds, channel, text });
  const held = t.session.backpressure;
  if (held) await Promise.race([held, aborted]);
}
