/**
 * Fault suite, class 7 — concurrency and storage. The real `keel` binary against the wire
 * server (official Anthropic SDK), real SQLite files in a temp KEEL_HOME:
 * - one writer per session: a second process gets KEEL_SESSION_BUSY before any provider call,
 *   or waits with --wait; a dead or stalled holder's lease is taken over and its dangling turn
 *   marked interrupted; a stalled holder that wakes up writes nothing more (fencing);
 * - concurrent first opens of a fresh home never fail with "database is locked";
 * - a read-only home can be viewed and is refused for writing before any provider call;
 * - a malformed database is never written to.
 */
import { spawn } from "node:child_process";
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { beforeAll, describe, expect, it } from "vitest";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import { createAgent, defineTool, isKeelError } from "../../packages/agent/src/index.ts";
import { scriptedProvider } from "../../packages/testkit/src/index.ts";
import { openSqlite, SqliteSessionStore } from "../../packages/store-sqlite/src/index.ts";
import {
  useSharedWire,
  REPO,
  asUnprivileged,
  digest,
  faultConfig,
  garbleTable,
  seedSession,
  project,
  runKeel,
  sessionIdOf,
  startKeel,
  storedEvents,
  storedSessions,
  storedUserTexts,
  until,
  wireEnv,
} from "./support/storage.ts";

const { root, server: sharedServer } = useSharedWire("keel-fault-storage-");
let server: WireServer;
beforeAll(() => {
  server = sharedServer();
});

const env = (home: string) => wireEnv(home, server.anthropicBaseURL);
/** Requests since `from` whose last user text contains `needle`. */
const requestsFor = (from: number, needle: string) =>
  server.requests.slice(from).filter((r) => JSON.stringify(r.body?.messages ?? []).includes(needle));
const firstJsonSession = (stdout: string) => /"sessionId":"([0-9a-f-]{36})"/.exec(stdout)?.[1];

