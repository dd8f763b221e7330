import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { DatabaseSync, StatementSync } from "node:sqlite";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { isKeelError } from "@keel/kernel";
import type { KeelEvent, KeelEventData } from "@keel/kernel";
import { MemorySessionStore } from "../../testkit/src/index.ts";
import type { Message } from "@keel/kernel";
import type { SessionStore } from "@keel/kernel";
import { defaultKeelHome } from "@keel/safe-path";
import { defaultSessionDbPath, SQLITE_SCHEMA_VERSION, SqliteSessionStore } from "@keel/store-sqlite";
import { keelErrorOf } from "../../agent/test/support/helpers.ts";
import { dropTestSchemas, openTestStore, requirePostgres } from "../../store-postgres/test/support/pg.ts";

const SQLITE_STORE_URL = pathToFileURL(
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src/sqlite-store.ts"),
).href;

function ev(
  sessionId: string,
  seq: number,
  data: KeelEventData,
  ts = 1_000 + seq,
  turnId: string | null = "turn-1",
): KeelEvent {
  return { ...data, sessionId, seq, ts, turnId } as KeelEvent;
}

const diag = (code: string): KeelEventData => ({ type: "diagnostic", level: "info", code, message: `m-${code}` });

let tmpDirs: string[] = [];
function freshDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-store-"));
  tmpDirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of tmpDirs) fs.rmSync(dir, { recursive: true, force: true });
  tmpDirs = [];
});

interface StoreCase {
  name: string;
  open(): SessionStore;
}

const cases: StoreCase[] = [
  { name: "MemorySessionStore", open: () => new MemorySessionStore() },
  {
    name: "SqliteSessionStore (file)",
    open: () => new SqliteSessionStore({ path: path.join(freshDir(), "sessions.sqlite") }),
  },
  { name: "SqliteSessionStore (:memory:)", open: () => new SqliteSessionStore({ path: ":memory:" }) },
  { name: "PostgresSessionStore", open: () => openTestStore() },
];
beforeAll(requirePostgres);
afterAll(dropTestSchemas);

