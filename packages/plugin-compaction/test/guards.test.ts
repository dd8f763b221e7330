import type { Message } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { afterEach, describe, expect, it } from "vitest";
import type { CompactOptions, CompactState } from "../src/index.ts";
import { compactHistory, SUMMARY_PREFIX } from "../src/index.ts";
import { bigOutput, cleanupDirs, diagnostics, expectPairs, ofType, scriptedTool, setup, textOf } from "./support.ts";

afterEach(cleanupDirs);

const bashCalls = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    text: `Check ${i}.`,
    toolCalls: [{ id: `c${i}`, name: "bash", args: { command: `check ${i}` } }],
  }));

describe("context_too_long", () => {
  it("is answered once with a forced compaction, and the retried request fits", async () => {
    const outputs = Array.from({ length: 3 }, (_, i) => bigOutput(`o${i}`, 60));
    const { session, provider } = await setup({
      steps: [...bashCalls(3), { error: { class: "context_too_long", status: 400 } }, { text: "fits now" }],
      tools: [scriptedTool("bash", outputs)],
      plugin: { model: false, subgoals: { extractor: "heuristic" } },
    });
    const r = await session.run("inspect the cluster");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("fits now");
    expect(provider.requests).toHaveLength(5);
    const before = defaultTokenCounter().countMessages(provider.requests[3]!.messages);
    const after = defaultTokenCounter().countMessages(provider.requests[4]!.messages);
    expect(after).toBeLessThan(before / 2);
    expectPairs(provider.requests[4]!.messages);
    const events = await session.events();
    const applied = diagnostics(events, "compaction.applied").map((d) => d.data as { forced: boolean });
    expect(applied.filter((d) => d.forced)).toHaveLength(1);
    expect(ofType(events, "context.edited").filter((e) => e.reason.includes("(context_too_long)"))).toHaveLength(1);
  });

  it("a second rejection in the same round fails the turn; the plugin does not compact twice", async () => {
    const outputs = Array.from({ length: 3 }, (_, i) => bigOutput(`o${i}`, 60));
    const { session, provider } = await setup({
      steps: [
        ...bashCalls(3),
        { error: { class: "context_too_long" } },
        { error: { class: "context_too_long" } },
        { text: "never" },
      ],
      tools: [scriptedTool("bash", outputs)],
      plugin: { model: false, subgoals: { extractor: "heuristic" } },
    });
    const r = await session.run("inspect the cluster");
    expect(r.verdict).toMatchObject({ status: "failed", errorClass: "context_too_long" });
    expect(provider.requests).toHaveLength(5);
    const applied = diagnostics(await session.events(), "compaction.applied").map((d) => d.data as { forced: boolean });
    expect(applied.filter((d) => d.forced)).toHaveLength(1);
    // Nothing the user said was lost.
    expect(textOf(session.messages[0]!)).toBe("inspect the cluster");
  });
});

describe("exhausted guard and cooldown", () => {
  it("a summary that is not smaller marks compaction exhausted: no compact → overflow → compact loop", async () => {
    const long = (i: number) => `Step ${i}. ${"Long deliberation about the plan and its many trade-offs. ".repeat(90)}`;
    const steps = [
      ...Array.from({ length: 4 }, (_, i) => ({
        text: long(i),
        toolCalls: [{ id: `c${i}`, name: "bash", args: { i } }],
      })),
      ...Array.from({ length: 6 }, (_, i) => ({
        text: `Short step ${i}.`,
        toolCalls: [{ id: `s${i}`, name: "bash", args: { i } }],
      })),
      { text: "final" },
    ];
    // The answer is cut to the budget, which is the whole of what it replaces (summaryShare 1): with its header it is not smaller.
    const huge = "Goal: ".concat("everything ".repeat(4_000));
    const { session, side } = await setup({
      steps,
      side: [{ text: huge }, { text: huge }, { text: huge }],
      window: 6_000,
      tools: [scriptedTool("bash", Array(10).fill("ok"))],
      plugin: {
        subgoals: { extractor: "heuristic" },
        hard: 0.7,
        cooldownRounds: 0,
        summaryTokens: 20_000,
        summaryShare: 1,
        maskText: false,
      },
    });
    const r = await session.run("plan it");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    // One summariser call; after it came back too big, the rounds still over the hard threshold
    // (the context grew by less than a tenth of the window) did not call it again.
    expect(side.requests).toHaveLength(1);
    const events = await session.events();
    expect(diagnostics(events, "KEEL_COMPACTION_EXHAUSTED").length).toBeGreaterThanOrEqual(1);
    const skipped = diagnostics(events, "compaction.applied").map(
      (d) => (d.data as { hardSkipped?: string }).hardSkipped,
    );
    expect(skipped[0]).toBe("not_smaller");
    expect(skipped.slice(1).length).toBeGreaterThanOrEqual(5);
    expect(skipped.slice(1).every((s) => s === "exhausted")).toBe(true);
  });

  it("cooldown: no second hard compaction within cooldownRounds; exhausted clears once below the soft threshold", async () => {
    const counter = defaultTokenCounter();
    const msg = (role: "user" | "assistant", text: string): Message =>
      ({ role, content: [{ type: "text", text }] }) as Message;
    const history: Message[] = [
      msg("user", "the task"),
      ...Array.from({ length: 10 }, (_, i) =>
        msg(i % 2 ? "user" : "assistant", `turn ${i} ${"words and more words ".repeat(60)}`),
      ),
      msg("user", "go on"),
    ];
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
    const total = counter.countMessages(history);
    const run = (state: CompactState, window = Math.floor(total / 0.95)) =>
      compactHistory({
        messages: history,
        overhead: 0,
        window,
        calibration: 1,
        pinned: new Set([0, history.length - 1]),
        state,
        options: o,
        countText: (t) => counter.countText(t),
        countMessage: (m) => counter.countMessage(m),
        stash: () => "x",
        model: undefined,
        goal: "the task",
      });
    const cooling = await run({ round: 5, lastHard: 4, exhausted: false });
    expect(cooling!.report.hardSkipped).toBe("cooldown");
    expect(cooling!.messages).toBe(cooling!.messages); // unchanged history, report only
    const ready = await run({ round: 7, lastHard: 4, exhausted: false });
    expect(ready!.report.stages).toContain("summary");
    expect(textOf(ready!.messages[1]!).startsWith(SUMMARY_PREFIX)).toBe(true);
    expectPairs(ready!.messages);
    const exhausted = { round: 9, lastHard: undefined, exhausted: true };
    expect((await run(exhausted))!.report.hardSkipped).toBe("exhausted");
    await run(exhausted, total * 10); // far below the soft threshold
    expect(exhausted.exhausted).toBe(false);
    // Grown by more than a tenth of the window since it was exhausted: it tries again.
    const grown = await run({ round: 9, lastHard: undefined, exhausted: true, exhaustedAt: Math.floor(total * 0.5) });
    expect(grown!.report.stages).toContain("summary");
  });
});
