import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createAgent, messageText } from "@keel/agent";
import { defaultSessionDbPath, SqliteSessionStore } from "@keel/store-sqlite";
import { scriptedProvider } from "@keel/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { compaction, MASK_PREFIX } from "../src/index.ts";
import { bigOutput, cleanupDirs, scriptedTool, tempDir } from "./support.ts";

afterEach(cleanupDirs);

const SECRET = `sk-ant-api03-${"Qw3rTy7u".repeat(12)}AA`;
const steps = (n: number) => [
  ...Array.from({ length: n }, (_, i) => ({
    text: `Step ${i}.`,
    toolCalls: [{ id: `c${i}`, name: "bash", args: { i } }],
  })),
  { text: "done" },
];

describe("the raw-output store: redacted and bound to its session", () => {
  it("stores masked outputs redacted, serves them to their own session, and answers 'not found' to another session holding the id", async () => {
    const home = tempDir();
    const outputs = Array.from({ length: 8 }, (_, i) => `ANTHROPIC_API_KEY=${SECRET}\n${bigOutput(`o${i}`, 60)}`);
    const plugin = () =>
      compaction({
        path: join(home, "compaction.sqlite"),
        model: false,
        taco: { enabled: false },
        subgoals: { extractor: "heuristic" },
      });
    const store = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
    const agent = await createAgent({
      provider: scriptedProvider(steps(8), { contextWindow: 9_000 }),
      store,
      tools: [scriptedTool("bash", outputs)],
      plugins: [plugin()],
    });
    const owner = await agent.session();
    await owner.run("check everything");
    const masked = owner.messages.find((m) => m.role === "tool" && messageText(m).startsWith(MASK_PREFIX))!;
    const id = /id="([^"]+)"/.exec(messageText(masked))![1]!;
    await agent.close();
    store.close();
    expect(readFileSync(join(home, "compaction.sqlite")).includes(SECRET)).toBe(false);
    for (const f of readdirSync(home).filter((f) => f.startsWith("compaction")))
      expect(readFileSync(join(home, f)).includes(SECRET.slice(13, 40)), f).toBe(false);

    const store2 = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
    const provider = scriptedProvider(
      [
        { toolCalls: [{ id: "r1", name: "context_retrieve", args: { id, startLine: 1, endLine: 3 } }] },
        { text: "ok" },
        { toolCalls: [{ id: "r2", name: "context_retrieve", args: { id, startLine: 1, endLine: 3 } }] },
        { text: "ok" },
      ],
      { contextWindow: 9_000 },
    );
    const agent2 = await createAgent({
      provider,
      store: store2,
      tools: [scriptedTool("bash", [])],
      plugins: [plugin()],
    });
    const intruder = await agent2.session();
    await intruder.run("read that id back");
    const denied = messageText(intruder.messages.at(-2)!);
    expect(denied).toMatch(/KEEL_COMPACTION_NOT_FOUND/);
    expect(denied).not.toContain("row 1");
    const resumed = await agent2.session(owner.id);
    await resumed.run("read it back");
    const back = messageText(resumed.messages.at(-2)!);
    expect(back).toContain("ANTHROPIC_API_KEY=[REDACTED:");
    expect(back).toContain("o");
    expect(back).not.toContain(SECRET);
    await agent2.close();
    store2.close();
  });
});
