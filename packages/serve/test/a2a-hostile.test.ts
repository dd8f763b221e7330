/**
 * The A2A endpoint against hostile or careless callers over real HTTP: a web page posting to
 * the loopback server, a second message on a task that is still working, a damaged task store.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { DatabaseSync } from "node:sqlite";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import type { Agent, KeelPlugin } from "@keel/agent";
import { ScriptedProvider } from "@keel/testkit";
import type { ProviderScriptInput } from "@keel/testkit";
import { resolveBind, SessionOwners, startA2a } from "../src/index.ts";
import type { A2aServer } from "../src/index.ts";

const review: KeelPlugin = {
  name: "review",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.pre_call", (e) =>
      e.call.name === "write_note"
        ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" }
        : undefined,
    );
  },
};

const TOKEN_A = "token-a-0123456789abcdef";
const TOKEN_B = "token-b-0123456789abcdef";

type Rig = { agent: Agent; provider: ScriptedProvider; server: A2aServer; notes: string[]; dir: string };
let rigs: Rig[] = [];
afterEach(async () => {
  for (const r of rigs) {
    await r.server.close();
    await r.agent.close();
    rmSync(r.dir, { recursive: true, force: true });
  }
  rigs = [];
});

async function serve(
  script: ProviderScriptInput,
  dir = mkdtempSync(join(tmpdir(), "keel-a2a-hostile-")),
  bind = resolveBind({}, {}),
): Promise<Rig> {
  const notes: string[] = [];
  const provider = new ScriptedProvider(script);
  const agent = await createAgent({
    name: "note-taker",
    provider,
    home: dir,
    plugins: [review],
    tools: [
      {
        name: "write_note",
        description: "Appends a note.",
        category: "edit",
        parameters: { type: "object", properties: { text: { type: "string" } } },
        execute: (args: unknown) => {
          notes.push((args as { text: string }).text);
          return "written";
        },
      },
    ],
  });
  const db = join(dir, "serve.sqlite");
  const server = await startA2a({ agent, owners: new SessionOwners(db), bind, tasksPath: db });
  const rig = { agent, provider, server, notes, dir };
  rigs.push(rig);
  return rig;
}

function call(method: string, params: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
}

function message(text: string, more: Record<string, unknown> = {}): { message: Record<string, unknown> } {
  return { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...more } };
}

async function rpc(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, json: await res.json() };
}

describe("a web page cannot drive the loopback server", () => {
  it("a text/plain POST (what a page may send cross-site without a preflight) is refused before any turn runs", async () => {
    const { server, provider } = await serve([{ text: "ran" }]);
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const sent = await rpc(server.url, call("SendMessage", message("write the note")), {
        "content-type": type,
        origin: "http://evil.example",
      });
      expect(sent.status).toBe(415);
      expect(sent.json.error.message).toContain("application/json");
    }
    expect(provider.requests).toHaveLength(0);
    const ok = await rpc(server.url, call("SendMessage", message("hi")), {
      "content-type": "application/a2a+json; charset=utf-8",
    });
    expect(ok.json.result.task.status.state).toBe("TASK_STATE_COMPLETED");
  });
});

function stream(url: string, params: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: call("SendStreamingMessage", params),
  });
}

describe("one message at a time per task", () => {
  it("a second message on a task whose turn still runs is refused; the turn finishes and keeps its answer", async () => {
    const { server, provider } = await serve([{ text: "The slow answer.", delayMs: 300 }, { text: "never asked" }]);
    const res = await stream(server.url, message("take your time"));
    const reader = res.body!.getReader();
    let head = "";
    while (!head.includes("TASK_STATE_WORKING")) head += new TextDecoder().decode((await reader.read()).value);
    const taskId = /"id":"([^"]+)"/.exec(head)![1]!;
    const second = await rpc(server.url, call("SendMessage", message("and also this", { taskId })));
    expect(second.json.error).toMatchObject({ code: -32004 });
    expect(second.json.error.message).toContain("still working on an earlier message");
    reader.releaseLock();
    await res.body!.cancel();
    let state = "";
    for (let i = 0; i < 200 && state !== "TASK_STATE_COMPLETED"; i++) {
      await new Promise((r) => setTimeout(r, 25));
      state = (await rpc(server.url, call("GetTask", { id: taskId }))).json.result.status.state;
    }
    const task = (await rpc(server.url, call("GetTask", { id: taskId }))).json.result;
    expect(task.status.state).toBe("TASK_STATE_COMPLETED");
    expect(task.status.message.parts[0].text).toBe("The slow answer.");
    expect(provider.requests).toHaveLength(1);
  });

  it("two approvals of one paused task at once (a retried request): the tool runs once and the task completes", async () => {
    const rig = await serve([
      { toolCalls: [{ id: "w1", name: "write_note", args: { text: "release is Thursday" } }] },
      { text: "Written.", delayMs: 100 },
      { text: "never asked" },
    ]);
    const paused = (await rpc(rig.server.url, call("SendMessage", message("note it")))).json.result.task;
    expect(paused.status.state).toBe("TASK_STATE_INPUT_REQUIRED");
    const answers = await Promise.all(
      [1, 2].map(() => rpc(rig.server.url, call("SendMessage", message("approve", { taskId: paused.id })))),
    );
    const done = answers.filter((a) => a.json.result);
    expect(done).toHaveLength(1);
    expect(done[0]!.json.result.task.status.state).toBe("TASK_STATE_COMPLETED");
    expect(answers.find((a) => a.json.error)!.json.error.message).toContain("still working on an earlier message");
    expect(rig.notes).toEqual(["release is Thursday"]);
    const task = (await rpc(rig.server.url, call("GetTask", { id: paused.id }))).json.result;
    expect(task.status.state).toBe("TASK_STATE_COMPLETED");
    expect(task.status.message.parts[0].text).toBe("Written.");
  });

  it("another caller naming a busy task gets 'not found', not that it is busy", async () => {
    const a = { authorization: `Bearer ${TOKEN_A}` };
    const { server } = await serve(
      [{ text: "mine", delayMs: 300 }],
      undefined,
      resolveBind({ token: [TOKEN_A, TOKEN_B] }, {}),
    );
    const res = await stream(server.url, message("slow"), a);
    const reader = res.body!.getReader();
    let head = "";
    while (!head.includes("TASK_STATE_WORKING")) head += new TextDecoder().decode((await reader.read()).value);
    const taskId = /"id":"([^"]+)"/.exec(head)![1]!;
    const other = await rpc(server.url, call("SendMessage", message("mine now", { taskId })), {
      authorization: `Bearer ${TOKEN_B}`,
    });
    expect(other.json.error).toMatchObject({ code: -32001 });
    reader.releaseLock();
    await res.body!.cancel();
  });
});

describe("a damaged task store", () => {
  it("damaged rows do not stop the server starting: others' tasks read, the damaged one says so, new work goes on", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-a2a-hostile-"));
    const first = await serve([{ text: "kept" }], dir);
    const kept = (await rpc(first.server.url, call("SendMessage", message("keep this")))).json.result.task;
    await first.server.close();
    await first.agent.close();
    rigs = [];
    const db = new DatabaseSync(join(dir, "serve.sqlite"));
    const insert = db.prepare("INSERT INTO a2a_tasks VALUES (?, 'local', ?, ?, ?, 0)");
    insert.run("torn-working", kept.contextId, 2, '{"id":"torn-working","status":');
    insert.run("torn-done", kept.contextId, 3, "null");
    db.close();
    const { server } = await serve([{ text: "still serving" }], dir);
    expect((await rpc(server.url, call("GetTask", { id: kept.id }))).json.result.status.state).toBe(
      "TASK_STATE_COMPLETED",
    );
    for (const id of ["torn-working", "torn-done"]) {
      const torn = await rpc(server.url, call("GetTask", { id }));
      expect(torn.json.error.message).toContain(`Task ${id} is damaged in the task store`);
      expect(torn.json.error.message).not.toMatch(/\n\s+at /);
    }
    const listed = (await rpc(server.url, call("ListTasks", {}))).json.result.tasks;
    expect(listed.map((t: { id: string }) => t.id)).toEqual([kept.id]);
    const next = await rpc(server.url, call("SendMessage", message("go on", { contextId: kept.contextId })));
    expect(next.json.result.task.status.message.parts[0].text).toBe("still serving");
  });

  it("a task store that cannot open rejects startA2a and leaves nothing listening on the port", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-a2a-hostile-"));
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const p = (probe.address() as AddressInfo).port;
        probe.close(() => resolve(p));
      });
    });
    const bad = join(dir, "tasks.sqlite");
    writeFileSync(bad, "this is not a database, just text long enough to fill a header page ".repeat(100));
    const { agent } = await serve([], dir);
    const owners = new SessionOwners();
    await expect(startA2a({ agent, owners, bind: resolveBind({ port }, {}), tasksPath: bad })).rejects.toThrow();
    const again = await startA2a({ agent, owners, bind: resolveBind({ port }, {}) });
    await again.close();
    owners.close();
  });
});

describe("deeply nested JSON", () => {
  it("is refused before a turn runs, not failed by a stack overflow after it ran", async () => {
    const { server, provider } = await serve([{ text: "ran anyway" }, { text: "shallow is fine" }]);
    let deep = "1";
    for (let i = 0; i < 2000; i++) deep = `[${deep}]`;
    for (const method of ["SendMessage", "SendStreamingMessage", "message/send"]) {
      const body = `{"jsonrpc":"2.0","id":7,"method":"${method}","params":{"message":{"messageId":"m-${method}","role":"ROLE_USER","parts":[{"data":{"a":${deep}}}]}}}`;
      const sent = await rpc(server.url, body);
      expect(sent.json).toMatchObject({ id: 7, error: { code: -32600 } });
      expect(sent.json.error.message).toContain("nested deeper than 100 levels");
    }
    expect(provider.requests).toHaveLength(0);
    let ok = "1";
    for (let i = 0; i < 50; i++) ok = `[${ok}]`;
    const fine = await rpc(
      server.url,
      call("SendMessage", {
        message: { messageId: "m-ok", role: "ROLE_USER", parts: [{ data: { a: JSON.parse(ok) } }] },
      }),
    );
    expect(fine.json.result.task.status.state).toBe("TASK_STATE_COMPLETED");
  });
});

describe("a paused task after a restart", () => {
  it("cancelling it frees the conversation, as it does before a restart", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-a2a-hostile-"));
    const first = await serve([{ toolCalls: [{ id: "w1", name: "write_note", args: { text: "x" } }] }], dir);
    const paused = (await rpc(first.server.url, call("SendMessage", message("note it")))).json.result.task;
    expect(paused.status.state).toBe("TASK_STATE_INPUT_REQUIRED");
    await first.server.close();
    await first.agent.close();
    rigs = [];
    const rig = await serve([{ text: "Fresh start." }], dir);
    const cancelled = await rpc(rig.server.url, call("CancelTask", { id: paused.id }));
    expect(cancelled.json.result.status.state).toBe("TASK_STATE_CANCELED");
    const next = await rpc(
      rig.server.url,
      call("SendMessage", message("something else", { contextId: paused.contextId })),
    );
    expect(next.json.result.task.status.message.parts[0].text).toBe("Fresh start.");
    expect(rig.notes).toEqual([]);
  });
});

describe("two tasks at once in one conversation", () => {
  it("the second fails saying what an A2A caller can do, and the first completes", async () => {
    const { server } = await serve([{ text: "start" }, { text: "The slow one.", delayMs: 300 }, { text: "never" }]);
    const first = (await rpc(server.url, call("SendMessage", message("start")))).json.result.task;
    const [slow, quick] = await Promise.all([
      rpc(server.url, call("SendMessage", message("slow", { contextId: first.contextId }))),
      new Promise((r) => setTimeout(r, 100)).then(() =>
        rpc(server.url, call("SendMessage", message("meanwhile", { contextId: first.contextId }))),
      ),
    ]);
    expect(slow.json.result.task.status.message.parts[0].text).toBe("The slow one.");
    const said = quick.json.result.task.status.message.parts[0].text as string;
    expect(quick.json.result.task.status.state).toBe("TASK_STATE_FAILED");
    expect(said).toContain("Another task in this conversation (contextId) is still running");
    expect(said).not.toMatch(/steer|followUp/);
  });
});

describe("IPv6 loopback written as in a URL", () => {
  it("--host [::1] listens on ::1 as loopback (no token needed) and answers there", async () => {
    const bind = resolveBind({ host: "[::1]" }, {});
    expect(bind).toMatchObject({ host: "::1", loopback: true });
    const { server } = await serve([{ text: "over IPv6" }], undefined, bind);
    expect(server.url).toMatch(/^http:\/\/\[::1\]:\d+\/$/);
    const sent = await rpc(server.url, call("SendMessage", message("hi")));
    expect(sent.json.result.task.status.message.parts[0].text).toBe("over IPv6");
    expect(() => resolveBind({ host: "[::]" }, {})).toThrow(/KEEL_SERVE_TOKEN_REQUIRED/);
  });
});
