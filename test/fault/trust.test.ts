/**
 * Class 14, trust round 3: nothing a host relies on may vanish, and a paused session belongs to
 * the fleet. Each scenario drives what a team embedding Keel drives: the HTTP example's server
 * (`examples/http-server/server.ts`) as several real processes on one store, with fetch.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { TurnStreamEvent } from "../../packages/stream/src/index.ts";
import { createAgent, isKeelError } from "../../packages/agent/src/index.ts";
import { scriptedProvider } from "../../packages/testkit/src/index.ts";
import { pool } from "../../packages/cli/test/support/run-keel.ts";
import compaction from "../../packages/plugin-compaction/src/index.ts";
import { goals } from "../../packages/plugin-goals/src/index.ts";
import mcp from "../../packages/plugin-mcp/src/index.ts";
import memory from "../../packages/plugin-memory/src/index.ts";
import skills from "../../packages/plugin-skills/src/index.ts";
import { userModel } from "../../packages/plugin-user-model/src/index.ts";
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

afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await dropTestSchemas();
});

function home(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-trust-"));
  dirs.push(d);
  return d;
}

/** Start one instance of the HTTP example; resolves once it listens. */
async function instance(
  keelHome: string,
  env: Record<string, string> = {},
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, KEEL_HOME: keelHome, PORT: "0", KEEL_MODEL: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
  return { url, child };
}

const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });

async function stream(res: Response): Promise<TurnStreamEvent[]> {
  expect(
    res.status,
    await res
      .clone()
      .text()
      .then((t) => t.slice(0, 300)),
  ).toBe(200);
  const out: TurnStreamEvent[] = [];
  const text = await res.text();
  for (const frame of text.split("\n\n")) {
    const data = frame.split("\n").find((l) => l.startsWith("data: "));
    if (data) out.push(JSON.parse(data.slice(6)) as TurnStreamEvent);
  }
  return out;
}

function verdict(es: TurnStreamEvent[]) {
  const last = es.at(-1);
  if (last?.type !== "verdict") throw new Error(`the stream ended with ${JSON.stringify(last)}`);
  return last.result;
}

async function pending(url: string, id: string): Promise<Array<{ callId: string; name: string; args: unknown }>> {
  const res = await fetch(`${url}/sessions/${id}/approvals`);
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { pending: Array<{ callId: string; name: string; args: unknown }> }).pending;
}

describe("class 14: a paused approval is never lost on reload", () => {
  it("twelve sessions paused on calls with provider-shaped ids (toolu_01… of 32 characters) all come back after a SIGKILL: listed, approved and run exactly once", async () => {
    const h = home();
    const log = join(h, "deployments.log");
    // How long a deploy's steps take is not what this checks: 1 ms steps, and the sessions are
    // paused and approved three at a time (each is its own session; the server serves them at once).
    const fast = { DEPLOY_STEP_MS: "1" };
    let a = await instance(h, fast);
    const sessions = await pool([...Array(12).keys()], 3, async (i) => {
      const { id } = (await (await post(`${a.url}/sessions`, {})).json()) as { id: string };
      const version = `v7.${i}.${(i * 7) % 10}`;
      const asked = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: `deploy ${version}` }));
      expect(verdict(asked).verdict.status).toBe("paused");
      const callId = (asked.find((e) => e.type === "approval.requested") as { callId: string }).callId;
      expect(callId).toMatch(/^toolu_01[0-9A-Za-z]{24}$/);
      return { id, version, callId };
    });
    a.child.kill("SIGKILL");
    await new Promise((r) => a.child.once("exit", r));
    a = await instance(h, fast);
    await pool(sessions, 3, async (s) => {
      const listed = await pending(a.url, s.id);
      expect(listed.map((p) => p.callId)).toEqual([s.callId]);
      const rest = await stream(
        await post(`${a.url}/sessions/${s.id}/approvals`, { answers: [{ callId: s.callId, approve: true }] }),
      );
      expect(verdict(rest).verdict.status).toBe("completed");
    });
    const deployed = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split(" ")[1]);
    expect(deployed.sort()).toEqual(sessions.map((s) => s.version).sort());
  });
});

