import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createAgent, messageText } from "@keel/agent";
import { defaultSessionDbPath, SqliteSessionStore } from "@keel/store-sqlite";
import { scriptedProvider } from "@keel/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { compaction, MASK_PREFIX } from "../src/index.ts";
import { bigOutput, cleanupDirs, diagnostics, expectPairs, scriptedTool, tempDir } from "./support.ts";

afterEach(cleanupDirs);

const steps = (n: number) => [
  ...Array.from({ length: n }, (_, i) => ({
    text: `Step ${i}.`,
    toolCalls: [{ id: `c${i}`, name: "bash", args: { i } }],
  })),
  { text: "done" },
];

describe("durability", () => {
  it("a resumed session has the compacted history (context.edited replays), and masked outputs stay retrievable", async () => {
    const home = tempDir();
    const outputs = Array.from({ length: 8 }, (_, i) => bigOutput(`o${i}`, 60));
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
    const session = await agent.session();
    await session.run("check everything");
    const live = session.messages.map((m) => JSON.stringify(m));
    expect(live.some((m) => m.includes(MASK_PREFIX))).toBe(true);
    const masked = session.messages.find((m) => m.role === "tool" && messageText(m).startsWith(MASK_PREFIX))!;
    const id = /id="([^"]+)"/.exec(messageText(masked))![1]!;
    const original = outputs[Number((masked.role === "tool" ? masked.toolCallId : "").slice(1))]!;
    await agent.close();
    store.close();

    const store2 = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
    const provider = scriptedProvider(
      [{ toolCalls: [{ id: "r1", name: "context_retrieve", args: { id, startLine: 1, endLine: 2 } }] }, { text: "ok" }],
      { contextWindow: 9_000 },
    );
    const agent2 = await createAgent({
      provider,
      store: store2,
      tools: [scriptedTool("bash", [])],
      plugins: [plugin()],
    });
    const resumed = await agent2.session(session.id);
    expect(resumed.messages.map((m) => JSON.stringify(m))).toEqual(live);
    await resumed.run("read the first masked output back");
    expectPairs(provider.requests[1]!.messages);
    const back = messageText(resumed.messages.at(-2)!);
    expect(back.split("\n").slice(1)).toEqual(original.split("\n").slice(0, 2));
    await agent2.close();
    store2.close();
  });

  it("an unwritable store path is reported once and outputs stay retrievable from memory", async () => {
    const home = tempDir();
    writeFileSync(join(home, "file"), "x");
    const outputs = Array.from({ length: 8 }, (_, i) => bigOutput(`o${i}`, 60));
    const store = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
    const agent = await createAgent({
      provider: scriptedProvider(steps(8), { contextWindow: 9_000 }),
      store,
      tools: [scriptedTool("bash", outputs)],
      plugins: [
        compaction({
          path: join(home, "file", "c.sqlite"),
          model: false,
          taco: { enabled: false },
          subgoals: { extractor: "heuristic" },
        }),
      ],
    });
    const session = await agent.session();
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    const warn = diagnostics(await session.events(), "KEEL_COMPACTION_STORE_FAILED");
    expect(warn).toHaveLength(1);
    expect(warn[0]!.message).toContain("@keel/plugin-compaction");
    expect(session.messages.some((m) => messageText(m).startsWith(MASK_PREFIX))).toBe(true);
    await agent.close();
    store.close();
  });
});
