/**
 * The host off Node (host-entry.ts) in workerd, without and with `nodejs_compat`: with the flag a
 * Worker has a `process` whose `versions.node` is set, yet no file system and no
 * @keel/agent/node in its bundle, so it is no Node to the host. Each scenario is one request:
 * createAgent with no store, a child session, an approval, a durable job, steering, what plugins
 * are told of storage, `store: "sqlite"` refused with a KeelError (support/host-scenarios.ts).
 */
import { afterAll, beforeAll, describe, it } from "vitest";
import { HOST_ENTRY, HOST_SCENARIOS } from "./support/host-scenarios.ts";
import { startTurnWorker, TURN_WORKER, type TurnWorker } from "./support/workerd.ts";

describe.each([
  { flags: [] as string[], label: "no nodejs_compat" },
  { flags: ["nodejs_compat"], label: "nodejs_compat" },
])("the host in workerd ($label)", ({ flags }) => {
  // Started once; a failure to bundle or start is thrown by each test (vitest would call them skipped).
  let worker: Promise<TurnWorker>;
  beforeAll(async () => {
    worker = startTurnWorker(
      `import { runScenario } from ${JSON.stringify(HOST_ENTRY)};
import { turnWorker } from ${JSON.stringify(TURN_WORKER)};
export default turnWorker((query) => runScenario(query.get("s") ?? ""));
`,
      {},
      flags,
    );
    await worker.catch(() => undefined);
  });
  afterAll(async () => {
    await (await worker.catch(() => undefined))?.dispose();
  });

  for (const scenario of HOST_SCENARIOS)
    it(scenario.title, async () => {
      scenario.check(await (await worker).run(`/?s=${scenario.name}`));
    });
});
