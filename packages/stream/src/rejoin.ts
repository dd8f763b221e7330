/**
 * Rejoin a session's turn stream after a dropped connection (SSE Last-Event-ID): the stored
 * events the client missed, then the live ones, from whichever instance runs the turn.
 */
import { isTerminalEvent, KeelError, messageText } from "@keel/kernel";
import type { AgentEvent, KeelEvent, PendingApproval, Session } from "@keel/agent";
import { liveTail, toStreamEvent } from "./turn-stream.ts";
import type { TurnStreamEvent } from "./turn-stream.ts";

/** Options of rejoinTurn(). Contract: all optional; `after` is parsed before anything is read. */
export interface RejoinOptions {
  /**
   * The last event id the client received (SSE `Last-Event-ID`: `"41"`, or `"41.7"` for a live
   * event after stored seq 41), or a seq. Absent: the session's latest turn from its start.
   */
  after?: string | number;
  /** Ends the stream (the client is gone). The turn itself is never touched. */
  signal?: AbortSignal;
  /** How often the log is read while another instance runs the turn (ms, default 250; backs off to 2 s while nothing is written). */
  pollMs?: number;
}

const POSITION = /^(\d{1,15})(?:\.(\d{1,15}))?$/;

/** The stored seq an event id points after, and how many live events after it. Contract: KEEL_STREAM_POSITION_INVALID (path `after`) for anything else. */
function positionOf(after: string | number): { seq: number; live: number } {
  const m = typeof after === "string" ? POSITION.exec(after.trim()) : null;
  if (m) return { seq: Number(m[1]), live: Number(m[2] ?? 0) };
  if (typeof after === "number" && Number.isSafeInteger(after) && after >= 0) return { seq: after, live: 0 };
  throw new KeelError(
    "KEEL_STREAM_POSITION_INVALID",
    // Shown cut by code points: a header never splits a surrogate pair in the message.
    `Cannot rejoin after ${JSON.stringify(Array.from(String(after)).slice(0, 40).join(""))}.`,
    { path: "after" },
  );
}

/** What the log says of the latest turn read so far: enough to build its verdict. */
interface TurnView {
  turnId: string;
  text: string;
  round: number;
  asked: Map<string, PendingApproval>;
}

/** Reads stored events in order into stream events. */
class LogReader {
  turn: TurnView | undefined;
  /** The latest turn's terminal event was read. */
  ended = false;

  /** `whole`: an assistant message becomes one `text` event (its deltas were never stored). */
  read(e: KeelEvent, whole: boolean): TurnStreamEvent[] {
    const id = String(e.seq);
    if (e.type === "turn.started" || e.type === "turn.resumed") {
      const same = e.type === "turn.resumed" && this.turn?.turnId === e.turnId;
      this.turn = { turnId: e.turnId!, text: "", round: 0, asked: same ? this.turn!.asked : new Map() };
      this.ended = false;
    } else if (e.type === "model.responded") {
      if (this.turn) this.turn.round = e.round;
    } else if (e.type === "message.appended") {
      if (e.message.role !== "assistant" || !this.turn) return [];
      const text = messageText(e.message);
      if (!text) return [];
      this.turn.text = text;
      return whole ? [{ type: "text", delta: text, round: this.turn.round, id }] : [];
    } else if (e.type === "approval.requested") {
      const { callId, name, args, round, reason, plugin, via } = e;
      this.turn?.asked.set(callId, {
        callId,
        turnId: e.turnId!,
        name,
        args,
        round,
        requestedAt: e.ts,
        ...(plugin !== undefined ? { plugin } : {}),
        ...(reason !== undefined ? { reason } : {}),
        ...(via ? { via } : {}),
      });
    } else if (isTerminalEvent(e) && "verdict" in e) {
      const t = this.turn?.turnId === e.turnId ? this.turn : undefined;
      if (t) this.ended = true;
      const { verdict, usage, rounds, toolCalls } = e;
      const pending = verdict.status === "paused" ? verdict.pending.flatMap((c) => t?.asked.get(c) ?? []) : undefined;
      const result = {
        sessionId: e.sessionId,
        turnId: e.turnId!,
        verdict,
        text: t?.text ?? "",
        usage,
        rounds,
        toolCalls,
      };
      return [{ type: "verdict", result: pending ? { ...result, pending } : result, id }];
    }
    const mapped = toStreamEvent(e);
    return mapped ? [{ ...mapped, id }] : [];
  }
}

/**
 * A rejoined turn stream (rejoinTurn): an async iterable of TurnStreamEvents, for sseResponse.
 * Contract: iterate at most once (KEEL_STREAM_CONSUMED); leaving the loop or the signal ends
 * the stream, never the turn.
 */
export class TurnRejoin implements AsyncIterable<TurnStreamEvent> {
  /** Nothing to send: the session's latest turn ended at or before `after` and none runs here (a server answers 204). */
  readonly upToDate: boolean;
  /** The stored seq the stream starts after. */
  readonly after: number;
  private iterated = false;
  private readonly reader = new LogReader();
  private readonly backlog: KeelEvent[] = [];

  private readonly session: Session;
  private readonly options: RejoinOptions;

  private readonly afterLive: number;

