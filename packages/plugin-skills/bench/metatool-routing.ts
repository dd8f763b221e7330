/**
 * MetaTool routing (199 tools used as skills, 20,614 labelled queries): stream 5,000 queries
 * in a seeded random order with bandit feedback (reward 1 when the pick is right; a second run
 * flips 10% of rewards) and report accuracy over the last 1,000 rounds for the reference
 * context-free Thompson sampler, BM25 relevance alone, and the contextual router.
 * The routers see only the query text and the reward of their own pick.
 * Run with `pnpm bench plugin-skills` (env: BENCH_ROUNDS, BENCH_SEED, BENCH_TUNING; BENCH_SEEDS=1,7,42
 * runs several stream orders and prints a per-seed table with mean and min).
 * BENCH_HALF=tune|heldout|all (default heldout): the queries are split in two halves by a hash
 * of their text; tune settings on `tune` and report `heldout`, so the figures are not fitted.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { dataDir } from "../../../test/support/data.ts";
import { Bm25 } from "@keel/text/retrieval";
import { ContextualRouter, createRng, terms, ThompsonSampler, tokenize } from "../src/index.ts";
import type { RoutePick, RouterTuning } from "../src/index.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5000);
const WINDOW = Math.min(1000, ROUNDS);
const SEEDS = (process.env.BENCH_SEEDS ?? process.env.BENCH_SEED ?? "42").split(",").map((s) => Number(s.trim()));
const FLIP = 0.1;

/** Rows of a two-column CSV with quoted fields. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") row.push(field), (field = "");
    else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      row.push(field), rows.push(row), (row = []), (field = "");
    } else field += ch;
  }
  if (field || row.length) row.push(field), rows.push(row);
  return rows.filter((r) => r.length >= 2 && r.some((f) => f.length));
}

const dir = join(dataDir(), "skills-routing", "metatool");
const descriptions = JSON.parse(readFileSync(join(dir, "plugin_des.json"), "utf8")) as Record<string, string>;
const byLower = new Map(Object.entries(descriptions).map(([k, v]) => [k.toLowerCase(), v]));
const rows = parseCsv(readFileSync(join(dir, "all_clean_data.csv"), "utf8"))
  .slice(1)
  .map(([query, tool]) => ({ query: query!, tool: tool! }));
const tools = [...new Set(rows.map((r) => r.tool))].sort();
const HALF = process.env.BENCH_HALF ?? "heldout";
if (!["tune", "heldout", "all"].includes(HALF)) throw new Error(`BENCH_HALF must be tune, heldout or all, got ${HALF}`);
/** FNV-1a of the query text: even → tune half, odd → held-out half (stable across runs and seeds). */
const halfOf = (text: string) => {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0) % 2 === 0 ? "tune" : "heldout";
};
const pool = HALF === "all" ? rows : rows.filter((r) => halfOf(r.query) === HALF);
const skills = tools.map((name) => ({ name, description: byLower.get(name.toLowerCase()) ?? "" }));

/** The first ROUNDS queries of a seeded shuffle of all rows. */
function streamOf(seed: number): typeof rows {
  const order = createRng(`order:${seed}`);
  const stream = [...pool];
  for (let i = stream.length - 1; i > 0; i--) {
    const j = Math.floor(order.next() * (i + 1));
    [stream[i], stream[j]] = [stream[j]!, stream[i]!];
  }
  return stream.slice(0, ROUNDS);
}

interface Policy {
  pick(query: string): string;
  learn(query: string, pick: string, reward: number): void;
}

function run(make: (seed: number) => Policy, seed: number, queries: typeof rows, flip: number): number {
  const policy = make(seed);
  const noise = createRng(`noise:${seed}`);
  let right = 0;
  queries.forEach(({ query, tool }, i) => {
    const pick = policy.pick(query);
    const correct = pick === tool;
    if (i >= ROUNDS - WINDOW && correct) right++;
    const reward = noise.next() < flip ? (correct ? 0 : 1) : correct ? 1 : 0;
    policy.learn(query, pick, reward);
  });
  return right / WINDOW;
}

