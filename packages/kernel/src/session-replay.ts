/**
 * A session's state rebuilt from its log, event by event: the conversation, a paused turn and
 * what it waits for, queued messages, finished jobs, the mode, and where an unfinished turn
 * stands. One reducer serves a first open (every event) and a handle catching up with what
 * other instances wrote since it last read (the events after its last seq).
 */
import type { KeelEvent } from "./events.ts";
import { isTerminalEvent } from "./events.ts";
import { applyMessageEdits } from "./merge.ts";
import type { Message } from "./messages.ts";
import { repairToolPairs } from "./repair.ts";
import type { PausedTurn } from "./turn-state.ts";
import type { PendingApproval } from "./verdict.ts";
import type { SessionMode } from "./events.ts";

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
}

/** A cursor before the first event. */
export function newCursor(): LogCursor {
  return { open: null, started: undefined, asked: new Map(), lastChild: new Map(), startedArgs: new Map(), children: new Map() };
}

/**
 * Apply `events` (in seq order, all after `target.seq`) to `target` and `cursor`, starting from
 * `messages`. Returns the conversation after them (the same array, grown, unless an edit replaced it).
 * Contract: rebuilds the calls a paused turn waits for from `approval.requested` (and what
 * answered or completed them within the turn), never from the verdict's copy of their ids.
 */
export function replay(target: ReplayTarget, cursor: LogCursor, messages: Message[], events: readonly KeelEvent[]): Message[] {
  let out = messages;
  for (const e of events) {
    target.seq = e.seq;
    switch (e.type) {
      case "turn.started":
        cursor.open = e.turnId;
        target.turnCount++;
        cursor.started = { input: e.input, metadata: e.metadata };
        cursor.asked = new Map();
        cursor.startedArgs.clear();
        target.paused = undefined;
        break;
      case "approval.requested":
        if (e.turnId) cursor.asked.set(e.callId, { callId: e.callId, turnId: e.turnId, name: e.name, args: e.args, round: e.round, requestedAt: e.ts, ...(e.reason !== undefined ? { reason: e.reason } : {}), ...(e.plugin !== undefined ? { plugin: e.plugin } : {}), ...(e.via ? { via: { ...e.via } } : {}) });
        break;
      case "tool.completed":
        cursor.asked.delete(e.callId);
        break;
      case "tool.started":
        cursor.startedArgs.set(e.callId, e.args);
        // Ids can repeat across rounds: a call's child is the one started after its last start.
        cursor.lastChild.delete(e.callId);
        break;
      case "approval.resolved": {
        // Answered within the turn (the approve() callback, an earlier "always"): it waits for no one.
        if (e.by !== "host") cursor.asked.delete(e.callId);
        const req = target.paused?.requests.get(e.callId);
        if (req && e.by === "host") req.answer = { approved: e.approved, ...(e.always ? { always: true } : {}), ...(e.reason !== undefined ? { reason: e.reason } : {}) };
        // A child's call approved "always" is always allowed in the child session, not here.
        if (e.approved && e.always && !req?.via) target.alwaysAllowed.add(e.name);
        break;
      }
      case "turn.paused":
        if (e.verdict.status === "paused" && e.turnId && cursor.started) {
          const requests = cursor.asked;
          const childCalls = new Map([...requests.values()].flatMap((r) => (r.via ? [[r.via.callId, cursor.startedArgs.get(r.via.callId)] as const] : [])));
          target.paused = { turnId: e.turnId, input: cursor.started.input, metadata: cursor.started.metadata, rounds: e.rounds, toolCalls: e.toolCalls, requests, ...(childCalls.size ? { childCalls } : {}) };
        }
        if (e.turnId === cursor.open) cursor.open = null;
        break;
      case "turn.resumed":
        target.paused = undefined;
        cursor.open = e.turnId;
        cursor.asked = new Map();
        break;
      case "session.mode":
        target.switchedMode = e.mode;
        break;
      case "child.started":
        if (e.turnId) cursor.children.set(e.turnId, [...(cursor.children.get(e.turnId) ?? []), e]);
        cursor.lastChild.set(e.callId, e);
        break;
      case "turn.interrupted":
        // A paused turn its parent gave up on (abandonPaused) ends here.
        if (target.paused?.turnId === e.turnId) target.paused = undefined;
        if (e.turnId === cursor.open) cursor.open = null;
        break;
      case "session.created":
        if (e.parent) target.parentLink = { ...e.parent };
        break;
      case "message.appended":
        out.push(e.message);
        break;
      case "context.edited":
        out = [...applyMessageEdits(out, e.edits)];
        break;
      case "context.repaired":
        out = [...repairToolPairs(out).messages];
        break;
      case "message.queued":
        (e.queue === "steering" ? target.steering : target.followUps).push({ queueId: e.queueId, text: e.text });
        break;
      case "message.dequeued": {
        const q = e.queue === "steering" ? target.steering : target.followUps;
        const at = q.findIndex((m) => m.queueId === e.queueId);
        if (at >= 0) q.splice(at, 1);
        break;
      }
      case "job.completed":
        if (e.status === "ok") target.completedJobs.add(e.idempotencyKey);
        break;
      default:
        if (isTerminalEvent(e) && e.turnId === cursor.open) cursor.open = null;
    }
  }
  return out;
}
