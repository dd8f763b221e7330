/**
 * PostgreSQL as a hostile user or server would meet it: a server that accepts and never
 * answers, a password in the URL, NUL bytes and lone surrogates in what is stored, a memory of
 * megabytes, another user's namespace. (Kills across instances: `fleet.test.ts`.)
 */
import { createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent } from "../../packages/kernel/src/index.ts";
import type { ModelEvent, ModelProvider, ModelRequest } from "../../packages/kernel/src/index.ts";
import { memory, PostgresMemoryStore } from "../../packages/plugin-memory/src/index.ts";
import { PostgresSessionStore } from "../../packages/store-postgres/src/index.ts";
import { dropTestSchemas, PG_URL, rawRows, requirePostgres, testSchema, testTarget } from "../../packages/store-postgres/test/support/pg.ts";
import { project, runKeel, tempRoot } from "./support/storage.ts";

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
    const env = { ...process.env, KEEL_HOME: home, KEEL_DATABASE_URL: url, KEEL_DATABASE_CONNECT_TIMEOUT_MS: "1500", KEEL_OFFLINE: "1" };
    const r = await runKeel(["run", "hello"], { cwd: dir, env, timeoutMs: 20_000 });
    expect(r.signal, "keel hung and was killed").toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("KEEL_STORE_FAILED");
    expect(r.stderr).toContain(`127.0.0.1:${port}`);
    expect(r.stderr + r.stdout).not.toContain("hunter2-very-secret");
    expect(r.ms).toBeLessThan(12_000);
  }, 30_000);

  it("NUL bytes and lone surrogates in a message and a memory are stored (as U+FFFD), not a failed write", async () => {
    const schema = testSchema();
    const nasty = "tea\u0000time \ud800 at five";
    const provider: ModelProvider = {
      id: "fault:remember",
      async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
        const last = request.messages.at(-1)!;
        const message = last.role === "user"
          ? { role: "assistant" as const, content: [{ type: "tool_call" as const, id: "c1", name: "memory_remember", args: { content: nasty } }] }
          : { role: "assistant" as const, content: [{ type: "text" as const, text: last.role === "tool" ? JSON.stringify(last.content) : "" }] };
        yield { type: "response", message, stopReason: last.role === "user" ? "tool_use" : "end_turn", usage: {} };
      },
    };
    const store = new PostgresSessionStore({ url: PG_URL, schema });
    const agent = await createAgent({ name: "nul", store, provider, plugins: [memory({ database: PG_URL, namespace: "u1", extraction: "off" })] });
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
  }, 30_000);

  it("a memory of megabytes (long distinct words) is stored and found; another namespace never sees it", async () => {
    const target = testTarget();
    const s = new PostgresMemoryStore(target);
    const words = Array.from({ length: 3000 }, (_, i) => `w${i}${"x".repeat(400)}`);
    const big = `needle ${words.join(" ")}`;
    const r = await s.write({ namespace: "alice", content: big });
    expect(r.memory.content.length).toBe(big.length);
    expect((await s.search({ namespace: "alice", terms: ["needle"], limit: 5 })).map((h) => h.memory.id)).toEqual([r.memory.id]);
    expect(await s.search({ namespace: "bob", terms: ["needle"], limit: 5 })).toEqual([]);
    expect(await s.get("bob", r.memory.id)).toBeUndefined();
    expect((await rawRows(target.schema, "keel_memories")).length).toBe(1);
  }, 30_000);
});
