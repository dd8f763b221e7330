import type { Message, ToolResultMessage } from "@keel/kernel";
import { messageText } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { afterEach, describe, expect, it } from "vitest";
import type { CompactOptions } from "../src/index.ts";
import {
  compactHistory,
  heuristicExtraction,
  MASK_PREFIX,
  messageKeys,
  parseExtraction,
  scoreBlocks,
  SubgoalRegistry,
  TIER,
  weightedJaccard,
  terms,
} from "../src/index.ts";
import { bigOutput, cleanupDirs, diagnostics, expectPairs, scriptedTool, setup } from "./support.ts";

afterEach(cleanupDirs);

const tool = (id: string, text: string): ToolResultMessage => ({
  role: "tool",
  toolCallId: id,
  toolName: "bash",
  content: [{ type: "text", text }],
  isError: false,
});
const call = (id: string, text = `calling ${id}`): Message => ({
  role: "assistant",
  content: [
    { type: "text", text },
    { type: "tool_call", id, name: "bash", args: {} },
  ],
});
const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });

describe("subgoal scores", () => {
  const history: Message[] = [
    user("task"),
    call("a"),
    tool("a", "alpha output one"),
    call("b"),
    tool("b", "beta output two"),
    call("c"),
    tool("c", "gamma output three"),
  ];
  const keys = messageKeys(history);

  it("tiers: active 1.0, completed 0.3, outside 0.1, plus index/len × 0.05; lowest evicted first", () => {
    const reg = new SubgoalRegistry();
    reg.apply({ next: "first" }, keys.slice(3, 5)); // b
    reg.apply({ completed: "done", next: "second" }, keys.slice(5)); // c active, b completed
    expect([reg.tier(keys[2]!), reg.tier(keys[4]!), reg.tier(keys[6]!)]).toEqual([
      TIER.none,
      TIER.completed,
      TIER.active,
    ]);
    const scored = scoreBlocks(history, [2, 4, 6], (i) => reg.tier(keys[i]!), { mig: false });
    expect(scored.map((s) => s.index)).toEqual([2, 4, 6]);
    expect(scored[0]!.score).toBeCloseTo(0.1 + (2 / 7) * 0.05, 10);
    expect(scored[1]!.score).toBeCloseTo(0.3 + (4 / 7) * 0.05, 10);
    expect(scored[2]!.score).toBeCloseTo(1.0 + (6 / 7) * 0.05, 10);
  });

  it("MIG subtracts the largest TF-weighted Jaccard similarity to a higher-scored block", () => {
    const dup = "error in /srv/app/db.py line 42 connection refused retry 3";
    const h: Message[] = [
      user("task"),
      call("a"),
      tool("a", dup),
      call("b"),
      tool("b", "unique listing of modules parser lexer"),
      call("c"),
      tool("c", dup),
    ];
    const same = () => TIER.completed;
    const plain = scoreBlocks(h, [2, 4], same, { mig: false });
    expect(plain.map((s) => s.index)).toEqual([2, 4]);
    const mig = scoreBlocks(h, [2, 4], same, { mig: true, pool: [2, 4, 6] });
    // The older copy of a later output is the most redundant, so it goes first with a penalty of 1.
    expect(mig[0]!.index).toBe(2);
    expect(mig[0]!.redundancy).toBeCloseTo(1, 10);
    expect(mig[1]!.redundancy).toBeLessThan(0.2);
    // A unique block outranks a redundant one that is newer (plain order would evict the unique one first).
    const h2: Message[] = [
      user("task"),
      call("a"),
      tool("a", "unique listing of modules parser lexer"),
      call("b"),
      tool("b", dup),
      call("c"),
      tool("c", dup),
    ];
    expect(scoreBlocks(h2, [2, 4], same, { mig: false })[0]!.index).toBe(2);
    expect(scoreBlocks(h2, [2, 4], same, { mig: true, pool: [2, 4, 6] })[0]!.index).toBe(4);
    expect(weightedJaccard(terms(h[2]!), terms(h[6]!))).toBe(1);
  });

  it("parses model extractions and has a deterministic fallback", () => {
    expect(parseExtraction("COMPLETED: reproduced the bug\nNEXT: fix the parser", true)).toEqual({
      completed: "reproduced the bug",
      next: "fix the parser",
    });
    expect(parseExtraction("SAME", true)).toEqual({});
    expect(parseExtraction("find the failing test", false)).toEqual({ next: "find the failing test" });
    const reg = new SubgoalRegistry();
    const x1 = heuristicExtraction(
      [{ role: "assistant", content: [{ type: "text", text: "Let's reproduce the bug first." }] }],
      undefined,
    );
    expect(x1.next).toBe("Let's reproduce the bug first.");
    reg.apply(x1);
    const x2 = heuristicExtraction(
      [
        {
          role: "assistant",
          content: [{ type: "text", text: "The bug is fixed. Now let's run the full test suite." }],
        },
      ],
      reg.active,
    );
    expect(x2).toEqual({ completed: "The bug is fixed.", next: "Now let's run the full test suite." });
  });

  it("a long active subgoal is capped: its older part becomes a completed subgoal", () => {
    const reg = new SubgoalRegistry();
    reg.apply({ next: "one" });
    reg.observe(history);
    const split = reg.capActive(history, () => 100, 250);
    expect(split!.state).toBe("completed");
    expect(reg.active!.keys.size).toBe(2);
    expect(split!.keys.size).toBe(history.length - 2);
  });
});

