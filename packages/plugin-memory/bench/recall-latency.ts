/**
 * Recall latency over 100,000 memories and write throughput, on a real SQLite file.
 * Synthetic memories: sentences drawn from a Zipf-distributed 20,000-word vocabulary (its 150
 * most frequent words play the part of function words: in every sentence, never in a query,
 * as real queries lose their stopwords); one namespace of 100,000 plus one of 10,000; 2% of
 * the writes carry a key and half of those supersede an earlier one.
 * Target: ranked recall p50 <= 2 ms, p99 <= 10 ms on SQLite. The same run on PostgreSQL
 * (BENCH_BACKENDS=sqlite,postgres; a fresh schema, dropped after) reports its figures beside.
 * Run with `pnpm bench plugin-memory`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PostgresMemoryStore, recall, SqliteMemoryStore } from "../src/index.ts";
import type { MemoryInput } from "../src/index.ts";
import { dropTestSchemas, testTarget } from "../../store-postgres/test/support/pg.ts";
import { endSharedPools } from "@keel/store-postgres";

const N = Number(process.env.BENCH_MEMORIES ?? 100_000);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 1000);
let seed = 42;
/** mulberry32: a small deterministic PRNG. */
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
};
const syll = [
  "ka",
  "lo",
  "mi",
  "ne",
  "ru",
  "sa",
  "to",
  "vi",
  "ze",
  "pa",
  "qu",
  "di",
  "fo",
  "gra",
  "ste",
  "bri",
  "mon",
  "tel",
  "and",
  "or",
];
const vocab = Array.from({ length: 20_000 }, (_, i) => {
  let w = "";
  let x = i + 7;
  do {
    w += syll[x % syll.length];
    x = Math.floor(x / syll.length);
  } while (x > 0);
  return w;
});
const fillers = ["the", "a", "and", "to", "of", "with", "is", "my", "we", "for"];
// Zipf(1.0) sampling by inverse CDF over precomputed cumulative weights.
const cum: number[] = [];
let total = 0;
for (let i = 0; i < vocab.length; i++) cum.push((total += 1 / (i + 1)));
const word = (from = 0) => {
  const r = cum[from]! + rand() * (total - cum[from]!);
  let lo = 0;
  let hi = cum.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cum[mid]! < r) lo = mid + 1;
    else hi = mid;
  }
  return vocab[lo]!;
};
const sentence = (n: number) =>
  Array.from({ length: n }, () => (rand() < 0.3 ? fillers[Math.floor(rand() * fillers.length)]! : word())).join(" ");

const day = 86_400_000;
const t0 = Date.UTC(2025, 0, 1);
const input = (i: number, namespace: string): MemoryInput => ({
  namespace,
  content: sentence(8 + Math.floor(rand() * 25)),
  occurredAt: t0 + (i % 400) * day,
  at: t0 + (i % 400) * day,
  source: { sessionId: `${namespace}/s${Math.floor(i / 20)}`, turnId: `t${i}` },
  ...(i % 50 === 0 ? { key: `k${Math.floor(i / 100)}` } : {}),
});

async function run(backend: string, store: SqliteMemoryStore | PostgresMemoryStore): Promise<void> {
  seed = 42;
  // Writes: one transaction each (as the tools and extraction do), then batches of 1,000.
  const single = 2000;
  let w0 = performance.now();
  for (let i = 0; i < single; i++) await store.write(input(i, "big"));
  const singleMs = performance.now() - w0;
  const batch = 1000;
  w0 = performance.now();
  for (let i = single; i < N; i += batch)
    await store.writeMany(Array.from({ length: Math.min(batch, N - i) }, (_, j) => input(i + j, "big")));
  const batchMs = performance.now() - w0;
  for (let i = 0; i < N / 10; i += batch)
    await store.writeMany(Array.from({ length: batch }, (_, j) => input(i + j, "small")));

  seed = 7;
  const queries = Array.from(
    { length: QUERIES },
    () => `what did we say about ${word(150)} and ${word(150)} ${rand() < 0.5 ? `with ${word(150)}` : ""}?`,
  );
  const pct = (xs: number[], p: number) =>
    xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
  async function measure(namespace: string, mode: "ranked" | "bm25"): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < (mode === "bm25" ? 10 : 100); i++) await recall(store, { namespace, query: queries[i]!, mode });
    // The baseline (stopwords kept) is slow: a tenth of the queries is enough for its percentiles.
    for (const q of mode === "bm25" ? queries.slice(0, Math.ceil(queries.length / 10)) : queries) {
      const s = performance.now();
      await recall(store, { namespace, query: q, mode });
      out.push(performance.now() - s);
    }
    return out;
  }
  const rows: Array<[string, number[]]> = [];
  for (const ns of ["big", "small"])
    for (const mode of ["bm25", "ranked"] as const)
      rows.push([
        `${mode} recall, namespace of ${ns === "big" ? N : N / 10} (store ${N + N / 10})`,
        await measure(ns, mode),
      ]);

  console.log(`${backend}: memories in store: ${await store.count()}, queries: ${QUERIES}`);
  console.log("what                                                   p50 ms   p99 ms   mean ms");
  for (const [name, xs] of rows)
    console.log(
      `${name.padEnd(54)} ${pct(xs, 50).toFixed(3).padStart(7)}  ${pct(xs, 99).toFixed(3).padStart(7)}  ${(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3).padStart(7)}`,
    );
  console.log(`ranked / bm25 p50 (namespace of ${N}): ${(pct(rows[1]![1], 50) / pct(rows[0]![1], 50)).toFixed(2)}x`);
  console.log(`writes, one transaction each: ${Math.round(single / (singleMs / 1000))} memories/s`);
  console.log(`writes, batches of ${batch}: ${Math.round((N - single) / (batchMs / 1000))} memories/s`);
  await store.close();
}

for (const backend of (process.env.BENCH_BACKENDS ?? "sqlite,postgres").split(",")) {
  if (backend === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "keel-memory-bench-"));
    await run(backend, new SqliteMemoryStore({ path: join(dir, "memory.sqlite") }));
    rmSync(dir, { recursive: true, force: true });
  } else {
    await run(backend, new PostgresMemoryStore(testTarget()));
    await dropTestSchemas();
  }
}
await endSharedPools();
