/**
 * Class 14, trust round 3, adversarial pass: what a hostile fleet, host or tool argument does to
 * the per-turn lease, the catch-up from the log and the value-by-value redaction. Each scenario
 * failed on main 27c873d/eccf95a for the reason its title states. Cross-process scenarios drive
 * the HTTP example's server as real processes; the others run agents on real SQLite files.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Agent, KeelEvent } from "../../packages/agent/src/index.ts";
import { createAgent, definePlugin, defineTool } from "../../packages/agent/src/index.ts";
import { scriptedProvider } from "../../packages/testkit/src/index.ts";
import memory from "../../packages/plugin-memory/src/index.ts";
import {
  dropTestSchemas,
  PG_URL,
  rawRows,
  requirePostgres,
  testSchema,
} from "../../packages/store-postgres/test/support/pg.ts";

const SERVER = fileURLToPath(new URL("../../examples/http-server/server.ts", import.meta.url));
const children: ChildProcess[] = [];
const dirs: string[] = [];
const agents: Agent[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
  for (const a of agents.splice(0)) await a.close().catch(() => undefined);
});
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await dropTestSchemas();
});

function home(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-trust-adv-"));
  dirs.push(d);
  return d;
}

/** One instance of the HTTP example; resolves once it listens. */
async function instance(keelHome: string, env: Record<string, string> = {}): Promise<string> {
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, KEEL_HOME: keelHome, PORT: "0", KEEL_MODEL: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  return new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });

/** Run one turn over HTTP; the text of the stream (its verdict frame included). */
async function turn(url: string, id: string, input: string): Promise<string> {
  const res = await post(`${url}/sessions/${id}/turns`, { input });
  const text = await res.text();
  expect(res.status, text.slice(0, 300)).toBe(200);
  expect(text).toContain('"type":"verdict"');
  return text;
}

async function messages(url: string, id: string): Promise<Array<{ role: string; text: string }>> {
  const res = await fetch(`${url}/sessions/${id}/messages`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { messages: Array<{ role: string; text: string }> }).messages;
}

/** A plugin that sends every call of `tool` to a person. */
const askFor = (tool: string) =>
  definePlugin({
    name: "ask-for",
    version: "1.0.0",
    setup: (ctx) =>
      ctx.on("tool.pre_call", (e) =>
        e.call.name === tool ? { kind: "tool_decision", decision: "ask", reason: "a person decides" } : undefined,
      ),
  });

async function agentOn(h: string, options: Omit<Parameters<typeof createAgent>[0], "home">): Promise<Agent> {
  const a = await createAgent({ home: h, ...options });
  agents.push(a);
  return a;
}

/** Every byte Keel wrote under `h` (databases, WAL and journals included), as Latin-1 text. */
function bytesUnder(h: string): string {
  let out = "";
  for (const f of ["sessions.sqlite", "sessions.sqlite-wal", "sessions.sqlite-journal"])
    if (existsSync(join(h, f))) out += readFileSync(join(h, f)).toString("latin1");
  return out;
}

