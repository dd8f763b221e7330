/**
 * Adversarial scenarios for class 5 (silent loss) and class 7 (concurrency and storage), tried
 * from outside as a demanding user would: the real `keel` binary, the official Anthropic SDK
 * against the wire server, real SQLite files in throwaway homes.
 * - a durable job left by a killed process runs exactly once when several processes start at
 *   the same moment (a claim across processes, not only within one);
 * - a database path taken by a folder is refused with a code that says so;
 * - a full disk (a file-size limit) never loses the user's message after a provider call;
 * - a home written before the hardening merge opens with its data and is migrated, also when
 *   the migrating process is SIGKILLed;
 * - a deleted WAL, a home on a path with spaces and emoji, two chats on one session, a burst
 *   of new sessions in one fresh home.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { offlineEnv } from "../../packages/cli/test/support/run-keel.ts";
import { SQLITE_SCHEMA_VERSION } from "../../packages/store-sqlite/src/index.ts";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import {
  allEvents,
  jobTrail,
  keel,
  makeHome,
  memories,
  MEMORY,
  sessionOf,
  SLOW_MEMORY_CONFIG,
} from "./support/jobs.ts";
import {
  useSharedWire,
  faultConfig,
  leaseOf,
  pairingProblems,
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
import {
  rows,
  runKeelFileLimited,
  schemaOf,
  SKILLS,
  terminalsByTurn,
  V1_INPUT,
  V1_SESSION,
  writeV1Home,
} from "./support/adversarial-c.ts";

const { root, server: sharedServer } = useSharedWire("keel-fault-adv-c-");
let server: WireServer;
beforeAll(() => {
  server = sharedServer();
});

/** The fault agent named as the old home's agent, with the real memory and skills plugins. */
const legacyConfig = () =>
  `import { memory } from ${JSON.stringify(MEMORY)};\nimport { skills } from ${JSON.stringify(SKILLS)};\n` +
  faultConfig("plugins: [memory(), skills()],").replace('name: "fault"', 'name: "legacy"');
const env = (home: string) => wireEnv(home, server.anthropicBaseURL);
const SLOW = { SLOW_EXTRACT: "1" };
const extractKey = (session: string, n = 1) => `memory.extract:${session}/${n}`;
/** Requests since `from` whose messages mention `needle`. */
const requestsFor = (from: number, needle: string) =>
  server.requests.slice(from).filter((r) => JSON.stringify(r.body?.messages ?? []).includes(needle));

/** A home whose first turn's memory extraction was cut by SIGKILL (job pending, its runner gone). */
async function killedDuringExtraction(fact: string): Promise<{ dir: string; home: string; session: string }> {
  const { dir, home } = makeHome(SLOW_MEMORY_CONFIG);
  const killed = await keel(dir, home, ["run", fact], {
    env: SLOW,
    onStderr: (chunk, child) => {
      if (chunk.includes("extract-started")) child.kill("SIGKILL");
    },
  });
  expect(killed.code).toBeNull();
  const session = sessionOf(killed, home);
  expect(jobTrail(allEvents(home), extractKey(session))).toEqual(["job.pending", "job.started"]);
  return { dir, home, session };
}

