import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "examples/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Vitest's default on a 2-core machine is one worker; most files wait on child
    // processes and sockets, so two workers halve the wall time (458 s → 285 s measured).
    maxWorkers: 2,
    // A test's timeout is a hang detector, not a speed check (speed is `pnpm bench`): scenarios
    // that spawn CLIs, MCP servers and databases take 5-20 s on a busy 2-core machine, so the
    // bound is a minute. Bounds a scenario promises (an exit "at once") are asserted inside it.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
