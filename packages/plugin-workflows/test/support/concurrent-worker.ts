/**
 * One of several processes sharing a workflows file (adversarial.test.ts): learns from 60
 * turns, counts 60 offer outcomes and reads the visible workflows; prints its error count.
 */
import { learnFrom, WorkflowStore } from "../../src/index.ts";

const [db, who] = process.argv.slice(2) as [string, string];
const store = new WorkflowStore(db);
let errors = 0;
for (let i = 0; i < 60; i++) {
  try {
    const u = `user_${who}_${1000 + i}`;
    const calls = [{ name: "get", args: { id: u } }];
    learnFrom(store, "shared", { input: `check reservation of user ${u}`, calls, results: ["{}"], answer: "ok" }, 3);
    store.outcome("shared", "wf-x", i % 2 === 0);
    store.visible("shared");
  } catch (err) {
    errors++;
    console.error(String(err));
  }
}
store.close();
console.log(JSON.stringify({ who, errors }));
