import { describe, expect, it } from "vitest";
import { createAgent, isKeelError } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { parseDataset } from "../src/dataset.ts";
import type { DatasetIssue } from "../src/dataset.ts";
import { parseVerdict } from "../src/judge.ts";
import { jsonReport, junitXml } from "../src/reporters.ts";
import { runEval } from "../src/runner.ts";
import { expectScorers, fencedBody, jsonOf, runScorer } from "../src/scorers.ts";
import type { ScoreContext } from "../src/scorers.ts";
import type { EvalCase } from "../src/types.ts";
import { testExperimentStore } from "./support/memory-experiments.ts";

const metrics = { rounds: 1, toolCalls: 0, inputTokens: 1, outputTokens: 1, costUsd: 0, durationMs: 1 };
function ctx(c: Partial<EvalCase>, output: string): Omit<ScoreContext, "signal"> {
  return { case: { id: "c", input: "q", ...c }, output, outputs: [output], events: [], metrics };
}
function issues(text: string, file: string): DatasetIssue[] {
  try {
    parseDataset(text, file);
  } catch (err) {
    if (!isKeelError(err, "KEEL_EVAL_DATASET_INVALID")) throw err;
    return err.details as DatasetIssue[];
  }
  throw new Error("expected the dataset to be refused");
}

