/**
 * A turn as an async iterable of typed events, for hosts that stream to a client (SSE, a
 * WebSocket, a job log) instead of subscribing a callback.
 */
import { errorMessage, KeelError } from "@keel/kernel";
import type {
  AgentEvent,
  ChildApprovalLink,
  PreparedTurn,
  RunOptions,
  Session,
  TurnInput,
  TurnResult,
} from "@keel/kernel";

/** How a streamed tool call ended. */
export type ToolRunStatusView = "ok" | "error" | "timeout" | "denied" | "skipped" | "cancelled";

/**
 * One event of a turn stream, by `type`:
 * - `turn.started` the turn's id (also on resume);
 * - `text` / `thinking` a delta of the model's answer or reasoning (whole characters);
 * - `tool.started`, `tool.progress`, `tool.finished` a tool call's life;
 * - `approval.requested` a call waits for approval (the turn will pause unless a callback answers);
 * - `compaction` a plugin rewrote the history before a request;
 * - `retry` the provider retried or fell back (deltas of the retried attempt are void);
 * - `error` the turn threw instead of ending with a verdict (a store failure);
 * - `verdict` always last (unless `error`): the TurnResult.
 */
export type TurnStreamEvent<O = unknown> =
  | { type: "turn.started"; turnId: string; resumed: boolean }
  | { type: "text"; delta: string; round: number }
  | { type: "thinking"; delta: string; round: number }
  | { type: "tool.started"; callId: string; name: string; args: unknown; round: number }
  | { type: "tool.progress"; callId: string; name: string; message: string; fraction?: number; elapsedMs: number }
  | {
      type: "tool.finished";
      callId: string;
      name: string;
      status: ToolRunStatusView;
      durationMs: number;
      decision?: string;
    }
  | {
      type: "approval.requested";
      callId: string;
      name: string;
      args: unknown;
      reason?: string;
      plugin?: string;
      via?: ChildApprovalLink;
    }
  | { type: "compaction"; plugin: string; reason: string; messagesBefore: number; messagesAfter: number }
  | { type: "retry"; message: string }
  | { type: "error"; code: string; message: string }
  | { type: "verdict"; result: TurnResult<O> };

/** Options of session.stream(). */
export interface StreamOptions {
  /**
   * Events buffered before the model's stream is paused until the consumer reads on (default 256).
   * Contract: only deltas wait; other events are never dropped.
   */
  highWaterMark?: number;
}

/** Map a kernel event of the session to a stream event, or undefined when streams do not carry it. */
function toStreamEvent(e: AgentEvent): TurnStreamEvent | undefined {
  switch (e.type) {
    case "turn.started":
      return { type: "turn.started", turnId: e.turnId!, resumed: false };
    case "turn.resumed":
      return { type: "turn.started", turnId: e.turnId!, resumed: true };
    case "model.delta":
      return e.channel === "tool_args"
        ? undefined
        : { type: e.channel === "text" ? "text" : "thinking", delta: e.text, round: e.round };
    case "tool.started":
      return { type: "tool.started", callId: e.callId, name: e.name, args: e.args, round: e.round };
    case "tool.progress":
      return {
        type: "tool.progress",
        callId: e.callId,
        name: e.name,
        message: e.message,
        ...(e.fraction !== undefined ? { fraction: e.fraction } : {}),
        elapsedMs: e.elapsedMs,
      };
    case "tool.completed":
      return {
        type: "tool.finished",
        callId: e.callId,
        name: e.name,
        status: e.status,
        durationMs: e.durationMs,
        ...(e.decision ? { decision: e.decision } : {}),
      };
    case "approval.requested":
      return {
        type: "approval.requested",
        callId: e.callId,
        name: e.name,
        args: e.args,
        ...(e.reason !== undefined ? { reason: e.reason } : {}),
        ...(e.plugin !== undefined ? { plugin: e.plugin } : {}),
        ...(e.via ? { via: { ...e.via } } : {}),
      };
    case "context.edited":
      return {
        type: "compaction",
        plugin: e.plugin,
        reason: e.reason,
        messagesBefore: e.before,
        messagesAfter: e.after,
      };
    case "model.notice":
      return e.kind === "info" ? undefined : { type: "retry", message: e.message };
    default:
      return undefined;
  }
}

/**
 * A running turn as an async iterable (session.stream / session.resumeStream).
 * Contract: the turn starts at once, whether or not anyone iterates; iterate at most once
 * (KEEL_STREAM_CONSUMED otherwise); the last event is `verdict` (or `error`); leaving the loop
 * early (`break`, `return`, a throw) cancels the turn and its provider request; while the
 * consumer is more than `highWaterMark` events behind, the model's stream is not read
 * (back-pressure reaches the provider's socket). `result` settles like run() would.
 */
export class TurnStream<O = unknown> implements AsyncIterable<TurnStreamEvent<O>> {
  /** The turn's result, as run() would resolve it. */
  readonly result: Promise<TurnResult<O>>;
  /**
   * Settles once the turn holds its session (its first event comes next); rejects with what
   * stopped it before it began: KEEL_SESSION_BUSY when another instance runs a turn in the
   * session, KEEL_APPROVAL_PENDING or KEEL_NOT_PAUSED when another instance paused or resumed it.
   * Contract: a server awaits it to answer those with a status code before it starts streaming.
   */
  readonly started: Promise<void>;
  private readonly queue: TurnStreamEvent<O>[] = [];
  private wake: (() => void) | undefined;
  private done = false;
  private iterated = false;
  private readonly ctrl = new AbortController();
  private readonly session: Session;
  private readonly high: number;
  private release: (() => void) | undefined;

