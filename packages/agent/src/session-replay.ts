/**
 * A session's state rebuilt from its log, event by event: the conversation, a paused turn and
 * what it waits for, queued messages, finished jobs, the mode, and where an unfinished turn
 * stands. One reducer serves a first open (every event) and a handle catching up with what
 * other instances wrote since it last read (the events after its last seq).
 */
import type { KeelEvent } from "@keel/kernel";
import { isTerminalEvent } from "@keel/kernel";
import { applyMessageEdits } from "@keel/kernel";
import type { Message } from "@keel/kernel";
import { repairToolPairs } from "@keel/kernel";
import type { PausedTurn } from "@keel/kernel";
import type { PendingApproval } from "@keel/kernel";
import type { Usage } from "@keel/kernel";
import { addUsage } from "@keel/kernel";
import type { SessionMode } from "@keel/kernel";

/** A child session a tool call started (child.started). */
export interface ChildStart {
  callId: string;
  name: string;
  childSessionId: string;
}

/** The state a session handle keeps, as the log says it is. */
export interface ReplayTarget {
  seq: number;
  turnCount: number;
  paused: PausedTurn | undefined;
  switchedMode: SessionMode | undefined;
  parentLink: { sessionId: string; turnId: string; callId: string; name: string; depth: number } | undefined;
  readonly steering: Array<{ queueId: string; text: string }>;
  readonly followUps: Array<{ queueId: string; text: string }>;
  readonly completedJobs: Set<string>;
  readonly alwaysAllowed: Set<string>;
  /** What the session's provider calls cost, from its `model.responded` events (budgets read it). */
  readonly spend: Usage;
}

/**
 * Where the log stands on its last turn, carried from one read to the next. Contract: `open` is
 * the id of a turn that started and has not ended (running elsewhere, or left by a dead process).
 */
export interface LogCursor {
  open: string | null;
  started: { input: string; metadata: Record<string, unknown> } | undefined;
  /** Calls of the current turn segment asked for approval and not answered within it: a pause waits for these. */
  asked: Map<string, PendingApproval>;
  /** The child each call started last (for the result of a call a crash cut off). */
  lastChild: Map<string, ChildStart>;
  /** The arguments each call of the open turn started with (a call waiting in a child runs again with them). */
  startedArgs: Map<string, unknown>;
  /** Child sessions each turn started: an interrupted turn's are closed too. */
  children: Map<string, ChildStart[]>;
  /** The child sessions each call of the open turn started since its last start, in order (a recovered call's children go on). */
  callChildren: Map<string, ChildStart[]>;
  /** Rounds and counted tool calls of the open turn so far (a recovered turn goes on from them). */
  rounds: number;
  toolCalls: number;
  /** The calls (round and id) counted in `toolCalls`: a call started again (after a crash, or a child's approval) counts once. */
  counted: Set<string>;
  /**
   * The lease a hold took over from the open turn's stalled or dead holder, as its `session.resumed`
   * record says, until the turn goes on (`turn.resumed`): whoever goes on with it later, under a
   * lease free by then, still says the turn was taken over.
   */
  takenOver?: { turnId: string; pid: number; host: string; reason: "expired" | "holder_dead" };
}

/** A cursor before the first event. */
export function newCursor(): LogCursor {
  return {
    open: null,
    started: undefined,
    asked: new Map(),
    lastChild: new Map(),
    startedArgs: new Map(),
    children: new Map(),
    callChildren: new Map(),
    rounds: 0,
    toolCalls: 0,
    counted: new Set(),
  };
}

/** One event's effect: on the target and the cursor, and on the conversation (returned when replaced). */
type Apply<T extends KeelEvent["type"]> = (
  target: ReplayTarget,
  cursor: LogCursor,
  e: Extract<KeelEvent, { type: T }>,
  messages: Message[],
) => Message[] | void;

