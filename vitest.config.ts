import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "examples/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 20_000,
  },
});
