/**
 * A turn as an async iterable of typed events, for hosts that stream to a client (SSE, a
 * WebSocket, a job log) instead of subscribing a callback.
 */
import { errorMessage, isTerminalEvent, KeelError } from "@keel/kernel";
import type {
  AgentEvent,
  ChildApprovalLink,
  PreparedTurn,
  RunOptions,
  Session,
  TurnInput,
  TurnResult,
} from "@keel/agent";

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
 *
 * `id` says where the event sits in the session's log, so a client can rejoin after it
 * (rejoinTurn): the `seq` of the stored event it comes from (`"41"`; a verdict's is its terminal
 * event's), or `"<seq>.<n>"` for the n-th live-only event (a delta, progress) after stored seq 41.
 * Contract: `id` is optional in the type (a host may build events) and always set by streamTurn,
 * streamResume and rejoinTurn.
 */
export type TurnStreamEvent<O = unknown> = (
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
  | { type: "verdict"; result: TurnResult<O> }
) & { id?: string };

/** Options of session.stream(). */
export interface StreamOptions {
  /**
   * Events buffered before the model's stream is paused until the consumer reads on (default 256).
   * Contract: only deltas wait; other events are never dropped.
   */
  highWaterMark?: number;
}

/** @internal Map a kernel event of the session to a stream event, or undefined when streams do not carry it. */
export function toStreamEvent(e: AgentEvent): TurnStreamEvent | undefined {
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

/** The live-only events each running TurnStream published since its session's last stored event. */
const tails = new WeakMap<Session, { lastSeq: number; events: TurnStreamEvent[] }>();

/** @internal What a turn stream running `session` in this process published after its last stored event (rejoinTurn resumes there). */
export function liveTail(session: Session): { lastSeq: number; events: TurnStreamEvent[] } | undefined {
  const tail = tails.get(session);
  return tail && { lastSeq: tail.lastSeq, events: [...tail.events] };
}

/**
 * A running turn as an async iterable (session.stream / session.resumeStream).
 * Contract: the turn starts at once, whether or not anyone iterates; iterate at most once
 * (KEEL_STREAM_CONSUMED otherwise); the last event is `verdict` (or `error`); leaving the loop
 * early (`break`, `return`, a throw) cancels the turn and its provider request; while the
 * consumer is more than `highWaterMark` events behind, the model's stream is not read
 * (back-pressure reaches the provider's socket), unless detach() was called. `result` settles
 * like run() would. Events carry rejoinable ids (see TurnStreamEvent).
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
  private detached = false;

  constructor(session: Session, start: PreparedTurn<O>, options: StreamOptions = {}) {
    this.session = session;
    this.high = Math.max(1, options.highWaterMark ?? 256);
    // Ids: a stored event's seq; a live-only one is numbered after the last stored seq seen.
    const tail = { lastSeq: session.seq, events: [] as TurnStreamEvent[] };
    let verdictId: string | undefined;
    const nextLiveId = () => `${tail.lastSeq}.${tail.events.length + 1}`;
    const subscribed = session.agent.subscribe((e) => {
      if (e.sessionId !== session.id) return;
      if ("seq" in e) {
        tail.lastSeq = e.seq;
        tail.events = [];
        if (isTerminalEvent(e)) verdictId = String(e.seq);
      }
      const mapped = toStreamEvent(e);
      if (!mapped) return;
      const event = { ...mapped, id: "seq" in e ? String(e.seq) : nextLiveId() } as TurnStreamEvent<O>;
      if (!("seq" in e)) tail.events.push(event as TurnStreamEvent);
      this.push(event);
    });
    tails.set(session, tail);
    const off = () => {
      subscribed();
      if (tails.get(session) === tail) tails.delete(session);
    };
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
        (result) => this.end({ type: "verdict", result, id: verdictId ?? nextLiveId() }),
        (err: unknown) =>
          this.end({
            type: "error",
            code: (err as { code?: string } | null)?.code ?? "KEEL_TURN_FAILED",
            message: errorMessage(err),
            id: `${tail.lastSeq}.${tail.events.length + 1}`,
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

  /**
   * Stop delivering events without cancelling the turn: it runs to its end (a client that
   * disconnected may rejoin it from the log), never held back by back-pressure.
   * Contract: the queue is dropped and later events are discarded; iteration ends; `result` still settles.
   */
  detach(): void {
    this.detached = true;
    this.queue.length = 0;
    this.unblock();
    this.wake?.();
  }

  private push(e: TurnStreamEvent<O>): void {
    if (this.done || this.detached) return;
    this.queue.push(e);
    this.wake?.();
    // Back-pressure only once someone reads: a host that just awaits `result` is never blocked.
    if (this.iterated && !this.release && this.queue.length >= this.high) {
      this.session.backpressure = new Promise<void>((r) => (this.release = r));
    }
  }

  private end(last: TurnStreamEvent<O>): void {
    if (!this.detached) this.queue.push(last);
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
          if (finished || this.done || this.detached) return { value: undefined, done: true };
          await new Promise<void>((r) => (this.wake = r));
          this.wake = undefined;
        }
      },
      return: async (): Promise<IteratorResult<TurnStreamEvent<O>>> => {
        // Leaving early cancels the turn (unless detached); wait for it to end so the session is free again.
        if (!this.done && !this.detached) {
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

/** Options of toSSEStream() and sseResponse(). Contract: without them, a disconnect cancels the turn (as before). */
export interface SSEOptions {
  /**
   * What a client that disconnects (the body is cancelled) does to the stream. `cancel` (the
   * default): the iterator is closed with return(), so a TurnStream cancels its turn. `continue`:
   * a TurnStream is detached (its turn runs to its end, unread events are discarded, no
   * back-pressure holds it) and the client may rejoin it (rejoinTurn); any other stream is closed.
   * Contract: only the body's cancellation is concerned; the turn's own signal still cancels it.
   */
  onDisconnect?: "cancel" | "continue";
}

/**
 * The stream as server-sent events: `id: <event id>`, `event: <type>` and `data: <JSON>` per
 * event, `verdict` last. Contract: pull-based (back-pressure from the reader reaches the turn);
 * the SSE id is the event's `id` (a per-response counter for events without one); a client that
 * disconnects cancels the turn unless `onDisconnect` is `continue`.
 */
export function toSSEStream(
  stream: AsyncIterable<TurnStreamEvent<unknown>>,
  options: SSEOptions = {},
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const it = stream[Symbol.asyncIterator]();
  let count = 0;
  let closed = false;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const next = await it.next();
        // A read that settles after the client disconnected has nowhere to go.
        if (closed) return;
        if (next.done) return controller.close();
        count++;
        controller.enqueue(
          encoder.encode(
            `id: ${next.value.id ?? count}\nevent: ${next.value.type}\ndata: ${JSON.stringify(next.value)}\n\n`,
          ),
        );
      },
      async cancel() {
        closed = true;
        if (options.onDisconnect === "continue" && stream instanceof TurnStream) stream.detach();
        else await it.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}

/** A `Response` streaming the turn as server-sent events (for fetch-style servers; see toSSEStream). Contract: as toSSEStream. */
export function sseResponse(
  stream: AsyncIterable<TurnStreamEvent<unknown>>,
  init: ResponseInit & SSEOptions = {},
): Response {
  const { onDisconnect, ...rest } = init;
  const headers = new Headers(rest.headers);
  headers.set("content-type", "text/event-stream; charset=utf-8");
  headers.set("cache-control", "no-cache, no-transform");
  headers.set("x-accel-buffering", "no");
  return new Response(toSSEStream(stream, onDisconnect ? { onDisconnect } : {}), { ...rest, headers });
}
