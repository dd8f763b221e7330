/**
 * Class 14, trust round 3: nothing a host relies on may vanish, and a paused session belongs to
 * the fleet. Each scenario drives what a team embedding Keel drives: the HTTP example's server
 * (`examples/http-server/server.ts`) as several real processes on one store, with fetch.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { TurnStreamEvent } from "../../packages/kernel/src/index.ts";

const SERVER = fileURLToPath(new URL("../../examples/http-server/server.ts", import.meta.url));
const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function home(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-trust-"));
  dirs.push(d);
  return d;
}

/** Start one instance of the HTTP example; resolves once it listens. */
async function instance(keelHome: string, env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [SERVER], { env: { ...process.env, KEEL_HOME: keelHome, PORT: "0", KEEL_MODEL: "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
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

const post = (url: string, body: unknown) => fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });

async function stream(res: Response): Promise<TurnStreamEvent[]> {
  expect(res.status, await res.clone().text().then((t) => t.slice(0, 300))).toBe(200);
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
    let a = await instance(h);
    const sessions: Array<{ id: string; version: string; callId: string }> = [];
    for (let i = 0; i < 12; i++) {
      const { id } = (await (await post(`${a.url}/sessions`, {})).json()) as { id: string };
      const version = `v7.${i}.${(i * 7) % 10}`;
      const asked = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: `deploy ${version}` }));
      expect(verdict(asked).verdict.status).toBe("paused");
      const callId = (asked.find((e) => e.type === "approval.requested") as { callId: string }).callId;
      expect(callId).toMatch(/^toolu_01[0-9A-Za-z]{24}$/);
      sessions.push({ id, version, callId });
    }
    a.child.kill("SIGKILL");
    await new Promise((r) => a.child.once("exit", r));
    a = await instance(h);
    for (const s of sessions) {
      const listed = await pending(a.url, s.id);
      expect(listed.map((p) => p.callId)).toEqual([s.callId]);
      const rest = await stream(await post(`${a.url}/sessions/${s.id}/approvals`, { answers: [{ callId: s.callId, approve: true }] }));
      expect(verdict(rest).verdict.status).toBe("completed");
    }
    const deployed = readFileSync(log, "utf8").trim().split("\n").map((l) => l.split(" ")[1]);
    expect(deployed.sort()).toEqual(sessions.map((s) => s.version).sort());
  });
});

describe("class 14: a paused session belongs to the fleet", () => {
  it("while instance A keeps the paused session open, instance B lists its approvals, approves and resumes it; A then serves the next turn on the whole history", async () => {
    const h = home();
    const log = join(h, "deployments.log");
    const a = await instance(h);
    const b = await instance(h);
    const { id } = (await (await post(`${a.url}/sessions`, {})).json()) as { id: string };
    const asked = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: "deploy v8.1.0" }));
    expect(verdict(asked).verdict.status).toBe("paused");
    // A holds its handle open (it is cached for ten minutes); B needs no lease to read it.
    expect((await pending(a.url, id)).length).toBe(1);
    const listed = await pending(b.url, id);
    expect(listed).toEqual([expect.objectContaining({ name: "deploy", args: { version: "v8.1.0" } })]);
    const rest = await stream(await post(`${b.url}/sessions/${id}/approvals`, { answers: [{ callId: listed[0]!.callId, approve: true }] }));
    expect(verdict(rest).verdict.status).toBe("completed");
    expect(readFileSync(log, "utf8").split("\n").filter(Boolean)).toHaveLength(1);

    // A's handle fell behind: it catches up from the log before it answers or runs anything.
    expect(await pending(a.url, id)).toEqual([]);
    const next = await stream(await post(`${a.url}/sessions/${id}/turns`, { input: "status" }));
    expect(verdict(next).text).toContain("live: v8.1.0");
    const { messages } = (await (await fetch(`${a.url}/sessions/${id}/messages`)).json()) as { messages: Array<{ role: string; text: string }> };
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]);
    expect(existsSync(log)).toBe(true);
  });

  it("a turn running in A is a 409 KEEL_SESSION_BUSY in B naming the holder, answered before any byte is streamed; once it ends B runs the session", async () => {
    const h = home();
    // A's deploy takes three steps of 4 s: long enough that B's request surely lands while it runs.
    const a = await instance(h, { DEPLOY_STEP_MS: "4000" });
    const b = await instance(h);
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
  });
});
