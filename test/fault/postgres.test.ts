/**
 * PostgreSQL as a hostile user or server would meet it: a server that accepts and never
 * answers, a password in the URL, NUL bytes and lone surrogates in what is stored, a memory of
 * megabytes, another user's namespace; credentials in every place a connection URL can hold
 * one (userinfo, `?password=`, `?sslpassword=`) never shown or stored, whatever fails.
 * (Kills across instances: `fleet.test.ts`.)
 */
import { createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent } from "../../packages/agent/src/index.ts";
import type { ModelEvent, ModelProvider, ModelRequest } from "../../packages/kernel/src/index.ts";
import { memory, PostgresMemoryStore } from "../../packages/plugin-memory/src/index.ts";
import { PostgresSessionStore } from "../../packages/store-postgres/src/index.ts";
import {
  dropTestSchemas,
  PG_URL,
  rawRows,
  requirePostgres,
  testSchema,
  testTarget,
} from "../../packages/store-postgres/test/support/pg.ts";
import { project, REPO, runKeel, tempRoot } from "./support/storage.ts";

const root = tempRoot("keel-fault-pg-");
let silent: Server;
const sockets: Socket[] = [];
beforeAll(async () => {
  await requirePostgres();
  // Accepts connections and never says a word: the worst a database endpoint can do.
  silent = createServer((s) => void sockets.push(s));
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  silent.close();
  rmSync(root, { recursive: true, force: true });
  await dropTestSchemas();
});

describe("PostgreSQL under hostile conditions", () => {
  it("a server that accepts and never answers: keel run ends with KEEL_STORE_FAILED within the connect deadline, the password never shown", async () => {
    const port = (silent.address() as { port: number }).port;
    const { dir, home } = project(root, "silent", `export default { name: "silent" };\n`);
    const url = `postgres://keel:hunter2-very-secret@127.0.0.1:${port}/keel`;
    const env = {
      ...process.env,
      KEEL_HOME: home,
      KEEL_DATABASE_URL: url,
      KEEL_DATABASE_CONNECT_TIMEOUT_MS: "1500",
      KEEL_OFFLINE: "1",
    };
    const r = await runKeel(["run", "hello"], { cwd: dir, env, timeoutMs: 20_000 });
    expect(r.signal, "keel hung and was killed").toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("KEEL_STORE_FAILED");
    expect(r.stderr).toContain(`127.0.0.1:${port}`);
    expect(r.stderr + r.stdout).not.toContain("hunter2-very-secret");
    expect(r.ms).toBeLessThan(12_000);
  }, 60_000);

  it("NUL bytes and lone surrogates in a message and a memory are stored (as U+FFFD), not a failed write", async () => {
    const schema = testSchema();
    const nasty = "tea\u0000time \ud800 at five";
    const provider: ModelProvider = {
      id: "fault:remember",
      async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
        const last = request.messages.at(-1)!;
        const message =
          last.role === "user"
            ? {
                role: "assistant" as const,
                content: [{ type: "tool_call" as const, id: "c1", name: "memory_remember", args: { content: nasty } }],
              }
            : {
                role: "assistant" as const,
                content: [{ type: "text" as const, text: last.role === "tool" ? JSON.stringify(last.content) : "" }],
              };
        yield { type: "response", message, stopReason: last.role === "user" ? "tool_use" : "end_turn", usage: {} };
      },
    };
    const store = new PostgresSessionStore({ url: PG_URL, schema });
    const agent = await createAgent({
      name: "nul",
      store,
      provider,
      plugins: [memory({ database: PG_URL, namespace: "u1", extraction: "off" })],
    });
    process.env.KEEL_DATABASE_SCHEMA = schema;
    try {
      const session = await agent.session();
      const result = await session.run(`remember ${nasty}`);
      expect(result.verdict.status).toBe("completed");
      expect(result.text).toMatch(/Memory #\d+ stored/);
      const mem = new PostgresMemoryStore({ url: PG_URL, schema });
      expect((await mem.list({ namespace: "u1" })).map((m) => m.content)).toEqual(["tea\uFFFDtime \uFFFD at five"]);
      expect((await mem.search({ namespace: "u1", terms: ["tea"], limit: 5 })).length).toBe(1);
      const users = (await session.events()).filter((e) => e.type === "message.appended" && e.message.role === "user");
      expect(users).toHaveLength(1);
      await session.close();
    } finally {
      delete process.env.KEEL_DATABASE_SCHEMA;
      await agent.close();
      await store.close();
    }
  }, 60_000);

  it("a memory of megabytes (long distinct words) is stored and found; another namespace never sees it", async () => {
    const target = testTarget();
    const s = new PostgresMemoryStore(target);
    const words = Array.from({ length: 3000 }, (_, i) => `w${i}${"x".repeat(400)}`);
    const big = `needle ${words.join(" ")}`;
    const r = await s.write({ namespace: "alice", content: big });
    expect(r.memory.content.length).toBe(big.length);
    expect((await s.search({ namespace: "alice", terms: ["needle"], limit: 5 })).map((h) => h.memory.id)).toEqual([
      r.memory.id,
    ]);
    expect(await s.search({ namespace: "bob", terms: ["needle"], limit: 5 })).toEqual([]);
    expect(await s.get("bob", r.memory.id)).toBeUndefined();
    expect((await rawRows(target.schema, "keel_memories")).length).toBe(1);
  }, 60_000);
});

