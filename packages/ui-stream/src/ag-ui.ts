/**
 * A Keel turn stream as AG-UI events (@ag-ui/core), encoded by @ag-ui/encoder (SSE, or protobuf
 * when the client's Accept asks for it). A paused turn ends its run with an `interrupt` outcome,
 * one interrupt per call waiting for approval; the next run answers them with `resume` entries.
 * Both packages are optional peers: this module loads neither until a response is encoded.
 */
import type { EventType as CoreEventType, BaseEvent, Interrupt } from "@ag-ui/core";
import type { EventEncoder } from "@ag-ui/encoder";
import type { TurnResult } from "@keel/kernel";
import type { TurnStreamEvent } from "@keel/stream";
import { assertPeers, loadPeers } from "./peers.ts";
import { closeOnCancel } from "./readable.ts";
import { streamError, turnEnd } from "./turn-end.ts";
import type { TurnEnd } from "./turn-end.ts";

/**
 * The AG-UI event types the mapper sends, as @ag-ui/core's EventType says them (a test checks
 * each against the package): the mapper runs without loading it.
 */
export const AGUI_EVENT_TYPES = {
  RUN_STARTED: "RUN_STARTED",
  RUN_FINISHED: "RUN_FINISHED",
  RUN_ERROR: "RUN_ERROR",
  TEXT_MESSAGE_START: "TEXT_MESSAGE_START",
  TEXT_MESSAGE_CONTENT: "TEXT_MESSAGE_CONTENT",
  TEXT_MESSAGE_END: "TEXT_MESSAGE_END",
  REASONING_START: "REASONING_START",
  REASONING_MESSAGE_START: "REASONING_MESSAGE_START",
  REASONING_MESSAGE_CONTENT: "REASONING_MESSAGE_CONTENT",
  REASONING_MESSAGE_END: "REASONING_MESSAGE_END",
  REASONING_END: "REASONING_END",
  TOOL_CALL_START: "TOOL_CALL_START",
  TOOL_CALL_ARGS: "TOOL_CALL_ARGS",
  TOOL_CALL_END: "TOOL_CALL_END",
  TOOL_CALL_RESULT: "TOOL_CALL_RESULT",
  CUSTOM: "CUSTOM",
} as const;
const EventType = AGUI_EVENT_TYPES as unknown as typeof CoreEventType;

/** @ag-ui/encoder's protobuf media type (AGUI_MEDIA_TYPE; a test checks it against the package). */
export const AGUI_PROTO_MEDIA_TYPE = "application/vnd.ag-ui.event+proto";

/** What AG-UI events need: both packages, optional peers. */
const AGUI_PEERS = ["@ag-ui/core", "@ag-ui/encoder"] as const;

let encoderLoading: Promise<typeof EventEncoder> | undefined;

/**
 * @ag-ui/encoder's EventEncoder, loaded on first use. Contract: rejects with KEEL_PACKAGE_MISSING
 * naming the package when it is not installed (tried again next time).
 */
export function loadEncoder(): Promise<typeof EventEncoder> {
  encoderLoading ??= loadPeers(AGUI_PEERS, "AG-UI events (aguiResponse, createAGUIHandler)", async () => {
    return (await import("@ag-ui/encoder")).EventEncoder;
  }).catch((err: unknown) => {
    encoderLoading = undefined;
    throw err;
  });
  return encoderLoading;
}

type ToolFinished = Extract<TurnStreamEvent, { type: "tool.finished" }>;

/** Options of toAGUIEvents() and aguiResponse(). Contract: `threadId` and `runId` are echoed on the run's events. */
export interface AGUIStreamOptions {
  /** The AG-UI thread (RunAgentInput.threadId). */
  threadId: string;
  /** The AG-UI run (RunAgentInput.runId). */
  runId: string;
  /** A finished call's result text (e.g. from the session); default its status. */
  outputOf?: (callId: string) => unknown;
  /** Tool calls the client already has (the interrupts a resumed run answers): not started again. */
  knownCalls?: Iterable<string>;
  /** Called when the client stops reading; default: the iterator is closed (a TurnStream cancels its turn). */
  onCancel?: () => void;
}

