/**
 * The smallest whole agent (agent-entry.ts) runs a full tool turn in workerd, Cloudflare's
 * Workers runtime: bundled by esbuild for the browser platform (no Node module, no polyfill),
 * served by a Worker module under Miniflare without the `nodejs_compat` flag.
 */
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundle, placesInBundle } from "./support/bundle.ts";
import { AGENT_ENTRY, expectFullToolTurn } from "./support/outcome.ts";

const WORKER = fileURLToPath(new URL("./support/worker.ts", import.meta.url));

describe("the smallest agent in workerd (Miniflare, no nodejs_compat)", () => {
  let mf: Miniflare | undefined;
  let script = "";

  beforeAll(async () => {
    // One Worker module: its fetch runs one turn of the agent and answers the outcome as JSON.
    const glue = `import { runOnce } from ${JSON.stringify(AGENT_ENTRY)};
import { turnWorker } from ${JSON.stringify(WORKER)};
export default turnWorker(() => runOnce());
`;
    script = await bundle(glue, import.meta.dirname, "worker.ts");
    // The module is listed, not given as `script` with `modules: true`: that form scans the code and
    // refuses any computed import(x) even if it never runs, which workerd itself only fails when it runs.
    mf = new Miniflare({
      modules: [{ type: "ESModule", path: "worker.js", contents: script }],
      compatibilityDate: "2026-07-01",
    });
    // A Worker that throws while its modules load (outside a handler workerd refuses timers, random
    // values, I/O, even new AbortController()) fails here: say which module of the bundle did it.
    await mf.ready.catch((err: Error) => {
      throw new Error(
        `workerd did not start the Worker: ${err.message}${placesInBundle(script, err.message, "worker.js")}`,
      );
    });
  });
  afterAll(async () => {
    // After a failed start dispose() throws that failure again; the test has reported it.
    await mf?.dispose().catch(() => undefined);
  });

  it("runs a whole tool turn: the tool ran, the plugin's section was in the prompt, the answer has the result", async () => {
    const res = await mf!.dispatchFetch("http://localhost/");
    const body = (await res.json()) as Record<string, unknown>;
    if ("error" in body)
      throw new Error(
        `The Worker answered ${res.status}: ${body.stack}${placesInBundle(script, String(body.stack), "worker.js")}`,
      );
    expect(res.status).toBe(200);
    expectFullToolTurn(body);
  });
});
