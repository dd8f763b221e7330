/**
 * A Worker module in workerd (Miniflare, no `nodejs_compat` unless asked): `glue` (bundled by bundle.ts)
 * default-exports turnWorker(...) from ./worker.ts; each run() is one request to it.
 */
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { bundle, placesInBundle } from "./bundle.ts";

/** The handler module the glue imports (`import { turnWorker } from ${JSON.stringify(TURN_WORKER)}`). */
export const TURN_WORKER = fileURLToPath(new URL("./worker.ts", import.meta.url));

export interface TurnWorker {
  /** GET `path` of the Worker: what its run returned, or the Worker's error, located in the bundle. */
  run(path: string): Promise<Record<string, unknown>>;
  dispose(): Promise<void>;
}

export async function startTurnWorker(
  glue: string,
  bindings: Record<string, string> = {},
  /** workerd's compatibility flags (`["nodejs_compat"]`: a `process` with `versions.node`, as many Workers have). */
  compatibilityFlags: string[] = [],
): Promise<TurnWorker> {
  const script = await bundle(glue, import.meta.dirname, "worker-glue.ts");
  const located = (text: string) => `${text}${placesInBundle(script, text, "worker.js")}`;
  // The module is listed, not given as `script` with `modules: true`: that form scans the code and
  // refuses any computed import(x) even if it never runs, which workerd itself only fails when it runs.
  const mf = new Miniflare({
    modules: [{ type: "ESModule", path: "worker.js", contents: script }],
    compatibilityDate: "2026-07-01",
    compatibilityFlags,
    bindings,
  });
  try {
    await mf.ready;
  } catch (err) {
    // A Worker that throws while its modules load fails here (outside a handler workerd refuses
    // timers, random values, I/O, even new AbortController()). dispose() would throw it again.
    await mf.dispose().catch(() => undefined);
    throw new Error(located(`workerd did not start the Worker: ${err instanceof Error ? err.message : String(err)}`));
  }
  return {
    async run(path) {
      const res = await mf.dispatchFetch(new URL(path, "http://localhost/"));
      const body = (await res.json()) as Record<string, unknown>;
      if ("error" in body || res.status !== 200)
        throw new Error(located(`The Worker answered ${res.status}: ${String(body.stack ?? JSON.stringify(body))}`));
      return body;
    },
    dispose: () => mf.dispose(),
  };
}
