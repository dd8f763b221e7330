/**
 * What the eval harness costs. (1) 100 offline cases through `keel eval` as a real process
 * (the scripted model, SQLite sessions and experiments in a throwaway home), wall time against
 * the bound of 30 s on 2 cores. (2) Per case, in process: runEval (a session per case,
 * metrics from its events, three scorers, the result stored) against a plain
 * `agent.session().run()` of the same input (session opened, run, closed), both on SQLite,
 * one case at a time, interleaved rounds; the ratio of medians is the harness's overhead.
 * Run with `pnpm bench eval`.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createAgent, defineTool } from "@keel/agent";
import { scriptedProvider } from "@keel/testkit";
import { openExperimentStore, runEval } from "../src/index.ts";
import type { EvalCase } from "../src/index.ts";

const CASES = Number(process.env.BENCH_CASES ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 50);
const root = mkdtempSync(join(tmpdir(), "keel-bench-eval-"));
const KEEL_BIN = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "cli", "bin", "keel.js");

/** Each case: a tool call, then the answer (two rounds), only for the request naming the case. */
function steps(n: number, offset = 0) {
  return Array.from({ length: n }, (_, k) => {
    const i = k + offset;
    return [
      { when: { lastUserIncludes: `question ${i}?` }, toolCalls: [{ name: "lookup", args: { word: `w${i}` } }] },
      { when: { lastUserIncludes: `question ${i}?` }, text: `The answer to ${i} is ${i * 7}.` },
    ];
  }).flat();
}
const cases = (n: number, offset = 0): EvalCase[] =>
  Array.from({ length: n }, (_, k) => ({
    id: `c${k + offset}`,
    input: `question ${k + offset}?`,
    expect: { contains: `is ${(k + offset) * 7}`, toolCalled: "lookup", limits: { maxRounds: 3 } },
  }));

/** The CLI project: a config with the `lookup` tool and the scripted model, and the dataset. */
function cliProject(): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = join(root, "cli");
  const home = join(dir, "home");
  spawnSync("mkdir", ["-p", dir]);
  writeFileSync(
    join(dir, "agent.config.mjs"),
    `export default {
  name: "bench",
  tools: [{ name: "lookup", description: "Looks a word up.", parameters: { type: "object", properties: { word: { type: "string" } } }, execute: (a) => "found " + a.word }],
  offline: { script: "./script.json" },
};\n`,
  );
  writeFileSync(join(dir, "script.json"), JSON.stringify({ steps: steps(CASES) }));
  writeFileSync(
    join(dir, "cases.jsonl"),
    `${cases(CASES)
      .map((c) => JSON.stringify(c))
      .join("\n")}\n`,
  );
  writeFileSync(join(dir, "one.jsonl"), `${JSON.stringify(cases(1)[0])}\n`);
  const env: NodeJS.ProcessEnv = { ...process.env, KEEL_HOME: home };
  for (const k of ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"]) delete env[k];
  return { dir, env };
}

function keel(args: string[], p: { dir: string; env: NodeJS.ProcessEnv }): { ms: number; code: number | null } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [KEEL_BIN, ...args], { cwd: p.dir, env: p.env, encoding: "utf8" });
  const ms = performance.now() - t0;
  if (r.status !== 0) process.stderr.write(r.stderr);
  return { ms, code: r.status };
}

const lookup = defineTool({
  name: "lookup",
  description: "Looks a word up.",
  execute: (a: unknown) => `found ${(a as { word: string }).word}`,
});

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function agentFor(home: string, n: number, offset: number) {
  return createAgent({
    name: "bench",
    provider: scriptedProvider(steps(n, offset)),
    store: "sqlite",
    home,
    tools: [lookup],
    sideModel: false,
  });
}

/** Per-case milliseconds of `n` plain runs (a new session each, run, closed). */
async function plain(home: string, n: number, offset: number): Promise<number> {
  const agent = await agentFor(home, n, offset);
  const t0 = performance.now();
  for (const c of cases(n, offset)) {
    const s = await agent.session();
    await s.run(c.input as string);
    await s.close();
  }
  const ms = (performance.now() - t0) / n;
  await agent.close();
  return ms;
}

/** Per-case milliseconds of `n` cases through runEval, one at a time. */
async function harness(home: string, n: number, offset: number): Promise<number> {
  const agent = await agentFor(home, n, offset);
  const store = await openExperimentStore(agent.storage);
  const list = cases(n, offset);
  const t0 = performance.now();
  const run = await runEval({
    agent,
    cases: list,
    store,
    concurrency: 1,
    dataset: { file: "bench", hash: `h${offset}` },
  });
  const ms = (performance.now() - t0) / n;
  if (run.summary.passed !== n) throw new Error(`only ${run.summary.passed}/${n} cases passed`);
  await store.close();
  await agent.close();
  return ms;
}

try {
  console.log(`${cpus().length} cores, node ${process.version}`);
  const project = cliProject();
  const cli = keel(["eval", "cases.jsonl", "--concurrency", "4"], project);
  console.log(
    `keel eval, ${CASES} offline cases (2 rounds, a tool call each), concurrency 4: ${(cli.ms / 1000).toFixed(1)} s wall, exit ${cli.code} (bound: 30 s) ${cli.ms < 30_000 && cli.code === 0 ? "OK" : "OVER"}`,
  );
  // One input as a user runs it: `keel run` against `keel eval` of a one-case dataset, both whole processes.
  const runs: number[] = [];
  const evals: number[] = [];
  for (let i = 0; i < 5; i++) {
    runs.push(keel(["run", "question 0?"], project).ms);
    evals.push(keel(["eval", "one.jsonl"], project).ms);
  }
  const [mr, me] = [median(runs), median(evals)];
  console.log(
    `one input as a process (median of 5): keel run ${mr.toFixed(0)} ms, keel eval of it ${me.toFixed(0)} ms: ${((me / mr - 1) * 100).toFixed(1)}% (goal: within 10%)`,
  );
  const home = join(root, "inproc");
  // Warm-up: the first agent pays for module loading and the database's creation.
  await plain(home, 10, 1_000_000);
  await harness(home, 10, 2_000_000);
  const p: number[] = [];
  const h: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const base = (r + 1) * 10_000;
    // Interleaved, and the order flips each round, so drift in the machine hits both alike.
    if (r % 2 === 0) {
      p.push(await plain(home, PER_ROUND, base));
      h.push(await harness(home, PER_ROUND, base + 5_000));
    } else {
      h.push(await harness(home, PER_ROUND, base + 5_000));
      p.push(await plain(home, PER_ROUND, base));
    }
  }
  const mp = median(p);
  const mh = median(h);
  console.log(`per case, in process on SQLite, ${ROUNDS} rounds of ${PER_ROUND}, one at a time (median of rounds):`);
  console.log(`  plain session().run() + close: ${mp.toFixed(2)} ms   [${p.map((x) => x.toFixed(2)).join(", ")}]`);
  console.log(`  runEval (scored, stored):      ${mh.toFixed(2)} ms   [${h.map((x) => x.toFixed(2)).join(", ")}]`);
  console.log(
    `  in-process ratio: ${(mh / mp).toFixed(3)} (${((mh / mp - 1) * 100).toFixed(1)}% over a scripted turn that costs the model nothing)`,
  );
  console.log(
    `  per-case overhead ${(mh - mp).toFixed(2)} ms = ${(((mh - mp) / mr) * 100).toFixed(2)}% of a plain keel run of the same input (${mr.toFixed(0)} ms; goal: within 10%)`,
  );
} finally {
  rmSync(root, { recursive: true, force: true });
}