describe("adversarial C, silent loss: a pending durable job runs once across processes", () => {
  it("two next starts racing to adopt a killed process's pending extraction: exactly one runs it (4 races)", async () => {
    // Before the fix each start claimed the key only in its own process: about half of the
    // races ran the job twice (two job.started, two job.pending adoptions).
    for (let race = 0; race < 4; race++) {
      const { dir, home, session } = await killedDuringExtraction(`I work at Acme Rockets, race ${race}.`);
      const [a, b] = await Promise.all([
        keel(dir, home, ["run", "Hello one."]),
        keel(dir, home, ["run", "Hello two."]),
      ]);
      expect(a.code, a.stderr).toBe(0);
      expect(b.code, b.stderr).toBe(0);
      const trail = jobTrail(allEvents(home), extractKey(session));
      expect(trail, `race ${race}`).toEqual([
        "job.pending",
        "job.started",
        "job.pending",
        "job.started",
        "job.completed:ok",
      ]);
      expect(memories(home).contents.filter((c) => c.includes("Acme"))).toHaveLength(1);
    }
  }, 60_000);

  it("the killed session's own resume racing a new session's start: the job runs once, and the resume keeps every message", async () => {
    for (let race = 0; race < 2; race++) {
      const { dir, home, session } = await killedDuringExtraction(`My cat is called Miso, race ${race}.`);
      const [resumed, fresh] = await Promise.all([
        keel(dir, home, ["run", "--session", session, "Still there?"]),
        keel(dir, home, ["run", "New here."]),
      ]);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(fresh.code, fresh.stderr).toBe(0);
      const events = allEvents(home);
      const trail = jobTrail(events, extractKey(session));
      expect(
        trail.filter((t) => t === "job.started"),
        `race ${race}: ${trail.join(" ")}`,
      ).toHaveLength(2);
      expect(trail.filter((t) => t === "job.completed:ok")).toHaveLength(1);
      expect(memories(home).contents.filter((c) => c.includes("Miso"))).toHaveLength(1);
      expect(storedUserTexts(events.filter((e) => e.sessionId === session))).toEqual([
        `My cat is called Miso, race ${race}.`,
        "Still there?",
      ]);
    }
  }, 60_000);
});

describe("adversarial C, silent loss: a live adopter keeps its job", () => {
  it("while a second process runs an adopted job, a third start leaves it alone (whatever order the sessions' ids sort in)", async () => {
    // Before the claim, the job's last runner was read in session-id order, not time order: when
    // the adopter's session sorted first, the killed process looked like the last runner and a
    // third start adopted the job again while the adopter was still running it.
    // The rounds are independent (each its own home): they run at once, so their close graces overlap.
    const round = async (round: number) => {
      const { dir, home, session } = await killedDuringExtraction(`I grow tomatoes, round ${round}.`);
      let third: Promise<Awaited<ReturnType<typeof keel>>> | undefined;
      const adopter = await keel(dir, home, ["run", "Adopting."], {
        env: { ...SLOW, KEEL_EXIT_GRACE_MS: "2500" },
        onStderr: (chunk) => {
          if (chunk.includes("extract-started")) third ??= keel(dir, home, ["run", "A third start."]);
        },
      });
      const t = await third!;
      expect(t.code, t.stderr).toBe(0);
      expect(adopter.stderr).toContain("KEEL_JOB_PENDING");
      // A's attempt, then the adopter's (cut by its close grace), and nothing from the third start
      // while the adopter holds the job (in log order). On a loaded machine the third start may
      // reach its check only after the adopter deferred the job and exited: adopting it then is right.
      const trail = jobTrail(allEvents(home), extractKey(session));
      expect(trail.slice(0, 5), `round ${round}`).toEqual([
        "job.pending",
        "job.started",
        "job.pending",
        "job.started",
        "job.deferred",
      ]);
      expect(
        [[], ["job.pending", "job.started", "job.completed:ok"]],
        `round ${round}: ${trail.join(", ")}`,
      ).toContainEqual(trail.slice(5));
    };
    await Promise.all([0, 1, 2].map(round));
  }, 60_000);
});

/** `unshare` runs each CLI as PID 1 of a new PID namespace, as in a container restarted after a kill. */
const AS_PID_1 = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"];
const canUnshare = spawnSync(AS_PID_1[0]!, [...AS_PID_1.slice(1), "true"]).status === 0;

