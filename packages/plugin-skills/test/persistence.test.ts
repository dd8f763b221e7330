import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { ContextualRouter, SkillsStore } from "../src/index.ts";
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

describe("posteriors persist in SQLite across processes", () => {
  it("what child processes learn is what a new process routes by, and concurrent writers add up", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-skills-persist-"));
    temps.push(home);
    const db = join(home, "skills.sqlite");
    const fresh = new ContextualRouter({ seed: 1, skills: SKILLS });
    const before = fresh.rank("sonnet rhyme").find((r) => r.skill === "verse")!.probability;

    const [p1, p2] = await Promise.all([child(db, "verse", 10, "sonnet rhyme"), child(db, "ledger", 10, "invoice receipt")]);
    expect(p1).toBeGreaterThan(before + 0.3);
    expect(p2).toBeGreaterThan(0.5);

    const store = new SkillsStore(db);
    try {
      const router = new ContextualRouter({ seed: 9, skills: SKILLS, store });
      expect(router.rank("a sonnet with rhyme")[0]!.skill).toBe("verse");
      expect(router.rank("invoice and receipt")[0]!.skill).toBe("ledger");
      expect(router.pick("sonnet rhyme")!.skill).toBe("verse");
      const arms = store.arms();
      expect(arms.get("verse")).toEqual({ successes: 10, failures: 0 });
      expect(arms.get("ledger")).toEqual({ successes: 10, failures: 0 });
      expect(store.termStats([]).updates).toBe(20);
    } finally {
      store.close();
    }
  });
});