describe("class 14 (adversarial): a handle that fell behind catches up once", () => {
  it("concurrent requests to instance A after instance B ran a turn (one PostgreSQL store): every reply shows B's turn once, and the fleet's turn ids stay unique", async () => {
    await requirePostgres();
    const schema = testSchema();
    const env = { KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema };
    const a = await instance(home(), env);
    const b = await instance(home(), env);
    const { id } = (await (await post(`${a}/sessions`, {})).json()) as { id: string };
    await turn(a, id, "status");
    await turn(b, id, "status please");
    const truth = await messages(b, id);
    expect(truth.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
      "assistant",
      "tool",
      "assistant",
    ]);
    // A's cached handle is behind by B's turn; five requests reach it at once (a page polling, say).
    const seen = await Promise.all(Array.from({ length: 5 }, () => messages(a, id)));
    for (const m of seen) expect(m).toEqual(truth);
    // A's next turn and then B's: each turn of the session has an id of its own.
    await turn(a, id, "status again");
    await turn(b, id, "status once more");
    const started = (await rawRows(schema, "keel_events"))
      .map((r) => JSON.parse(r) as { session_id: string; type: string; turn_id: string })
      .filter((r) => r.session_id === id && r.type === "turn.started");
    expect(started).toHaveLength(4);
    expect(new Set(started.map((r) => r.turn_id)).size).toBe(4);
  });

  it("run() and resume() on a handle another instance answered or resumed meanwhile read the log first: no KEEL_APPROVAL_PENDING for an answered call, the tool runs once", async () => {
    const h = home();
    let runs = 0;
    const refund = defineTool({
      name: "refund",
      description: "Refund an order.",
      category: "exec",
      execute: () => `refunded (${++runs})`,
    });
    const script = (n: number) => [
      { toolCalls: [{ id: `toolu_01Xk2P9mQ4vL7nR3tY6wZ8a${n}`, name: "refund", args: { order: `ord_${n}` } }] },
      { text: `refund ${n} handled` },
    ];
    const a = await agentOn(h, {
      provider: scriptedProvider([...script(1), ...script(2)]),
      tools: [refund],
      plugins: [askFor("refund")],
    });
    const b = await agentOn(h, {
      provider: scriptedProvider([{ text: "refund 2 handled" }]),
      tools: [refund],
      plugins: [askFor("refund")],
    });
    const sa = await a.session();
    expect((await sa.run("refund order 1")).verdict.status).toBe("paused");
    // B approves; A's handle (kept open, as a server caches it) resumes.
    await (await b.session(sa.id)).approve("toolu_01Xk2P9mQ4vL7nR3tY6wZ8a1");
    const resumed = await sa.resume();
    expect(resumed.verdict.status).toBe("completed");
    expect(runs).toBe(1);
    // A pauses again; B approves and resumes it; A's handle then starts the next turn.
    expect((await sa.run("refund order 2")).verdict.status).toBe("paused");
    const sb = await b.session(sa.id);
    await sb.approve("toolu_01Xk2P9mQ4vL7nR3tY6wZ8a2");
    expect((await sb.resume()).verdict.status).toBe("completed");
    expect(runs).toBe(2);
    const next = await sa.run("thanks").catch((err: unknown) => err);
    expect(next).not.toBeInstanceOf(Error);
  });
});

describe("class 14 (adversarial): what a handle writes without a lease", () => {
  it('a steer refused with KEEL_SESSION_BUSY ("nothing was written") is never written later: retried once, it is queued once', async () => {
    const h = home();
    const a = await agentOn(h, {
      provider: scriptedProvider([{ text: "first" }, { text: "a long answer", delayMs: 800 }]),
    });
    const b = await agentOn(h, { provider: scriptedProvider([{ text: "b answers" }]) });
    const sa = await a.session();
    await sa.run("hello");
    const sb = await b.session(sa.id);
    const running = sa.run("take your time");
    await new Promise((r) => setTimeout(r, 200));
    const refused = await sb.steer("STEER-ONCE").then(
      () => undefined,
      (err: unknown) => err,
    );
    expect((refused as { code?: string }).code).toBe("KEEL_SESSION_BUSY");
    expect((refused as Error).message).toContain("nothing was written");
    await running;
    // The host retries, as the error says.
    await sb.steer("STEER-ONCE");
    await sb.run("next").catch(() => undefined);
    const queued = (await sb.events())
      .filter((e): e is Extract<KeelEvent, { type: "message.queued" }> => e.type === "message.queued")
      .map((e) => e.text);
    expect(queued.filter((t) => t === "STEER-ONCE")).toHaveLength(1);
  });

  // Open: fails on main and here. close() swallows KEEL_SESSION_BUSY for what the handle emitted without
  // a lease (Session.flush), and an idle handle never retries its outbox after a refused write, so
  // job.completed is dropped and the job runs again. Drop `.fails` with the fix.
  it("a durable job that finished in instance B while instance A runs a turn keeps its record when B closes: the next start does not run it again", async () => {
    const h = home();
    let runs = 0;
    const worker = definePlugin({
      name: "worker",
      version: "1.0.0",
      setup(ctx) {
        ctx.registerJob("index", async () => {
          runs++;
          await new Promise((r) => setTimeout(r, 300));
        });
        ctx.on("turn.post_turn", (e) => ({
          kind: "background_job",
          name: "index",
          idempotencyKey: `index:${e.turnId}`,
          durable: true,
          retryDelayMs: 1,
        }));
      },
    });
    const b = await agentOn(h, { provider: scriptedProvider([{ text: "b" }]), plugins: [worker] });
    const a = await agentOn(h, { provider: scriptedProvider([{ text: "slow", delayMs: 1500 }]) });
    const sb = await b.session();
    await sb.run("index this");
    await new Promise((r) => setTimeout(r, 50));
    const sa = await a.session(sb.id);
    const running = sa.run("a long turn");
    await b.close();
    await running;
    expect(runs).toBe(1);
    const c = await agentOn(h, { provider: scriptedProvider([]), plugins: [worker] });
    await c.session(sb.id);
    await c.close();
    const events = await (await (await agentOn(h, { provider: scriptedProvider([]) })).session(sb.id)).events();
    expect(events.filter((e) => e.type === "job.completed")).toHaveLength(1);
    expect(runs).toBe(1);
  });
});