describe("adversarial C: a restarted process with the killed one's pid (a container's PID 1)", () => {
  it.skipIf(!canUnshare)(
    "keel as PID 1 killed during extraction: the next PID 1 adopts the pending job at once, and resuming the session takes the dead PID 1's lease at once",
    async () => {
      // Before the fix a lease or job attempt of "pid 1 on this host" counted as this very process:
      // the resume was refused with KEEL_SESSION_BUSY naming process 1 (itself) for the lease's
      // 30 s, and other sessions left the job alone until its 180 s timeout.
      const { dir, home } = makeHome(SLOW_MEMORY_CONFIG);
      const jobEnv = (extra: Record<string, string> = {}) =>
        offlineEnv({ KEEL_HOME: home, NODE_COMPILE_CACHE: join(tmpdir(), "keel-fault-compile-cache"), ...extra });
      const a = startKeel(["run", "I work at Acme Rockets."], { cwd: dir, env: jobEnv(SLOW), prefix: AS_PID_1 });
      await until(() => a.stderr().includes("extract-started"), "the extraction of PID 1", 15_000);
      a.child.kill("SIGKILL");
      await a.exit;
      const session = sessionOf({ code: null, stdout: "", stderr: a.stderr() }, home);
      expect(jobTrail(allEvents(home), extractKey(session))).toEqual(["job.pending", "job.started"]);

      const next = await runKeel(["run", "Hello again."], { cwd: dir, env: jobEnv(), prefix: AS_PID_1 });
      expect(next.code, next.stderr).toBe(0);
      expect(jobTrail(allEvents(home), extractKey(session))).toEqual([
        "job.pending",
        "job.started",
        "job.pending",
        "job.started",
        "job.completed:ok",
      ]);
      expect(memories(home).contents.filter((c) => c.includes("Acme"))).toHaveLength(1);

      const resumed = await runKeel(["run", "--session", session, "Back after the restart."], {
        cwd: dir,
        env: jobEnv(),
        prefix: AS_PID_1,
      });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stderr).not.toContain("KEEL_SESSION_BUSY");
      const events = allEvents(home).filter((e) => e.sessionId === session);
      // The session's lease went with the turn that ended before the extraction; only the job's claim was PID 1's, and it was taken over at once (the job trail above).
      expect(events.filter((e) => e.type === "session.resumed").every((e) => !("leaseTakenOver" in e))).toBe(true);
      expect(storedUserTexts(events)).toEqual(["I work at Acme Rockets.", "Back after the restart."]);
    },
    30_000,
  );
});

describe("adversarial C, storage: what sits where a database should be", () => {
  it("a folder where sessions.sqlite (or its -wal) should be: run and sessions list exit 1 with KEEL_STORE_CORRUPT saying it is a folder, before any provider call", async () => {
    // Before the fix: KEEL_STORE_FAILED "unable to open database file" / "disk I/O error" with
    // advice to check permissions and disk space, which were both fine.
    const p = project(root, "db-is-folder", faultConfig());
    mkdirSync(join(p.home, "sessions.sqlite"), { recursive: true });
    const from = server.requests.length;
    const run = await runKeel(["run", "hello folder"], { cwd: p.dir, env: env(p.home) });
    expect(run.code).toBe(1);
    expect(run.ms).toBeLessThan(10_000);
    expect(run.stderr).toMatch(/KEEL_STORE_CORRUPT.*sessions\.sqlite is a folder, not a database file/);
    expect(run.stderr).not.toContain("disk has room");
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(server.requests.length).toBe(from);
    const list = await runKeel(["sessions", "list"], { cwd: p.dir, env: env(p.home) });
    expect(list.code).toBe(1);
    expect(list.stderr).toMatch(/KEEL_STORE_CORRUPT.*is a folder/);
    expect(existsSync(join(p.home, "sessions.sqlite-wal"))).toBe(false);

    // The same for its WAL: a folder named sessions.sqlite-wal beside a good database.
    rmSync(join(p.home, "sessions.sqlite"), { recursive: true });
    const ok = await runKeel(["run", "hello file"], { cwd: p.dir, env: env(p.home) });
    expect(ok.code, ok.stderr).toBe(0);
    mkdirSync(join(p.home, "sessions.sqlite-wal"));
    const walFolder = await runKeel(["run", "--session", sessionIdOf(ok.stderr), "hello wal folder"], {
      cwd: p.dir,
      env: env(p.home),
    });
    expect(walFolder.code).toBe(1);
    expect(walFolder.stderr).toMatch(/KEEL_STORE_CORRUPT.*sessions\.sqlite-wal is a folder, not a regular file/);
    expect(requestsFor(from, "hello wal folder")).toHaveLength(0);
  });
  it("a FIFO where sessions.sqlite should be: sessions list and run exit 1 with KEEL_STORE_CORRUPT within 5 s instead of blocking forever on the FIFO", async () => {
    // Before the fix `keel sessions list` opened the FIFO read-only and waited for a writer forever.
    const p = project(root, "db-is-fifo", faultConfig());
    mkdirSync(p.home, { recursive: true });
    execFileSync("mkfifo", [join(p.home, "sessions.sqlite")]);
    const list = await runKeel(["sessions", "list"], { cwd: p.dir, env: env(p.home), timeoutMs: 8_000 });
    expect(list.code).toBe(1);
    expect(list.ms).toBeLessThan(5_000);
    expect(list.stderr).toMatch(/KEEL_STORE_CORRUPT.*sessions\.sqlite is a FIFO, not a database file/);
    const from = server.requests.length;
    const run = await runKeel(["run", "hello fifo"], { cwd: p.dir, env: env(p.home), timeoutMs: 8_000 });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("KEEL_STORE_CORRUPT");
    expect(server.requests.length).toBe(from);
  });
});