  /** @internal use rejoinTurn(); `log` is the session's whole log, `given` the parsed position. */
  constructor(
    session: Session,
    log: readonly KeelEvent[],
    given: { seq: number; live: number } | undefined,
    options: RejoinOptions,
  ) {
    this.session = session;
    this.options = options;
    const latest = log.findLast((e) => e.type === "turn.started" || e.type === "turn.resumed");
    this.after = given?.seq ?? (latest ? latest.seq - 1 : (log.at(-1)?.seq ?? 0));
    this.afterLive = given?.live ?? 0;
    for (const e of log) {
      if (e.seq > this.after) this.backlog.push(e);
      else this.reader.read(e, false);
    }
    const end = latest && log.find((e) => e.seq > latest.seq && isTerminalEvent(e) && e.turnId === latest.turnId);
    this.upToDate = !session.busy && (latest ? end !== undefined && end.seq <= this.after : true);
  }

  [Symbol.asyncIterator](): AsyncIterator<TurnStreamEvent> {
    if (this.iterated) throw new KeelError("KEEL_STREAM_CONSUMED", "This rejoined stream was already iterated.");
    this.iterated = true;
    const stop = new AbortController();
    const signal = this.options.signal ? AbortSignal.any([this.options.signal, stop.signal]) : stop.signal;
    const gen = this.follow(signal);
    return {
      next: () => gen.next(),
      return: async () => {
        stop.abort();
        return gen.return(undefined);
      },
    };
  }

  private async *follow(signal: AbortSignal): AsyncGenerator<TurnStreamEvent> {
    const { session, reader } = this;
    const store = session.agent.store;
    const pollMs = Math.max(10, this.options.pollMs ?? 250);
    const buffer: AgentEvent[] = [];
    let wake: (() => void) | undefined;
    const off = session.agent.subscribe((e) => {
      if (e.sessionId !== session.id) return;
      buffer.push(e);
      wake?.();
    });
    // A turn streamed here (streamTurn) kept the live events since its last stored one: a client resumes within them.
    const tail = liveTail(session);
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      // What was written since the door read it (a turn of this process publishes before it writes: flush first).
      if (session.busy) await session.flush().catch(() => undefined);
      const end = this.backlog.at(-1)?.seq ?? this.after;
      const backlog = [...this.backlog, ...(await store.events(session.id, { afterSeq: end }))];
      let pos = this.after;
      for (const e of backlog) {
        pos = e.seq;
        yield* reader.read(e, true);
      }
      // Live events buffered before the last stored one are behind it; the deltas after it are complete only if it was buffered.
      const at = buffer.findLastIndex((e) => "seq" in e && e.seq <= pos);
      const seen = at >= 0 && (buffer[at] as KeelEvent).seq === pos;
      buffer.splice(0, at + 1);
      let live = 0;
      let complete = seen;
      if (!seen && tail && tail.lastSeq === pos) {
        yield* tail.events.slice(pos === this.after ? this.afterLive : 0);
        live = tail.events.length;
        complete = true;
      }
      let partial = false;
      let wait = pollMs;
      const stored = function* (e: KeelEvent, whole: boolean) {
        pos = e.seq;
        live = 0;
        yield* reader.read(e, whole);
      };
      while (!reader.ended && !signal.aborted) {
        const e = buffer.shift();
        if (e && "seq" in e) {
          if (e.seq <= pos) continue;
          // A gap (an event this handle published before it was subscribed): the store has it.
          if (e.seq > pos + 1)
            for (const m of await store.events(session.id, { afterSeq: pos }))
              if (m.seq < e.seq && !reader.ended) yield* stored(m, true);
          if (reader.ended) break;
          // A turn publishes its terminal event before the store has it: the verdict goes out once it is on disk.
          if (isTerminalEvent(e)) await session.flush().catch(() => undefined);
          const assistant = e.type === "message.appended" && e.message.role === "assistant";
          yield* stored(e, partial);
          if (assistant) partial = false;
          complete = true;
        } else if (e) {
          const mapped = toStreamEvent(e);
          if (!mapped) continue;
          // Deltas joined midway are held back: the stored message gives the whole text instead.
          if ((mapped.type === "text" || mapped.type === "thinking") && !complete) partial = true;
          else yield { ...mapped, id: `${pos}.${++live}` };
        } else {
          // Nothing buffered. A turn running here publishes its events; else another instance writes them to the store.
          if (!session.busy) {
            const got = await store.events(session.id, { afterSeq: pos });
            for (const m of got) if (m.seq > pos && !reader.ended) yield* stored(m, true);
            wait = got.length ? pollMs : Math.min(wait * 2, 2000);
            if (got.length || reader.ended || signal.aborted) continue;
          }
          let timer: NodeJS.Timeout | undefined;
          await new Promise<void>((r) => {
            wake = r;
            timer = setTimeout(r, session.busy ? 1000 : wait);
          });
          clearTimeout(timer);
          wake = undefined;
        }
      }
    } finally {
      off();
      signal.removeEventListener("abort", onAbort);
    }
  }
}

/**
 * Rejoin the turn stream of `session` after the event `after` (a client's SSE Last-Event-ID).
 * Contract: yields the stored events after it as stream events (an assistant message as one
 * `text` event, a terminal event as the `verdict`), then, while the session's latest turn runs,
 * its live events: from this process's event feed when it runs here (deltas too), else by
 * reading the store every `pollMs`; the stream ends after the latest turn's verdict. An id from
 * an earlier turn yields every turn from there, each ending with its verdict. Ids are those of
 * streamTurn's events. A malformed `after` throws KEEL_STREAM_POSITION_INVALID before anything
 * is read; an open turn whose process died without its terminal event is followed until the signal aborts.
 */
export async function rejoinTurn(session: Session, options: RejoinOptions = {}): Promise<TurnRejoin> {
  const given = options.after === undefined ? undefined : positionOf(options.after);
  if (session.busy) await session.flush().catch(() => undefined);
  return new TurnRejoin(session, await session.agent.store.events(session.id), given, options);
}
