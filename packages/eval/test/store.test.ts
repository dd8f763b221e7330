/**
 * One contract for every ExperimentStore: in memory, in a real SQLite file, in a real
 * PostgreSQL schema. Records read back exactly (JSON fields included), cases upsert and come
 * back in dataset order, experiments list most recent first, and what the runner wrote before
 * a crash (a `running` experiment) is still there after a reopen.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isKeelError } from "@keel/kernel";
import { endSharedPools, sharedPool } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { dropTestSchemas, PG_URL, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";
import type { ExperimentStore } from "../src/index.ts";
import {
  memoryExperimentStore,
  openExperimentStore,
  postgresExperimentStore,
  sqliteExperimentStore,
} from "../src/index.ts";
import { caseResult, experiment, SUMMARY } from "./store-fixtures.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-experiments-"));
let n = 0;

/** A fresh store, and (for the database stores) a way to open the same place again. */
interface Backend {
  name: string;
  fresh(): { store: ExperimentStore; reopen?: () => ExperimentStore };
}

const backends: Backend[] = [
  { name: "memory", fresh: () => ({ store: memoryExperimentStore() }) },
  {
    name: "sqlite",
    fresh: () => {
      const path = join(dir, `s${++n}`, "sessions.sqlite");
      return { store: sqliteExperimentStore({ path }), reopen: () => sqliteExperimentStore({ path }) };
    },
  },
  {
    name: "postgres",
    fresh: () => {
      const target = testTarget();
      return { store: postgresExperimentStore(target), reopen: () => postgresExperimentStore(target) };
    },
  },
];

beforeAll(() => requirePostgres());
afterAll(async () => {
  await dropTestSchemas();
  await endSharedPools();
  rmSync(dir, { recursive: true, force: true });
});

/** Tables in `schema` (none: a viewer created nothing). */
async function tableCount(schema: string): Promise<number> {
  const r = await sharedPool(PG_URL).query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1", [schema]);
  return (r.rows[0] as { n: number }).n;
}

/** JSON that a lossy store would change: key order, escapes, unicode beyond the BMP, deep nesting, big and tiny numbers. */
const AWKWARD = {
  zeta: 1,
  alpha: [1.5, -2e-7, 1e300, 9007199254740991, null, true, ""],
  'key with "quotes" and \\': "tab\there\nnewline \u0000 nul, lone \ud800 surrogate",
  emoji: "👩🏽‍💻 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ☃",
  nested: { b: { a: [{ y: 1, x: 2 }] } },
  "": "empty key",
};

/** The error `p` rejects with (awaited at once: a rejection left waiting is reported as unhandled). */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.unreachable("expected a rejection"),
    (err: unknown) => err,
  );
}

