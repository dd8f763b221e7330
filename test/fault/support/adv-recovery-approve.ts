/**
 * A second process answering a turn another process left paused for approval: it opens the
 * session in `$KEEL_HOME/sessions.sqlite` as agent "fault", approves every pending call
 * (durable), prints APPROVED, then SIGKILLs itself before it could resume the turn.
 *
 *   node adv-recovery-approve.ts <sessionId>
 */
import { writeSync } from "node:fs";
import { createAgent } from "../../../packages/agent/src/index.ts";
import { scriptedProvider } from "../../../packages/testkit/src/index.ts";
import { SqliteSessionStore } from "../../../packages/store-sqlite/src/index.ts";

const sid = process.argv[2]!;
const agent = await createAgent({
  name: "fault",
  store: new SqliteSessionStore({ path: `${process.env.KEEL_HOME}/sessions.sqlite` }),
  provider: scriptedProvider([{ text: "never asked" }]),
});
const session = await agent.session(sid);
for (const p of session.pendingApprovals()) await session.approve(p.callId);
writeSync(1, "APPROVED\n");
process.kill(process.pid, "SIGKILL");