/** The interrupt reason a call waiting for approval carries. Contract: the interrupt's `id` and `toolCallId` are the Keel call id. */
export const APPROVAL_INTERRUPT = "tool_approval";

/**
 * Maps turn stream events to AG-UI events, one event at a time.
 * Contract: a pure state machine; RUN_STARTED first; text and reasoning messages are closed
 * before a tool call or the run's end; ends with RUN_FINISHED (outcome `success` — also for a
 * guard's stop —, `interrupt` for a paused turn, `cancelled` for an interrupted one) or RUN_ERROR,
 * each with `metadata.keel` (a TurnEnd: status, reason, code, message); every end but a normal
 * one or a pause is first said in an assistant text message (TurnEnd.note); a call's
 * TOOL_CALL_RESULT is sent once `outputOf` can read it (at the latest before the run's end).
 */
export class AGUIEventMapper {
  private started = false;
  private open: { kind: "text" | "reasoning"; id: string } | undefined;
  private parts = 0;
  private readonly calls: Set<string>;
  private readonly interrupts: Interrupt[] = [];
  /** Calls announced finished before their result was stored. */
  private unstored: ToolFinished[] = [];

  private readonly options: AGUIStreamOptions;

  constructor(options: AGUIStreamOptions) {
    this.options = options;
    this.calls = new Set(options.knownCalls ?? []);
  }

  /** The AG-UI events for one turn stream event. */
  map(e: TurnStreamEvent): BaseEvent[] {
    const out: BaseEvent[] = [];
    const { threadId, runId } = this.options;
    if (!this.started) {
      this.started = true;
      out.push({ type: EventType.RUN_STARTED, threadId, runId });
    }
    this.flushStored(e.type === "verdict" || e.type === "error", out);
    switch (e.type) {
      case "text":
      case "thinking":
        this.delta(e.type === "text" ? "text" : "reasoning", e.delta, out);
        break;
      case "approval.requested":
        this.call(e.callId, e.name, e.args, out);
        this.interrupts.push(approvalInterrupt(e.callId, e.name, e.reason, e.plugin));
        break;
      case "tool.started":
        this.call(e.callId, e.name, e.args, out);
        break;
      case "tool.progress":
        out.push({
          type: EventType.CUSTOM,
          name: "keel.tool_progress",
          value: { toolCallId: e.callId, message: e.message, fraction: e.fraction },
        });
        break;
      case "tool.finished":
        this.call(e.callId, e.name, {}, out);
        // The kernel announces a call's end before it stores the result: wait for it.
        if (this.stored(e)) this.result(e, out);
        else this.unstored.push(e);
        break;
      case "retry":
        this.close(out);
        out.push({ type: EventType.CUSTOM, name: "keel.retry", value: { message: e.message } });
        break;
      case "error": {
        this.close(out);
        const end = streamError(e.code, e.message);
        this.say(end, out);
        out.push({ type: EventType.RUN_ERROR, message: e.message, code: e.code, metadata: { keel: data(end) } });
        break;
      }
      case "verdict":
        this.finish(e.result, out);
        break;
    }
    return out;
  }

  /** The results of earlier calls that are stored now; all of them at the turn's end (every result is stored by then). */
  private flushStored(ending: boolean, out: BaseEvent[]): void {
    const still: ToolFinished[] = [];
    for (const w of this.unstored) {
      if (ending || this.stored(w)) this.result(w, out);
      else still.push(w);
    }
    this.unstored = still;
  }

  private stored(e: ToolFinished): boolean {
    return !this.options.outputOf || this.options.outputOf(e.callId) !== undefined;
  }

