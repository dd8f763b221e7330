/**
 * Experiments in the session database file: several processes write experiments and sessions
 * to one file at once, the session schema's version (PRAGMA user_version) is never touched,
 * and a viewer (keel studio) opens the file read-only without writing a byte.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { isKeelError } from "@keel/kernel";
import { SQLITE_SCHEMA_VERSION, SqliteSessionStore } from "@keel/store-sqlite";
import { SQLITE_EXPERIMENT_MIGRATIONS, sqliteExperimentStore } from "../src/index.ts";
import { caseResult, experiment, SUMMARY } from "./store-fixtures.ts";

const root = mkdtempSync(join(tmpdir(), "keel-experiments-sqlite-"));
let n = 0;
const fresh = () => join(root, `h${++n}`, "sessions.sqlite");
const STORE_URL = pathToFileURL(join(import.meta.dirname, "..", "src", "store", "sqlite.ts")).href;
const SESSIONS_URL = pathToFileURL(join(import.meta.dirname, "..", "..", "store-sqlite", "src", "index.ts")).href;

afterAll(() => rmSync(root, { recursive: true, force: true }));

const userVersion = (path: string) => {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
  } finally {
    db.close();
  }
};
const sha = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/**
 * A child process that writes `count` cases of experiment `exp` (created first when `create`)
 * and a session of its own to `path`.
 */
function writer(path: string, name: string, count: number, create = false): Promise<void> {
  const exp = create ? `exp-${name}` : "exp";
  const script = `
    import { sqliteExperimentStore } from ${JSON.stringify(STORE_URL)};
    import { SqliteSessionStore } from ${JSON.stringify(SESSIONS_URL)};
    const store = sqliteExperimentStore({ path: ${JSON.stringify(path)} });
    const sessions = new SqliteSessionStore({ path: ${JSON.stringify(path)} });
    sessions.createSession({ id: ${JSON.stringify(name)}, agent: "support", createdAt: 1 });
    if (${create}) await store.create({ id: ${JSON.stringify(exp)}, name: "n", dataset: "d", datasetHash: "h", agent: "support", status: "running", startedAt: 1 });
    for (let i = 0; i < ${count}; i++) {
      await store.putCase({ experimentId: ${JSON.stringify(exp)}, caseId: ${JSON.stringify(name)} + "-" + i, index: i, input: ["x"], status: "passed",
        output: "out " + i, scores: [], metrics: { rounds: 1, toolCalls: 0, inputTokens: 1, outputTokens: 1, costUsd: 0, durationMs: 1 },
        sessionId: ${JSON.stringify(name)}, startedAt: i, endedAt: i + 1 });
      sessions.append({ type: "diagnostic", level: "info", code: "C", message: "case " + i, sessionId: ${JSON.stringify(name)}, seq: i + 1, ts: i + 1, turnId: null });
    }
    await store.close();
    sessions.close();
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) =>
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`writer ${name} exited ${code}: ${stderr}`)),
    ),
  );
}

describe("experiments in the SQLite session database", () => {
  it("two processes write cases and sessions to one file at once; nothing is lost", async () => {
    const path = fresh();
    const sessions = new SqliteSessionStore({ path });
    const store = sqliteExperimentStore({ path });
    await store.create(experiment({ id: "exp" }));
    await Promise.all([writer(path, "a", 200), writer(path, "b", 200)]);
    const cases = await store.cases("exp");
    expect(cases).toHaveLength(400);
    expect(new Set(cases.map((c) => c.caseId)).size).toBe(400);
    expect((await sessions.getSession("a"))?.eventCount).toBe(200);
    expect((await sessions.getSession("b"))?.eventCount).toBe(200);
    await store.finish("exp", "completed", SUMMARY, 2);
    await store.close();
    sessions.close();
  });

  it("three processes opening a new file at once each create the tables once and write", async () => {
    const path = fresh();
    await Promise.all(["a", "b", "c"].map((name) => writer(path, name, 30, true)));
    const store = sqliteExperimentStore({ path });
    expect((await store.list()).map((e) => e.id).sort()).toEqual(["exp-a", "exp-b", "exp-c"]);
    for (const id of ["exp-a", "exp-b", "exp-c"]) expect(await store.cases(id)).toHaveLength(30);
    expect(userVersion(path)).toBe(SQLITE_SCHEMA_VERSION);
    await store.close();
  });

  it("the session schema's version is the session store's alone, whichever opens the file first", async () => {
    const first = fresh();
    const store = sqliteExperimentStore({ path: first });
    await store.create(experiment());
    expect(userVersion(first)).toBe(0);
    const sessions = new SqliteSessionStore({ path: first });
    sessions.createSession({ id: "s", agent: "support", createdAt: 1 });
    expect(userVersion(first)).toBe(SQLITE_SCHEMA_VERSION);
    await store.close();
    const again = sqliteExperimentStore({ path: first });
    expect((await again.get("exp-1"))?.name).toBe("nightly");
    expect(userVersion(first)).toBe(SQLITE_SCHEMA_VERSION);
    const db = new DatabaseSync(first, { readOnly: true });
    expect(db.prepare("SELECT component, version FROM keel_migrations").all()).toEqual([
      { component: "experiments", version: SQLITE_EXPERIMENT_MIGRATIONS.length },
    ]);
    db.close();
    await again.close();
    sessions.close();
  });

  it("refuses experiment tables newer than this Keel knows, naming the file", async () => {
    const path = fresh();
    await sqliteExperimentStore({ path }).close();
    const db = new DatabaseSync(path);
    db.exec("UPDATE keel_migrations SET version = 99 WHERE component = 'experiments'");
    db.close();
    let err: unknown;
    try {
      sqliteExperimentStore({ path });
    } catch (e) {
      err = e;
    }
    expect(isKeelError(err) && err.code).toBe("KEEL_STORE_FAILED");
    expect((err as Error).message).toMatch(/version 99 .*only knows up to 1/);
    expect((err as Error).message).toContain(path);
  });

  it("a read-only view writes nothing, reads a file without experiments as empty, and sees experiments written later", async () => {
    const path = fresh();
    const sessions = new SqliteSessionStore({ path });
    sessions.createSession({ id: "s", agent: "support", createdAt: 1 });
    sessions.close();
    const before = sha(path);
    const view = sqliteExperimentStore({ path, readOnly: true });
    expect(await view.list()).toEqual([]);
    expect(await view.get("exp-1")).toBeUndefined();
    expect(await view.cases("exp-1")).toEqual([]);
    let err: unknown;
    await view.create(experiment()).catch((e: unknown) => (err = e));
    expect(isKeelError(err) && err.code).toBe("KEEL_STORE_READ_ONLY");
    expect(sha(path)).toBe(before);
    const writer = sqliteExperimentStore({ path });
    await writer.create(experiment());
    await writer.putCase(caseResult());
    expect((await view.list()).map((e) => e.id)).toEqual(["exp-1"]);
    expect(await view.cases("exp-1")).toStrictEqual([caseResult()]);
    await writer.close();
    await view.close();
  });
});
