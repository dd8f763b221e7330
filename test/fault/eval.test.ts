/**
 * Fault suite, class 17 — evals. The real `keel eval` binary: a malformed case is a located
 * error before any model call (the wire server sees no request, no session is created); a
 * scorer that throws fails its case with its name while the other scorers and cases score; a run
 * SIGKILLed midway is continued with `--resume` and ends with every case scored exactly once; the
 * JUnit report stays well-formed XML whatever the model and the dataset put in it.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { beforeAll, describe, expect, it } from "vitest";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import { isWellFormed } from "../../packages/text/src/index.ts";
import { postgresExperimentStore, sqliteExperimentStore } from "../../packages/eval/src/index.ts";
import { endSharedPools } from "../../packages/store-postgres/src/index.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";
import {
  faultConfig,
  project,
  runKeel,
  sessionIdOf,
  startKeel,
  storedEvents,
  storedSessions,
  until,
  useSharedWire,
  wireEnv,
} from "./support/storage.ts";

const { root, server: sharedServer } = useSharedWire("keel-fault-eval-");
let server: WireServer;
beforeAll(() => {
  server = sharedServer();
});

const jsonl = (rows: unknown[]) => `${rows.map((r) => JSON.stringify(r)).join("\n")}\n`;

/** An offline project: a JSON config whose scripted model answers each case `q<i>.` after `delayMs`. */
function offlineProject(name: string, steps: unknown[]): { dir: string; home: string; env: NodeJS.ProcessEnv } {
  const p = project(root, name, "export default {};\n");
  writeFileSync(
    join(p.dir, "agent.config.mjs"),
    `export default ${JSON.stringify({ name, offline: { script: "./script.json" } })};\n`,
  );
  writeFileSync(join(p.dir, "script.json"), JSON.stringify({ steps }));
  const env = wireEnv(p.home, "http://127.0.0.1:9", { KEEL_HOME: p.home, KEEL_EXIT_GRACE_MS: "500" });
  delete env.ANTHROPIC_API_KEY;
  return { ...p, env };
}

async function experimentOf(home: string) {
  const store = sqliteExperimentStore({ path: join(home, "sessions.sqlite"), readOnly: true });
  try {
    const [e] = await store.list();
    return { experiment: e!, cases: await store.cases(e!.id) };
  } finally {
    await store.close();
  }
}

/**
 * A project whose agent has a `refund` tool (no category: its effect is not read-only) that
 * appends a line to EFFECT_LOG, then, with REFUND_HOLD set, waits until it is killed.
 */
function refundProject(name: string): { dir: string; home: string; env: NodeJS.ProcessEnv; effects: string } {
  const p = project(
    root,
    name,
    faultConfig(`tools: [{
    name: "refund",
    description: "Refunds the order.",
    parameters: { type: "object", properties: { ms: { type: "number" } } },
    execute: async (args, ctx) => {
      const { appendFileSync } = await import("node:fs");
      appendFileSync(process.env.EFFECT_LOG, "refund " + ctx.callId + "\\n");
      if (process.env.REFUND_HOLD) await new Promise((r) => setTimeout(r, 600_000));
      return "refunded";
    },
  }],`),
  );
  const effects = join(p.dir, "effects.log");
  return { ...p, effects, env: wireEnv(p.home, server.anthropicBaseURL, { EFFECT_LOG: effects }) };
}

const effectLines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : []);

