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
export default turnWorker(runOnce);
`;
    script = await bundle(glue, import.meta.dirname, "worker.ts");
    // The module is declared, not scanned: Miniflare's scanner refuses any import(name) it cannot
    // follow, and the host keeps one (its Node entry, loaded by name only where Node is).
    mf = new Miniflare({
      modules: [{ type: "ESModule", path: "worker.mjs", contents: script }],
      compatibilityDate: "2026-07-01",
    });
    // A Worker that throws while its modules load (workerd refuses timers, random values and I/O
    // outside a handler) fails here: say which module of the bundle did it.
    await mf.ready.catch((err: Error) => {
      throw new Error(`workerd did not start the Worker: ${err.message}${placesInBundle(script, err.message)}`);
    });
  });
  afterAll(async () => {
    await mf?.dispose();
  });

  it("runs a whole tool turn: the tool ran, the plugin's section was in the prompt, the answer has the result", async () => {
    const res = await mf!.dispatchFetch("http://localhost/");
    const body = (await res.json()) as Record<string, unknown>;
    if ("error" in body)
      throw new Error(`The Worker answered ${res.status}: ${body.stack}${placesInBundle(script, String(body.stack))}`);
    expect(res.status).toBe(200);
    expectFullToolTurn(body);
  });
});
