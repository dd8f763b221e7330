/**
 * Adversarial `keel replay` with the real binary (offline scripted model, real SQLite files):
 * `--last` in a store shared with child sessions, another agent and an empty session; two
 * replays of one session at once; a session whose turn is still running in another process.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteSessionStore, defaultSessionDbPath } from "../../packages/store-sqlite/src/index.ts";
import { offlineEnv, REPO, runKeel } from "../../packages/cli/test/support/run-keel.ts";
import { gate } from "../../packages/cli/test/support/gate.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-adv-replay-cli-"));
const home = join(dir, "home");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The agent `name`; SCRIPT=task delegates once to a `helper` child session. */
function writeConfig(file: string, name: string): string {
  const path = join(dir, file);
  writeFileSync(
    path,
    `import { existsSync } from "node:fs";
import { tasks } from ${JSON.stringify(join(REPO, "packages/plugin-tasks/src/index.ts"))};
export default {
  name: ${JSON.stringify(name)},
  instructions: "You help with the project." + (process.env.EXTRA ?? ""),
  offline: {
    script: process.env.SCRIPT === "task"
      ? [
          { toolCalls: [{ id: "t1", name: "task", args: { profile: "helper", prompt: "count the files" } }] },
          { text: "There are 3 files." },
          { text: "The helper counted 3 files." },
        ]
      : [
          { toolCalls: [{ id: "c1", name: "read", args: { path: "TODO.md" } }] },
          { text: "Two things are left." },
        ],
  },
  tools: [{ name: "read", description: "Reads a file.", execute: async (a) => {
    // READ_GATE: the read waits until that file exists (a test holds the turn open as long as it needs).
    while (process.env.READ_GATE && !existsSync(process.env.READ_GATE)) await new Promise((r) => setTimeout(r, 20));
    return "contents of " + a.path;
  } }],
  plugins: [tasks({ profiles: { helper: { description: "Counts things.", instructions: "Count carefully." } } })],
};
`,
  );
  return path;
}

const config = writeConfig("agent.config.mjs", "adv");
const other = writeConfig("other.config.mjs", "other");
const keel = (args: string[], extra: Record<string, string> = {}, cfg = config) =>
  runKeel([...args, "--config", cfg, "--home", home], { env: offlineEnv(extra) });

let delegating = "";
let plain = "";
beforeAll(async () => {
  // Three sessions of their own in one home: the runs write it at once, as processes sharing a store do.
  const [a, b, c] = await Promise.all([
    keel(["run", "What is left in TODO.md?"]),
    keel(["run", "Count the files with the helper"], { SCRIPT: "task" }),
    keel(["run", "What is left, says the other agent?"], {}, other),
  ]);
  expect(a.code, a.stderr).toBe(0);
  expect(b.code, b.stderr).toBe(0);
  expect(c.code, c.stderr).toBe(0);
  const store = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
  const adv = store.listSessions({ agent: "adv" });
  const child = adv.find(
    (s) =>
      store.events(s.id)[0]?.type === "session.created" &&
      "parent" in (store.events(s.id)[0] as object) &&
      (store.events(s.id)[0] as { parent?: unknown }).parent,
  );
  expect(child, "the task ran in a child session of the same agent").toBeDefined();
  delegating = adv.find((s) => store.events(s.id).some((e) => e.type === "child.started"))!.id;
  plain = adv.find((s) => s.id !== delegating && s.id !== child!.id)!.id;
  store.close();
}, 60_000);

