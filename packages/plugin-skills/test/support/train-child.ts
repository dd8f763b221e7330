/**
 * A child process for the persistence test: opens the skills database (a SQLite path, or
 * `postgres://…#schema`), credits `skill` with `n` successes on `query`, and prints
 * `DONE <probability>` (its posterior for that pair).
 * Usage: node train-child.ts <db> <skill> <n> <query>
 */
import { ContextualRouter, PostgresSkillsStore, SkillsStore, terms } from "../../src/index.ts";
import { endSharedPools } from "@keel/store-postgres";
import { SKILLS } from "./skills.ts";

const [db, skill, n, query] = process.argv.slice(2);
if (!db || !skill || !n || !query) {
  process.stderr.write("usage: node train-child.ts <db> <skill> <n> <query>\n");
  process.exit(2);
}
const [url, schema] = db.split("#");
const store = db.startsWith("postgres") ? new PostgresSkillsStore({ url: url!, schema: schema! }) : new SkillsStore(db);
const router = new ContextualRouter({ store, skills: SKILLS, seed: 1 });
for (let i = 0; i < Number(n); i++) await router.update({ skill, terms: terms(query), candidates: [] }, 1);
await router.prepare(query);
const p = router.rank(query).find((r) => r.skill === skill)!.probability;
store.close();
await endSharedPools();
process.stdout.write(`DONE ${p}\n`);