  constructor(session: Session, start: PreparedTurn<O>, options: StreamOptions = {}) {
    this.session = session;
    this.high = Math.max(1, options.highWaterMark ?? 256);
    const off = session.agent.subscribe((e) => {
      if (e.sessionId !== session.id) return;
      const mapped = toStreamEvent(e);
      if (mapped) this.push(mapped as TurnStreamEvent<O>);
    });
    let run: Promise<TurnResult<O>>;
    let held!: () => void;
    const started = new Promise<void>((r) => (held = r));
    try {
      run = start(this.ctrl.signal, held);
    } catch (err) {
      run = Promise.reject(err);
    }
    this.result = run;
    this.started = Promise.race([started, run.then(() => undefined)]);
    this.started.catch(() => {});
    run
      .then(
        (result) => this.end({ type: "verdict", result }),
        (err: unknown) =>
          this.end({
            type: "error",
            code: (err as { code?: string } | null)?.code ?? "KEEL_TURN_FAILED",
            message: errorMessage(err),
          }),
      )
      .finally(off);
    // A host that only awaits `result` must not see an unhandled rejection from the iterator side.
    run.catch(() => {});
  }

  /** Cancel the turn (as `break` does). */
  abort(reason?: unknown): void {
    this.ctrl.abort(reason ?? new KeelError("KEEL_TURN_ABORTED", "The turn stream was cancelled."));
    this.unblock();
  }

  private push(e: TurnStreamEvent<O>): void {
    if (this.done) return;
    this.queue.push(e);
    this.wake?.();
    // Back-pressure only once someone reads: a host that just awaits `result` is never blocked.
    if (this.iterated && !this.release && this.queue.length >= this.high) {
      this.session.backpressure = new Promise<void>((r) => (this.release = r));
    }
  }

  private end(last: TurnStreamEvent<O>): void {
    this.queue.push(last);
    this.done = true;
    this.unblock();
    this.wake?.();
  }

  private unblock(): void {
    if (!this.release) return;
    this.release();
    this.release = undefined;
    this.session.backpressure = undefined;
  }

  [Symbol.asyncIterator](): AsyncIterator<TurnStreamEvent<O>> {
    if (this.iterated) throw new KeelError("KEEL_STREAM_CONSUMED", "This turn stream was already iterated.");
    this.iterated = true;
    let finished = false;
    return {
      next: async (): Promise<IteratorResult<TurnStreamEvent<O>>> => {
        for (;;) {
          if (this.queue.length) {
            const value = this.queue.shift()!;
            if (this.queue.length < this.high / 2) this.unblock();
            if (this.done && !this.queue.length) finished = true;
            return { value, done: false };
          }
          if (finished || this.done) return { value: undefined, done: true };
          await new Promise<void>((r) => (this.wake = r));
          this.wake = undefined;
        }
      },
      return: async (): Promise<IteratorResult<TurnStreamEvent<O>>> => {
        // Leaving early cancels the turn; wait for it to end so the session is free again.
        if (!this.done) {
          this.abort(new KeelError("KEEL_TURN_ABORTED", "The turn stream's consumer stopped reading."));
          await this.result.catch(() => undefined);
        }
        finished = true;
        this.queue.length = 0;
        return { value: undefined, done: true };
      },
    };
  }
}

/**
 * Run one turn of `session` as a stream of typed events (text and thinking deltas, tools,
 * approvals, compaction, then the verdict). Contract: see TurnStream; `break` or `signal`
 * cancels the turn; what run() would reject at the door (bad input or schema, a busy or paused
 * session) throws here at once, so a server can answer it with a status code before it streams.
 */
export function streamTurn<O = unknown>(
  session: Session,
  input: TurnInput,
  options: RunOptions<O> & StreamOptions = {},
): TurnStream<O> {
  return new TurnStream<O>(session, session.prepare(input, options), options);
}

/** Resume the paused turn of `session` as a stream. Contract: as streamTurn; KEEL_NOT_PAUSED and KEEL_APPROVAL_PENDING throw at once. */
export function streamResume<O = unknown>(
  session: Session,
  options: RunOptions<O> & StreamOptions = {},
): TurnStream<O> {
  return new TurnStream<O>(session, session.prepareResume(options), options);
}

/**
 * The stream as server-sent events: `event: <type>` and `data: <JSON>` per event, `verdict` last.
 * Contract: pull-based (back-pressure from the reader reaches the turn); cancelling the body
 * (a client that disconnects) cancels the turn.
 */
export function toSSEStream(stream: AsyncIterable<TurnStreamEvent<unknown>>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const it = stream[Symbol.asyncIterator]();
  let id = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const next = await it.next();
        if (next.done) return controller.close();
        id++;
        controller.enqueue(
          encoder.encode(`id: ${id}\nevent: ${next.value.type}\ndata: ${JSON.stringify(next.value)}\n\n`),
        );
      },
      async cancel() {
        await it.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}

/** A `Response` streaming the turn as server-sent events (for fetch-style servers; see toSSEStream). */
export function sseResponse(stream: AsyncIterable<TurnStreamEvent<unknown>>, init: ResponseInit = {}): Response {
  const headers = new Headers(init.headers);
  headers.set("content-type", "text/event-stream; charset=utf-8");
  headers.set("cache-control", "no-cache, no-transform");
  headers.set("x-accel-buffering", "no");
  return new Response(toSSEStream(stream), { ...init, headers });
}
