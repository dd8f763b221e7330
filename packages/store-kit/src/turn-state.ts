/**
 * Each session's turn state, kept by the stores beside the log so a worker finds the turns
 * that should go on without reading every log: `running` (a turn started and has not ended:
 * running now, or left by a stopped process), `paused` (it waits for approval), `answered` (a
 * person answered a paused turn's call since; it may be ready to resume), or none (idle).
 */
import type { KeelEvent } from "@keel/kernel";

/** A session's turn state as stored. Contract: null is idle. */
export type TurnState = "running" | "paused" | "answered" | null;

/** What a batch does to one session's state: `set` it, or mark a paused one `answered`. */
export type TurnStateChange = { set: TurnState } | { answeredIfPaused: true };

/** The state a turn-level event leaves, or undefined for an event that changes none. */
function stateAfter(e: KeelEvent): TurnState | undefined {
  switch (e.type) {
    case "turn.started":
    case "turn.resumed":
      return "running";
    case "turn.paused":
      return "paused";
    case "turn.completed":
    case "turn.failed":
    case "turn.interrupted":
      return null;
    default:
      return undefined;
  }
}

/**
 * The change one event makes to its session's turn state, or undefined.
 * Contract: `turnStateChanges([e]).get(e.sessionId)`, without the map.
 */
export function turnStateChange(e: KeelEvent): TurnStateChange | undefined {
  const next = stateAfter(e);
  if (next !== undefined) return { set: next };
  if (e.type === "approval.resolved" && e.by === "host") return { answeredIfPaused: true };
  return undefined;
}

/**
 * The change each session of a batch (in order) makes to its turn state, or none.
 * Contract: the last turn-level event wins; a host's approval answer after a pause in the
 * batch sets `answered`, and one with no pause in the batch marks a stored `paused` answered.
 */
export function turnStateChanges(events: readonly KeelEvent[]): Map<string, TurnStateChange> {
  const out = new Map<string, TurnStateChange>();
  for (const e of events) {
    const next = stateAfter(e);
    if (next !== undefined) out.set(e.sessionId, { set: next });
    else if (e.type === "approval.resolved" && e.by === "host") {
      const was = out.get(e.sessionId);
      if (!was) out.set(e.sessionId, { answeredIfPaused: true });
      else if ("set" in was && was.set === "paused") out.set(e.sessionId, { set: "answered" });
    }
  }
  return out;
}