// The scenarios on the shared home run in order (each adds or reads the sessions the next ones
// count); the ones with homes of their own run beside them.
describe.concurrent("keel replay on the shared home", () => {
  describe.sequential("keel replay --last (adversarial)", () => {
    it("--last 5 --strict replays the agent's own top-level sessions: not the other agent's, not a task's child session", async () => {
      const r = await keel(["replay", "--last", "5", "--strict", "--json"]);
      const reports = JSON.parse(r.stdout) as Array<{ sessionId: string; identical: boolean }>;
      expect(reports.map((x) => x.sessionId).sort()).toEqual([delegating, plain].sort());
      expect(reports.every((x) => x.identical)).toBe(true);
      expect(r.code, r.stdout).toBe(0);
    }, 60_000);
  });

  describe.sequential("keel replay --json (adversarial)", () => {
    it("the report's shape: one object for a session, an array with --last; the same keys, diverged or not", async () => {
      const [one, changed, many] = await Promise.all([
        keel(["replay", plain, "--json"]),
        keel(["replay", plain, "--json"], { EXTRA: " Be brief." }),
        keel(["replay", "--last", "1", "--json"]),
      ]);
      const keys = ["identical", "notes", "pluginProblems", "requests", "sessionId", "toolChanges", "tools", "turns"];
      const a = JSON.parse(one.stdout) as Record<string, unknown>;
      expect(Object.keys(a).sort()).toEqual(keys);
      const b = JSON.parse(changed.stdout) as Record<string, unknown>;
      expect(Object.keys(b).sort()).toEqual([...keys, "asked", "firstDivergence", "systemDiff"].sort());
      expect(Object.keys((b.asked as object) ?? {}).sort()).toEqual(["lastMessages", "system", "tools"]);
      const rows = (a.requests as Array<Record<string, unknown>>).map((r) => Object.keys(r).sort());
      for (const r of rows)
        expect(r).toEqual([
          "compared",
          "context",
          "edits",
          "index",
          "messages",
          "optionsSame",
          "round",
          "same",
          "sections",
          "systemSame",
          "tokens",
          "tools",
        ]);
      const list = JSON.parse(many.stdout) as unknown[];
      expect(Array.isArray(list) && list.length).toBe(1);
      expect(Object.keys(list[0] as object).sort()).toEqual(keys);
    }, 60_000);
  });

  describe.sequential("keel replay (adversarial): concurrency and live sessions", () => {
    it("a session with no turn (a chat opened and closed) does not fail a --last batch", async () => {
      // Broke: replaySession threw KEEL_REPLAY_EMPTY for it and `keel replay --last 5 --strict`
      // exited 2: an opened-and-closed `keel chat` broke the CI gate.
      const chat = await runKeel(["chat", "--config", config, "--home", home], { env: offlineEnv(), stdin: [] });
      expect(chat.code, chat.stderr).toBe(0);
      const store = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
      const empty = store
        .listSessions({ agent: "adv" })
        .filter((s) => !store.events(s.id).some((e) => e.type === "turn.started"));
      store.close();
      expect(empty).toHaveLength(1);
      const r = await keel(["replay", "--last", "5", "--strict"]);
      expect(r.code, r.stderr + r.stdout).toBe(0);
      expect(r.stdout).toContain("2 of 2 sessions replayed identically.");
      // Asked for by id, it is still the clear, coded error.
      const one = await keel(["replay", empty[0]!.id]);
      expect(one.code).not.toBe(0);
      expect(one.stderr).toContain("KEEL_REPLAY_EMPTY");
    }, 60_000);

    it("--tools live of a session that delegated a task: the child runs again under its recorded id on its own recorded answers: identical", async () => {
      // Broke: the child asked the replay's provider and was served the parent's next answer; the
      // parent then ran out of answers and its turn failed. Then: the task's result names the
      // child session, whose id was new in the replay, so the request after the call differed.
      const r = await keel(["replay", delegating, "--tools", "live", "--strict", "--json"]);
      expect(r.code, r.stdout).toBe(0);
      const report = JSON.parse(r.stdout) as {
        identical: boolean;
        notes: string[];
        turns: Array<{ replayed: { text: string } }>;
      };
      expect(report.notes).toEqual([]);
      expect(report.turns.map((t) => t.replayed.text)).toEqual(["The helper counted 3 files."]);
      expect(report.identical).toBe(true);
    }, 60_000);

    it("two replays of one session at once: both identical, the recorded database byte for byte as it was", async () => {
      const db = defaultSessionDbPath(home);
      const { createHash } = await import("node:crypto");
      const { readFileSync } = await import("node:fs");
      const sum = () => createHash("sha256").update(readFileSync(db)).digest("hex");
      const before = sum();
      const [a, b] = await Promise.all([
        keel(["replay", delegating, "--strict", "--json"]),
        keel(["replay", delegating, "--strict", "--json"]),
      ]);
      for (const r of [a, b]) {
        expect(r.code, r.stderr).toBe(0);
        expect((JSON.parse(r.stdout) as { identical: boolean }).identical).toBe(true);
      }
      expect(sum()).toBe(before);
    }, 60_000);

    it("a session whose turn is still running in another process: replayed up to where its log stands", async () => {
      // Broke before the per-turn answers: the replay ran the open turn on, with no answer left.
      // Its read waits on a file the test writes once the replay is done: the turn is open for as long as that takes.
      const gate = join(dir, "running-turn-may-end");
      const running = runKeel(["run", "What is left in TODO.md?", "--config", config, "--home", home], {
        env: offlineEnv({ READ_GATE: gate }),
      });
      let id = "";
      const end = Date.now() + 30_000;
      while (!id) {
        if (Date.now() > end) throw new Error("timed out waiting for the running turn's tool.started");
        await new Promise((r) => setTimeout(r, 50));
        const store = new SqliteSessionStore({ path: defaultSessionDbPath(home), readOnly: true });
        for (const s of store.listSessions({ agent: "adv", limit: 3 })) {
          const events = store.events(s.id);
          if (events.some((e) => e.type === "tool.started") && !events.some((e) => e.type === "turn.completed"))
            id = s.id;
        }
        store.close();
      }
      const r = await keel(["replay", id, "--strict", "--json"]);
      writeFileSync(gate, "");
      const report = JSON.parse(r.stdout) as { identical: boolean; turns: Array<{ recorded: { status: string } }> };
      expect(report.turns[0]!.recorded.status).toBe("unfinished");
      expect(report.identical, r.stdout).toBe(true);
      expect(r.code).toBe(0);
      const done = await running;
      expect(done.code, done.stderr).toBe(0);
      // Once finished, it replays identically as a whole.
      const after = await keel(["replay", id, "--strict"]);
      expect(after.code, after.stdout).toBe(0);
    }, 60_000);
  });
});

