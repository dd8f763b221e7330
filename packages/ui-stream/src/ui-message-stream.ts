/**
 * A Keel turn stream as the AI SDK's UI message stream (the protocol `useChat` reads): text,
 * reasoning, tool input and output parts, tool approval requests, errors and the finish.
 */
import type { UIMessageChunk } from "ai";
import type { TurnResult } from "@keel/kernel";
import type { TurnStreamEvent } from "@keel/stream";
import { closeOnCancel } from "./readable.ts";
import { streamError, turnEnd } from "./turn-end.ts";
import type { TurnEnd } from "./turn-end.ts";

/** Options of toUIMessageStream() and uiMessageStreamResponse(). Contract: all optional; none changes the turn. */
export interface UIStreamOptions {
  /**
   * The id of the assistant message the stream writes (the `start` chunk's `messageId`). A resumed
   * turn passes the id of the message it continues. Default: `keel-<turn id>` from the turn's start.
   */
  messageId?: string;
  /** Tool calls the client already shows (a resumed turn's approved calls): their input is not sent again. */
  knownCalls?: Iterable<string>;
  /** A finished call's output (e.g. its result text from the session); default `{ status }`. */
  outputOf?: (callId: string) => unknown;
}

type ToolFinished = Extract<TurnStreamEvent, { type: "tool.finished" }>;

/** The `finish` chunk's reason for a completed verdict. */
const FINISH: Record<
  Extract<TurnResult["verdict"], { status: "completed" }>["reason"],
  "stop" | "length" | "content-filter" | "other"
> = {
  end_turn: "stop",
  max_tokens: "length",
  refusal: "content-filter",
  other: "other",
};

/**
 * Maps turn stream events to UI message chunks, one event at a time.
 * Contract: a pure state machine (no I/O); parts are opened and closed in the protocol's order
 * (a text or reasoning part is ended before a tool part or the next step); every stream it
 * sees to its `verdict` or `error` ends with `finish` (or `abort` for an interrupted turn); every
 * end but a normal one or a pause is first said in a text part (TurnEnd.note) and a
 * `data-keel-end` part (the TurnEnd: status, reason, code, message), before any `error` chunk; a
 * call waiting for approval carries its `reason` (→ `approval.requestReason`) and the asking
 * plugin (`approvalDescriptor.plugin`); a finished call's output is sent once `outputOf` can
 * read it (at the latest before `finish`).
 */
export class UIChunkMapper {
  private started = false;
  private step: number | undefined;
  private open: { kind: "text" | "reasoning"; id: string } | undefined;
  private parts = 0;
  /** Deltas of the current model attempt are on the client (a retry voids them). */
  private attempt = false;
  private readonly known: Set<string>;
  /** Calls announced finished before their result was stored (the kernel says so first). */
  private unstored: ToolFinished[] = [];

  private readonly options: UIStreamOptions;

  constructor(options: UIStreamOptions = {}) {
    this.options = options;
    this.known = new Set(options.knownCalls ?? []);
  }

