/**
 * MetaTool routing (199 tools used as skills, 20,614 labelled queries): stream 5,000 queries
 * in a seeded random order with bandit feedback (reward 1 when the pick is right; a second run
 * flips 10% of rewards) and report accuracy over the last 1,000 rounds for the reference
 * context-free Thompson sampler, BM25 relevance alone, and the contextual router.
 * The routers see only the query text and the reward of their own pick.
 * Run with `pnpm bench plugin-skills` (env: BENCH_ROUNDS, BENCH_SEED).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { dataDir } from "../../../test/support/data.ts";
import { Bm25Index, ContextualRouter, createRng, terms, ThompsonSampler } from "../src/index.ts";
import type { RoutePick, RouterTuning } from "../src/index.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5000);
const WINDOW = Math.min(1000, ROUNDS);
const SEED = Number(process.env.BENCH_SEED ?? 42);
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
const rows = parseCsv(readFileSync(join(dir, "all_clean_data.csv"), "utf8")).slice(1).map(([query, tool]) => ({ query: query!, tool: tool! }));
const tools = [...new Set(rows.map((r) => r.tool))].sort();
const skills = tools.map((name) => ({ name, description: byLower.get(name.toLowerCase()) ?? "" }));

const order = createRng(`order:${SEED}`);
const stream = [...rows];
for (let i = stream.length - 1; i > 0; i--) {
  const j = Math.floor(order.next() * (i + 1));
  [stream[i], stream[j]] = [stream[j]!, stream[i]!];
}
const queries = stream.slice(0, ROUNDS);

interface Policy {
  pick(query: string): string;
  learn(query: string, pick: string, reward: number): void;
}

function run(make: () => Policy, flip: number): number {
  const policy = make();
  const noise = createRng(`noise:${SEED}`);
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
const policies: Record<string, () => Policy> = {
  "reference Thompson (context-free)": () => {
    const ts = new ThompsonSampler({ seed: SEED, arms: tools });
    return { pick: () => ts.pick()!, learn: (_q, p, r) => ts.update(p, r) };
  },
  "BM25 relevance alone": () => {
    const index = new Bm25Index(skills.map((s) => ({ id: s.name, text: `${s.name} ${s.description}` })));
    return {
      pick(query) {
        const scores = index.scores(terms(query));
        let best = 0;
        for (let i = 1; i < scores.length; i++) if (scores[i]! > scores[best]!) best = i;
        return index.ids[best]!;
      },
      learn() {},
    };
  },
  "contextual router (this package)": () => {
    const router = new ContextualRouter({ seed: SEED, skills, tuning });
    let last: RoutePick | undefined;
    return {
      pick: (q) => (last = router.pick(q)!).skill,
      learn: (_q, _p, r) => router.update(last!, r),
    };
  },
};

const started = performance.now();
const table = Object.entries(policies).map(([name, make]) => ({ policy: name, clean: run(make, 0), flipped: run(make, FLIP) }));
const ours = table[2]!;
console.log(`MetaTool routing: ${skills.length} skills, ${ROUNDS} of ${rows.length} queries (seed ${SEED}), accuracy over the last ${WINDOW} rounds`);
console.table(table.map((r) => ({ policy: r.policy, "accuracy (clean rewards)": r.clean.toFixed(3), "accuracy (10% flipped)": r.flipped.toFixed(3) })));
console.log(
  `router vs BM25: ${(ours.clean / table[1]!.clean).toFixed(2)}x clean, ${(ours.flipped / table[1]!.flipped).toFixed(2)}x flipped; ` +
    `router vs reference: ${(ours.clean / table[0]!.clean).toFixed(1)}x clean; wall ${((performance.now() - started) / 1000).toFixed(1)} s`,
);
const ok = ours.clean >= 0.6 && ours.clean > table[0]!.clean && ours.clean > table[1]!.clean && ours.flipped > table[0]!.flipped && ours.flipped > table[1]!.flipped;
console.log(ok ? "target met: router >= 0.60 and ahead of both baselines" : "TARGET MISSED: router < 0.60 or not ahead of both baselines");
if (!ok) process.exitCode = 1;
