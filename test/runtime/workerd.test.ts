/**
 * The smallest whole agent (agent-entry.ts) runs a full tool turn in workerd, Cloudflare's
 * Workers runtime: bundled by esbuild for the browser platform (no Node module, no polyfill),
 * served by a Worker module under Miniflare without the `nodejs_compat` flag.
 */
import { afterAll, beforeAll, describe, it } from "vitest";
import { AGENT_ENTRY, expectFullToolTurn } from "./support/outcome.ts";
import { startTurnWorker, TURN_WORKER, type TurnWorker } from "./support/workerd.ts";

describe("the smallest agent in workerd (Miniflare, no nodejs_compat)", () => {
  // Started once; a failure to bundle or start is thrown by the test (vitest would call it skipped).
  let worker: Promise<TurnWorker>;
  beforeAll(async () => {
    worker = startTurnWorker(`import { runOnce } from ${JSON.stringify(AGENT_ENTRY)};
import { turnWorker } from ${JSON.stringify(TURN_WORKER)};
export default turnWorker(() => runOnce());
`);
    await worker.catch(() => undefined);
  });
  afterAll(async () => {
    await (await worker.catch(() => undefined))?.dispose();
  });

  it("runs a whole tool turn: the tool ran, the plugin's section was in the prompt, the answer has the result", async () => {
    expectFullToolTurn(await (await worker).run("/"));
  });
});