  /** The chunks for one event. */
  map(e: TurnStreamEvent): UIMessageChunk[] {
    const out: UIMessageChunk[] = [];
    if (!this.started && e.type !== "error") {
      this.started = true;
      const id = this.options.messageId ?? (e.type === "turn.started" ? `keel-${e.turnId}` : undefined);
      out.push(id ? { type: "start", messageId: id } : { type: "start" });
    }
    this.flushStored(e.type === "verdict" || e.type === "error", out);
    switch (e.type) {
      case "text":
      case "thinking":
        this.enterStep(e.round, out);
        this.delta(e.type === "text" ? "text" : "reasoning", e.delta, e.id, out);
        break;
      case "approval.requested":
        this.input(e.callId, e.name, e.args, undefined, out);
        // The AI SDK's own fields: `reason` is the part's `approval.requestReason`, the descriptor its `approval.descriptor`.
        out.push({
          type: "tool-approval-request",
          approvalId: e.callId,
          toolCallId: e.callId,
          ...(e.reason ? { reason: e.reason } : {}),
          ...(e.plugin ? { approvalDescriptor: { plugin: e.plugin } } : {}),
        });
        break;
      case "tool.started":
        if (!this.known.has(e.callId)) this.input(e.callId, e.name, e.args, e.round, out);
        break;
      case "tool.progress":
        out.push({
          type: "data-tool-progress",
          id: e.callId,
          data: {
            toolCallId: e.callId,
            message: e.message,
            ...(e.fraction !== undefined ? { fraction: e.fraction } : {}),
          },
        });
        break;
      case "tool.finished":
        if (e.status === "denied" || this.stored(e)) this.output(e, out);
        else this.unstored.push(e);
        break;
      case "retry":
        // The provider retried: what the failed attempt streamed in this step is void. A step
        // with no deltas since its tool parts is the previous round's: nothing to take back.
        this.close(out);
        if (this.attempt) out.push({ type: "reset-step" });
        this.attempt = false;
        break;
      case "error":
        this.close(out);
        if (!this.started) (this.started = true), out.push({ type: "start" });
        this.say(streamError(e.code, e.message), "error", out);
        out.push({ type: "error", errorText: `${e.message} (${e.code})` }, { type: "finish", finishReason: "error" });
        break;
      case "verdict":
        this.finish(e.result, out);
        break;
    }
    return out;
  }

  private enterStep(round: number | undefined, out: UIMessageChunk[]): void {
    if (round === undefined || round === this.step) return;
    this.close(out);
    if (this.step !== undefined) out.push({ type: "finish-step" });
    this.step = round;
    this.attempt = false;
    out.push({ type: "start-step" });
  }

  private delta(kind: "text" | "reasoning", delta: string, at: string | undefined, out: UIMessageChunk[]): void {
    if (this.open?.kind !== kind) {
      this.close(out);
      // Part ids are unique in the chat: the session log position of the part's first delta.
      this.open = { kind, id: `${kind}-${at ?? `n${++this.parts}`}` };
      out.push({ type: kind === "text" ? "text-start" : "reasoning-start", id: this.open.id });
    }
    out.push({ type: kind === "text" ? "text-delta" : "reasoning-delta", id: this.open.id, delta });
    this.attempt = true;
  }

  private close(out: UIMessageChunk[]): void {
    if (!this.open) return;
    out.push({ type: this.open.kind === "text" ? "text-end" : "reasoning-end", id: this.open.id });
    this.open = undefined;
  }

  private input(callId: string, name: string, args: unknown, round: number | undefined, out: UIMessageChunk[]): void {
    if (this.known.has(callId)) return;
    this.enterStep(round ?? this.step ?? 1, out);
    this.close(out);
    this.attempt = false;
    this.known.add(callId);
    out.push(
      { type: "tool-input-start", toolCallId: callId, toolName: name },
      { type: "tool-input-available", toolCallId: callId, toolName: name, input: args ?? {} },
    );
  }

  /** The outputs of earlier calls whose results are stored now; all of them at the turn's end (every result is stored by then). */
  private flushStored(ending: boolean, out: UIMessageChunk[]): void {
    const still: ToolFinished[] = [];
    for (const w of this.unstored) {
      if (ending || this.stored(w)) this.output(w, out);
      else still.push(w);
    }
    this.unstored = still;
  }

  /** Whether the call's result can be read (or there is nothing to read it with). */
  private stored(e: ToolFinished): boolean {
    return !this.options.outputOf || this.options.outputOf(e.callId) !== undefined;
  }

  private output(e: ToolFinished, out: UIMessageChunk[]): void {
    // A call refused before it ever started (a policy's deny) still gets its part first.
    this.input(e.callId, e.name, {}, undefined, out);
    if (e.status === "denied") out.push({ type: "tool-output-denied", toolCallId: e.callId });
    else if (e.status === "ok")
      out.push({
        type: "tool-output-available",
        toolCallId: e.callId,
        output: this.options.outputOf?.(e.callId) ?? { status: e.status },
      });
    else {
      const detail = this.options.outputOf?.(e.callId);
      out.push({
        type: "tool-output-error",
        toolCallId: e.callId,
        errorText: typeof detail === "string" && detail ? detail : `The tool call ended: ${e.status}.`,
      });
    }
  }