describe("storage: one writer per session", () => {
  it("a second CLI on a running session gets KEEL_SESSION_BUSY naming the holder, before any provider call", async () => {
    const p = project(root, "busy", faultConfig());
    const from = server.requests.length;
    // The first writer's tool holds its turn until the second CLI has been refused (a file releases it).
    const release = join(p.dir, "release");
    const a = startKeel(["run", "--json", "tools:1 pause:60000 first writer"], {
      cwd: p.dir,
      env: { ...env(p.home), FAULT_PAUSE_RELEASE: release },
    });
    await until(
      () =>
        requestsFor(from, "first writer").length >= 2 ||
        (firstJsonSession(a.stdout()) !== undefined && requestsFor(from, "first writer").length >= 1),
      "the first writer's request",
    );
    const id = firstJsonSession(a.stdout())!;
    const b = await runKeel(["run", "--session", id, "second writer"], { cwd: p.dir, env: env(p.home) });
    expect(b.code, b.stderr).toBe(1);
    expect(b.stderr).toContain("KEEL_SESSION_BUSY");
    expect(b.stderr).toContain(`process ${a.child.pid}`);
    expect(b.stderr).toMatch(/--wait/);
    expect(b.stderr).not.toMatch(/disk|\n\s+at /);
    writeFileSync(release, "");
    const ra = await a.exit;
    expect(ra.code, a.stderr()).toBe(0);
    // The wire server saw only the first writer: its tool round and its final round.
    expect(requestsFor(from, "second writer")).toHaveLength(0);
    expect(server.requests.slice(from).filter((r) => r.api === "anthropic")).toHaveLength(2);
    const events = storedEvents(p.home, id);
    expect(storedUserTexts(events)).toEqual(["tools:1 pause:60000 first writer"]);
    expect(events.map((e) => e.type)).not.toContain("turn.interrupted");
    expect(events.map((e) => e.type)).toContain("turn.completed");
  });

  it("with --wait the second CLI waits for the holder, then runs on the whole history", async () => {
    const p = project(root, "wait", faultConfig());
    const from = server.requests.length;
    // The holder's tool holds its turn until the second CLI says it waits (a file releases it).
    const release = join(p.dir, "release");
    const a = startKeel(["run", "--json", "tools:1 pause:60000 first turn"], {
      cwd: p.dir,
      env: { ...env(p.home), FAULT_PAUSE_RELEASE: release },
    });
    await until(
      () => firstJsonSession(a.stdout()) !== undefined && requestsFor(from, "first turn").length >= 1,
      "the first turn's request",
    );
    const id = firstJsonSession(a.stdout())!;
    const b = startKeel(["run", "--wait", "--session", id, "waited turn"], { cwd: p.dir, env: env(p.home) });
    await until(() => /in use by process \d+.*waiting/.test(b.stderr()), "the second CLI to wait");
    writeFileSync(release, "");
    const ra = await a.exit;
    const rb = await b.exit;
    expect(ra.code, a.stderr()).toBe(0);
    expect(rb.code, b.stderr()).toBe(0);
    const events = storedEvents(p.home, id);
    expect(storedUserTexts(events)).toEqual(["tools:1 pause:60000 first turn", "waited turn"]);
    const terminals = events.filter(
      (e) => e.type === "turn.completed" || e.type === "turn.interrupted" || e.type === "turn.failed",
    );
    expect(terminals.map((e) => e.type)).toEqual(["turn.completed", "turn.completed"]);
    // The waiter's only request came after the holder's last one and carried its exchange.
    const waited = requestsFor(from, "waited turn");
    expect(waited).toHaveLength(1);
    expect(waited[0]!.index).toBeGreaterThan(
      Math.max(
        ...requestsFor(from, "first turn")
          .filter((r) => !JSON.stringify(r.body.messages).includes("waited turn"))
          .map((r) => r.index),
      ),
    );
    expect(JSON.stringify(waited[0]!.body.messages)).toContain("tool_result");
  });

  it("a holder SIGKILLed mid-turn: the next run takes the lease at once (holder dead), marks the turn interrupted and completes", async () => {
    const p = project(root, "killed-holder", faultConfig("lease: { ttlMs: 60000 },"));
    const from = server.requests.length;
    const a = startKeel(["run", "--json", "tools:1 pause:60000 doomed turn"], { cwd: p.dir, env: env(p.home) });
    await until(
      () =>
        firstJsonSession(a.stdout()) !== undefined &&
        requestsFor(from, "doomed turn").length >= 1 &&
        a.stdout().includes('"tool.started"'),
      "the doomed turn's tool",
    );
    const id = firstJsonSession(a.stdout())!;
    a.child.kill("SIGKILL");
    expect((await a.exit).signal).toBe("SIGKILL");
    const b = await runKeel(["run", "--session", id, "after the kill"], {
      cwd: p.dir,
      env: env(p.home),
      timeoutMs: 60_000,
    });
    expect(b.code, b.stderr).toBe(0);
    // Far less than the 60 s TTL (half of it: headroom for a loaded machine): the dead holder's lease was replaced, not waited out.
    expect(b.ms).toBeLessThan(30_000);
    const events = storedEvents(p.home, id);
    const resumed = events.find((e) => e.type === "session.resumed");
    expect(resumed).toMatchObject({
      interruptedTurn: `${id}/1`,
      leaseTakenOver: { pid: a.child.pid, reason: "holder_dead" },
    });
    expect(events.filter((e) => e.type === "turn.interrupted").map((e) => e.turnId)).toEqual([`${id}/1`]);
    const sent = requestsFor(from, "after the kill")[0]!;
    expect(JSON.stringify(sent.body.messages)).toContain("doomed turn");
  });

  it("a holder stalled (SIGSTOP) past its lease TTL: the lease expires, the next run takes over, and the woken holder writes nothing more", async () => {
    const p = project(root, "stalled-holder", faultConfig("lease: { ttlMs: 400 },"));
    const from = server.requests.length;
    const a = startKeel(["run", "--json", "tools:1 pause:600 stalled turn"], { cwd: p.dir, env: env(p.home) });
    await until(
      () => firstJsonSession(a.stdout()) !== undefined && a.stdout().includes('"tool.started"'),
      "the stalled turn's tool",
    );
    const id = firstJsonSession(a.stdout())!;
    // Stop it inside the tool's wait, not inside the write that follows the event on stdout
    // (a process stopped mid-transaction holds SQLite's write lock; no lease can help then).
    await new Promise((r) => setTimeout(r, 150));
    a.child.kill("SIGSTOP");
    const b = await runKeel(["run", "--wait", "--session", id, "took over"], { cwd: p.dir, env: env(p.home) });
    expect(b.code, b.stderr).toBe(0);
    const before = storedEvents(p.home, id);
    // The open may first find the lease still held (a plain session.resumed) before --wait takes it over.
    const resumed = before.find((e) => e.type === "session.resumed" && e.interruptedTurn)!;
    expect(resumed).toMatchObject({
      interruptedTurn: `${id}/1`,
      leaseTakenOver: { pid: a.child.pid, reason: "expired" },
    });
    a.child.kill("SIGCONT");
    const ra = await a.exit;
    // The woken holder's tool finishes and its next write is fenced: a coded failure, nothing written.
    expect(ra.code, a.stderr()).toBe(1);
    expect(a.stderr()).toContain("KEEL_SESSION_BUSY");
    const after = storedEvents(p.home, id);
    expect(after).toEqual(before);
    expect(
      requestsFor(from, "stalled turn").filter((r) => !JSON.stringify(r.body.messages).includes("took over")),
    ).toHaveLength(1);
  });

  it("two agents in one process on one session: both open it; while one runs a turn the other's run is refused, or waits with waitMs; each catches up with the other's turns", async () => {
    const path = join(root, "in-process", "sessions.sqlite");
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = defineTool({ name: "slow", description: "waits", execute: () => gate.then(() => "done") });
    const a1 = await createAgent({
      provider: scriptedProvider([{ text: "one" }, { toolCalls: [{ id: "s1", name: "slow" }] }, { text: "slow done" }]),
      tools: [slow],
      store: new SqliteSessionStore({ path }),
    });
    const a2 = await createAgent({
      provider: scriptedProvider([{ text: "two" }, { text: "three" }]),
      store: new SqliteSessionStore({ path }),
    });
    const s1 = await a1.session();
    await s1.run("hello");
    const s2 = await a2.session(s1.id);
    expect(s2.messages).toHaveLength(2);
    const running = s1.run("go slow");
    await until(
      () => s1.busy && storedEvents(dirname(path), s1.id).some((e) => e.type === "tool.started"),
      "the slow call",
    );
    const refused = await s2.run("now?").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isKeelError(refused, "KEEL_SESSION_BUSY")).toBe(true);
    const a3 = await createAgent({
      provider: scriptedProvider([{ text: "waited" }]),
      store: new SqliteSessionStore({ path }),
    });
    const s3 = await a3.session(s1.id, { waitMs: 10_000 });
    const waiting = s3.run("after you");
    setTimeout(release, 150);
    expect((await running).text).toBe("slow done");
    expect((await waiting).text).toBe("waited");
    expect((await s2.run("again")).text).toBe("two");
    // s2 caught up with both turns it did not run before its own.
    expect(s2.messages.filter((m) => m.role === "user").map((m) => (m.content[0] as { text: string }).text)).toEqual([
      "hello",
      "go slow",
      "after you",
      "again",
    ]);
    expect((await s2.events()).filter((e) => e.type === "turn.interrupted")).toHaveLength(0);
    for (const a of [a1, a2, a3]) {
      await a.close();
      a.store.close();
    }
  });
});