describe("adversarial C, storage: a full disk", () => {
  it("the session log hits the file-size limit after the user's message: exit 1 KEEL_STORE_FAILED, the message is stored, and the next run resumes with one terminal event per turn and intact pairing", async () => {
    const p = project(root, "disk-full", faultConfig());
    const first = await runKeel(["run", "tools:1 pause:1 first turn"], {
      cwd: p.dir,
      env: env(p.home),
      timeoutMs: 60_000,
    });
    expect(first.code, first.stderr).toBe(0);
    const id = sessionIdOf(first.stderr);
    const size = Math.ceil(rows(join(p.home, "sessions.sqlite"), "PRAGMA page_count")[0]!["page_count"] as number) * 4;
    // The database file itself fits; its WAL can take the durable user message, not the whole turn.
    const full = await runKeelFileLimited(
      size + 1,
      ["run", "--session", id, "tools:2 pause:1 written on a full disk"],
      { cwd: p.dir, env: env(p.home) },
    );
    expect(full.code, full.stderr).toBe(1);
    expect(full.ms).toBeLessThan(10_000);
    expect(full.stderr).toContain("KEEL_STORE_FAILED");
    expect(full.stderr).not.toMatch(/\n\s+at /);
    const after = storedEvents(p.home, id);
    expect(storedUserTexts(after)).toContain("tools:2 pause:1 written on a full disk");

    const from = server.requests.length;
    const next = await runKeel(["run", "--session", id, "after the disk was freed"], {
      cwd: p.dir,
      env: env(p.home),
      timeoutMs: 60_000,
    });
    expect(next.code, next.stderr).toBe(0);
    const events = storedEvents(p.home, id);
    expect(storedUserTexts(events)).toEqual([
      "tools:1 pause:1 first turn",
      "tools:2 pause:1 written on a full disk",
      "after the disk was freed",
    ]);
    for (const [turn, ends] of terminalsByTurn(events)) expect(ends, turn).toHaveLength(1);
    const sent = requestsFor(from, "after the disk was freed");
    expect(sent.length).toBeGreaterThan(0);
    for (const r of sent) expect(pairingProblems(r.body as never)).toEqual([]);
    expect(JSON.stringify(sent[0]!.body.messages)).toContain("written on a full disk");
  });

  it("a full disk before the session database can even be opened: exit 1 with a coded error and no provider call", async () => {
    const p = project(root, "disk-full-open", faultConfig());
    // Setup runs get a minute (the 15 s default kill is short for a loaded machine); the bound under test is below.
    const first = await runKeel(["run", "first"], { cwd: p.dir, env: env(p.home), timeoutMs: 60_000 });
    expect(first.code, first.stderr).toBe(0);
    const id = sessionIdOf(first.stderr);
    const from = server.requests.length;
    const full = await runKeelFileLimited(4, ["run", "--session", id, "never sent"], { cwd: p.dir, env: env(p.home) });
    expect(full.code).toBe(1);
    expect(full.stderr).toMatch(/KEEL_STORE_FAILED.*sessions\.sqlite/);
    expect(requestsFor(from, "never sent")).toHaveLength(0);
    expect(storedUserTexts(storedEvents(p.home, id))).toEqual(["first"]);
  });
});