  private result(e: ToolFinished, out: BaseEvent[]): void {
    this.close(out);
    const detail = this.options.outputOf?.(e.callId);
    const content = typeof detail === "string" ? detail : JSON.stringify(detail ?? { status: e.status });
    out.push({
      type: EventType.TOOL_CALL_RESULT,
      messageId: `result-${e.callId}`,
      toolCallId: e.callId,
      content,
      role: "tool",
    });
  }

  private delta(kind: "text" | "reasoning", delta: string, out: BaseEvent[]): void {
    if (this.open?.kind !== kind) {
      this.close(out);
      const messageId = `${this.options.runId}-${kind}-${++this.parts}`;
      this.open = { kind, id: messageId };
      if (kind === "text") out.push({ type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant" });
      else
        out.push(
          { type: EventType.REASONING_START, messageId },
          { type: EventType.REASONING_MESSAGE_START, messageId, role: "reasoning" },
        );
    }
    const type = kind === "text" ? EventType.TEXT_MESSAGE_CONTENT : EventType.REASONING_MESSAGE_CONTENT;
    out.push({ type, messageId: this.open.id, delta });
  }

  private close(out: BaseEvent[]): void {
    if (!this.open) return;
    const messageId = this.open.id;
    if (this.open.kind === "text") out.push({ type: EventType.TEXT_MESSAGE_END, messageId });
    else out.push({ type: EventType.REASONING_MESSAGE_END, messageId }, { type: EventType.REASONING_END, messageId });
    this.open = undefined;
  }

  private call(callId: string, name: string, args: unknown, out: BaseEvent[]): void {
    if (this.calls.has(callId)) return;
    this.close(out);
    this.calls.add(callId);
    out.push(
      { type: EventType.TOOL_CALL_START, toolCallId: callId, toolCallName: name },
      { type: EventType.TOOL_CALL_ARGS, toolCallId: callId, delta: JSON.stringify(args ?? {}) },
      { type: EventType.TOOL_CALL_END, toolCallId: callId },
    );
  }

  private finish(result: TurnResult, out: BaseEvent[]): void {
    this.close(out);
    const { threadId, runId } = this.options;
    const v = result.verdict;
    const usage = [{ inputTokens: result.usage.inputTokens, outputTokens: result.usage.outputTokens }];
    const end = turnEnd(v);
    this.say(end, out);
    const metadata = { keel: data(end) };
    switch (v.status) {
      case "failed":
        out.push({ type: EventType.RUN_ERROR, message: v.message, code: v.code, usage, metadata });
        break;
      case "paused":
        out.push({
          type: EventType.RUN_FINISHED,
          threadId,
          runId,
          outcome: { type: "interrupt", interrupts: this.pending(result) },
          usage,
          metadata,
        });
        break;
      case "interrupted":
        out.push({ type: EventType.RUN_FINISHED, threadId, runId, outcome: { type: "cancelled" }, usage, metadata });
        break;
      case "stopped":
      case "completed":
        // A guard's stop is a finished run (its final round may have answered), as A2A's `completed`:
        // `metadata.keel` says which guard, with its code; the note above says it to people.
        out.push({
          type: EventType.RUN_FINISHED,
          threadId,
          runId,
          result: result.text,
          outcome: { type: "success" },
          usage,
          metadata,
        });
        break;
      default: {
        // A new kind of end must be mapped here (and in turnEnd) before this compiles.
        const unmapped: never = v;
        void unmapped;
        out.push({
          type: EventType.RUN_ERROR,
          message: end.message,
          ...(end.code ? { code: end.code } : {}),
          metadata,
        });
      }
    }
  }

  /** How the turn ended, as an assistant text message any AG-UI client shows (nothing for a normal end or a pause). */
  private say(end: TurnEnd, out: BaseEvent[]): void {
    if (!end.note) return;
    const messageId = `${this.options.runId}-keel-end`;
    out.push(
      { type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant" },
      { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: end.note },
      { type: EventType.TEXT_MESSAGE_END, messageId },
    );
  }

  /** The interrupts of a paused turn: every call it waits for, also those asked before this stream began. */
  private pending(result: TurnResult): Interrupt[] {
    const seen = new Map(this.interrupts.map((i) => [i.id, i]));
    const ids = result.verdict.status === "paused" ? result.verdict.pending : [];
    return ids.map((id) => {
      const asked = seen.get(id);
      if (asked) return asked;
      const p = result.pending?.find((x) => x.callId === id);
      return approvalInterrupt(id, p?.name ?? "the tool call", p?.reason, p?.plugin);
    });
  }
}

/** A TurnEnd as `metadata.keel` (without the page's note). */
function data(end: TurnEnd): Omit<TurnEnd, "note"> {
  const { note: _note, ...rest } = end;
  return rest;
}

/**
 * The interrupt of a call waiting for approval. Contract: `message` says the tool and why it
 * asks; `metadata` carries `reason` and `plugin` (who asked) when the decision gave them.
 */
function approvalInterrupt(callId: string, name: string, reason?: string, plugin?: string): Interrupt {
  return {
    id: callId,
    reason: APPROVAL_INTERRUPT,
    message: `Approve ${name}${reason ? ` (${reason})` : ""}?`,
    toolCallId: callId,
    responseSchema: {
      type: "object",
      properties: { approved: { type: "boolean" }, reason: { type: "string" } },
      required: ["approved"],
    },
    ...(reason || plugin ? { metadata: { ...(reason ? { reason } : {}), ...(plugin ? { plugin } : {}) } } : {}),
  };
}

/** The turn as a ReadableStream of AG-UI events. Contract: as AGUIEventMapper; pull-based. */
export function toAGUIEvents(
  stream: AsyncIterable<TurnStreamEvent>,
  options: AGUIStreamOptions,
): ReadableStream<BaseEvent> {
  const mapper = new AGUIEventMapper(options);
  return closeOnCancel(stream, (e) => mapper.map(e), options.onCancel);
}

/**
 * A Response streaming the turn as AG-UI events, encoded by @ag-ui/encoder's EventEncoder for
 * the request's `Accept` (SSE by default, also for any-type Accept; protobuf only when Accept names its media type).
 * Contract: the encoder's content type; throws KEEL_PACKAGE_MISSING naming @ag-ui/core or
 * @ag-ui/encoder (optional peers) when one is not installed, before reading the stream.
 */
export function aguiResponse(
  stream: AsyncIterable<TurnStreamEvent>,
  options: AGUIStreamOptions & { accept?: string | null; headers?: Record<string, string> },
): Response {
  // Only a client that names the protobuf type gets it: the encoder would pick it for `*/*`
  // (curl's and fetch's default), and such a client expects readable SSE.
  assertPeers(AGUI_PEERS, "AG-UI events (aguiResponse, createAGUIHandler)");
  const named = options.accept?.toLowerCase().includes(AGUI_PROTO_MEDIA_TYPE);
  const headers = new Headers(options.headers);
  // What the encoder's getContentType() says for these options (a test checks it).
  headers.set("content-type", named ? AGUI_PROTO_MEDIA_TYPE : "text/event-stream");
  headers.set("cache-control", "no-cache");
  headers.set("x-accel-buffering", "no");
  const bytes = new TextEncoder();
  let encoder: EventEncoder;
  const body = toAGUIEvents(stream, options).pipeThrough(
    new TransformStream<BaseEvent, Uint8Array>({
      // Loaded once per process; the first event waits for it.
      start: async () => {
        const Encoder = await loadEncoder();
        encoder = new Encoder(named ? { accept: options.accept! } : {});
      },
      transform: (event, controller) => {
        const encoded = encoder.encodeBinary(event);
        controller.enqueue(typeof encoded === "string" ? bytes.encode(encoded) : encoded);
      },
    }),
  );
  return new Response(body, { headers });
}