  private finish(result: TurnResult, out: UIMessageChunk[]): void {
    this.close(out);
    if (this.step !== undefined) out.push({ type: "finish-step" });
    const v = result.verdict;
    this.say(turnEnd(v), result.turnId, out);
    switch (v.status) {
      case "interrupted":
        out.push({ type: "abort", reason: v.reason });
        break;
      case "failed":
        out.push({ type: "error", errorText: `${v.message} (${v.code})` }, { type: "finish", finishReason: "error" });
        break;
      case "paused":
        out.push({ type: "finish", finishReason: "tool-calls" });
        break;
      case "stopped":
        out.push({ type: "finish", finishReason: "other" });
        break;
      case "completed":
        out.push({ type: "finish", finishReason: FINISH[v.reason] ?? "other" });
        break;
      default: {
        // A new kind of end must be mapped here (and in turnEnd) before this compiles.
        const unmapped: never = v;
        void unmapped;
        out.push({ type: "finish", finishReason: "other" });
      }
    }
  }

  /**
   * How the turn ended, on the page: a text part with the note (what any useChat page renders)
   * and a `data-keel-end` part with the end's fields (for a page that renders its own), both
   * before the `error` chunk that makes useChat throw. Nothing for an answer that ended on its own or a pause.
   */
  private say(end: TurnEnd, turnId: string, out: UIMessageChunk[]): void {
    if (!end.note) return;
    const id = `keel-end-${turnId}`;
    const { note, ...data } = end;
    out.push(
      { type: "text-start", id },
      { type: "text-delta", id, delta: note },
      { type: "text-end", id },
      { type: "data-keel-end", id, data },
    );
  }
}

/**
 * The turn as a ReadableStream of UI message chunks (`ai`'s UIMessageChunk).
 * Contract: pull-based (the reader's pace reaches the turn); ends after `finish` or `abort`;
 * cancelling the stream closes the iterator (a TurnStream cancels its turn) unless `onCancel` is given.
 */
export function toUIMessageStream(
  stream: AsyncIterable<TurnStreamEvent>,
  options: UIStreamOptions & { onCancel?: () => void } = {},
): ReadableStream<UIMessageChunk> {
  const mapper = new UIChunkMapper(options);
  return closeOnCancel(stream, (e) => mapper.map(e), options.onCancel);
}

/** The headers of a UI message stream response. Contract: the same as `ai`'s UI_MESSAGE_STREAM_HEADERS (v1). */
export const UI_STREAM_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no",
};

/** The chunks as SSE bytes. Contract: `data: <JSON>` per chunk, then `data: [DONE]` once the chunks end. */
export function uiChunksToSSE(chunks: ReadableStream<UIMessageChunk>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return chunks.pipeThrough(
    new TransformStream<UIMessageChunk, Uint8Array>({
      transform: (chunk, controller) => controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`)),
      flush: (controller) => controller.enqueue(encoder.encode("data: [DONE]\n\n")),
    }),
  );
}

/**
 * A Response streaming the turn in the UI message stream protocol (what `useChat`'s
 * DefaultChatTransport reads). Contract: status 200 unless `init` says otherwise; the protocol's
 * headers; as toUIMessageStream.
 */
export function uiMessageStreamResponse(
  stream: AsyncIterable<TurnStreamEvent>,
  init: ResponseInit & UIStreamOptions & { onCancel?: () => void } = {},
): Response {
  const { messageId, knownCalls, outputOf, onCancel, ...rest } = init;
  const headers = new Headers(rest.headers);
  for (const [k, v] of Object.entries(UI_STREAM_HEADERS)) headers.set(k, v);
  const chunks = toUIMessageStream(stream, {
    ...(messageId !== undefined ? { messageId } : {}),
    ...(knownCalls ? { knownCalls } : {}),
    ...(outputOf ? { outputOf } : {}),
    ...(onCancel ? { onCancel } : {}),
  });
  return new Response(uiChunksToSSE(chunks), { ...rest, headers });
}
