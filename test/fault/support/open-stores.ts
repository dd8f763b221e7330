/**
 * Child process of the concurrent-first-open scenario: waits for "go" on stdin, then opens
 * every SQLite database Keel keeps in a home (sessions, memory, skills, MCP audit, compaction)
 * through their real classes, writes one row into each, and prints "ok" or "ERR <db>: <error>".
 */
import { join } from "node:path";
import { SqliteSessionStore } from "../../../packages/store-sqlite/src/index.ts";
import { SqliteMemoryStore } from "../../../packages/plugin-memory/src/sqlite-store.ts";
import { SkillsStore } from "../../../packages/plugin-skills/src/store.ts";
import { AuditLog } from "../../../packages/plugin-mcp/src/audit.ts";
import { RawStore } from "../../../packages/plugin-compaction/src/store.ts";

const home = process.argv[2]!;
const tag = `p${process.pid}`;
process.stdout.write("ready\n");
await new Promise((r) => process.stdin.once("data", r));
let step = "sessions";
try {
  const sessions = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
  sessions.createSession({ id: tag, agent: "open", createdAt: Date.now() });
  sessions.close();
  step = "memory";
  const memory = new SqliteMemoryStore({ path: join(home, "memory.sqlite") });
  memory.write({ namespace: "n", content: `opened by ${tag}` });
  memory.close();
  step = "skills";
  const skills = new SkillsStore(join(home, "skills.sqlite"));
  skills.revoke(tag);
  step = "mcp-audit";
  let auditError: unknown;
  const audit = new AuditLog(join(home, "mcp-audit.sqlite"), (e) => (auditError = e));
  audit.record({
    ts: Date.now(),
    sessionId: tag,
    server: "s",
    tool: "t",
    name: "s_t",
    durationMs: 1,
    outcome: "ok",
    bytes: 0,
  });
  if (auditError) throw auditError;
  step = "compaction";
  const raw = new RawStore(join(home, "compaction.sqlite"));
  raw.put({
    id: tag,
    sessionId: tag,
    toolCallId: "c",
    toolName: "t",
    kind: "taco",
    text: "x",
    tokens: 1,
    createdAt: Date.now(),
  });
  if (raw.degraded) throw new Error(raw.lastError);
  process.stdout.write("ok\n");
} catch (err) {
  process.stdout.write(`ERR ${step}: ${err instanceof Error ? err.message : String(err)}\n`);
}
process.exit(0);