describe.each(backends)("ExperimentStore contract: $name", (backend) => {
  const open = () => backend.fresh();

  it("an experiment reads back exactly, optional fields absent when not given", async () => {
    const { store } = open();
    const full = experiment({
      config: "agent.config.ts",
      baseline: "exp-0",
      metadata: AWKWARD,
    });
    await store.create(full);
    await store.create(experiment({ id: "exp-bare", startedAt: 1 }));
    expect(await store.get("exp-1")).toStrictEqual(full);
    expect(JSON.stringify((await store.get("exp-1"))!.metadata)).toBe(JSON.stringify(AWKWARD));
    const bare = await store.get("exp-bare");
    expect(bare).toStrictEqual(experiment({ id: "exp-bare", startedAt: 1 }));
    for (const key of ["config", "baseline", "endedAt", "summary", "metadata"]) expect(bare).not.toHaveProperty(key);
    await store.close();
  });

  it("reads of an unknown id give undefined and []", async () => {
    const { store } = open();
    expect(await store.get("nope")).toBeUndefined();
    expect(await store.cases("nope")).toEqual([]);
    expect(await store.list()).toEqual([]);
    await store.close();
  });

  it("finish sets the status, summary and end; an experiment never finished stays running", async () => {
    const { store } = open();
    await store.create(experiment());
    await store.create(experiment({ id: "exp-killed", startedAt: 2 }));
    await store.finish("exp-1", "completed", SUMMARY, 1_700_000_009_999);
    const done = await store.get("exp-1");
    expect(done).toStrictEqual({ ...experiment(), status: "completed", summary: SUMMARY, endedAt: 1_700_000_009_999 });
    expect(JSON.stringify(done!.summary)).toBe(JSON.stringify(SUMMARY));
    const killed = await store.get("exp-killed");
    expect(killed?.status).toBe("running");
    expect(killed).not.toHaveProperty("endedAt");
    await store.finish("exp-killed", "failed", { ...SUMMARY, cases: 0, passRate: 0, scorers: {} }, 5);
    expect((await store.get("exp-killed"))?.status).toBe("failed");
    await store.close();
  });

  it("putCase upserts on (experiment, case id); cases come back in dataset order, exactly", async () => {
    const { store } = open();
    await store.create(experiment());
    await store.create(experiment({ id: "exp-2" }));
    const third = caseResult({
      caseId: "c3",
      index: 2,
      input: ["first turn", "second turn 👋"],
      sessionId: "s-3",
      status: "failed",
      output: "multi\nline <b>not html</b>",
      scores: [
        { scorer: "contains", pass: false, score: 0, reason: 'expected "refund"' },
        { scorer: "judge", pass: false, score: 0, error: "the judge threw: timeout" },
      ],
      metrics: { rounds: 3, toolCalls: 2, inputTokens: 1234, outputTokens: 56, costUsd: 0.004321, durationMs: 789 },
    });
    const errored = caseResult({ caseId: "c2", index: 1, status: "error", output: "", scores: [], error: "KEEL_X" });
    await store.putCase(third);
    await store.putCase(caseResult({ caseId: "c1", index: 0, status: "failed" }));
    await store.putCase(errored);
    await store.putCase(caseResult({ experimentId: "exp-2", caseId: "c1" }));
    // The case ran again (a resumed run): the newer result replaces the older.
    const rerun = caseResult({ caseId: "c1", index: 0, status: "passed", output: "second try", sessionId: "s-1b" });
    await store.putCase(rerun);
    const cases = await store.cases("exp-1");
    expect(cases).toStrictEqual([rerun, errored, third]);
    expect(cases[1]).not.toHaveProperty("sessionId");
    expect(cases[0]).not.toHaveProperty("error");
    expect(await store.cases("exp-2")).toHaveLength(1);
    await store.close();
  });

  it("JSON fields (input, scores, metrics, summary, metadata) round-trip byte for byte", async () => {
    const { store } = open();
    await store.create(experiment({ metadata: AWKWARD }));
    const tricky = caseResult({
      input: ["\u0000", "\ud83d", AWKWARD.emoji, AWKWARD['key with "quotes" and \\']],
      scores: [{ scorer: "👩🏽‍💻", pass: true, score: 0.1 + 0.2, reason: AWKWARD.emoji }],
      metrics: { rounds: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 1e-12, durationMs: 0.5 },
    });
    await store.putCase(tricky);
    const [back] = await store.cases("exp-1");
    for (const key of ["input", "scores", "metrics"] as const)
      expect(JSON.stringify(back![key])).toBe(JSON.stringify(tricky[key]));
    const awkwardSummary = {
      ...SUMMARY,
      scorers: { "z\u0000": { passed: 0, total: 0, mean: 0 }, a: SUMMARY.scorers.contains! },
    };
    await store.finish("exp-1", "completed", awkwardSummary, 9);
    expect(JSON.stringify((await store.get("exp-1"))!.summary)).toBe(JSON.stringify(awkwardSummary));
    await store.close();
  });

  it("lists most recent first (the later created on a tie), by agent, at most `limit`", async () => {
    const { store } = open();
    await store.create(experiment({ id: "old", startedAt: 100 }));
    await store.create(experiment({ id: "new", startedAt: 300 }));
    await store.create(experiment({ id: "other-agent", agent: "sales", startedAt: 200 }));
    await store.create(experiment({ id: "tie-first", startedAt: 100 }));
    const ids = async (o?: { agent?: string; limit?: number }) => (await store.list(o)).map((e) => e.id);
    expect(await ids()).toEqual(["new", "other-agent", "tie-first", "old"]);
    expect(await ids({ agent: "support" })).toEqual(["new", "tie-first", "old"]);
    expect(await ids({ agent: "sales" })).toEqual(["other-agent"]);
    expect(await ids({ agent: "nobody" })).toEqual([]);
    expect(await ids({ limit: 2 })).toEqual(["new", "other-agent"]);
    expect(await ids({ agent: "support", limit: 1 })).toEqual(["new"]);
    expect(await ids({ limit: 0 })).toEqual([]);
    expect(await ids({ limit: -3 })).toEqual([]);
    expect(await ids({ limit: 1.9 })).toEqual(["new"]);
    expect(await ids({ limit: Number.POSITIVE_INFINITY })).toHaveLength(4);
    expect((await store.list())[0]).toStrictEqual(experiment({ id: "new", startedAt: 300 }));
    await store.close();
  });

  it("refuses a second experiment with the same id, and a finish or case of an unknown experiment", async () => {
    const { store } = open();
    await store.create(experiment());
    for (const call of [
      () => store.create(experiment({ name: "again" })),
      () => store.finish("nope", "completed", SUMMARY, 1),
      () => store.putCase(caseResult({ experimentId: "nope" })),
    ]) {
      const err = await rejection(call());
      expect(isKeelError(err) && err.code).toBe("KEEL_STORE_FAILED");
    }
    expect((await store.get("exp-1"))?.name).toBe("nightly");
    expect(await store.cases("nope")).toEqual([]);
    await store.close();
  });

  it("after close every call throws KEEL_STORE_FAILED; close twice is fine", async () => {
    const { store } = open();
    await store.create(experiment());
    await store.close();
    await store.close();
    const calls = [
      () => store.get("exp-1"),
      () => store.list(),
      () => store.cases("exp-1"),
      () => store.create(experiment({ id: "x" })),
    ];
    for (const call of calls) {
      const err = await rejection(call());
      expect(isKeelError(err) && err.code).toBe("KEEL_STORE_FAILED");
    }
  });

  it.skipIf(backend.name === "memory")(
    "a reopen after close keeps everything, and a run that never finished is still running",
    async () => {
      const { store, reopen } = open();
      await store.create(experiment({ metadata: AWKWARD }));
      await store.create(experiment({ id: "done", startedAt: 5 }));
      await store.putCase(caseResult());
      await store.putCase(caseResult({ caseId: "c2", index: 1, input: ["a", "b"] }));
      await store.finish("done", "completed", SUMMARY, 6);
      const before = { list: await store.list(), cases: await store.cases("exp-1") };
      await store.close();
      const again = reopen!();
      expect(await again.list()).toStrictEqual(before.list);
      expect(await again.cases("exp-1")).toStrictEqual(before.cases);
      expect((await again.get("exp-1"))?.status).toBe("running");
      // The resumed run goes on where it stopped.
      await again.putCase(caseResult({ caseId: "c3", index: 2 }));
      await again.finish("exp-1", "completed", SUMMARY, 7);
      expect((await again.cases("exp-1")).map((c) => c.caseId)).toEqual(["c1", "c2", "c3"]);
      await again.close();
    },
  );
});

