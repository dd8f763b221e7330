// The floor of a durable turn: hand.mjs's loop plus the least a durable log writes for it to one
// SQLite file in WAL mode: a session row and 18 event rows as JSON, in 2 transactions committed
// with synchronous=FULL (before the model call, and at the turn's end). What Keel's SQLite turn
// adds above its in-memory turn is held against what this adds above the hand loop.
import { DatabaseSync } from "node:sqlite";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { measure, weather, USER, CITIES, FINAL } from "./scenario.mjs";

const EVENTS = 18;
const db = new DatabaseSync(join(mkdtempSync(join(tmpdir(), "keel-floor-")), "s.sqlite"));
db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL");
db.exec("CREATE TABLE sessions (id TEXT PRIMARY KEY, updated INTEGER)");
db.exec("CREATE TABLE events (session TEXT, seq INTEGER, data TEXT, PRIMARY KEY (session, seq))");
const addSession = db.prepare("INSERT INTO sessions VALUES (?, ?)");
const touch = db.prepare("UPDATE sessions SET updated = ? WHERE id = ?");
const addEvent = db.prepare("INSERT INTO events VALUES (?, ?, ?)");
function commit(session, from, to) {
  db.exec("BEGIN IMMEDIATE");
  for (let seq = from; seq < to; seq++)
    addEvent.run(session, seq, JSON.stringify({ seq, text: USER, city: CITIES[seq % 3] }));
  touch.run(Date.now(), session);
  db.exec("COMMIT");
}
let n = 0;
await measure("sqlite floor (hand loop + 18 rows, 2 FULL commits)", async () => {
  const session = `s${n++}`;
  addSession.run(session, Date.now());
  commit(session, 0, EVENTS / 2);
  const messages = [{ role: "user", text: USER }];
  const out = await Promise.all(CITIES.map((city) => weather({ city })));
  for (const text of out) messages.push({ role: "tool", text });
  commit(session, EVENTS / 2, EVENTS);
  return FINAL;
});
