/**
 * Answering approvals from the studio page (`keel studio --allow-approvals`): the session is
 * opened with its lease, the answer is stored, and once every pending call is answered the
 * turn resumes here, in the background; the page follows it live like any other turn.
 */
import type { Agent, Session } from "@keel/agent";
import { errorMessage, KeelError } from "@keel/kernel";
import { cliUser } from "../approvals.ts";
import type { ApprovalAnswerer } from "./server.ts";

/** Contract: one resume at a time per session; a session busy elsewhere is KEEL_SESSION_BUSY (HTTP 409). */
export function sessionAnswerer(agent: Agent, note: (line: string) => void): ApprovalAnswerer {
  const resuming = new Map<string, Promise<unknown>>();
  const studioUser = cliUser().replace(/^cli/, "studio");
  return async (sessionId, callId, answer) => {
    if (resuming.has(sessionId))
      throw new KeelError("KEEL_TURN_BUSY", `Session "${sessionId}" is resuming its turn; wait for it to finish.`);
    const session: Session = await agent.session(sessionId);
    const pending = session.pendingApprovals().find((p) => p.callId === callId);
    if (!pending || pending.answer) {
      await session.close();
      // Answered once is answered: a second page (or a stale tab) cannot flip it.
      throw new KeelError(
        "KEEL_APPROVAL_UNKNOWN",
        `Session "${sessionId}" has no unanswered approval "${callId}" (${pending ? "it was answered already" : "the turn moved on, or it was never asked"}).`,
      );
    }
    // Recorded as answered from the studio, by the person who started it.
    const given = { ...(answer.reason ? { reason: answer.reason } : {}), answerer: studioUser };
    if (answer.approved) await session.approve(callId, given);
    else await session.deny(callId, given);
    if (session.pendingApprovals().some((p) => !p.answer)) {
      // The answers are in the log: release the lease so the session is free until the last one.
      await session.close();
      return { resumed: false };
    }
    const run = session
      .resume()
      .then((r) => note(`keel: studio resumed ${sessionId}: ${r.verdict.status}`))
      .catch((err) => note(`keel: studio could not resume ${sessionId}: ${errorMessage(err)}`))
      .finally(async () => {
        resuming.delete(sessionId);
        await session.close().catch(() => {});
      });
    resuming.set(sessionId, run);
    return { resumed: true };
  };
}