describe("class 14 (adversarial): caller data in storage", () => {
  const KEY = "q8Zk3Lw9Rt2Yp6Vb1Nc4Xm7Hd0Jf5Gs8";

  it("a key in a tool argument is never stored: in a URL's query (api_key=, access_token=) or as the value of an env entry named like a key", async () => {
    const h = home();
    const fetchUrl = defineTool({
      name: "fetch_url",
      description: "GET a URL.",
      category: "info",
      execute: () => "200 OK",
    });
    const setEnv = defineTool({
      name: "set_env",
      description: "Set deployment variables.",
      category: "exec",
      execute: () => "set",
    });
    const a = await agentOn(h, {
      provider: scriptedProvider([
        {
          toolCalls: [
            {
              id: "toolu_01Aa",
              name: "fetch_url",
              args: { url: `https://api.example.com/v1/report?api_key=${KEY}&format=csv` },
            },
            {
              id: "toolu_01Ab",
              name: "fetch_url",
              args: { url: `https://graph.example.com/me?access_token=${KEY.split("").reverse().join("")}` },
            },
            {
              id: "toolu_01Ac",
              name: "set_env",
              args: { env: [{ name: "STRIPE_SECRET", value: `${KEY.slice(16)}${KEY.slice(0, 16)}` }] },
            },
          ],
        },
        { text: "done" },
      ]),
      tools: [fetchUrl, setEnv],
    });
    const s = await a.session();
    expect((await s.run("pull the report and set the env")).verdict.status).toBe("completed");
    await a.close();
    const bytes = bytesUnder(h);
    expect(bytes).toContain("api.example.com");
    for (const k of [KEY, KEY.split("").reverse().join(""), `${KEY.slice(16)}${KEY.slice(0, 16)}`])
      expect(bytes).not.toContain(k);
  });

  it("a paused call whose arguments carry identifiers in key-named fields (a Stripe-style idempotencyKey, a cache key, a public key) runs with them after a reload", async () => {
    const h = home();
    const args = {
      order: "ord_2026_1127",
      idempotencyKey: "req_01HZX8K3M9QW2E5R7T4Y6U8I0P",
      cacheKey: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      publicKey: "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=",
    };
    const ran: unknown[] = [];
    const refund = defineTool({
      name: "refund",
      description: "Refund an order.",
      category: "exec",
      execute: (x: unknown) => (ran.push(x), "refunded"),
    });
    const a = await agentOn(h, {
      provider: scriptedProvider([{ toolCalls: [{ id: "toolu_01Q9", name: "refund", args }] }]),
      tools: [refund],
      plugins: [askFor("refund")],
    });
    const s = await a.session();
    expect((await s.run("refund it")).verdict.status).toBe("paused");
    await a.close();
    const b = await agentOn(h, {
      provider: scriptedProvider([{ text: "refunded" }]),
      tools: [refund],
      plugins: [askFor("refund")],
    });
    const again = await b.session(s.id);
    expect(again.pendingApprovals()[0]?.args).toEqual(args);
    await again.approve("toolu_01Q9");
    expect((await again.resume()).verdict.status).toBe("completed");
    expect(ran).toEqual([args]);
  });
});

describe("class 14 (adversarial): a child agent's plugins follow their parent", () => {
  it("a subagent's plugins (ToolContext.child) keep their data in the parent agent's home, never in KEEL_HOME", async () => {
    const shared = home();
    const own = home();
    const before = process.env.KEEL_HOME;
    process.env.KEEL_HOME = shared;
    try {
      const delegate = defineTool({
        name: "delegate",
        description: "Ask the note keeper.",
        category: "exec",
        execute: async (_args: unknown, ctx) => {
          const run = await ctx.child({
            name: "note_keeper",
            agent: { plugins: [memory({ extraction: "deterministic" })] },
            input: "Remember that release day is Thursday.",
          });
          return run.result.text ?? "";
        },
      });
      const a = await agentOn(own, {
        provider: scriptedProvider([
          { toolCalls: [{ id: "toolu_01Dg", name: "delegate", args: {} }] },
          { text: "noted by the child" },
          { text: "the child wrote it down" },
        ]),
        sideModel: false,
        tools: [delegate],
      });
      const s = await a.session();
      expect((await s.run("note the release day")).verdict.status).toBe("completed");
      await a.close();
      expect(readdirSync(shared)).toEqual([]);
      expect(existsSync(join(own, "memory.sqlite"))).toBe(true);
    } finally {
      if (before === undefined) delete process.env.KEEL_HOME;
      else process.env.KEEL_HOME = before;
    }
  });
});
