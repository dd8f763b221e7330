import { describe, expect, it } from "vitest";
import type { KeelEvent, ModelProvider } from "@keel/kernel";
import { scriptedProvider } from "@keel/testkit";
import { defineScorer, expectScorers, runScorer, subsetMatch } from "../src/scorers.ts";
import type { ScoreContext, Scorer } from "../src/scorers.ts";
import { llmJudge, parseVerdict } from "../src/judge.ts";
import type { EvalCase } from "../src/types.ts";

const metrics = { rounds: 2, toolCalls: 1, inputTokens: 100, outputTokens: 50, costUsd: 0.01, durationMs: 1200 };
const toolStarted = (name: string, args: unknown) =>
  ({
    type: "tool.started",
    name,
    args,
    round: 1,
    callId: `c-${name}`,
    sessionId: "s",
    seq: 1,
    ts: 0,
    turnId: "t",
  }) as KeelEvent;

function ctx(c: Partial<EvalCase>, output: string, extra: Partial<ScoreContext> = {}): Omit<ScoreContext, "signal"> {
  return {
    case: { id: "c", input: "question", ...c },
    output,
    outputs: [output],
    events: [toolStarted("read_file", { path: "TODO.md", encoding: "utf8" })],
    metrics,
    ...extra,
  };
}

async function scoreAll(c: Partial<EvalCase>, output: string, extra: Partial<ScoreContext> = {}) {
  const context = ctx(c, output, extra);
  return Promise.all(expectScorers(context.case).map((s) => runScorer(s, context)));
}

describe("built-in scorers", () => {
  it("exact, contains, notContains and regex", async () => {
    const r = await scoreAll(
      {
        expect: {
          exact: "Thursday",
          contains: ["thurs", "day"],
          notContains: "Friday",
          regex: { pattern: "^\\s*thu", flags: "i" },
        },
      },
      " Thursday\n",
    );
    expect(r.map((s) => [s.scorer, s.pass])).toEqual([
      ["exact", true],
      ["contains", true],
      ["notContains", true],
      ["regex", true],
    ]);
    const bad = await scoreAll({ expect: { exact: "x", contains: ["a", "zz"], regex: "^q" } }, "abc");
    expect(bad.map((s) => [s.scorer, s.pass, s.score])).toEqual([
      ["exact", false, 0],
      ["contains", false, 0.5],
      ["regex", false, 0],
    ]);
    expect(bad[1]!.reason).toBe('missing: "zz"');
  });

  it("jsonSchema reads the answer (or its ```json block) and names what does not match", async () => {
    const schema = { type: "object", required: ["day"], properties: { day: { type: "string" } } };
    const [ok] = await scoreAll({ expect: { jsonSchema: schema } }, 'Here:\n```json\n{"day": "Thu"}\n```');
    expect(ok!.pass).toBe(true);
    const [bad] = await scoreAll({ expect: { jsonSchema: schema } }, '{"day": 4}');
    expect(bad!.reason).toContain("/day must be string");
    const [notJson] = await scoreAll({ expect: { jsonSchema: schema } }, "Thursday");
    expect(notJson!.reason).toContain("not JSON");
  });

  it("toolCalled matches the name and a subset of the arguments, from tool.started events", async () => {
    const [ok] = await scoreAll({ expect: { toolCalled: [{ name: "read_file", args: { path: "TODO.md" } }] } }, "");
    expect(ok!.pass).toBe(true);
    const [wrongArgs] = await scoreAll({ expect: { toolCalled: { name: "read_file", args: { path: "x" } } } }, "");
    expect(wrongArgs!.reason).toContain('not called: read_file with {"path":"x"} (called: read_file)');
    const [none] = await scoreAll({ expect: { toolCalled: "write_file" } }, "", { events: [] });
    expect(none!.reason).toContain("called: no tool");
    expect(subsetMatch({ a: [1, { b: 2 }] }, { a: [1, { b: 2, c: 3 }], d: 4 })).toBe(true);
    expect(subsetMatch({ a: [1] }, { a: [1, 2] })).toBe(false);
  });

  it("limits: rounds, tool calls, tokens, cost, time", async () => {
    const [ok] = await scoreAll({ expect: { limits: { maxRounds: 2, maxTokens: 150, maxCostUsd: 0.02 } } }, "");
    expect(ok!.pass).toBe(true);
    const [over] = await scoreAll({ expect: { limits: { maxRounds: 1, maxToolCalls: 0, maxDurationMs: 1000 } } }, "");
    expect(over!.reason).toBe("over the limits: rounds 2 > 1, tool calls 1 > 0, ms 1200 > 1000");
  });
});