/** What each event type changes; a type not listed changes nothing but the seq (and ends an open turn when terminal). */
const APPLY: { readonly [T in KeelEvent["type"]]?: Apply<T> } = {
  "turn.started": (target, cursor, e) => {
    cursor.open = e.turnId;
    target.turnCount++;
    cursor.started = { input: e.input, metadata: e.metadata };
    cursor.asked = new Map();
    cursor.startedArgs.clear();
    cursor.callChildren.clear();
    cursor.rounds = 0;
    cursor.toolCalls = 0;
    cursor.counted.clear();
    target.paused = undefined;
  },
  "approval.requested": (_t, cursor, e) => {
    if (e.turnId)
      cursor.asked.set(e.callId, {
        callId: e.callId,
        turnId: e.turnId,
        name: e.name,
        args: e.args,
        round: e.round,
        requestedAt: e.ts,
        ...(e.reason !== undefined ? { reason: e.reason } : {}),
        ...(e.plugin !== undefined ? { plugin: e.plugin } : {}),
        ...(e.via ? { via: { ...e.via } } : {}),
      });
  },
  "tool.completed": (_t, cursor, e) => void cursor.asked.delete(e.callId),
  "tool.started": (_t, cursor, e) => {
    cursor.startedArgs.set(e.callId, e.args);
    const key = `${e.round}:${e.callId}`;
    // The same call started again (recovered after a crash, or resumed for its child's approval): its
    // children go on from their logs and are not started anew, so they stay its (a second crash
    // must find them, or the call would be cut for good and its children left open).
    if (cursor.counted.has(key)) return;
    cursor.counted.add(key);
    cursor.toolCalls++;
    // Ids can repeat across rounds: a call's child is the one started after its last start.
    cursor.lastChild.delete(e.callId);
    cursor.callChildren.delete(e.callId);
  },
  "approval.resolved": (target, cursor, e) => {
    // Answered within the turn (the approve() callback, an earlier "always"): it waits for no one.
    if (e.by !== "host") cursor.asked.delete(e.callId);
    const req = target.paused?.requests.get(e.callId);
    if (req && e.by === "host")
      req.answer = {
        approved: e.approved,
        ...(e.always ? { always: true } : {}),
        ...(e.reason !== undefined ? { reason: e.reason } : {}),
        ...(e.answerer !== undefined ? { answerer: e.answerer } : {}),
      };
    // A child's call approved "always" is always allowed in the child session, not here.
    if (e.approved && e.always && !req?.via) target.alwaysAllowed.add(e.name);
  },
  "turn.paused": (target, cursor, e) => {
    if (e.verdict.status === "paused" && e.turnId && cursor.started) {
      const requests = cursor.asked;
      const childCalls = new Map(
        [...requests.values()].flatMap((r) =>
          r.via ? [[r.via.callId, cursor.startedArgs.get(r.via.callId)] as const] : [],
        ),
      );
      target.paused = {
        turnId: e.turnId,
        input: cursor.started.input,
        metadata: cursor.started.metadata,
        rounds: e.rounds,
        toolCalls: e.toolCalls,
        usage: { ...e.usage },
        requests,
        ...(childCalls.size ? { childCalls } : {}),
      };
    }
    if (e.turnId === cursor.open) cursor.open = null;
    cursor.rounds = e.rounds;
    cursor.toolCalls = e.toolCalls;
  },
  "turn.resumed": (target, cursor, e) => {
    target.paused = undefined;
    cursor.open = e.turnId;
    cursor.asked = new Map();
    cursor.takenOver = undefined;
  },
  "session.resumed": (_t, cursor, e) => {
    if (e.unfinishedTurn && e.unfinishedTurn === cursor.open && e.leaseTakenOver)
      cursor.takenOver = { turnId: e.unfinishedTurn, ...e.leaseTakenOver };
  },
  "session.mode": (target, _c, e) => void (target.switchedMode = e.mode),
  "child.started": (_t, cursor, e) => {
    if (e.turnId) cursor.children.set(e.turnId, [...(cursor.children.get(e.turnId) ?? []), e]);
    cursor.lastChild.set(e.callId, e);
    cursor.callChildren.set(e.callId, [...(cursor.callChildren.get(e.callId) ?? []), e]);
  },
  "preflight.completed": (target, _c, e) => void addUsage(target.spend, e.usage),
  "model.responded": (target, cursor, e) => {
    cursor.rounds = Math.max(cursor.rounds, e.round);
    addUsage(target.spend, e.usage);
  },
  "turn.interrupted": (target, cursor, e) => {
    // A paused turn its parent gave up on (abandonPaused) ends here.
    if (target.paused?.turnId === e.turnId) target.paused = undefined;
    if (e.turnId === cursor.open) cursor.open = null;
  },
  "session.created": (target, _c, e) => void (e.parent && (target.parentLink = { ...e.parent })),
  "message.appended": (_t, _c, e, messages) => void messages.push(e.message),
  "context.edited": (_t, _c, e, messages) => [...applyMessageEdits(messages, e.edits)],
  "context.repaired": (_t, _c, _e, messages) => [...repairToolPairs(messages).messages],
  "message.queued": (target, _c, e) =>
    void (e.queue === "steering" ? target.steering : target.followUps).push({ queueId: e.queueId, text: e.text }),
  "message.dequeued": (target, _c, e) => {
    const q = e.queue === "steering" ? target.steering : target.followUps;
    const at = q.findIndex((m) => m.queueId === e.queueId);
    if (at >= 0) q.splice(at, 1);
  },
  "job.completed": (target, _c, e) => void (e.status === "ok" && target.completedJobs.add(e.idempotencyKey)),
};

/**
 * Apply `events` (in seq order, all after `target.seq`) to `target` and `cursor`, starting from
 * `messages`. Returns the conversation after them (the same array, grown, unless an edit replaced it).
 * Contract: rebuilds the calls a paused turn waits for from `approval.requested` (and what
 * answered or completed them within the turn), never from the verdict's copy of their ids.
 */
export function replay(
  target: ReplayTarget,
  cursor: LogCursor,
  messages: Message[],
  events: readonly KeelEvent[],
): Message[] {
  let out = messages;
  for (const e of events) {
    target.seq = e.seq;
    const apply = APPLY[e.type] as Apply<typeof e.type> | undefined;
    if (apply) out = apply(target, cursor, e, out) ?? out;
    else if (isTerminalEvent(e) && e.turnId === cursor.open) cursor.open = null;
  }
  return out;
}