describe("openExperimentStore", () => {
  it("SQLite: the agent's session database under its home; PostgreSQL: its database and schema", async () => {
    const home = join(dir, "home");
    const sqlite = await openExperimentStore({ home, database: { kind: "sqlite" } });
    await sqlite.create(experiment());
    await sqlite.close();
    const direct = sqliteExperimentStore({ path: join(home, "sessions.sqlite") });
    expect((await direct.get("exp-1"))?.name).toBe("nightly");
    await direct.close();
    const target = testTarget();
    const pg = await openExperimentStore({ home, database: { kind: "postgres", ...target } });
    await pg.create(experiment({ id: "pg-1" }));
    await pg.close();
    const pgDirect = postgresExperimentStore(target);
    expect((await pgDirect.get("pg-1"))?.name).toBe("nightly");
    await pgDirect.close();
  });

  it("a read-only view creates nothing (SQLite file or PostgreSQL schema), reads empty, refuses writes, and sees what is written later", async () => {
    const home = join(dir, "view-home");
    const target = testTarget();
    const sessions = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
    sessions.close();
    for (const database of [{ kind: "sqlite" } as const, { kind: "postgres", ...target } as const]) {
      const view = await openExperimentStore({ home, database }, { readOnly: true });
      expect(await view.list()).toEqual([]);
      expect(await view.get("exp-1")).toBeUndefined();
      expect(await view.cases("exp-1")).toEqual([]);
      const err = await rejection(view.create(experiment()));
      expect(isKeelError(err) && err.code).toBe("KEEL_STORE_READ_ONLY");
      if (database.kind === "postgres") expect(await tableCount(target.schema)).toBe(0);
      const writer = await openExperimentStore({ home, database });
      await writer.create(experiment());
      await writer.putCase(caseResult());
      expect((await view.list()).map((e) => e.id)).toEqual(["exp-1"]);
      expect(await view.cases("exp-1")).toStrictEqual([caseResult()]);
      await writer.close();
      await view.close();
    }
  });

  it("never echoes a password of the database URL", async () => {
    const store = await openExperimentStore({
      home: dir,
      database: { kind: "postgres", url: "postgres://keel:hunter2-secret@127.0.0.1:1/test", schema: "s" },
    });
    const err = await rejection(store.list());
    expect(isKeelError(err) && err.code).toBe("KEEL_STORE_FAILED");
    expect(String((err as Error).message)).not.toContain("hunter2-secret");
    expect(JSON.stringify(err)).not.toContain("hunter2-secret");
    await store.close();
  });
});