describe("adversarial C, storage: a home from before the hardening merge", () => {
  it("sessions v1 (no leases), memory v1 and skills v0 databases written by the old code, opened with memory and skills: the old history and memories reach the request, every schema is migrated", async () => {
    const p = project(root, "v1-home", legacyConfig());
    writeV1Home(p.home);
    expect(schemaOf(join(p.home, "sessions.sqlite")).tables).not.toContain("leases");
    const from = server.requests.length;
    const r = await runKeel(["run", "--session", V1_SESSION, "what is my dog called?"], {
      cwd: p.dir,
      env: env(p.home),
    });
    expect(r.code, r.stderr).toBe(0);
    const sent = requestsFor(from, "what is my dog called?")[0]!;
    expect(JSON.stringify(sent.body.messages)).toContain(V1_INPUT);
    expect(JSON.stringify(sent.body.system ?? "")).toContain("The user's dog is Rex");
    const sessions = schemaOf(join(p.home, "sessions.sqlite"));
    // Migrated all the way, whatever the newest version is (v3 dropped two unread indexes).
    expect(sessions.version).toBe(SQLITE_SCHEMA_VERSION);
    expect(SQLITE_SCHEMA_VERSION).toBeGreaterThanOrEqual(2);
    expect(sessions.tables).toContain("leases");
    expect(storedUserTexts(storedEvents(p.home, V1_SESSION))).toEqual([V1_INPUT, "what is my dog called?"]);
    expect(
      rows(
        join(p.home, "memory.sqlite"),
        "SELECT content FROM memories WHERE superseded_by IS NULL AND forgotten_at IS NULL",
      ).map((m) => m["content"]),
    ).toContain("The user's dog is Rex");
    // The old miss log kept a whole message with an AWS secret key: scrubbed on open, on disk too.
    expect(rows(join(p.home, "memory.sqlite"), "SELECT query FROM misses WHERE id = 2")[0]!["query"]).toMatch(
      /^deploy with .*\[REDACTED/,
    );
    for (const f of readdirSync(p.home).filter((n) => n.startsWith("memory.sqlite")))
      expect(readFileSync(join(p.home, f)).includes("wJalrXUtnFEMI"), f).toBe(false);
    // skills v0 kept raw inputs in un-namespaced streaks: migrated to v1, which drops them.
    const skills = schemaOf(join(p.home, "skills.sqlite"));
    expect(skills.version).toBe(1);
    expect(skills.tables).toContain("ns_streaks");
    expect(skills.tables).not.toContain("streaks");
    const list = await runKeel(["sessions", "list"], { cwd: p.dir, env: env(p.home) });
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(V1_SESSION);
  });

  it("SIGKILL at random moments while a v1 session database is being opened and migrated: never half-migrated, and the next run resumes with nothing lost", async () => {
    const delays = [40, 120, 200, 280, 360];
    for (const delay of delays) {
      const p = project(root, `v1-kill-${delay}`, legacyConfig());
      writeV1Home(p.home);
      const a = startKeel(["run", "--session", V1_SESSION, `killed at ${delay} ms`], { cwd: p.dir, env: env(p.home) });
      await new Promise((res) => setTimeout(res, delay));
      a.child.kill("SIGKILL");
      await a.exit;
      const s = schemaOf(join(p.home, "sessions.sqlite"));
      // All or nothing: version 1 without leases, or the current version with them.
      expect([1, SQLITE_SCHEMA_VERSION], `delay ${delay}`).toContain(s.version);
      expect(s.tables.includes("leases"), `delay ${delay}`).toBe(s.version === SQLITE_SCHEMA_VERSION);
      const b = await runKeel(["run", "--session", V1_SESSION, "after the kill"], { cwd: p.dir, env: env(p.home) });
      expect(b.code, `delay ${delay}: ${b.stderr}`).toBe(0);
      const texts = storedUserTexts(storedEvents(p.home, V1_SESSION));
      expect(texts[0]).toBe(V1_INPUT);
      expect(texts.at(-1)).toBe("after the kill");
      for (const [turn, ends] of terminalsByTurn(storedEvents(p.home, V1_SESSION))) expect(ends, turn).toHaveLength(1);
    }
  }, 60_000);
});

describe("adversarial C, storage: a holder stalled mid-stream", () => {
  it("SIGSTOP while the model's answer streams, past the lease TTL; after SIGCONT the streamed tool call never runs (no side effect) and no further request is made", async () => {
    const config = `import { appendFileSync } from "node:fs";
export default { name: "fault", model: "anthropic:claude-sonnet-4-6", lease: { ttlMs: 400 },
  tools: [{ name: "pause", description: "Leaves a mark (a side effect).", parameters: { type: "object", properties: { ms: { type: "number" } } }, category: "info",
    execute: () => { appendFileSync(process.env.MARK_FILE, "ran in " + process.pid + "\\n"); return "marked"; } }] };`;
    const p = project(root, "stalled-stream", config);
    const mark = join(p.dir, "marks.txt");
    const markEnv = { ...env(p.home), MARK_FILE: mark };
    const from = server.requests.length;
    // 150 ms between SSE events: the tool call arrives about a second after the request.
    const a = startKeel(["run", "--json", "tools:1 delay:150 stalled stream"], { cwd: p.dir, env: markEnv });
    await until(
      () => requestsFor(from, "stalled stream").length > 0 && /"sessionId":"/.test(a.stdout()),
      "the stalled turn's request",
    );
    const id = /"sessionId":"([0-9a-f-]{36})"/.exec(a.stdout())![1]!;
    await new Promise((r) => setTimeout(r, 200));
    a.child.kill("SIGSTOP");
    const b = await runKeel(["run", "--wait", "--session", id, "took over"], { cwd: p.dir, env: markEnv });
    expect(b.code, b.stderr).toBe(0);
    const before = storedEvents(p.home, id);
    // Let the server finish writing the stalled stream into the socket, then wake the holder.
    await new Promise((r) => setTimeout(r, 1_200));
    a.child.kill("SIGCONT");
    const ra = await a.exit;
    expect(ra.code, a.stderr()).toBe(1);
    expect(a.stderr()).toContain("KEEL_SESSION_BUSY");
    expect(existsSync(mark)).toBe(false);
    expect(storedEvents(p.home, id)).toEqual(before);
    expect(
      requestsFor(from, "stalled stream").filter((r) => !JSON.stringify(r.body.messages).includes("took over")),
    ).toHaveLength(1);
    expect([...terminalsByTurn(before).values()]).toEqual([["turn.interrupted"], ["turn.completed"]]);
  });
});

describe("adversarial C, storage: sabotage and odd homes", () => {
  it("the -wal file deleted while a turn runs: the holder completes, and the next run sees every turn of the session", async () => {
    const p = project(root, "wal-deleted", faultConfig());
    const first = await runKeel(["run", "hello first"], { cwd: p.dir, env: env(p.home) });
    const id = sessionIdOf(first.stderr);
    const a = startKeel(["run", "--json", "--session", id, "tools:1 pause:600 second turn"], {
      cwd: p.dir,
      env: env(p.home),
    });
    await until(() => a.stdout().includes('"tool.started"'), "the second turn's tool");
    unlinkSync(join(p.home, "sessions.sqlite-wal"));
    const ra = await a.exit;
    expect(ra.code, a.stderr()).toBe(0);
    const b = await runKeel(["run", "--session", id, "third turn"], { cwd: p.dir, env: env(p.home) });
    expect(b.code, b.stderr).toBe(0);
    const events = storedEvents(p.home, id);
    expect(storedUserTexts(events)).toEqual(["hello first", "tools:1 pause:600 second turn", "third turn"]);
    expect([...terminalsByTurn(events).values()]).toEqual([["turn.completed"], ["turn.completed"], ["turn.completed"]]);
  });

  it("KEEL_HOME on a path with spaces, accents and emoji: run, resume and list work", async () => {
    const p = project(root, "odd path ü 日本 😀", faultConfig());
    const home = join(p.dir, "home with space ü😀");
    const a = await runKeel(["run", "hello from an odd path"], { cwd: p.dir, env: env(home) });
    expect(a.code, a.stderr).toBe(0);
    const id = sessionIdOf(a.stderr);
    const b = await runKeel(["run", "--session", id, "again"], { cwd: p.dir, env: env(home) });
    expect(b.code, b.stderr).toBe(0);
    expect(storedUserTexts(storedEvents(home, id))).toEqual(["hello from an odd path", "again"]);
    const list = await runKeel(["sessions", "list"], { cwd: p.dir, env: env(home) });
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(id);
  });

  it("two `keel chat` on one session take turns: an idle chat holds no lease, and each catches up with the other's turn before its own (no seq clash, no lost line)", async () => {
    const p = project(root, "two-chats", faultConfig());
    const first = await runKeel(["run", "hello first"], { cwd: p.dir, env: env(p.home) });
    const id = sessionIdOf(first.stderr);
    const from = server.requests.length;
    const a = startKeel(["chat", "--session", id], { cwd: p.dir, env: env(p.home), keepStdin: true });
    await until(() => a.stderr().includes("keel chat"), "the first chat's banner");
    const b = startKeel(["chat", "--session", id], { cwd: p.dir, env: env(p.home), keepStdin: true });
    await until(() => b.stderr().includes("keel chat"), "the second chat's banner");
    b.child.stdin!.write("from chat b\n");
    await until(
      () => storedEvents(p.home, id).filter((e) => e.type === "turn.completed").length === 2 && !leaseOf(p.home, id),
      "chat b's turn to end",
    );
    a.child.stdin!.write("from chat a\n");
    await until(
      () =>
        requestsFor(from, "from chat a").length > 0 &&
        storedUserTexts(storedEvents(p.home, id)).includes("from chat a"),
      "chat a's turn",
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nchat a: ${a.stderr()}\nchat b: ${b.stderr()}`);
    });
    a.child.stdin!.end();
    b.child.stdin!.end();
    expect((await a.exit).code, a.stderr()).toBe(0);
    expect((await b.exit).code, b.stderr()).toBe(0);
    expect(a.stderr()).not.toContain("KEEL_SESSION_BUSY");
    // Chat a read chat b's turn from the log before its own: the model saw both lines.
    expect(JSON.stringify(requestsFor(from, "from chat a")[0]!.body.messages)).toContain("from chat b");
    const events = storedEvents(p.home, id);
    expect(storedUserTexts(events)).toEqual(["hello first", "from chat b", "from chat a"]);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  });

  it("a bounded burst: 12 `keel run --new` at once in one fresh home all complete, each in its own session with its own message", async () => {
    const p = project(root, "burst", faultConfig());
    const runs = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        runKeel(["run", "--new", `burst message ${i}`], { cwd: p.dir, env: env(p.home), timeoutMs: 30_000 }),
      ),
    );
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    const ids = runs.map((r) => sessionIdOf(r.stderr));
    expect(new Set(ids).size).toBe(12);
    expect(storedSessions(p.home).sort()).toEqual([...ids].sort());
    ids.forEach((id, i) => {
      expect(storedUserTexts(storedEvents(p.home, id))).toEqual([`burst message ${i}`]);
    });
  }, 60_000);
});