describe("subgoal registry across compactions", () => {
  it("real turns: extraction by the side model; active-subgoal outputs are never masked, completed ones are", async () => {
    const outputs = Array.from({ length: 8 }, (_, i) => bigOutput(`o${i}`, 60));
    const steps = [
      ...Array.from({ length: 8 }, (_, i) => ({
        text: `Step ${i}.`,
        toolCalls: [{ id: `c${i}`, name: "bash", args: { i } }],
      })),
      { text: "done" },
    ];
    const side = [
      { text: "NEXT: collect the logs" },
      { text: "SAME" },
      { text: "COMPLETED: logs collected\nNEXT: analyse the shard errors" },
      ...Array(10).fill({ text: "SAME" }),
    ];
    const { session, provider } = await setup({
      steps,
      side,
      window: 11_000,
      tools: [scriptedTool("bash", outputs)],
      plugin: {
        taco: { enabled: false },
        hard: 0.99,
        subgoals: { every: 1, maxActiveShare: 1 },
        protectedTail: { tokens: 0, messages: 2 },
      },
    });
    await session.run("find the failing shard");
    const masked = new Set<string>();
    for (const req of provider.requests) {
      expectPairs(req.messages);
      for (const m of req.messages)
        if (m.role === "tool" && messageText(m).startsWith(MASK_PREFIX)) masked.add(m.toolCallId);
    }
    expect(masked.size).toBeGreaterThan(0);
    // c0, c1 belong to the completed subgoal; c2 onward to the active one.
    expect([...masked].every((id) => id === "c0" || id === "c1")).toBe(true);
    const applied = diagnostics(await session.events(), "compaction.applied");
    const spans = (
      applied.at(-1)!.data as { subgoals: Array<{ description: string; state: string; span: [number, number] | null }> }
    ).subgoals;
    expect(spans.map((s) => [s.description, s.state])).toEqual([
      ["collect the logs", "completed"],
      ["analyse the shard errors", "active"],
    ]);
    expect(spans[1]!.span![0]).toBeGreaterThan(spans[0]!.span![1]);
  });

  it("a hard summary keeps the active subgoal's blocks (lifted out and put back) and the registry still resolves them", async () => {
    const counter = defaultTokenCounter();
    const filler = (i: number) => `${i} ${"log line with numbers 1234 and words ".repeat(40)}`;
    const history: Message[] = [user("the task")];
    for (let i = 0; i < 8; i++) history.push(call(`k${i}`, `Working on ${i}.`), tool(`k${i}`, filler(i)));
    history.push(user("continue"));
    const keys = messageKeys(history);
    const reg = new SubgoalRegistry();
    reg.apply({ next: "old work" }, keys.slice(1, 9));
    reg.apply({ completed: "ok", next: "current work" }, keys.slice(9, 13)); // k4, k5 active
    const activeBefore = history.filter((_, i) => reg.ownerOf(keys[i]!)?.state === "active");
    const o: CompactOptions = {
      strategy: "subgoal",
      soft: 0.6,
      hard: 0.9,
      target: 0.45,
      protectedTail: { tokens: 0, messages: 2, share: 0.25 },
      cooldownRounds: 2,
      minMaskTokens: 120,
      summaryTokens: 300,
      summaryTimeoutMs: 1_000,
      retrieveTool: "context_retrieve",
      stubIdentifiers: 150,
      maskArguments: true,
    };
    const res = await compactHistory({
      messages: history,
      overhead: 0,
      window: 1_000,
      calibration: 1,
      pinned: new Set([0, history.length - 1]),
      force: true,
      state: { round: 1, lastHard: undefined, exhausted: false },
      registry: reg,
      options: o,
      countText: (t) => counter.countText(t),
      countMessage: (m) => counter.countMessage(m),
      stash: (m) => m.toolCallId,
      model: undefined,
      goal: "the task",
    });
    expect(res!.report.summary!.lifted).toBe(4);
    for (const m of activeBefore) expect(res!.messages.includes(m)).toBe(true);
    expectPairs(res!.messages);
    const spans = reg.spans(res!.messages);
    expect(spans.find((s) => s.state === "active")!.span).not.toBeNull();
    expect(spans.find((s) => s.description === "old work")!.span).toBeNull(); // summarised away
  });
});