describe("class 14: a paused session belongs to the fleet", () => {
  it("while instance A keeps the paused session open, instance B lists its approvals, approves and resumes it; A then serves the next turn on the whole history", async () => {
    const h = home();
    const log = join(h, "deployments.log");
    const [a, b] = await Promise.all([instance(h, { DEPLOY_STEP_MS: "1" }), instance(h, { DEPLOY_STEP_MS: "1" })]);
    const { id } = (await (await post(`${a.url}/sessions`, {})).json()) as { id: string };
    const asked = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: "deploy v8.1.0" }));
    expect(verdict(asked).verdict.status).toBe("paused");
    // A holds its handle open (it is cached for ten minutes); B needs no lease to read it.
    expect((await pending(a.url, id)).length).toBe(1);
    const listed = await pending(b.url, id);
    expect(listed).toEqual([expect.objectContaining({ name: "deploy", args: { version: "v8.1.0" } })]);
    const rest = await stream(
      await post(`${b.url}/sessions/${id}/approvals`, { answers: [{ callId: listed[0]!.callId, approve: true }] }),
    );
    expect(verdict(rest).verdict.status).toBe("completed");
    expect(readFileSync(log, "utf8").split("\n").filter(Boolean)).toHaveLength(1);

    // A's handle fell behind: it catches up from the log before it answers or runs anything.
    expect(await pending(a.url, id)).toEqual([]);
    const next = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: "status" }));
    expect(verdict(next).text).toContain("live: v8.1.0");
    const { messages } = (await (await fetch(`${a.url}/sessions/${id}/messages`)).json()) as {
      messages: Array<{ role: string; text: string }>;
    };
    expect(messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
      "assistant",
      "tool",
      "assistant",
    ]);
    expect(existsSync(log)).toBe(true);
  });

  it(
    "a turn running in A is a 409 KEEL_SESSION_BUSY in B naming the holder, answered before any byte is streamed; once it ends B runs the session",
    async () => {
      const h = home();
      // A's deploy takes three steps of 1 s: B's request lands while it runs (it is sent once the first
      // step is streamed, so it has the 2-3 s the other steps take; B answers a 409 in milliseconds).
      const [a, b] = await Promise.all([instance(h, { DEPLOY_STEP_MS: "1000" }), instance(h)]);
      const { id } = (await (await post(`${a.url}/sessions`, {})).json()) as { id: string };
      const asked = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: "deploy v9.0.0" }));
      const callId = (asked.find((e) => e.type === "approval.requested") as { callId: string }).callId;
      const running = await post(`${a.url}/sessions/${id}/approvals`, { answers: [{ callId, approve: true }] });
      // The resumed turn streams: once its first progress line arrives, A holds the session.
      const reader = running.body!.getReader();
      let seen = "";
      while (!seen.includes("tool.progress")) seen += new TextDecoder().decode((await reader.read()).value);
      const busy = await post(`${b.url}/sessions/${id}/turns`, { input: "status" });
      expect(busy.status).toBe(409);
      expect(busy.headers.get("content-type")).toContain("application/json");
      expect(busy.headers.get("retry-after")).toBe("1");
      const body = (await busy.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("KEEL_SESSION_BUSY");
      expect(body.error.message).toMatch(/process \d+ on .*, running a turn/);
      // Reading needs no lease, even now.
      expect(await pending(b.url, id)).toEqual([]);
      while (!(await reader.read()).done);
      const after = await stream(await post(`${b.url}/sessions/${id}/turns`, { input: "status" }));
      expect(verdict(after).text).toContain("live: v9.0.0");
    },
    20_000 + 3_000,
  );
});

describe("class 14: one store rule, and every plugin's data follows its agent", () => {
  it("two instances with their own homes and one KEEL_DATABASE_URL share PostgreSQL: a session paused on A is approved on B, and no sessions.sqlite is written", async () => {
    await requirePostgres();
    const schema = testSchema();
    const env = { KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema };
    const [ha, hb] = [home(), home()];
    const [a, b] = await Promise.all([instance(ha, env), instance(hb, env)]);
    const { id } = (await (await post(`${a.url}/sessions`, {})).json()) as { id: string };
    const asked = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: "deploy v10.2.0" }));
    expect(verdict(asked).verdict.status).toBe("paused");
    const listed = await pending(b.url, id);
    expect(listed).toEqual([expect.objectContaining({ name: "deploy" })]);
    const rest = await stream(
      await post(`${b.url}/sessions/${id}/approvals`, { answers: [{ callId: listed[0]!.callId, approve: true }] }),
    );
    expect(verdict(rest).verdict.status).toBe("completed");
    expect(existsSync(join(ha, "sessions.sqlite")) || existsSync(join(hb, "sessions.sqlite"))).toBe(false);
    expect((await rawRows(schema, "keel_events")).length).toBeGreaterThan(5);
  });

  it("two agents in one process with their own homes (two tenants) keep every plugin's database in their own home, and nothing in KEEL_HOME", async () => {
    const shared = home();
    const before = process.env.KEEL_HOME;
    process.env.KEEL_HOME = shared;
    try {
      const homes = [home(), home()];
      for (const [i, h] of homes.entries()) {
        const agent = await createAgent({
          home: h,
          provider: scriptedProvider([{ text: `tenant ${i}: noted, release day is Thursday.` }]),
          sideModel: false,
          plugins: [
            memory({ extraction: "deterministic" }),
            skills({ dirs: [] }),
            compaction(),
            userModel(),
            goals(),
            mcp({ servers: {} }),
          ],
        });
        const session = await agent.session();
        await session.run("Remember that release day is Thursday.");
        await agent.close();
      }
      expect(readdirSync(shared)).toEqual([]);
      const [a, b] = homes.map((h) =>
        readdirSync(h)
          .filter((f) => f.endsWith(".sqlite"))
          .sort(),
      );
      expect(a).toEqual(b);
      expect(a).toEqual([
        "goals.sqlite",
        "mcp-audit.sqlite",
        "memory.sqlite",
        "sessions.sqlite",
        "skills.sqlite",
        "user-model.sqlite",
      ]);
    } finally {
      if (before === undefined) delete process.env.KEEL_HOME;
      else process.env.KEEL_HOME = before;
    }
  });

  it('createAgent: `store: "sqlite"` wins over KEEL_DATABASE_URL; a KEEL_DATABASE_URL that is neither is a located error naming it, never echoing it', async () => {
    const h = home();
    const before = process.env.KEEL_DATABASE_URL;
    try {
      process.env.KEEL_DATABASE_URL = "mysql://root:hunter2secret@db.internal/keel";
      const err = await createAgent({ home: h, provider: scriptedProvider([]) }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isKeelError(err, "KEEL_AGENT_OPTIONS_INVALID")).toBe(true);
      expect((err as Error).message).toContain("KEEL_DATABASE_URL");
      expect((err as Error).message).not.toContain("hunter2secret");
      const agent = await createAgent({ home: h, store: "sqlite", provider: scriptedProvider([{ text: "ok" }]) });
      await (await agent.session()).run("hi");
      await agent.close();
      expect(existsSync(join(h, "sessions.sqlite"))).toBe(true);
    } finally {
      if (before === undefined) delete process.env.KEEL_DATABASE_URL;
      else process.env.KEEL_DATABASE_URL = before;
    }
  });
});
