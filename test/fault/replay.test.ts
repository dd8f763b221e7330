/**
 * Class 16, evals and replay: `keel replay` of sessions the real binary recorded against the
 * wire server (the Anthropic SDK). A replay never asks the model, never writes to the recorded
 * store or home, never shows a secret the log redacted, survives a broken plugin of today's
 * config, and works on PostgreSQL.
 */
import { mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../packages/store-postgres/src/index.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";
import {
  digest,
  faultConfig,
  project,
  runKeel,
  sessionIdOf,
  storedEvents,
  useSharedWire,
  wireEnv,
} from "./support/storage.ts";

const { root, server } = useSharedWire("keel-fault-replay-");
const KEY = `sk-ant-api03-${"Q7x".repeat(30)}AA`;

/** The fault agent with an `echo` tool (returns its text) and, with BROKEN=1, a plugin that throws. */
const config = faultConfig(`plugins: [{
    name: "notes",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("turn.pre_prompt_compile", () => {
        if (process.env.BROKEN === "1") throw new Error("notes broke today");
        return { kind: "prompt_section", id: "n", domain: "notes", sectionId: "notes", content: process.env.NOTES ?? "Keep notes short." };
      });
    },
  }],`);

/** Every file under `dir` with its digest: what a replay must leave as it was. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else out[p] = digest(p);
    }
  };
  walk(dir);
  return out;
}

describe("keel replay (class 16)", () => {
  let p: { dir: string; home: string };
  let id = "";
  const tmp = join(root, "tmp");

  beforeAll(async () => {
    mkdirSync(tmp, { recursive: true });
    p = project(root, "recorded", config);
    const run = await runKeel(["run", `tools:2 pause:5 remember ${KEY}`], {
      cwd: p.dir,
      env: wireEnv(p.home, server().anthropicBaseURL),
      timeoutMs: 60_000,
    });
    expect(run.code, run.stderr).toBe(0);
    id = sessionIdOf(run.stderr);
    expect(JSON.stringify(storedEvents(p.home, id))).not.toContain(KEY);
  }, 90_000);

  // No key and no server: a replay that asked the model would fail.
  const offline = (extra: Record<string, string> = {}) => ({
    ...wireEnv(p.home, "http://127.0.0.1:9", extra),
    ANTHROPIC_API_KEY: "",
    TMPDIR: tmp,
  });

  it("asks no model, writes nothing to the recorded home, removes its scratch home and shows no secret", async () => {
    const before = snapshot(p.home);
    const asked = server().requests.length;
    const r = await runKeel(["replay", id, "--strict", "--json"], { cwd: p.dir, env: offline(), timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { identical: boolean; requests: Array<{ same: boolean; compared: string }> };
    expect(report.identical).toBe(true);
    expect(report.requests).toHaveLength(3);
    expect(report.requests.every((q) => q.compared === "digest")).toBe(true);
    expect(server().requests.length).toBe(asked);
    expect(snapshot(p.home)).toEqual(before);
    expect(readdirSync(tmp).filter((f) => f.startsWith("keel-replay-"))).toEqual([]);
    const text = await runKeel(["replay", id], {
      cwd: p.dir,
      env: offline({ NOTES: "Cite sources." }),
      timeoutMs: 60_000,
    });
    for (const out of [r.stdout, r.stderr, text.stdout, text.stderr]) expect(out).not.toContain(KEY);
    expect(text.stdout).toContain("[REDACTED:");
  });

  it("a plugin of today's config that throws: the replay names it and the section it no longer builds, exit 1 under --strict, no stack trace", async () => {
    const r = await runKeel(["replay", id, "--strict"], {
      cwd: p.dir,
      env: offline({ BROKEN: "1" }),
      timeoutMs: 60_000,
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("section notes removed (by notes, 17 → 0 chars)");
    expect(r.stdout).toMatch(/Plugin notes threw in turn\.pre_prompt_compile: .*notes broke today/);
    expect(r.stdout).toContain("Result: diverged");
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("a session recorded on PostgreSQL replays from it, and the database gains no event", async () => {
    await requirePostgres();
    const schema = testSchema();
    try {
      const pg = { KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema };
      const q = project(root, "pg", config);
      const run = await runKeel(["run", "tools:1 pause:5 on postgres"], {
        cwd: q.dir,
        env: wireEnv(q.home, server().anthropicBaseURL, pg),
        timeoutMs: 60_000,
      });
      expect(run.code, run.stderr).toBe(0);
      const sid = sessionIdOf(run.stderr);
      const store = new PostgresSessionStore({ url: PG_URL, schema });
      const before = (await store.events(sid)).length;
      const r = await runKeel(["replay", sid, "--strict"], {
        cwd: q.dir,
        env: { ...wireEnv(q.home, "http://127.0.0.1:9", pg), ANTHROPIC_API_KEY: "" },
        timeoutMs: 60_000,
      });
      expect(r.code, r.stderr + r.stdout).toBe(0);
      expect(r.stdout).toContain("Result: identical.");
      expect((await store.events(sid)).length).toBe(before);
      expect((await store.listSessions()).length).toBe(1);
      await store.close();
    } finally {
      await dropTestSchemas();
    }
  });

  afterAll(() => {
    // The recorded home is the test's; the report file is never written anywhere else.
    expect(readFileSync(join(p.dir, "agent.config.mjs"), "utf8")).toContain("notes");
  });
});
