import { mkdtempSync, readdirSync, rmSync, statSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { REPO, offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-compile-cache-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
/** A user's environment: the test run's own NODE_COMPILE_CACHE (vitest.config.ts) would stand in for keel's. */
const ownCache = (extra: Record<string, string>) => {
  const { NODE_COMPILE_CACHE: _, ...env } = offlineEnv(extra);
  return env;
};
const minimal = ["run", "--config", join(REPO, "examples", "minimal", "agent.config.ts"), "hello"];

describe("Node's compile cache", () => {
  it.runIf(process.platform !== "win32")(
    "lives in the user's private cache folder (KEEL_CACHE_DIR here), made 0700, and fills on a run: it holds the config's compiled code, so never the shared tmp folder",
    async () => {
      const cache = join(root, "cache");
      const run = await runKeel(minimal, {
        env: ownCache({ KEEL_HOME: join(root, "home-a"), KEEL_CACHE_DIR: cache }),
      });
      expect(run.code, run.stderr).toBe(0);
      const dir = join(cache, "node-compile-cache");
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(statSync(cache).mode & 0o077).toBe(0);
      expect(readdirSync(dir, { recursive: true }).length).toBeGreaterThan(0);
    },
  );

  it("KEEL_NO_COMPILE_CACHE=1 turns it off: no compile cache folder is made", async () => {
    const cache = join(root, "cache-off");
    const run = await runKeel(minimal, {
      env: ownCache({ KEEL_HOME: join(root, "home-b"), KEEL_CACHE_DIR: cache, KEEL_NO_COMPILE_CACHE: "1" }),
    });
    expect(run.code, run.stderr).toBe(0);
    expect(existsSync(join(cache, "node-compile-cache"))).toBe(false);
  });
});
