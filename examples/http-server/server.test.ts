/**
 * The HTTP example end to end over real sockets: `node server.ts` in a child process, driven
 * with fetch. A deploy waits for approval across two requests and a server killed in between;
 * denial, "always" and a client that disconnects mid-stream (the turn runs on; rejoin.test.ts
 * rejoins it).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { TurnStreamEvent } from "@keel/stream";

const here = dirname(fileURLToPath(import.meta.url));
const children: ChildProcess[] = [];

async function start(home: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [join(here, "server.ts")], {
    env: { ...process.env, KEEL_HOME: home, PORT: "0", KEEL_MODEL: "" },
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

async function post(url: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
    ...(signal ? { signal } : {}),
  });
}

/** Read a server-sent-event body into the events it carries (optionally stopping early). */
async function events(res: Response, stopAt?: (e: TurnStreamEvent) => boolean): Promise<TurnStreamEvent[]> {
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  const out: TurnStreamEvent[] = [];
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body!) {
    buf += decoder.decode(chunk, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = frame.split("\n").find((l) => l.startsWith("data: "));
      const event = frame.split("\n").find((l) => l.startsWith("event: "));
      const e = JSON.parse(data!.slice(6)) as TurnStreamEvent;
      expect(event).toBe(`event: ${e.type}`);
      out.push(e);
      if (stopAt?.(e)) return out;
    }
  }
  return out;
}

const verdictOf = (es: TurnStreamEvent[]) => {
  const last = es.at(-1);
  if (last?.type !== "verdict") throw new Error(`the stream ended with ${JSON.stringify(last)}`);
  return last.result;
};

afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

