/**
 * One instance of an agent on PostgreSQL, for the multi-process tests.
 *   hang <schema> <session>            create the session, run "first question" on a model that
 *                                      never answers; prints STREAMING once the request is out
 *   turn <schema> <session> <input>    open the session, run a turn; prints RESULT <status>,
 *                                      or BUSY <code> <message>; then PROVIDER_CALLS <n>
 */
import { writeSync } from "node:fs";
import { createAgent } from "../../../agent/src/index.ts";
import { scriptedProvider } from "../../../testkit/src/index.ts";
import { PostgresSessionStore } from "../../src/index.ts";

const [mode, schema, sessionId, input] = process.argv.slice(2) as [string, string, string, string | undefined];
const say = (line: string) => writeSync(1, `${line}\n`);
const store = new PostgresSessionStore({ url: process.env.KEEL_TEST_PG_URL!, schema });
let calls = 0;
const base = scriptedProvider(mode === "hang" ? [{ hang: true }] : [{ text: "Answered." }]);
const provider = {
  ...base,
  id: base.id,
  stream(request: Parameters<typeof base.stream>[0], options: Parameters<typeof base.stream>[1]) {
    calls++;
    if (mode === "hang") say("STREAMING");
    return base.stream(request, options);
  },
};
const agent = await createAgent({ name: "pg-child", store, provider });
if (mode === "hang") {
  await store.ready();
  if (!(await store.getSession(sessionId)))
    await store.createSession({ id: sessionId, agent: "pg-child", createdAt: Date.now() });
}
try {
  const session = await agent.session(sessionId);
  const result = await session.run(mode === "hang" ? "first question" : input!);
  say(`RESULT ${result.verdict.status}`);
} catch (err) {
  say(`BUSY ${(err as { code?: string }).code} ${(err as Error).message}`);
}
say(`PROVIDER_CALLS ${calls}`);
await agent.close();
await store.close();