describe("fault class 17: evals", () => {
  it("a malformed case is a located error before any model call: no request, no session, exit 2", async () => {
    const p = project(root, "malformed", faultConfig());
    writeFileSync(
      join(p.dir, "cases.yaml"),
      [
        "- id: fine",
        "  input: hello",
        "- id: broken",
        "  input: hi",
        "  expect:",
        "    regex: '(unclosed'",
        "- id: fine",
        "  input: again",
      ].join("\n"),
    );
    const before = server.requests.length;
    const r = await runKeel(["eval", "cases.yaml"], { cwd: p.dir, env: wireEnv(p.home, server.anthropicBaseURL) });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain("KEEL_EVAL_DATASET_INVALID");
    expect(r.stderr).toContain(`${join(p.dir, "cases.yaml")}:6 expect.regex: not a valid regular expression`);
    expect(r.stderr).toContain('7 id: duplicate id "fine" (first at line 1)');
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(server.requests.length).toBe(before);
    expect(existsSync(join(p.home, "sessions.sqlite"))).toBe(false);
    expect(storedSessions(p.home)).toEqual([]);
  });

  it("a scorer that throws fails its case with its name; hostile text keeps the JUnit report well-formed", async () => {
    const hostile = `]]><![CDATA[x]]> <b>&amp;</b> "q" \u0001\u0007\u001b[31m ${"😀".repeat(5000)}`;
    const p = offlineProject("scorers", [
      { when: { lastUserIncludes: "first" }, text: hostile },
      { when: { lastUserIncludes: "second" }, text: "plain answer" },
    ]);
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      jsonl([
        { id: `first ]]> \u0002 ${"🧪".repeat(300)}`, input: "first", expect: { contains: "😀" } },
        { id: "second", input: "second", expect: { contains: "plain" } },
      ]),
    );
    writeFileSync(
      join(p.dir, "check.eval.mjs"),
      `export default {
  dataset: "./cases.jsonl",
  scorers: [
    { name: "explodes", appliesTo: (c) => c.id !== "second", score() { throw new Error("scorer bug ]]> <oops>"); } },
    { name: "garbage", appliesTo: (c) => c.id === "second", score: () => ({ score: "lots" }) },
    { name: "length", score: ({ output }) => output.length > 0 },
  ],
};
`,
    );
    const r = await runKeel(["eval", "check.eval.mjs", "--junit", "out.xml", "--json", "out.json"], {
      cwd: p.dir,
      env: p.env,
    });
    expect(r.code, r.stderr).toBe(3);
    const report = JSON.parse(readFileSync(join(p.dir, "out.json"), "utf8"));
    const [first, second] = report.cases as Array<{
      status: string;
      scores: Array<{ scorer: string; pass: boolean; reason?: string }>;
    }>;
    expect(first!.status).toBe("failed");
    expect(first!.scores.map((s) => [s.scorer, s.pass])).toEqual([
      ["contains", true],
      ["explodes", false],
      ["length", true],
    ]);
    expect(first!.scores[1]!.reason).toBe('scorer "explodes" threw: scorer bug ]]> <oops>');
    expect(second!.scores.find((s) => s.scorer === "garbage")!.reason).toContain(
      'scorer "garbage" returned no verdict',
    );
    expect(second!.scores.find((s) => s.scorer === "contains")!.pass).toBe(true);
    const junit = readFileSync(join(p.dir, "out.xml"), "utf8");
    expect(XMLValidator.validate(junit)).toBe(true);
    expect(isWellFormed(junit)).toBe(true);
    expect([...junit].filter((ch) => ch < " " && !"\n\r\t".includes(ch))).toEqual([]);
    const doc = new XMLParser({
      ignoreAttributes: false,
      attributeNamePrefix: "",
      isArray: (n) => n === "testcase",
    }).parse(junit);
    const cases = doc.testsuites.testsuite.testcase;
    expect(cases).toHaveLength(2);
    expect(cases[0].failure.message).toContain('explodes: scorer "explodes" threw: scorer bug ]]> <oops>');
    expect(cases[0]["system-out"]).toContain("]]><![CDATA[x]]> <b>&amp;</b>");
    expect(cases[1].failure.type).toBe("garbage");
  });

  it("a run SIGKILLed midway continues with --resume: finished cases kept, every case scored exactly once", async () => {
    const n = 10;
    const steps = Array.from({ length: n }, (_, i) => ({
      when: { lastUserIncludes: `q${i}.` },
      text: `a${i}`,
      delayMs: 250,
    }));
    const p = offlineProject("killed", steps);
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      jsonl(Array.from({ length: n }, (_, i) => ({ id: `c${i}`, input: `q${i}.`, expect: { exact: `a${i}` } }))),
    );
    const first = startKeel(["eval", "cases.jsonl", "--concurrency", "2"], { cwd: p.dir, env: p.env });
    await until(() => /\[3\/10\]/.test(first.stderr()), "three cases scored");
    first.child.kill("SIGKILL");
    const killed = await first.exit;
    expect(killed.signal).toBe("SIGKILL");
    const cut = await experimentOf(p.home);
    expect(cut.experiment.status).toBe("running");
    const kept = new Map(cut.cases.map((c) => [c.caseId, c.sessionId]));
    expect(kept.size).toBeGreaterThanOrEqual(3);
    expect(kept.size).toBeLessThan(n);

    const resumed = await runKeel(["eval", "cases.jsonl", "--resume", "--concurrency", "3"], {
      cwd: p.dir,
      env: p.env,
    });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain(`(${kept.size} already scored, resumed)`);
    expect(resumed.stderr.match(/\[\d+\/10\] pass/g)).toHaveLength(n - kept.size);
    const done = await experimentOf(p.home);
    expect(done.experiment).toMatchObject({
      id: cut.experiment.id,
      status: "completed",
      summary: { cases: n, passed: n },
    });
    expect(done.cases.map((c) => c.caseId)).toEqual(Array.from({ length: n }, (_, i) => `c${i}`));
    // Cases scored before the kill were not run again: the same sessions.
    for (const [caseId, sessionId] of kept)
      expect(done.cases.find((c) => c.caseId === caseId)!.sessionId).toBe(sessionId);
    expect(new Set(done.cases.map((c) => c.sessionId)).size).toBe(n);
    // A finished experiment is not resumed again.
    const again = await runKeel(["eval", "cases.jsonl", "--resume", cut.experiment.id], { cwd: p.dir, env: p.env });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("KEEL_EVAL_RESUME_MISMATCH");
  });
  it("Ctrl-C stops a run with exit 130, says how to continue, and --resume=EXP finishes it", async () => {
    const n = 8;
    const steps = Array.from({ length: n }, (_, i) => ({
      when: { lastUserIncludes: `q${i}.` },
      text: `a${i}`,
      delayMs: 300,
    }));
    const p = offlineProject("interrupted", steps);
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      jsonl(Array.from({ length: n }, (_, i) => ({ id: `c${i}`, input: `q${i}.`, expect: { exact: `a${i}` } }))),
    );
    const first = startKeel(["eval", "cases.jsonl", "--concurrency", "2"], { cwd: p.dir, env: p.env });
    await until(() => /\[2\/8\]/.test(first.stderr()), "two cases scored");
    first.child.kill("SIGINT");
    const stopped = await first.exit;
    expect(stopped.code, first.stderr()).toBe(130);
    const hint = /continue with: keel eval cases\.jsonl --resume (exp_\w+)/.exec(first.stderr());
    expect(hint, first.stderr()).toBeTruthy();
    const cut = await experimentOf(p.home);
    expect(cut.experiment).toMatchObject({ id: hint![1], status: "running" });
    const resumed = await runKeel(["eval", "cases.jsonl", `--resume=${hint![1]}`], { cwd: p.dir, env: p.env });
    expect(resumed.code, resumed.stderr).toBe(0);
    const done = await experimentOf(p.home);
    expect(done.experiment).toMatchObject({ status: "completed", summary: { cases: n, passed: n } });
    expect(done.cases).toHaveLength(n);
  });
  it("on PostgreSQL: a SIGKILLed run resumes from the shared schema, and the next run gates against it", async () => {
    await requirePostgres();
    const schema = testSchema();
    const n = 6;
    const steps = Array.from({ length: 2 * n }, (_, k) => {
      const i = k % n;
      return { when: { lastUserIncludes: `q${i}.` }, text: `a${i}`, delayMs: 200 };
    });
    const p = offlineProject("postgres", steps);
    const env = { ...p.env, KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema };
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      jsonl(Array.from({ length: n }, (_, i) => ({ id: `c${i}`, input: `q${i}.`, expect: { exact: `a${i}` } }))),
    );
    const first = startKeel(["eval", "cases.jsonl", "--concurrency", "2"], { cwd: p.dir, env });
    await until(() => /\[2\/6\]/.test(first.stderr()), "two cases scored");
    first.child.kill("SIGKILL");
    await first.exit;
    const resumed = await runKeel(["eval", "cases.jsonl", "--resume"], { cwd: p.dir, env });
    expect(resumed.code, resumed.stderr).toBe(0);
    const second = await runKeel(["eval", "cases.jsonl", "--baseline", "latest", "--max-regressions", "0"], {
      cwd: p.dir,
      env,
    });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain("0 regression(s) · 0 fixed · 6 unchanged");
    const store = postgresExperimentStore({ url: PG_URL, schema });
    try {
      const list = await store.list();
      expect(list.map((e) => [e.status, e.summary?.passed])).toEqual([
        ["completed", n],
        ["completed", n],
      ]);
      expect(list[0]!.baseline).toBe(list[1]!.id);
      expect((await store.cases(list[1]!.id)).map((c) => c.caseId)).toEqual(
        Array.from({ length: n }, (_, i) => `c${i}`),
      );
    } finally {
      await store.close();
      await endSharedPools();
      await dropTestSchemas();
    }
    // Nothing went to SQLite in the home.
    expect(existsSync(join(p.home, "sessions.sqlite"))).toBe(false);
  });

  it("tools answer from fixtures: a side-effecting tool never runs unasked (default), --tools live runs it", {
    timeout: 180_000,
  }, async () => {
    const p = refundProject("fixtures");
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      jsonl([
        {
          id: "fixture",
          input: "refund it tools:1 tool:refund",
          tools: { refund: { result: "refunded (fixture)" } },
          expect: { toolCalled: "refund" },
        },
        { id: "no-fixture", input: "refund again tools:1 tool:refund", expect: { contains: "Done" } },
      ]),
    );
    const r = await runKeel(["eval", "cases.jsonl", "--json", "out.json"], {
      cwd: p.dir,
      env: p.env,
      timeoutMs: 60_000,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(effectLines(p.effects)).toEqual([]);
    const report = JSON.parse(readFileSync(join(p.dir, "out.json"), "utf8"));
    const [fixture, refused] = report.cases as Array<{ sessionId: string }>;
    const answer = (sid: string) =>
      storedEvents(p.home, sid).flatMap((e) =>
        e.type === "message.appended" && e.message.role === "tool"
          ? e.message.content.map((b) => (b.type === "text" ? b.text : ""))
          : [],
      );
    expect(answer(fixture!.sessionId).join("")).toContain("refunded (fixture)");
    expect(answer(refused!.sessionId).join("")).toContain("KEEL_EVAL_TOOL_NOT_RUN");
    // Asked for: the fixture still answers its case, the other call runs for real.
    const live = await runKeel(["eval", "cases.jsonl", "--tools", "live"], {
      cwd: p.dir,
      env: p.env,
      timeoutMs: 60_000,
    });
    expect(live.code, live.stderr).toBe(0);
    expect(effectLines(p.effects)).toHaveLength(1);
  });

  it("a case killed after its tool ran does not run it again on --resume", { timeout: 180_000 }, async () => {
    const p = refundProject("resume-effect");
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      jsonl([{ id: "refund", input: "refund it tools:1 tool:refund", expect: { contains: "Done" } }]),
    );
    const first = startKeel(["eval", "cases.jsonl", "--tools", "live"], {
      cwd: p.dir,
      env: { ...p.env, REFUND_HOLD: "1" },
    });
    await until(() => effectLines(p.effects).length === 1, "the refund ran");
    first.child.kill("SIGKILL");
    await first.exit;
    const resumed = await runKeel(["eval", "cases.jsonl", "--resume", "--tools", "live"], {
      cwd: p.dir,
      env: p.env,
      timeoutMs: 60_000,
    });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(effectLines(p.effects)).toHaveLength(1);
    const done = await experimentOf(p.home);
    expect(done.experiment.status).toBe("completed");
    const events = storedEvents(p.home, done.cases[0]!.sessionId!);
    const completed = events.find((e) => e.type === "tool.completed");
    expect(completed).toMatchObject({ name: "refund", status: "denied", decision: "deny by keel-eval" });
  });

  it("a scorer calling process.exit(0) fails its case by name; an exit that slips past still exits non-zero", {
    timeout: 180_000,
  }, async () => {
    const p = offlineProject("exits", [{ when: { lastUserIncludes: "q" }, text: "answer" }]);
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      jsonl([
        { id: "c1", input: "q1" },
        { id: "c2", input: "q2" },
      ]),
    );
    writeFileSync(
      join(p.dir, "quits.eval.mjs"),
      `export default { dataset: "./cases.jsonl", scorers: [{ name: "quits", score() { process.exit(0); } }] };\n`,
    );
    const r = await runKeel(["eval", "quits.eval.mjs", "--junit", "out.xml"], {
      cwd: p.dir,
      env: p.env,
      timeoutMs: 60_000,
    });
    expect(r.code, r.stderr).toBe(3);
    expect(r.stdout + r.stderr).toContain('scorer "quits"');
    expect(existsSync(join(p.dir, "out.xml"))).toBe(true);
    // An exit the guard cannot turn into a throw (process.exit taken before the run): still
    // non-zero, the experiment left resumable, and the way to continue said.
    writeFileSync(
      join(p.dir, "sly.eval.mjs"),
      `const exit = process.exit;
export default { dataset: "./cases.jsonl", scorers: [{ name: "sly", score() { exit.call(process, 0); } }] };\n`,
    );
    const sly = await runKeel(["eval", "sly.eval.mjs"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(sly.code, sly.stderr).not.toBe(0);
    expect(sly.code).not.toBeNull();
    expect(sly.stderr).toContain("KEEL_EVAL_UNFINISHED");
    expect(sly.stderr).toMatch(/--resume exp_\w+/);
    // A scorer that never settles, with no timer left: the event loop empties mid-run.
    writeFileSync(
      join(p.dir, "drains.eval.mjs"),
      `export default { dataset: "./cases.jsonl", scorers: [{ name: "drains", timeoutMs: Infinity, score: () => new Promise(() => {}) }] };\n`,
    );
    const drained = await runKeel(["eval", "drains.eval.mjs"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(drained.code, drained.stderr).not.toBe(0);
    expect(drained.code).not.toBeNull();
    expect(drained.stderr).toContain("KEEL_EVAL_UNFINISHED");
    const store = sqliteExperimentStore({ path: join(p.home, "sessions.sqlite"), readOnly: true });
    try {
      const list = await store.list();
      expect(list.map((e) => e.status)).toEqual(["running", "running", "completed"]);
    } finally {
      await store.close();
    }
  });

  it("an eval file imports @keel/eval in a folder with no node_modules (from the CLI)", {
    timeout: 180_000,
  }, async () => {
    const p = offlineProject("uninstalled", [{ when: { lastUserIncludes: "q" }, text: "answer" }]);
    writeFileSync(join(p.dir, "cases.jsonl"), jsonl([{ id: "c1", input: "q1", expect: { contains: "answer" } }]));
    writeFileSync(
      join(p.dir, "check.eval.ts"),
      `import { defineEval, defineScorer } from "@keel/eval";
const short = defineScorer({ name: "short", score: ({ output }: { output: string }) => output.length < 100 });
export default defineEval({ dataset: "./cases.jsonl", scorers: [short] });
`,
    );
    expect(existsSync(join(p.dir, "node_modules"))).toBe(false);
    const r = await runKeel(["eval", "check.eval.ts"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/1\/1/);
  });

  it("eval sessions stay out of keel replay --last and keel run -c", { timeout: 180_000 }, async () => {
    const p = refundProject("replay-last");
    const run = await runKeel(["run", "hello there"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    const mine = sessionIdOf(run.stderr);
    writeFileSync(join(p.dir, "cases.jsonl"), jsonl([{ id: "c1", input: "an eval case" }]));
    const ev = await runKeel(["eval", "cases.jsonl"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(ev.code, ev.stderr).toBe(0);
    expect(storedSessions(p.home)).toHaveLength(2);
    const replay = await runKeel(["replay", "--last", "1", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(replay.code, replay.stderr).toBe(0);
    const reports = JSON.parse(replay.stdout) as Array<{ sessionId: string }>;
    expect(reports.map((x) => x.sessionId)).toEqual([mine]);
    // Nor does -c continue one.
    const again = await runKeel(["run", "-c", "and again"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(sessionIdOf(again.stderr)).toBe(mine);
  });
});
