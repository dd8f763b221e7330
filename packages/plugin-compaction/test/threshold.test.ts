import { afterEach, describe, expect, it } from "vitest";
import { MASK_PREFIX, SUMMARY_PREFIX } from "../src/index.ts";
import { bigOutput, cleanupDirs, diagnostics, expectPairs, ofType, scriptedTool, setup, textOf } from "./support.ts";

afterEach(cleanupDirs);

const calls = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    text: `Step ${i + 1}: let me run the next check.`,
    toolCalls: [{ id: `c${i + 1}`, name: "bash", args: { command: `check ${i + 1}` } }],
  }));

describe("context pressure thresholds (real kernel turns)", () => {
  it("below the soft threshold nothing is touched and no model is called", async () => {
    const outputs = Array.from({ length: 4 }, (_, i) => bigOutput(`t${i}`, 40));
    const { session, provider, side } = await setup({
      steps: [...calls(4), { text: "done" }],
      window: 50_000,
      tools: [scriptedTool("bash", outputs)],
      plugin: { subgoals: { extractor: "heuristic" } },
    });
    const r = await session.run("check the cluster");
    expect(r.verdict.status).toBe("completed");
    const last = provider.requests.at(-1)!.messages;
    expect(last.filter((m) => m.role === "tool").map(textOf)).toEqual(outputs);
    expect(side.requests).toHaveLength(0);
    expect(ofType(await session.events(), "context.edited")).toHaveLength(0);
  });

  it("above the soft threshold old tool outputs become retrievable stubs without a model call; the tail stays raw", async () => {
    const outputs = Array.from({ length: 8 }, (_, i) => bigOutput(`t${i}`, 60));
    const { session, provider, side } = await setup({
      steps: [...calls(8), { text: "done" }],
      window: 9_000,
      tools: [scriptedTool("bash", outputs)],
      plugin: { taco: { enabled: false }, hard: 0.99, subgoals: { extractor: "heuristic" } },
    });
    const r = await session.run("check the cluster");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.verdict.status).toBe("completed");
    expect(side.requests).toHaveLength(0);
    const last = provider.requests.at(-1)!.messages;
    expectPairs(last);
    const results = last.filter((m) => m.role === "tool").map(textOf);
    expect(results[0]!.startsWith(MASK_PREFIX)).toBe(true);
    expect(results[0]).toMatch(/context_retrieve\(id="m[0-9a-f]{12}"/);
    expect(results.at(-1)).toBe(outputs.at(-1));
    const events = await session.events();
    const applied = diagnostics(events, "compaction.applied");
    expect(applied.length).toBeGreaterThan(0);
    const data = applied[0]!.data as { tokensBefore: number; tokensAfter: number; masked: unknown[]; stages: string[] };
    expect(data.stages).toContain("mask");
    expect(data.tokensAfter).toBeLessThan(data.tokensBefore);
    expect(data.tokensBefore).toBeGreaterThanOrEqual(0.6 * 9_000);
    // Every request the model got stayed under the hard threshold.
    const edited = ofType(events, "context.edited");
    expect(edited.length).toBe(applied.length);
    expect(edited[0]!.reason).toMatch(/^compaction subgoal: \d+ → \d+ tokens; masked \d+ tool outputs/);
  });

  it("above the hard threshold old turns are summarised by the side model, keeping the first user message and the tail", async () => {
    const long = (i: number) =>
      `Thinking about step ${i}. ${"We weigh the options for the migration plan carefully. ".repeat(90)}`;
    const steps = [
      ...Array.from({ length: 6 }, (_, i) => ({
        text: long(i),
        toolCalls: [{ id: `c${i}`, name: "bash", args: { command: `step ${i}` } }],
      })),
      { text: "done" },
    ];
    const summary =
      "Goal:\n- migrate\nDecisions:\n- keep plan B\nFiles touched:\n- /srv/app/db.py\nKey facts:\n- exit code 3\nOpen questions:\n- none\nCurrent state:\n- testing";
    const { session, provider, side } = await setup({
      steps,
      side: [{ text: summary }],
      window: 6_000,
      tools: [scriptedTool("bash", Array(6).fill("ok"))],
      plugin: { taco: { enabled: false }, maskText: false, subgoals: { extractor: "heuristic" } },
    });
    const r = await session.run("migrate the database");
    expect(r.verdict.status).toBe("completed");
    expect(side.requests).toHaveLength(1);
    expect(side.requests[0]!.system).toMatch(
      /Goal, Decisions, Files touched, Key facts, Open questions, Current state/,
    );
    const last = provider.requests.at(-1)!.messages;
    expectPairs(last);
    expect(textOf(last[0]!)).toBe("migrate the database");
    const s = last.find((m) => textOf(m).startsWith(SUMMARY_PREFIX));
    expect(s && textOf(s)).toContain("exit code 3");
    expect(textOf(last.at(-1)!)).toBe("ok");
    const data = diagnostics(await session.events(), "compaction.applied").map(
      (d) => d.data as { stages: string[]; summary?: { method: string } },
    );
    expect(data.some((d) => d.stages.includes("summary") && d.summary?.method === "model")).toBe(true);
  });

  it("a failing summariser falls back to the deterministic structured summary", async () => {
    const long = (i: number) =>
      `Now let's edit /srv/app/mod_${i}.py. ${"Careful reasoning about the change and its risks. ".repeat(90)}`;
    const steps = [
      ...Array.from({ length: 6 }, (_, i) => ({
        text: long(i),
        toolCalls: [{ id: `c${i}`, name: "bash", args: { command: `edit ${i}` } }],
      })),
      { text: "done" },
    ];
    const { session, provider } = await setup({
      steps,
      side: [{ error: { class: "overloaded" } }],
      window: 6_000,
      tools: [scriptedTool("bash", Array(6).fill("ok"))],
      plugin: { taco: { enabled: false }, maskText: false },
    });
    await session.run("edit the modules");
    const last = provider.requests.at(-1)!.messages;
    const s = last.find((m) => textOf(m).startsWith(SUMMARY_PREFIX))!;
    expect(textOf(s)).toMatch(/Goal:\n- edit the modules/);
    expect(textOf(s)).toContain("Files touched:");
    expect(textOf(s)).toContain("/srv/app/mod_0.py");
    const events = await session.events();
    expect(diagnostics(events, "KEEL_COMPACTION_MODEL_FAILED").length).toBeGreaterThan(0);
  });
});