describe("eval adversarial", () => {
  it("a YAML alias bomb is a located dataset error; an anchor used by many cases loads", () => {
    const bomb = [
      "- input: fine",
      "- input: boom",
      "  metadata:",
      "    a: &a [x, x, x, x, x, x, x, x, x, x]",
      "    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]",
      "    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]",
      "    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]",
      "    e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]",
    ].join("\n");
    expect(issues(bomb, "bomb.yaml")).toEqual([
      expect.objectContaining({
        file: "bomb.yaml",
        line: 2,
        field: "(case)",
        message: expect.stringContaining("alias"),
      }),
    ]);
    // Before: the whole list was converted at once, and yaml's cap of 100 alias expansions per
    // conversion threw a bare ReferenceError (no file, no line) for 101 cases sharing one anchor.
    const list = ["- input: h", "  metadata: &m { k: [x, x, x] }"];
    for (let i = 0; i < 150; i++) list.push(`- input: h${i}`, "  metadata: *m");
    const d = parseDataset(list.join("\n"), "aliases.yaml");
    expect(d.cases).toHaveLength(151);
    expect(d.cases[150]!.metadata).toEqual({ k: ["x", "x", "x"] });
  });

  it("JSONL odds: BOM, CRLF, blank lines, no trailing newline, non-object lines", () => {
    const d = parseDataset('\uFEFF{"id":"a","input":"x"}\r\n\r\n  \r\n{"id":"b","input":"y"}', "c.jsonl");
    expect(d.cases.map((c) => [c.id, c.source?.line])).toEqual([
      ["a", 1],
      ["b", 4],
    ]);
    const found = issues('{"input":"x"}\n[1]\n"str"\nnull\n42\n', "c.jsonl");
    expect(found.map((i) => i.line)).toEqual([2, 3, 4, 5]);
  });

  it("a catastrophic regex against a long output fails its case in bounded time", { timeout: 60_000 }, async () => {
    const c = { expect: { regex: "^(a+)+$" } };
    const t0 = Date.now();
    const [r] = await Promise.all(
      expectScorers({ id: "c", input: "q", ...c }).map((s) => runScorer(s, ctx(c, `${"a".repeat(40)}!`))),
    );
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(r).toMatchObject({ scorer: "regex", pass: false });
  });

  it("a jsonSchema with a remote $ref is refused at load, never fetched", () => {
    const found = issues(
      '{"input":"x","expect":{"jsonSchema":{"$ref":"http://127.0.0.1:9/schema.json"}}}\n',
      "c.jsonl",
    );
    expect(found[0]).toMatchObject({ line: 1, field: "expect.jsonSchema" });
  });

  it("JUnit XML stays well-formed with hostile text", () => {
    const hostile = `]]><x a="'&\u0000\u0001\uD800\uDFFF\uFFFE\u{1F600}${"é".repeat(5000)}`;
    const xml = junitXml(
      { id: "e1", name: hostile, dataset: hostile, agent: hostile, startedAt: Date.now() } as never,
      [
        {
          caseId: hostile,
          status: "error",
          error: hostile,
          output: hostile,
          scores: [],
          metrics: { ...metrics, durationMs: Number.NaN },
        } as never,
      ],
      { cases: 1, passed: 0, failed: 0, errored: 1, durationMs: 1, scorers: {}, passRate: 0 } as never,
    );
    const bad = [...xml].filter((ch) => {
      const c = ch.codePointAt(0)!;
      return (
        (c < 0x20 && c !== 9 && c !== 10 && c !== 13) || c === 0xfffe || c === 0xffff || (c >= 0xd800 && c <= 0xdfff)
      );
    });
    expect(bad).toEqual([]);
    expect(xml).not.toMatch(/<x a=/);
    expect(xml).not.toContain("NaN");
  });

  it("--resume refuses an experiment of another agent (its cases would mix two agents' answers)", async () => {
    const store = testExperimentStore();
    await store.create({
      id: "exp_other",
      name: "theirs",
      dataset: "x",
      datasetHash: "h1",
      agent: "someone-else",
      status: "running",
      startedAt: Date.now(),
    });
    const agent = await createAgent({
      name: "mine",
      provider: scriptedProvider([{ text: "a" }] as never),
      store: new MemorySessionStore(),
      sideModel: false,
    });
    try {
      await expect(
        runEval({
          agent,
          cases: [{ id: "1", input: "q" }],
          store,
          dataset: { file: "x", hash: "h1" },
          resume: "exp_other",
        }),
      ).rejects.toThrow(/KEEL_EVAL_RESUME_MISMATCH/);
      expect(store.puts).toBe(0);
    } finally {
      await agent.close();
    }
  });

  it("a secret the model says never reaches the experiment store, JUnit or the JSON report", async () => {
    const pat = `ghp_${"A1b2C3d4E5".repeat(3)}x7Y8z9`;
    const store = testExperimentStore();
    const agent = await createAgent({
      name: "mine",
      provider: scriptedProvider([{ text: `the token is ${pat}` }] as never),
      store: new MemorySessionStore(),
      sideModel: false,
    });
    try {
      const run = await runEval({
        agent,
        cases: [{ id: "1", input: "q", expect: { exact: "no token" } }],
        store,
        dataset: { file: "x", hash: "h1" },
      });
      const stored = JSON.stringify([...store.results.get(run.experiment.id)!.values()]);
      expect(stored).toContain("REDACTED");
      expect(stored).not.toContain(pat);
      expect(junitXml(run.experiment, run.results, run.summary)).not.toContain(pat);
      expect(jsonReport(run.experiment, run.results, run.summary)).not.toContain(pat);
    } finally {
      await agent.close();
    }
  });

  it("an unclosed code fence followed by many line breaks does not hang jsonSchema", { timeout: 60_000 }, () => {
    const c0 = process.cpuUsage();
    // Before: /```(?:json)?\s*\n([\s\S]*?)\n\s*```/ took ~5 s at 3,000 line breaks, ~150 s at 10,000.
    expect(jsonOf(`\`\`\`${"\n".repeat(200_000)}x`).ok).toBe(false);
    expect(jsonOf(`\`\`\`json ${"\n \t".repeat(100_000)}`).ok).toBe(false);
    // CPU time, not wall time (a busy machine stretches only the latter).
    const used = process.cpuUsage(c0);
    expect((used.user + used.system) / 1000).toBeLessThan(2_000);
    expect(jsonOf('Here:\n```json\n{"a": 1}\n```\nbye')).toEqual({ ok: true, value: { a: 1 } });
    // Same blocks as the old regex (up to blanks), on many small mixes of its tokens.
    const old = /```(?:json)?\s*\n([\s\S]*?)\n\s*```/;
    const parts = ["```", "json", "\n", " ", "x", "{}", "`"];
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed);
    for (let n = 0; n < 5_000; n++) {
      let t = "";
      for (let k = rand() % 10; k >= 0; k--) t += parts[rand() % parts.length];
      expect([t, fencedBody(t)?.trim()]).toEqual([t, old.exec(t)?.[1]?.trim()]);
    }
  });

  it("a case id a store cannot keep (NUL, lone surrogate) is a located error", () => {
    // Before: accepted; the stores read such an id back changed (U+FFFD), so --resume re-ran the
    // case (scored twice) and --baseline compared it as new + missing, never as a regression.
    const found = issues(
      '{"id":"ok","input":"x"}\n{"id":"a\\u0000b","input":"x"}\n{"id":"\\ud800","input":"x"}\n',
      "c.jsonl",
    );
    expect(found.map((i) => [i.line, i.field])).toEqual([
      [2, "id"],
      [3, "id"],
    ]);
  });

  it("a scorer timeout past setTimeout's range (or Infinity) waits, it does not fail the case at once", async () => {
    for (const timeoutMs of [3e9, Number.POSITIVE_INFINITY]) {
      const slow = { name: "slow", timeoutMs, score: () => new Promise<boolean>((r) => setTimeout(() => r(true), 30)) };
      expect(await runScorer(slow, ctx({}, "x"))).toMatchObject({ scorer: "slow", pass: true });
    }
  });

  it("a judge answer of unclosed braces is read in bounded time", { timeout: 60_000 }, () => {
    // CPU time, not wall time: a quadratic reader burns minutes of CPU here, a busy machine only stretches the wall clock.
    const c0 = process.cpuUsage();
    expect(parseVerdict("{".repeat(400_000))).toBeUndefined();
    const used = process.cpuUsage(c0);
    expect((used.user + used.system) / 1000).toBeLessThan(3_000);
    expect(parseVerdict(`${"{".repeat(100)} {"pass": true}`)).toEqual({ pass: true });
  });
});
