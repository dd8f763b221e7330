import { globSync, readFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

const ALL = ["packages/*/test/**/*.test.ts", "examples/**/*.test.ts", "test/**/*.test.ts"];

/**
 * Files that change what the process shares (its environment, working folder, handlers, globals,
 * module mocks, timers) or that start processes run each in a fresh worker; every other package
 * test shares its worker's loaded modules with the files before it (about half the import time
 * and CPU of the suite's many small files). Decided by reading each file, so a new file that
 * starts touching the process is isolated without anyone listing it.
 */
const TOUCHES_PROCESS =
  /process\.env(\.\w+|\[[^\]]+\])\s*=[^=]|delete process\.env|process\.chdir|process\.umask|process\.on\(|process\.once\(|process\.exitCode|vi\.(mock|doMock|stubEnv|stubGlobal|useFakeTimers|spyOn)|globalThis\.\w+\s*=[^=]|defineProperty\(globalThis|child_process|runKeel|startKeel|KEEL_BIN/;
const isolated = globSync("packages/*/test/**/*.test.ts").filter((f) => TOUCHES_PROCESS.test(readFileSync(f, "utf8")));

/**
 * Most scenarios wait on child processes, sockets and databases, so on an idle machine two workers
 * per core keep the cores busy (2 cores: 442 s with 2 workers, 330 s with 4, measured). On a
 * machine already busy (its load average at or above its cores) they would only contend, and
 * scenarios that promise a bound (an exit within a grace) get less of the CPU they need: one
 * worker per core then. KEEL_TEST_WORKERS overrides.
 */
// Every process the tests start (vitest's workers, keel, the example servers, fixtures, MCP servers)
// keeps its compiled code in one cache for the checkout: a file is compiled once per run, not once
// per process. keel's own cache (KEEL_CACHE_DIR) then stands aside; its tests unset this.
process.env.NODE_COMPILE_CACHE ??= join(import.meta.dirname, "node_modules", ".cache", "node-compile-cache");

const cores = availableParallelism();
const WORKERS = Number(process.env.KEEL_TEST_WORKERS) || (loadavg()[0]! < cores ? 2 * cores : cores);

export default defineConfig({
  test: {
    pool: "forks",
    maxWorkers: WORKERS,
    // A test's timeout is a hang detector, not a speed check (speed is `pnpm bench`): scenarios
    // that spawn CLIs, MCP servers and databases take 5-20 s on a busy 2-core machine, so the
    // bound is a minute. Bounds a scenario promises (an exit "at once") are asserted inside it.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: { name: "shared", include: ["packages/*/test/**/*.test.ts"], exclude: isolated, isolate: false },
      },
      { extends: true, test: { name: "isolated", include: [...isolated, ...ALL.slice(1)] } },
    ],
  },
});
