/**
 * A child process for the persistence test: opens the skills database, credits `skill` with
 * `n` successes on `query`, and prints `DONE <probability>` (its posterior for that pair).
 * Usage: node train-child.ts <db path> <skill> <n> <query>
 */
import { ContextualRouter, SkillsStore, terms } from "../../src/index.ts";
import { SKILLS } from "./skills.ts";

const [db, skill, n, query] = process.argv.slice(2);
if (!db || !skill || !n || !query) {
  process.stderr.write("usage: node train-child.ts <db> <skill> <n> <query>\n");
  process.exit(2);
}
const store = new SkillsStore(db);
const router = new ContextualRouter({ store, skills: SKILLS, seed: 1 });
for (let i = 0; i < Number(n); i++) router.update({ skill, terms: terms(query), candidates: [] }, 1);
const p = router.rank(query).find((r) => r.skill === skill)!.probability;
store.close();
process.stdout.write(`DONE ${p}\n`);
