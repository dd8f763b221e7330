import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ContextualRouter, PostgresSkillsStore, SkillsStore } from "../src/index.ts";
import type { SkillsStorage } from "../src/index.ts";
import { dropTestSchemas, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";
import { SKILLS } from "./support/skills.ts";

const run = promisify(execFile);
const CHILD = fileURLToPath(new URL("./support/train-child.ts", import.meta.url));
const temps: string[] = [];
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function child(db: string, skill: string, n: number, query: string): Promise<number> {
  const { stdout } = await run(process.execPath, [CHILD, db, skill, String(n), query], { timeout: 15_000 });
  const m = /^DONE (\S+)$/m.exec(stdout);
  expect(m, stdout).not.toBeNull();
  return Number(m![1]);
}

beforeAll(requirePostgres);
afterAll(dropTestSchemas);

/** A database each backend's processes share (its argument for the child) and a store on it. */
const backends: Array<[string, () => { arg: string; open: () => SkillsStorage }]> = [
  [
    "SQLite",
    () => {
      const home = mkdtempSync(join(tmpdir(), "keel-skills-persist-"));
      temps.push(home);
      const db = join(home, "skills.sqlite");
      return { arg: db, open: () => new SkillsStore(db) };
    },
  ],
  [
    "PostgreSQL",
    () => {
      const t = testTarget();
      return { arg: `${t.url}#${t.schema}`, open: () => new PostgresSkillsStore(t) };
    },
  ],
];

describe.each(backends)("posteriors persist on %s across processes", (_name, backend) => {
  it("what child processes learn is what a new process routes by, and concurrent writers add up", async () => {
    const { arg: db, open } = backend();
    const fresh = new ContextualRouter({ seed: 1, skills: SKILLS });
    const before = fresh.rank("sonnet rhyme").find((r) => r.skill === "verse")!.probability;

    const [p1, p2] = await Promise.all([
      child(db, "verse", 10, "sonnet rhyme"),
      child(db, "ledger", 10, "invoice receipt"),
    ]);
    expect(p1).toBeGreaterThan(before + 0.3);
    expect(p2).toBeGreaterThan(0.5);

    const store = open();
    try {
      const router = new ContextualRouter({ seed: 9, skills: SKILLS, store });
      await router.prepare("a sonnet with rhyme");
      expect(router.rank("a sonnet with rhyme")[0]!.skill).toBe("verse");
      await router.prepare("invoice and receipt");
      expect(router.rank("invoice and receipt")[0]!.skill).toBe("ledger");
      await router.prepare("sonnet rhyme");
      expect(router.pick("sonnet rhyme")!.skill).toBe("verse");
      const arms = store.arms();
      expect(arms.get("verse")).toEqual({ successes: 10, failures: 0 });
      expect(arms.get("ledger")).toEqual({ successes: 10, failures: 0 });
      expect(store.termStats([]).updates).toBe(20);
    } finally {
      store.close();
    }
  });

  it("keeps picks for late feedback, streaks per namespace and revocations, with secrets redacted", async () => {
    const { open } = backend();
    const a = open();
    const b = open();
    const key = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
    await a.savePick({
      sessionId: "s1",
      turnId: "t1",
      skill: "verse",
      terms: ["sonnet"],
      candidates: ["verse", "ledger"],
      forced: false,
      signature: "write-sonnet",
      input: `a sonnet about ${key}`,
    });
    const pick = await b.getPick("t1");
    expect(pick).toMatchObject({
      sessionId: "s1",
      skill: "verse",
      candidates: ["verse", "ledger"],
      forced: false,
      signature: "write-sonnet",
    });
    expect(pick!.input).not.toContain(key);
    expect(await b.getPick("t1", "other-session")).toBeUndefined();
    expect((await a.bumpStreak("write-sonnet", true, { input: "x", answer: "y" }, "team")).count).toBe(1);
    expect((await b.bumpStreak("write-sonnet", true, { input: "x2", answer: `y2 ${key}` }, "team")).count).toBe(2);
    const s3 = await a.bumpStreak("write-sonnet", true, { input: "x3", answer: "y3" }, "other");
    expect(s3.count).toBe(1);
    expect(JSON.stringify(s3)).not.toContain(key);
    expect((await a.bumpStreak("write-sonnet", false, { input: "x", answer: "y" }, "team")).count).toBe(0);
    expect(await b.isRevoked("write-sonnet")).toBe(false);
    await a.revoke("write-sonnet");
    expect(await b.isRevoked("write-sonnet")).toBe(true);
    expect((await b.bumpStreak("write-sonnet", true, { input: "x", answer: "y" }, "other")).count).toBe(1);
    a.close();
    b.close();
  });
});
