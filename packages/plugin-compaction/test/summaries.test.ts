import { afterEach, describe, expect, it } from "vitest";
import { SUMMARY_PREFIX } from "../src/index.ts";
import { cleanupDirs, expectPairs, scriptedTool, setup, textOf } from "./support.ts";

afterEach(cleanupDirs);

describe("repeated hard compactions in one long turn (real kernel turns)", () => {
  it("fold the earlier summary into the next one instead of keeping a pile of summaries", async () => {
    const long = (i: number) => `Step ${i}: reading /srv/app/mod_${i}.py. ${"We weigh the options for the migration plan carefully. ".repeat(40)}`;
    const steps = [...Array.from({ length: 14 }, (_, i) => ({ text: long(i), toolCalls: [{ id: `c${i}`, name: "bash", args: { command: `step ${i}` } }] })), { text: "done" }];
    const { session, provider } = await setup({ steps, window: 3_000, tools: [scriptedTool("bash", Array.from({ length: 14 }, (_, i) => `ok exit_code_${i}`))], plugin: { model: false, taco: { enabled: false }, maskText: false, cooldownRounds: 0, subgoals: { extractor: "heuristic" } } });
    const r = await session.run("migrate the database");
    expect(r.verdict.status).toBe("completed");
    const summaries = provider.requests.map((q) => q.messages.filter((m) => textOf(m).startsWith(SUMMARY_PREFIX)).length);
    expect(Math.max(...summaries)).toBe(1);
    const last = provider.requests.at(-1)!.messages;
    expectPairs(last);
    expect(textOf(last[0]!)).toBe("migrate the database");
    // The one summary covers the earliest steps too (merged, not dropped).
    expect(textOf(last.find((m) => textOf(m).startsWith(SUMMARY_PREFIX))!)).toContain("/srv/app/mod_0.py");
  });
});
