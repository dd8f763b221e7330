import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { extractIdentifiers, reduceText, RawStore, sliceRaw } from "../src/index.ts";
import { bigOutput, cleanupDirs, diagnostics, scriptedTool, setup, tempDir } from "./support.ts";

afterEach(cleanupDirs);

const steps = (n: number, usage?: { inputTokens: number }) => [
  ...Array.from({ length: n }, (_, i) => ({
    text: `Step ${i}.`,
    toolCalls: [{ id: `c${i}`, name: "bash", args: { i } }],
    ...(usage ? { usage } : {}),
  })),
  { text: "done" },
];

describe("token accounting", () => {
  it("counts the system prompt and tool definitions, and calibrates by the provider's reported input tokens", async () => {
    const outputs = Array.from({ length: 6 }, (_, i) => bigOutput(`o${i}`, 60));
    const plugin = { taco: { enabled: false }, model: false as const, subgoals: { extractor: "heuristic" as const } };
    const plain = await setup({ steps: steps(6), window: 20_000, tools: [scriptedTool("bash", outputs)], plugin });
    await plain.session.run("go");
    expect(diagnostics(await plain.session.events(), "compaction.applied")).toHaveLength(0);
    // The same run, but the provider reports twice the tokens we estimate: compaction starts earlier.
    const calibrated = await setup({
      steps: steps(6, { inputTokens: 100_000 }),
      window: 20_000,
      tools: [
        scriptedTool(
          "bash",
          Array.from({ length: 6 }, (_, i) => bigOutput(`o${i}`, 60)),
        ),
      ],
      plugin,
    });
    await calibrated.session.run("go");
    const applied = diagnostics(await calibrated.session.events(), "compaction.applied").map(
      (d) => d.data as { calibration: number; tokensBefore: number },
    );
    expect(applied.length).toBeGreaterThan(0);
    expect(applied[0]!.calibration).toBeGreaterThan(1.4);
    expect(applied[0]!.tokensBefore).toBeGreaterThanOrEqual(0.6 * 20_000);
  });

  it("the system prompt counts toward the threshold", async () => {
    const run = async (instructions: string) => {
      const home = tempDir();
      const { createAgent } = await import("@keel/agent");
      const { MemorySessionStore, scriptedProvider } = await import("@keel/testkit");
      const { compaction } = await import("../src/index.ts");
      const outputs = Array.from({ length: 5 }, (_, i) => bigOutput(`o${i}`, 40));
      const agent = await createAgent({
        provider: scriptedProvider(steps(5), { contextWindow: 10_000 }),
        instructions,
        store: new MemorySessionStore(),
        tools: [scriptedTool("bash", outputs)],
        plugins: [
          compaction({
            path: join(home, "c.sqlite"),
            model: false,
            taco: { enabled: false },
            subgoals: { extractor: "heuristic" },
            protectedTail: { messages: 2 },
          }),
        ],
      });
      const session = await agent.session();
      await session.run("go");
      return diagnostics(await session.events(), "compaction.applied").length;
    };
    expect(await run("Be brief.")).toBe(0);
    expect(await run("Follow the house rules carefully. ".repeat(600))).toBeGreaterThan(0);
  });
});

describe("reduction, identifiers and the store", () => {
  it("extracts paths, symbols, numbers, ids and error names", () => {
    const ids = extractIdentifiers(
      "Traceback in /srv/app/db.py: KeyError on user_id 48213 (reservation 8JX2WO, v1.2.3, obj.method, fooBar, 0x1f)",
    );
    for (const x of [
      "/srv/app/db.py",
      "KeyError",
      "user_id",
      "48213",
      "8JX2WO",
      "v1.2.3",
      "obj.method",
      "fooBar",
      "0x1f",
    ])
      expect(ids).toContain(x);
    expect(ids).not.toContain("in");
  });

  it("reduces to about the target, keeping head, tail and the error line", () => {
    const text = bigOutput("r", 500);
    const count = (t: string) => Math.ceil(t.length / 4);
    const out = reduceText(text, 500, count);
    expect(count(out)).toBeLessThanOrEqual(560);
    expect(out.startsWith(text.split("\n")[0]!)).toBe(true);
    expect(out.endsWith(text.split("\n").at(-1)!)).toBe(true);
    expect(out).toContain("L250: Traceback: ValueError");
    expect(reduceText("short", 500, count)).toBe("short");
  });

  it("slices by lines and characters; an unwritable store falls back to memory and says so", () => {
    expect(sliceRaw("a\nb\nc\nd", { startLine: 2, endLine: 3 }, 100)).toMatchObject({
      text: "b\nc",
      from: "lines 2–3 of 4",
    });
    expect(sliceRaw("abcdef", { startChar: 2, endChar: 4 }, 100).text).toBe("cd");
    const dir = tempDir();
    writeFileSync(join(dir, "file"), "not a directory");
    const store = new RawStore(join(dir, "file", "sub", "c.sqlite"));
    store.put({
      id: "x1",
      sessionId: "s",
      toolCallId: "c",
      toolName: "bash",
      kind: "mask",
      text: "raw text",
      tokens: 2,
      createdAt: 0,
    });
    expect(store.get("x1", "s")!.text).toBe("raw text");
    expect(store.get("x1", "another session")).toBeUndefined();
    expect(store.degraded).toBe(true);
    expect(store.lastError).toMatch(/ENOTDIR|not a directory/i);
    store.close();
  });
});

describe("options", () => {
  it("bad options are a located registration error naming the plugin", async () => {
    const { createAgent } = await import("@keel/agent");
    const { MemorySessionStore, scriptedProvider } = await import("@keel/testkit");
    const { compaction } = await import("../src/index.ts");
    const make = (o: object) =>
      createAgent({
        provider: scriptedProvider([]),
        store: new MemorySessionStore(),
        plugins: [compaction(o as never)],
      });
    await expect(make({ soft: 0.95, hard: 0.9 })).rejects.toThrow(
      /KEEL_PLUGIN_OPTIONS_INVALID \(plugin "@keel\/plugin-compaction", at plugins\[0\]\.options\.soft\): expected target ≤ soft ≤ hard/,
    );
    await expect(make({ taco: { threshold: -1 } })).rejects.toThrow(/options\.taco\.threshold/);
    await expect(make({ strategy: "lru" })).rejects.toThrow(/options\.strategy/);
  });
});