const tuning: RouterTuning = JSON.parse(process.env.BENCH_TUNING ?? "{}");
const policies: Record<string, (seed: number) => Policy> = {
  "reference Thompson (context-free)": (seed) => {
    const ts = new ThompsonSampler({ seed, arms: tools });
    return { pick: () => ts.pick()!, learn: (_q, p, r) => ts.update(p, r) };
  },
  "BM25 relevance alone": () => {
    const index = new Bm25(skills.map((s) => tokenize(`${s.name} ${s.description}`)));
    return {
      pick(query) {
        const scores = index.score(terms(query));
        let best = 0;
        for (let i = 1; i < scores.length; i++) if (scores[i]! > scores[best]!) best = i;
        return skills[best]!.name;
      },
      learn() {},
    };
  },
  "contextual router (this package)": (seed) => {
    const router = new ContextualRouter({ seed, skills, tuning });
    let last: RoutePick | undefined;
    return {
      pick: (q) => (last = router.pick(q)!).skill,
      learn: (_q, _p, r) => router.update(last!, r),
    };
  },
};

const started = performance.now();
const names = Object.keys(policies);
const results = SEEDS.map((seed) => {
  const queries = streamOf(seed);
  return {
    seed,
    rows: Object.values(policies).map((make) => ({
      clean: run(make, seed, queries, 0),
      flipped: run(make, seed, queries, FLIP),
    })),
  };
});
const wall = ((performance.now() - started) / 1000).toFixed(1);
const meets = (r: (typeof results)[number]["rows"]) =>
  r[2]!.clean >= 0.6 &&
  r[2]!.clean > r[0]!.clean &&
  r[2]!.clean > r[1]!.clean &&
  r[2]!.flipped > r[0]!.flipped &&
  r[2]!.flipped > r[1]!.flipped;
console.log(
  `MetaTool routing: ${skills.length} skills, ${ROUNDS} of ${pool.length} queries (${HALF} half of ${rows.length}), accuracy over the last ${WINDOW} rounds`,
);
if (SEEDS.length === 1) {
  const table = results[0]!.rows;
  const ours = table[2]!;
  console.log(`stream order seed ${SEEDS[0]}`);
  console.table(
    table.map((r, i) => ({
      policy: names[i],
      "accuracy (clean rewards)": r.clean.toFixed(3),
      "accuracy (10% flipped)": r.flipped.toFixed(3),
    })),
  );
  console.log(
    `router vs BM25: ${(ours.clean / table[1]!.clean).toFixed(2)}x clean, ${(ours.flipped / table[1]!.flipped).toFixed(2)}x flipped; ` +
      `router vs reference: ${(ours.clean / table[0]!.clean).toFixed(1)}x clean; wall ${wall} s`,
  );
} else {
  const short = ["reference", "BM25", "router"];
  const line = (label: string, value: (p: number, k: "clean" | "flipped") => number) =>
    Object.fromEntries([
      ["seed", label],
      ...short.flatMap((n, p) => (["clean", "flipped"] as const).map((k) => [`${n} ${k}`, value(p, k).toFixed(3)])),
    ]);
  const perSeed = results.map(({ seed, rows: r }) => ({
    ...line(String(seed), (p, k) => r[p]![k]),
    "target met": meets(r) ? "yes" : "no",
  }));
  const mean = line("mean", (p, k) => results.reduce((s, r) => s + r.rows[p]![k], 0) / results.length);
  const min = line("min", (p, k) => Math.min(...results.map((r) => r.rows[p]![k])));
  console.table([...perSeed, mean, min]);
  console.log(`wall ${wall} s for ${SEEDS.length} seeds`);
}
const ok = results.every((r) => meets(r.rows));
console.log(
  ok
    ? "target met: router >= 0.60 and ahead of both baselines"
    : "TARGET MISSED: router < 0.60 or not ahead of both baselines (on at least one seed)",
);
if (!ok) process.exitCode = 1;