describe.each(cases)("$name", ({ open }) => {
  let store: SessionStore;
  beforeEach(() => {
    store = open();
  });
  afterEach(async () => {
    await store.close();
  });

  it("keeps each session's turn state with its appends: unfinished() lists running turns and answered pauses, oldest first", async () => {
    const verdictOf = (type: "turn.completed" | "turn.paused" | "turn.interrupted") =>
      ({
        type,
        verdict:
          type === "turn.paused"
            ? { status: "paused", reason: "approval", pending: ["c1"] }
            : type === "turn.completed"
              ? { status: "completed", reason: "end_turn" }
              : { status: "interrupted", reason: "process_exit" },
        usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
        rounds: 1,
        toolCalls: 0,
      }) as KeelEventData;
    const started: KeelEventData = { type: "turn.started", input: "x", trigger: "user", metadata: {} };
    const answer: KeelEventData = { type: "approval.resolved", callId: "c1", name: "t", approved: true, by: "host" };
    for (const [i, id] of ["idle", "running", "paused", "answered", "done", "other"].entries())
      await store.createSession({ id, agent: id === "other" ? "beta" : "alpha", createdAt: 10 + i });
    await store.appendMany!([ev("idle", 1, diag("a"), 100)]);
    await store.appendMany!([ev("running", 1, started, 105)]);
    await store.appendMany!([ev("paused", 1, started, 101), ev("paused", 2, verdictOf("turn.paused"), 102)]);
    // The answer comes in a later batch than the pause (another instance answered it).
    await store.appendMany!([ev("answered", 1, started, 103), ev("answered", 2, verdictOf("turn.paused"), 103)]);
    await store.appendMany!([ev("answered", 3, answer, 104)]);
    await store.appendMany!([ev("done", 1, started, 106), ev("done", 2, verdictOf("turn.completed"), 107)]);
    await store.appendMany!([ev("other", 1, started, 99)]);
    const list = await store.unfinished!({ agent: "alpha" });
    expect(list.map((u) => [u.sessionId, u.state])).toEqual([
      ["answered", "answered"],
      ["running", "running"],
    ]);
    expect(list[1]).toMatchObject({ agent: "alpha", updatedAt: 105 });
    expect((await store.unfinished!()).map((u) => u.sessionId)).toEqual(["other", "answered", "running"]);
    expect((await store.unfinished!({ limit: 1 })).map((u) => u.sessionId)).toEqual(["other"]);
    // An answer with no pause stored changes nothing; a turn that ends leaves the list.
    await store.appendMany!([ev("idle", 2, answer, 108)]);
    await store.appendMany!([ev("running", 2, verdictOf("turn.interrupted"), 109)]);
    expect((await store.unfinished!()).map((u) => u.sessionId)).toEqual(["other", "answered"]);
  });

  it("creates, gets and lists sessions", async () => {
    await store.createSession({ id: "s1", agent: "alpha", createdAt: 100 });
    await store.createSession({ id: "s2", agent: "beta", createdAt: 200 });
    await store.createSession({ id: "s3", agent: "alpha", createdAt: 300 });

    expect(await store.getSession("s1")).toEqual({
      id: "s1",
      agent: "alpha",
      createdAt: 100,
      updatedAt: 100,
      eventCount: 0,
    });
    expect(await store.getSession("nope")).toBeUndefined();

    expect((await store.listSessions()).map((s) => s.id)).toEqual(["s3", "s2", "s1"]);
    expect((await store.listSessions({ agent: "alpha" })).map((s) => s.id)).toEqual(["s3", "s1"]);
    expect((await store.listSessions({ limit: 2 })).map((s) => s.id)).toEqual(["s3", "s2"]);
    expect((await store.listSessions({ agent: "alpha", limit: 1 })).map((s) => s.id)).toEqual(["s3"]);
    expect(await store.listSessions({ agent: "gamma" })).toEqual([]);
  });

  it("lists the most recently updated session first; ties go to the newest created", async () => {
    await store.createSession({ id: "old", agent: "a", createdAt: 100 });
    await store.createSession({ id: "mid", agent: "a", createdAt: 200 });
    await store.createSession({ id: "new", agent: "a", createdAt: 200 });
    await store.append(ev("old", 1, diag("x"), 500));
    expect((await store.listSessions()).map((s) => s.id)).toEqual(["old", "new", "mid"]);
  });

  it("rejects a second session with the same id", async () => {
    await store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    const err = await keelErrorOf(() => store.createSession({ id: "s1", agent: "b", createdAt: 2 }));
    expect(err.code).toBe("KEEL_STORE_FAILED");
    expect(err.message).toContain('"s1" already exists');
    expect((await store.getSession("s1"))?.agent).toBe("a");
  });

  it("returns events in seq order, filtered by afterSeq, as fresh arrays", async () => {
    await store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    await store.createSession({ id: "s2", agent: "a", createdAt: 1 });
    await store.append(ev("s1", 1, { type: "session.created", agent: "a" }, 10, null));
    await store.append(ev("s2", 1, diag("other"), 11));
    for (let seq = 2; seq <= 5; seq++) await store.append(ev("s1", seq, diag(`c${seq}`)));

    const all = await store.events("s1");
    expect(all.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(all[0]).toEqual({ type: "session.created", agent: "a", sessionId: "s1", seq: 1, ts: 10, turnId: null });
    expect(all[2]).toEqual({
      type: "diagnostic",
      level: "info",
      code: "c3",
      message: "m-c3",
      sessionId: "s1",
      seq: 3,
      ts: 1003,
      turnId: "turn-1",
    });

    expect((await store.events("s1", { afterSeq: 3 })).map((e) => e.seq)).toEqual([4, 5]);
    expect(await store.events("s1", { afterSeq: 5 })).toEqual([]);
    expect((await store.events("s1", { afterSeq: 0 })).length).toBe(5);
    expect((await store.events("s2")).map((e) => e.type)).toEqual(["diagnostic"]);
    expect(await store.events("unknown")).toEqual([]);

    const first = await store.events("s1");
    first.pop();
    expect((await store.events("s1")).length).toBe(5);
  });

  it("keeps seq order even when appends arrive out of order", async () => {
    await store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    for (const seq of [1, 3, 2, 5, 4]) await store.append(ev("s1", seq, diag(`c${seq}`)));
    expect((await store.events("s1")).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect((await store.events("s1", { afterSeq: 2 })).map((e) => e.seq)).toEqual([3, 4, 5]);
  });

  it("tracks eventCount and updatedAt (the latest event ts)", async () => {
    await store.createSession({ id: "s1", agent: "a", createdAt: 100 });
    await store.append(ev("s1", 1, diag("a"), 150));
    await store.append(ev("s1", 2, diag("b"), 400));
    expect(await store.getSession("s1")).toEqual({
      id: "s1",
      agent: "a",
      createdAt: 100,
      updatedAt: 400,
      eventCount: 2,
    });
    // A clock step backwards does not move updatedAt back.
    await store.append(ev("s1", 3, diag("c"), 300));
    expect(await store.getSession("s1")).toMatchObject({ updatedAt: 400, eventCount: 3 });
    expect((await store.listSessions())[0]).toMatchObject({ id: "s1", updatedAt: 400, eventCount: 3 });
  });

  it("throws KEEL_SESSION_BUSY on a duplicate seq (two writers) and keeps the first event", async () => {
    await store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    await store.append(ev("s1", 1, diag("first")));
    const err = await keelErrorOf(() => store.append(ev("s1", 1, diag("second"))));
    expect(err.code).toBe("KEEL_SESSION_BUSY");
    expect(err.message).toMatch(/seq 1/);
    expect(err.message).toMatch(/two writers/);
    const events = await store.events("s1");
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ code: "first" });
    expect((await store.getSession("s1"))?.eventCount).toBe(1);
    // Same seq in another session is fine.
    await store.createSession({ id: "s2", agent: "a", createdAt: 1 });
    await store.append(ev("s2", 1, diag("s2")));
    expect(await store.events("s2")).toHaveLength(1);
  });

  it("throws KEEL_SESSION_NOT_FOUND when appending to an unknown session", async () => {
    const err = await keelErrorOf(() => store.append(ev("ghost", 1, diag("x"))));
    expect(err.code).toBe("KEEL_SESSION_NOT_FOUND");
    expect(err.message).toContain('"ghost"');
    expect(await store.events("ghost")).toEqual([]);
    expect(await store.listSessions()).toEqual([]);
  });

  it("round-trips nested data: messages with content blocks, unicode, nulls", async () => {
    await store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    const assistant: Message = {
      role: "assistant",
      content: [
        { type: "thinking", text: "hmm… 🤔", providerData: { signature: "sig==", nested: [1, { deep: null }] } },
        { type: "text", text: 'quote " backslash \\ newline\n' },
        { type: "tool_call", id: "call_1", name: "read_file", args: { path: "/tmp/x", opts: { lines: [1, 2, 3] } } },
      ],
    };
    const toolResult: Message = {
      role: "tool",
      toolCallId: "call_1",
      toolName: "read_file",
      content: [
        { type: "text", text: "ok" },
        { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
      ],
      isError: false,
      rewrittenBy: ["compressor"],
    };
    await store.append(ev("s1", 1, { type: "message.appended", message: assistant }));
    await store.append(ev("s1", 2, { type: "message.appended", message: toolResult }));
    await store.append(
      ev("s1", 3, {
        type: "tool.started",
        round: 1,
        callId: "call_1",
        name: "read_file",
        args: [null, true, 1.5, "s"],
      }),
    );

    const events = await store.events("s1");
    expect(events[0]).toEqual({
      type: "message.appended",
      message: assistant,
      sessionId: "s1",
      seq: 1,
      ts: 1001,
      turnId: "turn-1",
    });
    expect(events[1]).toEqual({
      type: "message.appended",
      message: toolResult,
      sessionId: "s1",
      seq: 2,
      ts: 1002,
      turnId: "turn-1",
    });
    expect(events[2]).toMatchObject({ type: "tool.started", args: [null, true, 1.5, "s"] });
  });

  it("close() is idempotent and later calls throw KEEL_STORE_FAILED", async () => {
    await store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    await store.close();
    await store.close();
    expect((await keelErrorOf(() => store.getSession("s1"))).code).toBe("KEEL_STORE_FAILED");
    expect((await keelErrorOf(() => store.append(ev("s1", 1, diag("x"))))).code).toBe("KEEL_STORE_FAILED");
    expect((await keelErrorOf(() => store.events("s1"))).code).toBe("KEEL_STORE_FAILED");
  });
});

describe("SqliteSessionStore on disk", () => {
  const opened: SqliteSessionStore[] = [];
  function openStore(file: string): SqliteSessionStore {
    const store = new SqliteSessionStore({ path: file });
    opened.push(store);
    return store;
  }
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
    vi.restoreAllMocks();
  });

  it("creates parent directories, uses WAL, records the schema version, and stores the documented columns", () => {
    const file = path.join(freshDir(), "nested", "deeper", "sessions.sqlite");
    const store = openStore(file);
    store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    store.append(ev("s1", 1, { type: "turn.started", input: "hi", trigger: "user", metadata: { k: 1 } }, 42, "turn-9"));
    expect(fs.existsSync(file)).toBe(true);

    const raw = new DatabaseSync(file);
    try {
      expect(raw.prepare("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
      expect(raw.prepare("PRAGMA user_version").get()).toEqual({ user_version: SQLITE_SCHEMA_VERSION });
      const row = raw.prepare("SELECT session_id, seq, ts, turn_id, type, data FROM events").get();
      expect({ ...row }).toEqual({
        session_id: "s1",
        seq: 1,
        ts: 42,
        turn_id: "turn-9",
        type: "turn.started",
        data: JSON.stringify({ input: "hi", trigger: "user", metadata: { k: 1 } }),
      });
      const indexes = raw
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'")
        .all()
        .map((r) => r["name"]);
      expect(indexes).toContain("events_jobs");
      expect(indexes).not.toContain("events_type");
      // Job records (looked up across sessions at start) are read through the partial index.
      const plan = raw
        .prepare(
          "EXPLAIN QUERY PLAN SELECT seq FROM events WHERE type IN ('job.pending', 'job.completed') AND type GLOB 'job.*' ORDER BY session_id, seq",
        )
        .all()
        .map((r) => String(r["detail"]));
      expect(plan.join(" ")).toContain("events_jobs");
    } finally {
      raw.close();
    }
  });

  it("keeps data across close and reopen", () => {
    const file = path.join(freshDir(), "sessions.sqlite");
    const first = new SqliteSessionStore({ path: file });
    first.createSession({ id: "s1", agent: "a", createdAt: 5 });
    first.append(ev("s1", 1, diag("one"), 10));
    first.append(ev("s1", 2, diag("two"), 20));
    first.close();

    const second = openStore(file);
    expect(second.getSession("s1")).toEqual({ id: "s1", agent: "a", createdAt: 5, updatedAt: 20, eventCount: 2 });
    expect(second.events("s1").map((e) => (e as { code?: string }).code)).toEqual(["one", "two"]);
    second.append(ev("s1", 3, diag("three")));
    expect(second.events("s1", { afterSeq: 2 })).toHaveLength(1);
  });

  it("a second store on the same file sees the other's writes, and a seq clash between them fails", () => {
    const file = path.join(freshDir(), "sessions.sqlite");
    const a = openStore(file);
    const b = openStore(file);
    a.createSession({ id: "s1", agent: "a", createdAt: 1 });
    expect(b.getSession("s1")).toMatchObject({ id: "s1", eventCount: 0 });
    a.append(ev("s1", 1, diag("from-a")));
    expect(b.events("s1").map((e) => e.seq)).toEqual([1]);
    b.append(ev("s1", 2, diag("from-b")));
    expect(a.events("s1").map((e) => (e as { code?: string }).code)).toEqual(["from-a", "from-b"]);
    expect(a.getSession("s1")?.eventCount).toBe(2);

    const err = (() => {
      try {
        b.append(ev("s1", 2, diag("clash")));
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(isKeelError(err, "KEEL_SESSION_BUSY")).toBe(true);
    expect(String((err as Error).message)).toContain("two writers");
    // The failed append left no transaction open: the other writer can still write.
    a.append(ev("s1", 3, diag("after-clash")));
    expect(b.events("s1").map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it("reports KEEL_STORE_CORRUPT naming the path when the path is a directory (not 'unable to open', which points at permissions)", async () => {
    const dir = freshDir();
    const err = await keelErrorOf(() => new SqliteSessionStore({ path: dir }));
    expect(err.code).toBe("KEEL_STORE_CORRUPT");
    expect(err.message).toContain(`${dir} is a folder, not a database file`);
    expect((err as { location?: { path?: string } }).location?.path).toBe(dir);
    const viewing = await keelErrorOf(() => new SqliteSessionStore({ path: dir, readOnly: true }));
    expect(viewing.code).toBe("KEEL_STORE_CORRUPT");
  });

  it("reports KEEL_STORE_FAILED when a parent directory cannot be created", async () => {
    const dir = freshDir();
    const blocker = path.join(dir, "a-file");
    fs.writeFileSync(blocker, "not a directory");
    const file = path.join(blocker, "sessions.sqlite");
    const err = await keelErrorOf(() => new SqliteSessionStore({ path: file }));
    expect(err.code).toBe("KEEL_STORE_FAILED");
    expect(err.message).toContain(file);
    expect(err.cause).toBeDefined();
  });

  it("refuses a database written by a newer schema version", async () => {
    const file = path.join(freshDir(), "sessions.sqlite");
    openStore(file).close();
    const raw = new DatabaseSync(file);
    raw.exec(`PRAGMA user_version=${SQLITE_SCHEMA_VERSION + 1}`);
    raw.close();
    const err = await keelErrorOf(() => new SqliteSessionStore({ path: file }));
    expect(err.code).toBe("KEEL_STORE_FAILED");
    expect(err.message).toContain("upgrade Keel");
  });

  /**
   * Spy on node:sqlite: capture the connection of the next store opened (the first connection
   * to prepare a statement) and record its real `synchronous` level each time COMMIT runs.
   */
  function watchCommits(): { levelAtCommit: number[]; level(): number; connection(): DatabaseSync } {
    let db: DatabaseSync | undefined;
    const realPrepare = DatabaseSync.prototype.prepare;
    const realRun = StatementSync.prototype.run;
    const level = (): number => {
      if (!db) throw new Error("no connection captured");
      return realPrepare.call(db, "PRAGMA synchronous").get()?.["synchronous"] as number;
    };
    const levelAtCommit: number[] = [];
    vi.spyOn(DatabaseSync.prototype, "prepare").mockImplementation(function (this: DatabaseSync, ...args: unknown[]) {
      db ??= this;
      return (realPrepare as (...a: unknown[]) => StatementSync).apply(this, args);
    });
    vi.spyOn(StatementSync.prototype, "run").mockImplementation(function (this: StatementSync, ...args: unknown[]) {
      if (this.sourceSQL === "COMMIT" && db) levelAtCommit.push(level());
      return (realRun as (...a: unknown[]) => ReturnType<StatementSync["run"]>).apply(this, args);
    });
    return {
      levelAtCommit,
      level,
      connection: () => {
        if (!db) throw new Error("no connection captured");
        return db;
      },
    };
  }
  const NORMAL = 1;
  const FULL = 2;

  it("a durable append commits with synchronous=FULL; other commits use NORMAL", () => {
    const watch = watchCommits();
    const store = openStore(path.join(freshDir(), "sessions.sqlite"));
    expect(watch.level()).toBe(NORMAL);
    store.createSession({ id: "s1", agent: "a", createdAt: 1 });

    store.append(ev("s1", 1, diag("plain")));
    store.append(ev("s1", 2, diag("durable")), { durable: true });
    store.append(ev("s1", 3, diag("plain again")));
    expect(watch.levelAtCommit).toEqual([NORMAL, FULL, NORMAL]);
    expect(watch.level()).toBe(NORMAL);

    // A failed durable append also restores NORMAL and leaves no transaction open.
    expect(() => store.append(ev("s1", 3, diag("dup")), { durable: true })).toThrow(/two writers/);
    expect(watch.level()).toBe(NORMAL);
    expect(watch.connection().isTransaction).toBe(false);
    expect(store.events("s1").map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it("with synchronous: FULL every commit is FULL", () => {
    const watch = watchCommits();
    const store = new SqliteSessionStore({ path: path.join(freshDir(), "sessions.sqlite"), synchronous: "FULL" });
    opened.push(store);
    store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    store.append(ev("s1", 1, diag("x")));
    store.append(ev("s1", 2, diag("y")), { durable: true });
    store.append(ev("s1", 3, diag("z")));
    expect(watch.levelAtCommit).toEqual([FULL, FULL, FULL]);
  });

  it("a durable append survives SIGKILL of the writing process", async () => {
    const file = path.join(freshDir(), "sessions.sqlite");
    const script = `
      import { SqliteSessionStore } from ${JSON.stringify(SQLITE_STORE_URL)};
      const store = new SqliteSessionStore({ path: ${JSON.stringify(file)} });
      store.createSession({ id: "killed", agent: "child", createdAt: 1 });
      store.append({ type: "diagnostic", level: "warn", code: "C", message: "before the kill", sessionId: "killed", seq: 1, ts: 7, turnId: null }, { durable: true });
      process.stdout.write("appended\\n");
      setInterval(() => {}, 1 << 30);
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    await new Promise<void>((resolve, reject) => {
      let stdout = "";
      const timer = setTimeout(() => reject(new Error(`child did not append in time; stderr: ${stderr}`)), 15_000);
      child.stdout.on("data", (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes("appended")) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then(({ code }) => {
        clearTimeout(timer);
        reject(new Error(`child exited early with code ${code}; stderr: ${stderr}`));
      });
    });
    child.kill("SIGKILL");
    expect((await exited).signal).toBe("SIGKILL");

    // Killed without close(): the commit sits in the WAL, not yet checkpointed into the main file.
    expect(fs.statSync(`${file}-wal`).size).toBeGreaterThan(0);
    const store = openStore(file);
    expect(store.getSession("killed")).toMatchObject({ agent: "child", eventCount: 1, updatedAt: 7 });
    expect(store.events("killed")).toEqual([
      {
        type: "diagnostic",
        level: "warn",
        code: "C",
        message: "before the kill",
        sessionId: "killed",
        seq: 1,
        ts: 7,
        turnId: null,
      },
    ]);
  });
});

describe("default paths", () => {
  it("uses KEEL_HOME when set, else ~/.keel", () => {
    expect(defaultKeelHome({ KEEL_HOME: "/srv/keel" })).toBe("/srv/keel");
    expect(defaultKeelHome({ KEEL_HOME: "" })).toBe(path.join(os.homedir(), ".keel"));
    expect(defaultKeelHome({})).toBe(path.join(os.homedir(), ".keel"));
  });

  it("puts the session database in the home", () => {
    expect(defaultSessionDbPath("/srv/keel")).toBe(path.join("/srv/keel", "sessions.sqlite"));
  });
});
