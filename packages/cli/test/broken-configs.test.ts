/**
 * Every broken config in fixtures/broken, run through the real binary: a located message
 * (code, file, path, what was expected and found) and exit status 2. No agent starts.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { pool, runKeel } from "./support/run-keel.ts";
import type { KeelRun } from "./support/run-keel.ts";

const dir = join(import.meta.dirname, "fixtures", "broken");

/** Fixture folder → what its message must contain (besides the code's advice and the file). */
const EXPECTED: Record<string, { code: string; file: string; says: string[] }> = {
  "syntax-error": { code: "KEEL_CONFIG_LOAD_FAILED", file: "agent.config.ts", says: ["agent.config.ts:4:"] },
  "throws-on-load": { code: "KEEL_CONFIG_LOAD_FAILED", file: "agent.config.ts", says: ["the config needs DB_URL"] },
  "no-default-export": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["has no default export (it exports config)"],
  },
  "default-is-function": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["at default export", "the config file exports a function, not a config"],
  },
  "model-wrong-type": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["model: expected a model", "(found 42)"],
  },
  "model-bad-format": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["model: expected <provider>:<model>", '(found "gpt4")'],
  },
  "unknown-key": { code: "KEEL_CONFIG_INVALID", file: "agent.config.ts", says: ['Unrecognized key: "plugin"'] },
  "plugins-not-array": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["plugins: Invalid input: expected array, received object"],
  },
  "unknown-plugin-package": {
    code: "KEEL_PLUGIN_NOT_FOUND",
    file: "agent.config.ts",
    says: ["at plugins[1]", '"@keel/plugin-does-not-exist" could not be imported'],
  },
  "package-not-a-plugin": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["at plugins[0]", '"zod" does not export a plugin'],
  },
  "missing-dependency": {
    code: "KEEL_DEPENDENCY_MISSING",
    file: "agent.config.ts",
    says: ['plugin "audit"', "plugins[0].dependencies", 'depends on "memory"'],
  },
  "bad-plugin-option": {
    code: "KEEL_PLUGIN_OPTIONS_INVALID",
    file: "agent.config.ts",
    says: ['plugin "ranker"', "at plugins[2].options.topK", "expected number, received string", '(found "ten")'],
  },
  "duplicate-plugin": {
    code: "KEEL_PLUGIN_DUPLICATE",
    file: "agent.config.ts",
    says: ['"same" appears at plugins[0] and plugins[1]'],
  },
  "setup-throws": {
    code: "KEEL_PLUGIN_SETUP_FAILED",
    file: "agent.config.ts",
    says: ['plugin "fragile"', "no API token for fragile"],
  },
  "kernel-range": {
    code: "KEEL_KERNEL_RANGE_UNSUPPORTED",
    file: "agent.config.ts",
    says: ['plugin "future"', '"^2.0.0"', "this kernel is 1.0.0"],
  },
  "dependency-cycle": { code: "KEEL_DEPENDENCY_CYCLE", file: "agent.config.ts", says: ["a -> b -> a"] },
  "unknown-phase": {
    code: "KEEL_PHASE_UNKNOWN",
    file: "agent.config.ts",
    says: ['plugin "typo"', '"turn.pre_promt_context" is not a phase'],
  },
  "bad-limit": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["limits.maxRounds: Too small", "(found -1)"],
  },
  "bad-tool-name": { code: "KEEL_TOOL_INVALID", file: "agent.config.ts", says: ['tools[0] ("read file!")'] },
  "offline-script-missing": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ['offline.script "./no-such-script.json" could not be read', "ENOENT"],
  },
  "offline-script-invalid": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["steps.0.toolCalls", "expected array, received string"],
  },
  "json-syntax-error": { code: "KEEL_CONFIG_LOAD_FAILED", file: "agent.config.json", says: ["line 1 column 56"] },
  "package-json-field": {
    code: "KEEL_CONFIG_INVALID",
    file: "package.json",
    says: ["instructions: Invalid input: expected string, received number", "(found 5)"],
  },
  "import-missing-module": {
    code: "KEEL_CONFIG_LOAD_FAILED",
    file: "agent.config.ts",
    says: ["Cannot find module './helpers/missing.ts'"],
  },
  "bad-preflight": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.ts",
    says: ["preflight: expected true, false or", '(found "yes")'],
  },
  "bad-base-url": {
    code: "KEEL_CONFIG_INVALID",
    file: "agent.config.mjs",
    says: ["baseURL: expected an http(s) URL", '(found "localhost:11434")'],
  },
};

describe("broken configs never start an agent", () => {
  const names = readdirSync(dir).sort();
  let runs: Map<string, KeelRun> | undefined;
  const all = async () => {
    runs ??= new Map(
      await pool(names, 3, async (n) => [n, await runKeel(["run", "hello"], { cwd: join(dir, n) })] as const),
    );
    return runs;
  };

  it("every fixture has an expectation (and there are at least 20)", () => {
    expect(names.length).toBeGreaterThanOrEqual(20);
    expect(names).toEqual(Object.keys(EXPECTED).sort());
  });

  it.each(Object.entries(EXPECTED))("%s: located message and exit 2", { timeout: 120_000 }, async (name, want) => {
    const run = (await all()).get(name)!;
    expect(run.code, run.stderr).toBe(2);
    expect(run.stdout).toBe("");
    const msg = run.stderr;
    expect(msg).toContain(want.code);
    expect(msg).toContain(join(dir, name, want.file));
    for (const s of want.says) expect(msg).toContain(s);
    expect(msg).not.toMatch(/\n\s+at .*\(.*:\d+:\d+\)/); // no stack trace
    expect(msg).not.toContain("keel: completed");
  });

  it("a --config path that does not exist is a usage error naming it", async () => {
    const run = await runKeel(["run", "--config", "nope/agent.config.ts", "hi"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("KEEL_CONFIG_NOT_FOUND");
    expect(run.stderr).toContain("--config nope/agent.config.ts: no such file");
  });
});