/** Files under `home` whose bytes hold any of `needles` (WAL and SHM files included). */
function filesHolding(home: string, needles: readonly string[]): string[] {
  let names: string[];
  try {
    names = readdirSync(home, { recursive: true }) as string[];
  } catch {
    return [];
  }
  return names.filter(
    (n) => statSync(join(home, n)).isFile() && needles.some((x) => readFileSync(join(home, n)).includes(x)),
  );
}

/** A password that could be nowhere else: a prefix per place, random bytes. */
const secret = (where: string) => `${where}-${randomBytes(9).toString("base64url")}`;

/** A port nothing listens on (a server that refuses): bound, then closed. */
async function refusingPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Env of an offline run whose stores are at `url` (tables in `extra.KEEL_DATABASE_SCHEMA` when given, never the developer's). */
function pgEnv(home: string, url: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KEEL_HOME: home,
    KEEL_DATABASE_URL: url,
    KEEL_DATABASE_CONNECT_TIMEOUT_MS: "3000",
    KEEL_OFFLINE: "1",
  };
  delete env.KEEL_DATABASE_SCHEMA;
  return { ...env, ...extra };
}

describe("trust round 3 (issue 30): a credential anywhere in a connection string is never shown or stored", () => {
  it("a server that refuses: keel run with a password in the userinfo, ?password= and ?sslpassword= says where it tried (host, port, database) and shows none of them", async () => {
    const port = await refusingPort();
    const [user, query, ssl] = [secret("userinfo"), secret("query"), secret("sslkey")];
    const { dir, home } = project(root, "mask-refused", `export default { name: "mask-refused" };\n`);
    const url = `postgres://keel:${user}@127.0.0.1:${port}/keeldb?password=${query}&sslpassword=${ssl}&application_name=keel-fault`;
    const r = await runKeel(["run", "hello"], { cwd: dir, env: pgEnv(home, url), timeoutMs: 30_000 });
    expect(r.signal, "keel hung and was killed").toBeNull();
    for (const s of [user, query, ssl]) expect(r.stdout + r.stderr).not.toContain(s);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      `keel: stores on postgres://keel:***@127.0.0.1:${port}/keeldb?password=***&sslpassword=***&application_name=keel-fault (KEEL_DATABASE_URL)`,
    );
    expect(r.stderr).toContain("KEEL_STORE_FAILED");
    expect(r.stderr).toContain(`127.0.0.1:${port}/keeldb`);
    expect(filesHolding(home, [user, query, ssl])).toEqual([]);
  }, 60_000);

  it("a database that does not exist on the real server: keel run, keel sessions list and keel db migrate fail naming it, with no password shown", async () => {
    const [user, query, ssl] = [secret("userinfo"), secret("query"), secret("sslkey")];
    const { dir, home } = project(root, "mask-nodb", `export default { name: "mask-nodb" };\n`);
    const server = new URL(PG_URL);
    const url = `postgres://${server.username || "postgres"}:${user}@${server.host}/keel_fault_no_such_db?sslpassword=${ssl}&password=${query}`;
    for (const args of [
      ["run", "hello"],
      ["sessions", "list"],
      ["db", "migrate"],
    ]) {
      const r = await runKeel(args, { cwd: dir, env: pgEnv(home, url), timeoutMs: 30_000 });
      expect(r.signal, `keel ${args.join(" ")} hung`).toBeNull();
      for (const s of [user, query, ssl]) expect(r.stdout + r.stderr, args.join(" ")).not.toContain(s);
      expect(r.code, `keel ${args.join(" ")}: ${r.stderr}`).not.toBe(0);
      expect(r.stderr, args.join(" ")).toMatch(/KEEL_STORE_FAILED/);
      expect(r.stderr, args.join(" ")).toContain(`@${server.host}/keel_fault_no_such_db?sslpassword=***&password=***`);
      expect(r.stderr, args.join(" ")).toContain('"keel_fault_no_such_db" does not exist');
    }
    expect(filesHolding(home, [user, query, ssl])).toEqual([]);
  }, 90_000);

  it("a plugin's store on a missing database while the session log is SQLite: the failure is shown and recorded in the home without the password", async () => {
    const [query, ssl] = [secret("query"), secret("sslkey")];
    const server = new URL(PG_URL);
    const url = `postgres://${server.username || "postgres"}@${server.host}/keel_fault_no_such_db?password=${query}&sslpassword=${ssl}`;
    const memoryUrl = pathToFileURL(join(REPO, "packages", "plugin-memory", "src", "index.ts")).href;
    const script = JSON.stringify([
      { toolCalls: [{ name: "memory_remember", args: { content: "the deploy is on Friday" } }] },
      { text: "noted" },
    ]);
    const { dir, home } = project(
      root,
      "mask-plugin",
      `import memory from ${JSON.stringify(memoryUrl)};\nexport default { name: "mask-plugin", plugins: [memory({ database: ${JSON.stringify(url)}, extraction: "off" })], offline: { script: ${script} } };\n`,
    );
    const env = pgEnv(home, "sqlite");
    const r = await runKeel(["run", "remember that the deploy is on Friday"], { cwd: dir, env, timeoutMs: 30_000 });
    expect(r.signal, "keel hung").toBeNull();
    for (const s of [query, ssl]) expect(r.stdout + r.stderr).not.toContain(s);
    expect(filesHolding(home, [query, ssl])).toEqual([]);
    expect(r.stderr + r.stdout).toContain("KEEL_MEMORY_STORE_FAILED");
    expect(r.stderr + r.stdout).toContain("keel_fault_no_such_db?password=***&sslpassword=***");
    expect(
      filesHolding(home, ["KEEL_MEMORY_STORE_FAILED"]).length,
      "the failure is in the session log",
    ).toBeGreaterThan(0);
  }, 60_000);

  it("a working server given ?password= (trust auth ignores it): run, sessions list and db migrate --json show where the stores are, never the password", async () => {
    const query = secret("query");
    const schema = testSchema();
    const { dir, home } = project(root, "mask-ok", `export default { name: "mask-ok" };\n`);
    const url = `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}password=${query}`;
    const env = pgEnv(home, url, { KEEL_DATABASE_SCHEMA: schema });
    const out: string[] = [];
    for (const args of [
      ["run", "hello"],
      ["sessions", "list"],
      ["db", "migrate", "--json"],
    ]) {
      const r = await runKeel(args, { cwd: dir, env, timeoutMs: 30_000 });
      expect(r.stdout + r.stderr, args.join(" ")).not.toContain(query);
      expect(r.code, `keel ${args.join(" ")}: ${r.stderr}`).toBe(0);
      out.push(r.stdout + r.stderr);
    }
    expect(out[0]).toContain(`keel: stores on ${PG_URL.replace(/\?.*$/, "")}?password=*** (KEEL_DATABASE_URL)`);
    expect(JSON.parse(out[2]!.trim().split("\n").at(-1)!)).toMatchObject({
      database: `${PG_URL.replace(/\?.*$/, "")}?password=***`,
      schema,
    });
    expect(filesHolding(home, [query])).toEqual([]);
  }, 90_000);

  it("a config whose store is not a usable URL quotes it with the password masked", async () => {
    const query = secret("query");
    const { dir, home } = project(
      root,
      "mask-config",
      `export default { name: "mask-config", store: "postgresql://keel@db.internal/keel?password=${query} trailing" };\n`,
    );
    const r = await runKeel(["run", "hello"], { cwd: dir, env: pgEnv(home, "sqlite"), timeoutMs: 30_000 });
    expect(r.stdout + r.stderr).not.toContain(query);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain("KEEL_CONFIG_INVALID");
    expect(r.stderr).toContain("postgresql://keel@db.internal/keel?password=***");
  }, 60_000);
});
