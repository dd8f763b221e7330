/**
 * Recall quality on LoCoMo (evaluation only, CC BY-NC; read in place): every turn of each
 * conversation is a memory (namespace = conversation) dated with its session; for every
 * question of categories 1–4 recall the top 10 and count a hit when any evidence turn is
 * among them. Ranked recall (no model call) beside plain BM25 over the same store.
 * Tuning used conversations 0–4 only; 5–9 are reported separately as held out.
 * Runs on SQLite and on PostgreSQL (BENCH_BACKENDS=sqlite,postgres; the server at
 * KEEL_TEST_PG_URL or 127.0.0.1:5432/test, one schema per conversation, dropped after).
 */
import { PostgresMemoryStore, SqliteMemoryStore, recall } from "../src/index.ts";
import type { MemoryStore, RelevanceTuning } from "../src/index.ts";
import { dropTestSchemas, testTarget } from "../../store-postgres/test/support/pg.ts";
import { endSharedPools } from "@keel/store-postgres";
import { loadLocomo } from "./locomo-data.ts";

const tuning = process.env.BENCH_TUNING ? (JSON.parse(process.env.BENCH_TUNING) as Partial<RelevanceTuning>) : {};
const only = process.env.BENCH_SPLIT; // "dev" = conversations 0-4 only
const convs = loadLocomo().filter((c) => only !== "dev" || c.index < 5);

type Tally = { n: number; at5: number; at10: number };
const tally = () => ({ n: 0, at5: 0, at10: 0 });
const splits = { "dev 0-4": (i: number) => i < 5, "held-out 5-9": (i: number) => i >= 5, all: () => true } as const;
const modes = ["bm25", "ranked"] as const;
const backends = (process.env.BENCH_BACKENDS ?? "sqlite,postgres").split(",");
const open: Record<string, () => MemoryStore & { writeMany(i: readonly unknown[]): unknown }> = {
  sqlite: () => new SqliteMemoryStore({ path: ":memory:" }),
  postgres: () => new PostgresMemoryStore(testTarget()),
};
const at10: Record<string, number> = {};
for (const backend of backends) {
  const res: Record<string, Record<string, Record<string, Tally>>> = {};
  for (const mode of modes) {
    res[mode] = {};
    for (const split of Object.keys(splits))
      res[mode]![split] = { 1: tally(), 2: tally(), 3: tally(), 4: tally(), all: tally() };
  }
  for (const c of convs) {
    // One store per conversation: each is one user's memory (index statistics are per store).
    const store = open[backend]!();
    const diaOf = new Map<number, string>();
    ((await store.writeMany(c.turns.map((t) => t.input))) as Array<{ memory: { id: number } }>).forEach((r, i) => {
      diaOf.set(r.memory.id, c.turns[i]!.diaId);
    });
    for (const q of c.questions) {
      for (const mode of modes) {
        const got = await recall(store, {
          namespace: c.sampleId,
          query: q.question,
          now: c.lastDate + 86_400_000,
          limit: 10,
          maxChars: Infinity,
          itemChars: 100_000,
          mode,
          tuning,
        });
        const ids = got.map((r) => diaOf.get(r.memory.id));
        const hit = (k: number) => ids.slice(0, k).some((d) => d !== undefined && q.evidence.includes(d));
        for (const [split, inSplit] of Object.entries(splits)) {
          if (!inSplit(c.index)) continue;
          for (const key of [String(q.category), "all"]) {
            const t = res[mode]![split]![key]!;
            t.n++;
            if (hit(5)) t.at5++;
            if (hit(10)) t.at10++;
          }
        }
      }
    }
    await store.close();
  }
  const f = (x: number) => x.toFixed(3);
  console.log(`LoCoMo recall on ${backend} (categories 1-4; 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)`);
  console.log("split         cat     n   bm25@5  bm25@10  ranked@5  ranked@10  ratio@10");
  for (const split of Object.keys(splits)) {
    if (only === "dev" && split !== "dev 0-4") continue;
    for (const cat of ["1", "2", "3", "4", "all"]) {
      const b = res.bm25![split]![cat]!;
      const r = res.ranked![split]![cat]!;
      if (!b.n) continue;
      console.log(
        `${split.padEnd(13)} ${cat.padEnd(4)} ${String(b.n).padStart(5)}   ${f(b.at5 / b.n)}   ${f(b.at10 / b.n)}    ${f(r.at5 / r.n)}     ${f(r.at10 / r.n)}     ${(r.at10 / b.n / (b.at10 / b.n)).toFixed(2)}x`,
      );
    }
  }
  at10[backend] = res.ranked!.all!.all!.at10 / res.ranked!.all!.all!.n;
}
if (at10.sqlite !== undefined && at10.postgres !== undefined)
  console.log(
    `ranked recall@10, all: SQLite ${at10.sqlite.toFixed(3)}, PostgreSQL ${at10.postgres.toFixed(3)} (difference ${(at10.postgres - at10.sqlite).toFixed(3)})`,
  );
await dropTestSchemas();
await endSharedPools();
