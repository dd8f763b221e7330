import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DatabaseSync } from "node:sqlite";
import { offlineEnv, runKeel } from "../../packages/cli/test/support/run-keel.ts";

const here = dirname(fileURLToPath(import.meta.url));
const home = mkdtempSync(join(tmpdir(), "keel-full-stack-"));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const env = offlineEnv({ KEEL_HOME: home });
type Ev = { type: string; [k: string]: any };
const parse = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Ev);

describe("examples/full-stack", () => {
  it("one process stores a fact and reads the project through MCP; a second process recalls the fact", async () => {
    const first = await runKeel(
      ["run", "--json", "Remember that release day is Thursday, then tell me what is left in TODO.md"],
      { cwd: here, env },
    );
    expect(first.code, first.stderr).toBe(0);
    const a = parse(first.stdout);
    expect(a.filter((e) => e.type === "tool.completed").map((e) => `${e.name}:${e.status}`)).toEqual([
      "tool_search:ok",
      "mcp__fs__read_text_file:ok",
      "memory_remember:ok",
    ]);
    const fileResult = a.find(
      (e) =>
        e.type === "message.appended" && e.message.role === "tool" && e.message.toolName === "mcp__fs__read_text_file",
    );
    expect(JSON.stringify(fileResult?.message.content)).toContain("Fix the flaky login test");
    const compiled = a.find((e) => e.type === "prompt.compiled")!;
    expect(compiled.manifest.sections.map((s: { sectionId: string }) => s.sectionId)).toEqual(
      expect.arrayContaining(["skills", "memory_recall"]),
    );
    expect(compiled.manifest.tools.map((t: { name: string }) => t.name)).toContain("tool_search");

    const db = new DatabaseSync(join(home, "memory.sqlite"), { readOnly: true });
    try {
      const row = db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number };
      expect(row.n).toBeGreaterThan(0);
    } finally {
      db.close();
    }

    const second = await runKeel(["run", "--json", "When do we release?"], { cwd: here, env });
    expect(second.code, second.stderr).toBe(0);
    const b = parse(second.stdout);
    const recalled = b.find((e) => e.type === "prompt.compiled")!.manifest.context;
    expect(recalled).toEqual([expect.objectContaining({ id: "memory.recall", plugin: "@keel/plugin-memory" })]);
    expect(
      b.find((e) => e.type === "message.appended" && e.message.role === "assistant")?.message.content[0].text,
    ).toContain("Thursday");
  }, 90_000);

  it("keel inspect shows all four plugins and where they subscribe", async () => {
    const run = await runKeel(["inspect", "--json"], { cwd: here, env });
    expect(run.code, run.stderr).toBe(0);
    const map = JSON.parse(run.stdout) as {
      plugins: Array<{ name: string }>;
      phases: Array<{ phase: string; subscriptions: Array<{ plugin: string }> }>;
    };
    expect(map.plugins.map((p) => p.name).sort()).toEqual([
      "@keel/plugin-compaction",
      "@keel/plugin-mcp",
      "@keel/plugin-memory",
      "@keel/plugin-skills",
    ]);
    const by = (phase: string) => map.phases.find((p) => p.phase === phase)!.subscriptions.map((s) => s.plugin);
    expect(by("turn.pre_tool_materialization")).toEqual(
      expect.arrayContaining(["@keel/plugin-memory", "@keel/plugin-skills", "@keel/plugin-mcp"]),
    );
    expect(by("round.pre_request")).toContain("@keel/plugin-compaction");
  }, 60_000);
});