describe("custom scorers", () => {
  it("defineScorer is typed and returns its argument; booleans, numbers and objects are verdicts", async () => {
    const s = defineScorer({ name: "short", score: ({ output }) => output.length < 5 });
    expect(s.name).toBe("short");
    expect(await runScorer(s, ctx({}, "abc"))).toEqual({ scorer: "short", pass: true, score: 1 });
    const n = defineScorer({ name: "half", threshold: 0.6, score: () => 0.5 });
    expect(await runScorer(n, ctx({}, ""))).toEqual({ scorer: "half", pass: false, score: 0.5 });
    const o = defineScorer({ name: "obj", score: async () => ({ score: 0.9, reason: "close" }) });
    expect(await runScorer(o, ctx({}, ""))).toEqual({ scorer: "obj", pass: true, score: 0.9, reason: "close" });
  });

  it("a scorer that throws, hangs or returns garbage fails with its name, never throws", async () => {
    const cases: Scorer[] = [
      {
        name: "thrower",
        score: () => {
          throw new Error("boom");
        },
      },
      { name: "rejecter", score: () => Promise.reject(new Error("async boom")) },
      { name: "nothing", score: () => undefined as never },
      { name: "nan", score: () => Number.NaN },
      { name: "big", score: () => 3 },
      { name: "stringy", score: () => ({ pass: "yes" }) as never },
      {
        name: "proxy",
        score: () =>
          new Proxy(
            {},
            {
              get: () => {
                throw new Error("trap");
              },
            },
          ) as never,
      },
      {
        name: "slow",
        timeoutMs: 30,
        score: ({ signal }) => new Promise((r) => signal.addEventListener("abort", () => r(true))),
      },
    ];
    const results = await Promise.all(cases.map((s) => runScorer(s, ctx({}, ""))));
    for (const [i, r] of results.entries()) {
      expect(r.pass, cases[i]!.name).toBe(false);
      expect(r.score).toBe(0);
      expect(r.reason).toContain(`scorer "${cases[i]!.name}"`);
      expect(r.error).toBeTruthy();
    }
    expect(results[0]!.reason).toBe('scorer "thrower" threw: boom');
    expect(results[7]!.reason).toContain("did not finish within 30 ms");
  });
});

describe("the LLM judge", () => {
  it("parses a verdict defensively", () => {
    expect(parseVerdict('{"pass": true, "score": 0.9, "reason": "ok"}')).toEqual({
      pass: true,
      score: 0.9,
      reason: "ok",
    });
    expect(parseVerdict('Sure! ```json\n{"reason": "has {braces}", "score": "0.4"}\n``` done')).toEqual({
      reason: "has {braces}",
      score: 0.4,
    });
    expect(parseVerdict('{"note": 1} then {"pass": false}')).toEqual({ pass: false });
    expect(parseVerdict("PASS")).toBeUndefined();
    expect(parseVerdict('{"score": 7}')).toBeUndefined();
    expect(parseVerdict('{"pass": tru')).toBeUndefined();
  });

  it("asks the model with the rubric, input, reference and answer, and scores its verdict", async () => {
    const model = scriptedProvider([
      { text: '{"pass": true, "score": 1, "reason": "mentions Thursday"}' },
      { text: "I think it is fine." },
    ]);
    const judge = llmJudge({ rubric: "Names the release day." });
    const c = ctx({ reference: "Thursday" }, "We release on Thursday.", { model: model as ModelProvider });
    expect(await runScorer(judge, c)).toEqual({ scorer: "judge", pass: true, score: 1, reason: "mentions Thursday" });
    const asked = JSON.stringify(model.requests[0]!.messages);
    for (const part of ["Names the release day.", "question", "<reference>", "We release on Thursday."])
      expect(asked).toContain(part);
    const garbled = await runScorer(judge, c);
    expect(garbled).toMatchObject({ pass: false, scorer: "judge" });
    expect(garbled.reason).toContain('scorer "judge" threw: answered no verdict: "I think it is fine."');
    const none = await runScorer(judge, ctx({}, "x"));
    expect(none.reason).toContain("has no model to ask");
  });
});