// Their processes take turns two at a time, beside the one of the shared-home scenario running then.
const ownSlot = gate(2);
const runOwn = (...args: Parameters<typeof runKeel>) => ownSlot(() => runKeel(...args));

describe.concurrent("keel replay (adversarial): sessions in homes of their own", () => {
  it("a turn cut by the context ceiling replays identically, also from a log whose manifests lack the window (the config's is used)", async () => {
    // Broke: the replay's provider had no context window, so the ceiling never tripped: the
    // request the recording sent as its final round (no tools) went with the tools.
    const cfg = join(dir, "ceiling.config.mjs");
    writeFileSync(
      cfg,
      `export default {
  name: "ceiling",
  limits: { contextCeiling: 0.5 },
  offline: { script: { contextWindow: 6000, steps: [
    { toolCalls: [{ id: "c1", name: "big", args: {} }] },
    { toolCalls: [{ id: "c2", name: "big", args: {} }] },
    { text: "enough" },
  ] } },
  tools: [{ name: "big", description: "Big output.", execute: () => "lorem ipsum ".repeat(1000) }],
};
`,
    );
    const h = join(dir, "ceiling-home");
    const run = await runOwn(["run", "read it all", "--config", cfg, "--home", h], { env: offlineEnv() });
    // A turn stopped by a guard exits 1.
    expect(run.stderr).toContain("keel: stopped (context_ceiling)");
    const db = new DatabaseSync(defaultSessionDbPath(h));
    const id = (db.prepare("SELECT id FROM sessions").get() as { id: string }).id;
    const finals = db
      .prepare("SELECT count(*) AS n FROM events WHERE type = 'prompt.compiled' AND data LIKE '%\"finalRound\":true%'")
      .get() as { n: number };
    expect(finals.n).toBe(1);
    db.close();
    const replay = () => runOwn(["replay", id, "--strict", "--config", cfg, "--home", h], { env: offlineEnv() });
    const now = await replay();
    expect(now.code, now.stdout).toBe(0);
    // As a log written before manifests held the window.
    const w = new DatabaseSync(defaultSessionDbPath(h));
    w.exec("UPDATE events SET data = json_remove(data, '$.manifest.contextWindow') WHERE type = 'prompt.compiled'");
    w.close();
    const old = await replay();
    expect(old.code, old.stdout).toBe(0);
  }, 60_000);

  it("a turn a SIGKILLed process left, recovered by the next process (recovery auto), then another turn: identical", async () => {
    const cfg = join(dir, "recover.config.mjs");
    writeFileSync(
      cfg,
      `export default {
  name: "recover",
  recovery: "auto",
  offline: { script: [
    { toolCalls: [{ id: "c1", name: "read", args: { path: "TODO.md" } }] },
    { text: "Two things are left." },
  ] },
  tools: [{ name: "read", description: "Reads a file.", execute: async (a) => {
    await new Promise((r) => setTimeout(r, Number(process.env.READ_MS ?? 0)));
    return "contents of " + a.path;
  } }],
};
`,
    );
    const h = join(dir, "recover-home");
    const { spawn } = await import("node:child_process");
    const { KEEL_BIN } = await import("../../packages/cli/test/support/run-keel.ts");
    const child = spawn(process.execPath, [KEEL_BIN, "run", "What is left?", "--config", cfg, "--home", h], {
      env: offlineEnv({ READ_MS: "30000" }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const gone = new Promise((r) => child.on("close", r));
    let id = "";
    const end = Date.now() + 30_000;
    while (!id) {
      if (Date.now() > end) throw new Error("timed out waiting for tool.started");
      await new Promise((r) => setTimeout(r, 50));
      try {
        const store = new SqliteSessionStore({ path: defaultSessionDbPath(h), readOnly: true });
        for (const s of store.listSessions()) if (store.events(s.id).some((e) => e.type === "tool.started")) id = s.id;
        store.close();
      } catch {}
    }
    child.kill("SIGKILL");
    await gone;
    const next = await runOwn(["run", "--session", id, "And now?", "--config", cfg, "--home", h], {
      env: offlineEnv(),
    });
    // The recovered turn completed; the next one failed (the offline script ran out).
    expect(next.code).toBe(1);
    const store = new SqliteSessionStore({ path: defaultSessionDbPath(h), readOnly: true });
    const events = store.events(id);
    store.close();
    expect(events.some((e) => e.type === "turn.resumed" && !!e.recovered)).toBe(true);
    expect(events.some((e) => e.type === "tool.completed" && e.status === "cancelled")).toBe(true);
    // Broke: the cut call, answered from the log with its "interrupted" result, counted as
    // "cancelled → error", and the replay diverged with the same config (a call that timed out
    // did the same: "timeout → error").
    const r = await runOwn(["replay", id, "--strict", "--config", cfg, "--home", h], { env: offlineEnv() });
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toContain("Result: identical.");
  }, 60_000);

  it("sessions of keel run whose calls asked for approval (--ask deny, --ask allow, answered on the paused turn): identical", async () => {
    // Broke before approvals were replayed through the pause: the CLI answers on the paused
    // turn (session.deny with its reason, then resume), and a callback's denial reads otherwise.
    const cfg = join(dir, "ask.config.mjs");
    writeFileSync(
      cfg,
      `export default {
  name: "asker",
  offline: { script: [
    { toolCalls: [{ id: "c1", name: "read", args: { path: "TODO.md" } }] },
    { text: "Done." },
  ] },
  tools: [{ name: "read", description: "Reads a file.", execute: (a) => "contents of " + a.path }],
  plugins: [{ name: "gate", version: "1.0.0", setup(ctx) {
    ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "reads need a yes" }));
  } }],
};
`,
    );
    const h = join(dir, "ask-home");
    const runs = await Promise.all(
      ["deny", "allow"].map((ask) =>
        runOwn(["run", `read it (${ask})`, "--ask", ask, "--config", cfg, "--home", h], { env: offlineEnv() }),
      ),
    );
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    const store = new SqliteSessionStore({ path: defaultSessionDbPath(h), readOnly: true });
    const ids = store.listSessions().map((s) => s.id);
    const resolved = ids.flatMap((id) => store.events(id).filter((e) => e.type === "approval.resolved"));
    store.close();
    expect(resolved.map((e) => e.type === "approval.resolved" && [e.approved, e.by]).sort()).toEqual([
      [false, "host"],
      [true, "host"],
    ]);
    const replays = await Promise.all(
      ids.map((id) => runOwn(["replay", id, "--strict", "--config", cfg, "--home", h], { env: offlineEnv() })),
    );
    for (const r of replays) expect(r.code, r.stdout).toBe(0);
  }, 60_000);
});
