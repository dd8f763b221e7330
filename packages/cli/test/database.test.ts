/**
 * One setting moves every store: the config's `store` or KEEL_DATABASE_URL. A real agent
 * through the real CLI on PostgreSQL: its session, its memory and `keel db migrate`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropTestSchemas, PG_URL, rawRows, requirePostgres, testSchema } from "../../store-postgres/test/support/pg.ts";
import { offlineEnv, REPO, runKeel } from "./support/run-keel.ts";
import { startStudioProcess } from "./support/studio.ts";

const dirs: string[] = [];
beforeAll(requirePostgres);
afterAll(async () => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  await dropTestSchemas();
});

function project(store?: string): string {
  const dir = mkdtempSync(join(tmpdir(), "keel-db-"));
  dirs.push(dir);
  const memory = JSON.stringify(join(REPO, "packages/plugin-memory/src/index.ts"));
  writeFileSync(
    join(dir, "agent.config.ts"),
    `import memory from ${memory};\nexport default { name: "db-agent", plugins: [memory({ extraction: "deterministic" })]${store ? `, store: ${JSON.stringify(store)}` : ""} };\n`,
  );
  return dir;
}

describe("store selection", () => {
  it("KEEL_DATABASE_URL puts the session log and memory on PostgreSQL; keel sessions and keel db migrate read it", async () => {
    const dir = project();
    const schema = testSchema();
    const env = offlineEnv({ KEEL_HOME: join(dir, "home"), KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema });
    const run = await runKeel(["run", "remember that my favourite colour is teal"], { cwd: dir, env });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("keel: stores on postgres://postgres@127.0.0.1:5432/test (KEEL_DATABASE_URL)");
    expect((await rawRows(schema, "keel_sessions")).length).toBe(1);
    expect((await rawRows(schema, "keel_events")).some((r) => r.includes("favourite colour is teal"))).toBe(true);
    const list = await runKeel(["sessions", "--json"], { cwd: dir, env });
    expect(JSON.parse(list.stdout)).toHaveLength(1);
    const migrate = await runKeel(["db", "migrate", "--json"], { cwd: dir, env });
    expect(migrate.code, migrate.stderr).toBe(0);
    expect(
      JSON.parse(migrate.stdout).components.map((c: { component: string; applied: number }) => [
        c.component,
        c.applied,
      ]),
    ).toEqual([
      ["experiments", 1],
      ["memory", 0],
      ["sessions", 0],
    ]);
  }, 60_000);

  it("keel studio reads the sessions of every instance from PostgreSQL", async () => {
    const dir = project();
    const schema = testSchema();
    const env = offlineEnv({ KEEL_HOME: join(dir, "home"), KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema });
    for (const input of ["first instance says hello", "second instance says hello"]) {
      const run = await runKeel(["run", "--new", input], { cwd: dir, env });
      expect(run.code, run.stderr).toBe(0);
    }
    const studio = await startStudioProcess([], { cwd: dir, env });
    try {
      await expect
        .poll(() => studio.stderr())
        .toContain("keel: studio on postgres://postgres@127.0.0.1:5432/test (read-only)");
      const list = (await (await fetch(`${studio.origin}/api/sessions?q=second&token=${studio.token}`)).json()) as {
        sessions: Array<{ id: string; title: string; status: string }>;
      };
      expect(list.sessions.map((s) => [s.title, s.status])).toEqual([["second instance says hello", "completed"]]);
      const detail = (await (
        await fetch(`${studio.origin}/api/sessions/${list.sessions[0]!.id}?token=${studio.token}`)
      ).json()) as { turns: Array<{ input: string; requests: unknown[] }> };
      expect(detail.turns.map((t) => t.input)).toEqual(["second instance says hello"]);
      expect(detail.turns[0]!.requests).toHaveLength(1);
    } finally {
      studio.stop();
    }
  }, 60_000);

  it("keel db migrate on a fresh schema creates the tables of the config's plugins", async () => {
    const dir = project();
    const schema = testSchema();
    const r = await runKeel(["db", "migrate"], {
      cwd: dir,
      env: offlineEnv({ KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema }),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /experiments\s+version 1 \(1 step applied\)\nmemory\s+version 1 \(1 step applied\)\nsessions\s+version 2 \(2 steps applied\)/,
    );
    expect(await rawRows(schema, "keel_experiments")).toEqual([]);
    expect(await rawRows(schema, "keel_memories")).toEqual([]);
  }, 60_000);

  it("a store that is neither sqlite nor a postgres URL is a located config error; without PostgreSQL keel db migrate says how to get it", async () => {
    const bad = await runKeel(["run", "hi"], { cwd: project("mysql://db/keel") });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/KEEL_CONFIG_INVALID[\s\S]*store: expected "sqlite" or a PostgreSQL URL/);
    const env = await runKeel(["run", "hi"], {
      cwd: project(),
      env: offlineEnv({ KEEL_DATABASE_URL: "mysql://db/keel" }),
    });
    expect(env.code).toBe(2);
    expect(env.stderr).toMatch(/KEEL_DATABASE_URL must be "sqlite" or a postgres:\/\/ URL/);
    const m = await runKeel(["db", "migrate"], { cwd: project(), env: offlineEnv({ KEEL_DATABASE_URL: "sqlite" }) });
    expect(m.code).toBe(2);
    expect(m.stderr).toContain("keel db migrate works on PostgreSQL");
  }, 60_000);
});