describe("storage: concurrent opens", () => {
  it("32 processes opening a fresh home's five databases at the same moment all succeed (no 'database is locked')", async () => {
    const home = join(root, "fresh-home");
    const script = join(REPO, "test", "fault", "support", "open-stores.ts");
    // Node's compile cache, filled by one warm-up child (in another home), keeps 32 cold
    // starts on 2 cores to a few seconds; the opens themselves are what is under test.
    const childEnv = { ...process.env, NODE_COMPILE_CACHE: join(root, "compile-cache") };
    const warm = spawn(process.execPath, ["--no-warnings", script, join(root, "warm-home")], {
      stdio: ["pipe", "ignore", "inherit"],
      env: childEnv,
    });
    warm.stdin.end("go\n");
    await new Promise((r) => warm.on("close", r));
    const kids = Array.from({ length: 32 }, () =>
      spawn(process.execPath, ["--no-warnings", script, home], { stdio: ["pipe", "pipe", "pipe"], env: childEnv }),
    );
    let ready = 0;
    const outs = kids.map(
      (k) =>
        new Promise<string>((res) => {
          let s = "";
          k.stdout.on("data", (d: Buffer) => {
            s += d.toString();
            if (s.startsWith("ready\n") && !(k as { counted?: boolean }).counted) {
              (k as { counted?: boolean }).counted = true;
              ready++;
            }
          });
          k.stderr.on("data", (d: Buffer) => (s += d.toString()));
          k.on("close", () => res(s.replace(/^ready\n/, "").trim()));
        }),
    );
    // Every child has loaded its modules before any opens: they start on one signal.
    await until(() => ready === kids.length, "32 children to load", 30_000);
    const t0 = Date.now();
    for (const k of kids) k.stdin.write("go\n");
    const results = await Promise.all(outs);
    expect(
      results.filter((r) => r !== "ok"),
      results.join("\n"),
    ).toEqual([]);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(storedSessions(home)).toHaveLength(32);
  }, 60_000);

  it("a first open that meets another process's write lock on a fresh file waits for it instead of failing", async () => {
    const path = join(root, "locked", "x.sqlite");
    openSqlite(path, { wal: false }).close();
    // Another process holds a RESERVED lock (rollback journal): SQLite refuses the WAL switch
    // without calling the busy handler, so only a retry gets through.
    const holder = spawn(
      process.execPath,
      [
        "-e",
        `const {DatabaseSync}=require("node:sqlite");const d=new DatabaseSync(${JSON.stringify(path)});d.exec("BEGIN IMMEDIATE");d.exec("CREATE TABLE held(x)");console.log("locked");setTimeout(()=>{d.exec("COMMIT");d.close();},400);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    await new Promise((r) => holder.stdout.once("data", r));
    const t0 = Date.now();
    const db = openSqlite(path, { setup: (d) => d.exec("CREATE TABLE IF NOT EXISTS mine(y)") });
    const waited = Date.now() - t0;
    expect((db.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode).toBe("wal");
    expect(
      db
        .prepare("SELECT name FROM sqlite_schema ORDER BY name")
        .all()
        .map((r) => r["name"]),
    ).toEqual(["held", "mine"]);
    db.close();
    expect(waited).toBeGreaterThan(200);
    await new Promise((r) => holder.on("close", r));
  });

  it("two CLIs starting new sessions in one fresh home at once both complete", async () => {
    const p = project(root, "two-fresh", faultConfig());
    const [a, b] = await Promise.all([
      runKeel(["run", "tools:0 left"], { cwd: p.dir, env: env(p.home) }),
      runKeel(["run", "tools:0 right"], { cwd: p.dir, env: env(p.home) }),
    ]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    expect(new Set(storedSessions(p.home))).toEqual(new Set([sessionIdOf(a.stderr), sessionIdOf(b.stderr)]));
  });
});

describe("storage: read-only homes", () => {
  const unprivileged = asUnprivileged();

  it.skipIf(unprivileged === undefined)(
    "a read-only home (folder and files not writable, run as a non-root user) can be listed, shown and inspected; run fails KEEL_STORE_READ_ONLY before any provider call, and nothing changes",
    async () => {
      const p = project(root, "ro-home", faultConfig());
      const id = await seedSession(p.home, ["stored before"]);
      const db = join(p.home, "sessions.sqlite");
      chmodSync(root, 0o755);
      chmodSync(db, 0o444);
      chmodSync(p.home, 0o555);
      try {
        const before = digest(db);
        const list = await runKeel(["sessions", "list"], { cwd: p.dir, env: env(p.home), prefix: unprivileged! });
        expect(list.code, list.stderr).toBe(0);
        expect(list.stdout).toContain(id);
        const show = await runKeel(["sessions", "show", id], { cwd: p.dir, env: env(p.home), prefix: unprivileged! });
        expect(show.code, show.stderr).toBe(0);
        expect(show.stdout).toContain("stored before");
        expect(show.stdout).toContain("turn.completed");
        const inspect = await runKeel(["inspect"], { cwd: p.dir, env: env(p.home), prefix: unprivileged! });
        expect(inspect.code, inspect.stderr).toBe(0);
        const from = server.requests.length;
        const run = await runKeel(["run", "--session", id, "not allowed"], {
          cwd: p.dir,
          env: env(p.home),
          prefix: unprivileged!,
        });
        expect(run.code, run.stderr).toBe(1);
        expect(run.stderr).toContain("KEEL_STORE_READ_ONLY");
        expect(run.stderr).toContain(db);
        expect(server.requests.length).toBe(from);
        expect(digest(db)).toBe(before);
        expect(existsSync(`${db}-wal`)).toBe(false);
      } finally {
        chmodSync(p.home, 0o755);
        chmodSync(db, 0o644);
      }
    },
  );

  it.skipIf(unprivileged === undefined)(
    "a read-only database file in a writable folder: viewing works, run is refused with KEEL_STORE_READ_ONLY naming the file, the file is unchanged",
    async () => {
      const p = project(root, "ro-file", faultConfig());
      const id = await seedSession(p.home, ["kept"]);
      const db = join(p.home, "sessions.sqlite");
      chmodSync(root, 0o755);
      chmodSync(p.dir, 0o777);
      chmodSync(p.home, 0o777);
      chmodSync(db, 0o444);
      try {
        const before = digest(db);
        const list = await runKeel(["sessions", "list", "--json"], {
          cwd: p.dir,
          env: env(p.home),
          prefix: unprivileged!,
        });
        expect(list.code, list.stderr).toBe(0);
        expect(JSON.parse(list.stdout).map((s: { id: string }) => s.id)).toEqual([id]);
        const from = server.requests.length;
        const run = await runKeel(["run", "--session", id, "refused"], {
          cwd: p.dir,
          env: env(p.home),
          prefix: unprivileged!,
        });
        expect(run.code, run.stderr).toBe(1);
        expect(run.stderr).toMatch(
          /KEEL_STORE_READ_ONLY.*sessions\.sqlite cannot be written: the file is not writable/,
        );
        expect(server.requests.length).toBe(from);
        expect(digest(db)).toBe(before);
      } finally {
        chmodSync(db, 0o644);
      }
    },
  );
});

describe("storage: malformed databases", () => {
  it("a session database that fails the quick check is refused for writing (KEEL_STORE_CORRUPT, no provider call, not a byte written) but can still be listed", async () => {
    const p = project(root, "garbled", faultConfig());
    const id = await seedSession(p.home, ["before damage"]);
    const db = join(p.home, "sessions.sqlite");
    garbleTable(db, "events");
    const before = digest(db);
    const from = server.requests.length;
    const run = await runKeel(["run", "--session", id, "into the damage"], { cwd: p.dir, env: env(p.home) });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("KEEL_STORE_CORRUPT");
    expect(run.stderr).toContain(db);
    expect(run.stderr).toMatch(/Move the file named aside/);
    expect(server.requests.length).toBe(from);
    expect(digest(db)).toBe(before);
    expect(existsSync(`${db}-wal`) ? readFileSync(`${db}-wal`).length : 0).toBe(0);
    const fresh = await runKeel(["run", "a new session"], { cwd: p.dir, env: env(p.home) });
    expect(fresh.code).toBe(1);
    expect(fresh.stderr).toContain("KEEL_STORE_CORRUPT");
    expect(digest(db)).toBe(before);
    // Viewing reads what SQLite can still read: the sessions table is intact.
    const list = await runKeel(["sessions", "list"], { cwd: p.dir, env: env(p.home) });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(id);
  });

  it("a session database that is not a database at all: run and sessions list fail with KEEL_STORE_CORRUPT (no stack trace) and the file is left as it was", async () => {
    const p = project(root, "not-a-db", faultConfig());
    const db = join(p.home, "sessions.sqlite");
    rmSync(p.home, { recursive: true, force: true });
    const junk = Buffer.alloc(8192, 0x5a);
    junk.write("this is not SQLite at all", 0);
    await import("node:fs").then((fs) => fs.mkdirSync(p.home, { recursive: true }));
    writeFileSync(db, junk);
    const from = server.requests.length;
    const run = await runKeel(["run", "hello"], { cwd: p.dir, env: env(p.home) });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("KEEL_STORE_CORRUPT");
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(server.requests.length).toBe(from);
    const list = await runKeel(["sessions", "list"], { cwd: p.dir, env: env(p.home) });
    expect(list.code).toBe(1);
    expect(list.stderr).toContain("KEEL_STORE_CORRUPT");
    expect(readFileSync(db).equals(junk)).toBe(true);
  });

  it("a plugin database that fails the quick check (skills.sqlite) is not written; the plugin says so and the turn completes", async () => {
    const skillsUrl = pathToFileURL(join(REPO, "packages", "plugin-skills", "src", "index.ts")).href;
    const p = project(
      root,
      "garbled-plugin",
      `import skills from ${JSON.stringify(skillsUrl)};\n${faultConfig("plugins: [skills({ dirs: [] })],").replace("export default {", "export default {")}`,
    );
    const first = await runKeel(["run", "tools:0 learn something"], { cwd: p.dir, env: env(p.home) });
    expect(first.code, first.stderr).toBe(0);
    const db = join(p.home, "skills.sqlite");
    expect(existsSync(db)).toBe(true);
    const fill = new DatabaseSync(db);
    fill.exec(
      "CREATE TABLE IF NOT EXISTS filler(x); INSERT INTO filler VALUES (randomblob(3000)), (randomblob(3000));",
    );
    fill.close();
    garbleTable(db, "filler");
    const before = digest(db);
    const run = await runKeel(["run", "--json", "tools:0 with a broken skills db"], { cwd: p.dir, env: env(p.home) });
    expect(run.code, run.stderr).toBe(0);
    const diag = run.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; code?: string; message?: string })
      .find((e) => e.type === "diagnostic" && e.code === "KEEL_SKILL_STORE_FAILED");
    expect(diag?.message).toContain("KEEL_STORE_CORRUPT");
    expect(diag?.message).toContain(db);
    expect(digest(db)).toBe(before);
  });
});