describe("examples/http-server", () => {
  it("a deploy waits for approval across requests and a killed server; approved, it really runs and the answer streams", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-http-"));
    const log = join(home, "deployments.log");
    let server = await start(home);
    const created = await post(`${server.url}/sessions`, {});
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };

    const first = await events(await post(`${server.url}/sessions/${id}/turns`, { input: "please deploy v2.0.1" }));
    expect(first.map((e) => e.type)).toEqual(["turn.started", "text", "text", "approval.requested", "verdict"]);
    expect(first[3]).toMatchObject({
      name: "deploy",
      args: { version: "v2.0.1" },
      plugin: "review-deploys",
      reason: "deploys reach production",
    });
    expect(verdictOf(first).verdict).toMatchObject({ status: "paused", reason: "approval" });
    expect(existsSync(log)).toBe(false);
    const busy = await post(`${server.url}/sessions/${id}/turns`, { input: "status" });
    expect(busy.status).toBe(409);
    expect(await busy.json()).toMatchObject({ error: { code: "KEEL_APPROVAL_PENDING" } });

    // The server dies without a chance to clean up; a new one picks the session up from SQLite.
    server.child.kill("SIGKILL");
    await new Promise((r) => server.child.once("exit", r));
    server = await start(home);
    const pending = (await (await fetch(`${server.url}/sessions/${id}/approvals`)).json()) as {
      pending: Array<{ callId: string; name: string }>;
    };
    expect(pending.pending).toEqual([expect.objectContaining({ name: "deploy", args: { version: "v2.0.1" } })]);

    const rest = await events(
      await post(`${server.url}/sessions/${id}/approvals`, {
        answers: [{ callId: pending.pending[0]!.callId, approve: true }],
      }),
    );
    expect(rest[0]).toMatchObject({ type: "turn.started", resumed: true });
    expect(rest.filter((e) => e.type === "tool.progress").map((e) => e.type === "tool.progress" && e.message)).toEqual([
      "building v2.0.1",
      "uploading v2.0.1",
      "switching traffic v2.0.1",
    ]);
    expect(rest.find((e) => e.type === "tool.finished")).toMatchObject({ name: "deploy", status: "ok" });
    const done = verdictOf(rest);
    expect(done.verdict.status).toBe("completed");
    expect(done.text).toContain("✓ deploy: v2.0.1 is live");
    expect(
      rest
        .filter((e) => e.type === "text")
        .map((e) => (e.type === "text" ? e.delta : ""))
        .join(""),
    ).toBe(done.text);
    expect(readFileSync(log, "utf8")).toMatch(new RegExp(`^\\S+ v2\\.0\\.1 by ${id}\\n$`));

    const { messages } = (await (await fetch(`${server.url}/sessions/${id}/messages`)).json()) as {
      messages: Array<{ role: string; text: string }>;
    };
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(messages[0]!.text).toBe("please deploy v2.0.1");
    expect(messages[2]!.text).toBe("v2.0.1 is live (deployment recorded in deployments.log)");
  });

  it("deny with a reason reaches the model; 'always' lets later deploys of the session run without asking", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-http-"));
    const log = join(home, "deployments.log");
    const { url } = await start(home);
    const { id } = (await (await post(`${url}/sessions`, {})).json()) as { id: string };

    const asked = await events(await post(`${url}/sessions/${id}/turns`, { input: "deploy v3.0" }));
    const callId = (asked.find((e) => e.type === "approval.requested") as { callId: string }).callId;
    const denied = await events(
      await post(`${url}/sessions/${id}/approvals`, {
        answers: [{ callId, approve: false, reason: "freeze until Monday" }],
      }),
    );
    expect(denied.find((e) => e.type === "tool.finished")).toMatchObject({ status: "denied" });
    expect(verdictOf(denied).text).toContain("✗ deploy: ");
    expect(verdictOf(denied).text).toContain("freeze until Monday");
    expect(existsSync(log)).toBe(false);

    const again = await events(await post(`${url}/sessions/${id}/turns`, { input: "deploy v3.1" }));
    const second = (again.find((e) => e.type === "approval.requested") as { callId: string }).callId;
    expect(
      verdictOf(
        await events(
          await post(`${url}/sessions/${id}/approvals`, { answers: [{ callId: second, approve: true, always: true }] }),
        ),
      ).verdict.status,
    ).toBe("completed");
    const third = await events(await post(`${url}/sessions/${id}/turns`, { input: "deploy v3.2" }));
    expect(third.some((e) => e.type === "approval.requested")).toBe(false);
    expect(verdictOf(third).verdict.status).toBe("completed");
    expect(
      readFileSync(log, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split(" ")[1]),
    ).toEqual(["v3.1", "v3.2"]);

    const unknown = await post(`${url}/sessions/${id}/approvals`, { answers: [{ callId: "nope", approve: true }] });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: "KEEL_APPROVAL_UNKNOWN" } });
  });

  it("a client that disconnects mid-stream leaves the turn and its tool running to the end; bad requests get located 4xx errors", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-http-"));
    const log = join(home, "deployments.log");
    const { url } = await start(home);
    const { id } = (await (await post(`${url}/sessions`, {})).json()) as { id: string };
    const asked = await events(await post(`${url}/sessions/${id}/turns`, { input: "deploy v4.0" }));
    const callId = (asked.find((e) => e.type === "approval.requested") as { callId: string }).callId;

    const gone = new AbortController();
    const res = await post(
      `${url}/sessions/${id}/approvals`,
      { answers: [{ callId, approve: true, always: true }] },
      gone.signal,
    );
    const seen = await events(res, (e) => e.type === "tool.progress");
    expect(seen.at(-1)).toMatchObject({ type: "tool.progress", message: "building v4.0" });
    gone.abort();

    // The session is free again once the turn, which nobody reads any more, has ended: the deploy finished.
    let next: Response | undefined;
    for (let i = 0; i < 300; i++) {
      next = await post(`${url}/sessions/${id}/turns`, { input: "status" });
      if (next.status !== 409) break;
      await next.body?.cancel();
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(next!.status).toBe(200);
    const status = await events(next!);
    expect(verdictOf(status).text).toContain("live: v4.0");
    expect(readFileSync(log, "utf8")).toMatch(new RegExp(`^\\S+ v4\\.0 by ${id}\\n$`));

    const bad = await post(`${url}/sessions/${id}/turns`, {
      input: [{ type: "image", mediaType: "image/tiff", data: "AAAA" }],
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      error: { code: "KEEL_INPUT_INVALID", message: expect.stringContaining("[0]") },
    });
    const notJson = await fetch(`${url}/sessions/${id}/turns`, { method: "POST", body: "{" });
    expect(notJson.status).toBe(400);
    expect((await fetch(`${url}/sessions/nope/approvals`)).status).toBe(404);
    expect((await fetch(`${url}/nowhere`)).status).toBe(404);
  });
});
