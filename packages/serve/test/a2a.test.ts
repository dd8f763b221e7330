/**
 * A Keel agent as an A2A endpoint, driven by @a2a-js/sdk's own client over real HTTP: the
 * card, send / stream / get, a conversation across tasks, approvals as input-required, tokens
 * and ownership, and JSON-RPC errors that leave the server serving.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk";
import type { Message, Part, StreamResponse, Task } from "@a2a-js/sdk";
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import type { Client } from "@a2a-js/sdk/client";
import { createAgent } from "@keel/agent";
import type { Agent, KeelPlugin } from "@keel/agent";
import { ScriptedProvider } from "@keel/testkit";
import type { ProviderScriptInput } from "@keel/testkit";
import { resolveBind, SessionOwners, startA2a } from "../src/index.ts";
import type { A2aServer } from "../src/index.ts";

const TOKEN_A = "token-a-0123456789abcdef";
const TOKEN_B = "token-b-0123456789abcdef";

const guard: KeelPlugin = {
  name: "guard",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.pre_call", (e) =>
      e.call.name === "write_note"
        ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" }
        : undefined,
    );
  },
};

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

async function serve(script: ProviderScriptInput, bind = resolveBind({}, {})): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), "keel-a2a-"));
  const notes: string[] = [];
  const provider = new ScriptedProvider(script);
  const agent = await createAgent({
    name: "note-taker",
    instructions: "Private: the team's notes are kept in vault 12.\nBe brief.",
    description: "Takes notes for the team.",
    provider,
    home: dir,
    plugins: [guard],
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
  const server = await startA2a({ agent, owners: new SessionOwners(join(dir, "serve.sqlite")), bind });
  const rig = { agent, provider, server, notes, dir };
  rigs.push(rig);
  return rig;
}

async function client(url: string, token?: string): Promise<Client> {
  const authed: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (token) headers.set("authorization", `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: authed })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authed }),
  }).createFromUrl(url);
}

function send(parts: unknown[], more: { contextId?: string; taskId?: string } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: "ROLE_USER", parts, ...more } });
}

const text = (m: Message | undefined) =>
  (m?.parts ?? []).flatMap((p: Part) => (p.content?.$case === "text" ? [p.content.value] : [])).join("");

async function task(c: Client, request: SendMessageRequest): Promise<Task> {
  const r = await c.sendMessage(request);
  if (!("status" in r)) throw new Error("expected a task");
  return r;
}

async function rpc(url: string, body: string, token?: string): Promise<{ status: number; json: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body,
  });
  return { status: res.status, json: await res.json() };
}

const writeCall = { toolCalls: [{ id: "w1", name: "write_note", args: { text: "release is Thursday" } }] };

describe("keel agent over A2A", () => {
  it("publishes a card the SDK reads: name, description, streaming, the JSON-RPC url, a skill with its tools", async () => {
    const { server } = await serve([]);
    const card = await (await client(server.url)).getAgentCard();
    expect(card.name).toBe("note-taker");
    // The agent's own description, never its instructions (the card is public).
    expect(card.description).toBe("Takes notes for the team.");
    expect(JSON.stringify(card)).not.toContain("vault");
    expect(card.capabilities?.streaming).toBe(true);
    expect(card.supportedInterfaces[0]).toMatchObject({ url: server.url, protocolBinding: "JSONRPC" });
    expect(card.skills[0]!.tags).toContain("write_note");
    expect(card.skills[0]!.description).toContain('"approve"');
    expect(card.securitySchemes ?? {}).toEqual({});
  });

  it("message/send answers with a completed task; tasks/get reads it back", async () => {
    const { server } = await serve([{ text: "Noted: release is Thursday." }]);
    const c = await client(server.url);
    const t = await task(c, send([{ text: "note the release day" }]));
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(text(t.status?.message)).toBe("Noted: release is Thursday.");
    expect(
      t.artifacts.map((a) => a.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")),
    ).toEqual(["Noted: release is Thursday."]);
    const got = await c.getTask(GetTaskRequest.fromJSON({ id: t.id }));
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(got.contextId).toBe(t.contextId);
  });

  it("message/stream: the task, working, the answer in chunks, then the final status", async () => {
    const { server } = await serve([{ text: "A fairly long answer, streamed in pieces.", chunkSize: 8 }]);
    const c = await client(server.url);
    const events: StreamResponse[] = [];
    for await (const e of c.sendMessageStream(send([{ text: "hello" }]))) events.push(e);
    const kinds = events.map((e) => e.payload?.$case);
    expect(kinds[0]).toBe("task");
    expect(kinds[1]).toBe("statusUpdate");
    expect(kinds.filter((k) => k === "artifactUpdate").length).toBeGreaterThan(3);
    const last = events.at(-1)!.payload!;
    expect(last.$case).toBe("statusUpdate");
    if (last.$case === "statusUpdate") expect(last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const streamed = events.flatMap((e) =>
      e.payload?.$case === "artifactUpdate"
        ? e.payload.value.artifact!.parts.map((p) => (p.content?.$case === "text" ? p.content.value : ""))
        : [],
    );
    expect(streamed.join("")).toBe("A fairly long answer, streamed in pieces.");
  });

  it("a follow-up in the same contextId continues the Keel session: the model sees the earlier turn", async () => {
    const { server, provider } = await serve([{ text: "Remembered: blue." }, { text: "It was blue." }]);
    const c = await client(server.url);
    const first = await task(c, send([{ text: "my colour is blue" }]));
    const second = await task(c, send([{ text: "what was my colour?" }], { contextId: first.contextId }));
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).not.toBe(first.id);
    expect(text(second.status?.message)).toBe("It was blue.");
    const seen = JSON.stringify(provider.requests[1]!.messages);
    expect(seen).toContain("my colour is blue");
    expect(seen).toContain("Remembered: blue.");
  });

  it("a paused approval is input-required; approving on the same task runs the tool and completes", async () => {
    const rig = await serve([writeCall, { text: "Written." }]);
    const c = await client(rig.server.url);
    const paused = await task(c, send([{ text: "note the release day" }]));
    expect(paused.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(text(paused.status?.message)).toContain(
      'write_note {"text":"release is Thursday"} (callId w1): writes are reviewed',
    );
    const data = paused.status!.message!.parts.find((p) => p.content?.$case === "data")!;
    expect(data.content).toMatchObject({ value: { waiting: [{ callId: "w1", name: "write_note" }] } });
    expect(rig.notes).toEqual([]);
    // Not an answer: still input-required, told how to answer.
    const unclear = await task(c, send([{ text: "hmm" }], { taskId: paused.id, contextId: paused.contextId }));
    expect(unclear.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(text(unclear.status?.message)).toContain("is not an answer");
    const done = await task(c, send([{ data: { approve: true } }], { taskId: paused.id, contextId: paused.contextId }));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.id).toBe(paused.id);
    expect(text(done.status?.message)).toBe("Written.");
    expect(rig.notes).toEqual(["release is Thursday"]);
  });

  it("denying with text: the tool does not run, the model hears why, the task completes", async () => {
    const rig = await serve([writeCall, { text: "I will not write it." }]);
    const c = await client(rig.server.url);
    const paused = await task(c, send([{ text: "note it" }]));
    const done = await task(c, send([{ text: "deny not before the review" }], { taskId: paused.id }));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(rig.notes).toEqual([]);
    expect(JSON.stringify(rig.provider.requests[1]!.messages)).toContain("not before the review");
  });

  it("message/stream pauses at input-required; the answer streams the rest of the turn to completed", async () => {
    const rig = await serve([writeCall, { text: "Written it down." }]);
    const c = await client(rig.server.url);
    const states = async (req: SendMessageRequest) => {
      const out: { state?: TaskState; id: string }[] = [];
      for await (const e of c.sendMessageStream(req))
        if (e.payload?.$case === "statusUpdate")
          out.push({ state: e.payload.value.status?.state, id: e.payload.value.taskId });
      return out;
    };
    const first = await states(send([{ text: "note it" }]));
    expect(first.at(-1)!.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const second = await states(send([{ text: "approve" }], { taskId: first[0]!.id }));
    expect(second.at(-1)!.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(rig.notes).toEqual(["release is Thursday"]);
  });

  it("tasks/cancel aborts a running turn: the task ends cancelled", async () => {
    const { server } = await serve([{ hang: true }]);
    const c = await client(server.url);
    const events = c.sendMessageStream(send([{ text: "take your time" }]));
    let id = "";
    let last: TaskState | undefined;
    for await (const e of events) {
      if (e.payload?.$case === "task") id = e.payload.value.id;
      if (e.payload?.$case === "statusUpdate") {
        last = e.payload.value.status?.state;
        if (last === TaskState.TASK_STATE_WORKING) void c.cancelTask(CancelTaskRequest.fromJSON({ id }));
      }
    }
    expect(last).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await c.getTask(GetTaskRequest.fromJSON({ id }))).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("cancelling a task that waits for approval frees the conversation for the next task", async () => {
    const rig = await serve([writeCall, { text: "Fresh start." }]);
    const c = await client(rig.server.url);
    const paused = await task(c, send([{ text: "note it" }]));
    const blocked = await task(c, send([{ text: "meanwhile" }], { contextId: paused.contextId }));
    expect(blocked.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(text(blocked.status?.message)).toContain("waits for an approval in an earlier task");
    const cancelled = await c.cancelTask(CancelTaskRequest.fromJSON({ id: paused.id }));
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const next = await task(c, send([{ text: "something else" }], { contextId: paused.contextId }));
    expect(text(next.status?.message)).toBe("Fresh start.");
    expect(rig.notes).toEqual([]);
  });

  it("a caller that leaves a stream early does not stop the task: tasks/get later shows it completed", async () => {
    const { server } = await serve([{ text: "Done without you.", delayMs: 300 }]);
    const c = await client(server.url);
    let id = "";
    for await (const e of c.sendMessageStream(send([{ text: "start and leave" }]))) {
      if (e.payload?.$case === "task") id = e.payload.value.id;
      break;
    }
    let state: TaskState | undefined;
    for (let i = 0; i < 200 && state !== TaskState.TASK_STATE_COMPLETED; i++) {
      await new Promise((r) => setTimeout(r, 50));
      state = (await c.getTask(GetTaskRequest.fromJSON({ id }))).status?.state;
    }
    expect(state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("a failing turn is a failed task with a message, never a stack", async () => {
    const { server } = await serve([{ error: { class: "auth", message: "bad key" } }]);
    const t = await task(await client(server.url), send([{ text: "hi" }]));
    expect(t.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(text(t.status?.message)).toContain("The turn failed");
    expect(text(t.status?.message)).not.toMatch(/\n\s+at /);
  });
});

describe("who may call", () => {
  it("with tokens: no token is 401; each token sees only its own tasks and conversations", async () => {
    const { server } = await serve([{ text: "for A" }], resolveBind({ token: [TOKEN_A, TOKEN_B] }, {}));
    const card = (await (await fetch(`${server.url}.well-known/agent-card.json`)).json()) as Record<string, any>;
    expect(card).toMatchObject({ url: server.url, protocolVersion: "0.3.0", capabilities: { streaming: true } });
    expect(card.securitySchemes).toEqual({
      bearer: { type: "http", scheme: "bearer", description: "The server's token" },
    });
    const v1 = await fetch(`${server.url}.well-known/agent-card.json`, { headers: { "A2A-Version": "1.0" } });
    expect(Object.keys(((await v1.json()) as Record<string, any>).securitySchemes)).toEqual(["bearer"]);
    const bare = await rpc(
      server.url,
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }),
    );
    expect(bare.status).toBe(401);
    expect(bare.json.error.code).toBeTypeOf("number");
    const a = await client(server.url, TOKEN_A);
    const b = await client(server.url, TOKEN_B);
    expect((await a.getAgentCard()).securitySchemes.bearer?.scheme).toMatchObject({ value: { scheme: "Bearer" } });
    const t = await task(a, send([{ text: "mine" }]));
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    await expect(b.getTask(GetTaskRequest.fromJSON({ id: t.id }))).rejects.toThrow(/not found/i);
    await expect(b.sendMessage(send([{ text: "let me in" }], { contextId: t.contextId }))).rejects.toThrow(
      /not found|No conversation/i,
    );
    await expect(b.sendMessage(send([{ text: "let me in" }], { taskId: t.id }))).rejects.toThrow(/not found/i);
    expect((await a.getTask(GetTaskRequest.fromJSON({ id: t.id }))).id).toBe(t.id);
    expect((await a.listTasks(ListTasksRequest.fromJSON({}))).tasks.map((x) => x.id)).toEqual([t.id]);
    expect((await b.listTasks(ListTasksRequest.fromJSON({}))).tasks).toEqual([]);
  });

  it("malformed JSON, a bad request, an unknown method and bad params are JSON-RPC errors; the server goes on", async () => {
    const { server } = await serve([{ text: "still here" }]);
    expect((await rpc(server.url, "{not json")).json.error.code).toBe(-32700);
    expect((await rpc(server.url, "[1,2]")).json.error.code).toBe(-32600);
    expect(
      (await rpc(server.url, JSON.stringify({ jsonrpc: "2.0", id: 2, method: "NoSuchThing", params: {} }))).json.error
        .code,
    ).toBe(-32601);
    expect(
      (await rpc(server.url, JSON.stringify({ jsonrpc: "2.0", id: 3, method: "GetTask", params: 7 }))).json.error.code,
    ).toBe(-32602);
    expect(
      (await rpc(server.url, JSON.stringify({ jsonrpc: "2.0", id: 4, method: "tasks/get", params: {} }))).json.error
        .code,
    ).toBe(-32602);
    const t = await task(await client(server.url), send([{ text: "are you there?" }]));
    expect(text(t.status?.message)).toBe("still here");
  });

  it("answers the v0.3 method names too (message/send, tasks/get)", async () => {
    const { server } = await serve([{ text: "old client, same agent" }]);
    const sent = await rpc(
      server.url,
      JSON.stringify({
        jsonrpc: "2.0",
        id: 5,
        method: "message/send",
        params: {
          message: { kind: "message", messageId: randomUUID(), role: "user", parts: [{ kind: "text", text: "hi" }] },
        },
      }),
    );
    expect(sent.json.result).toMatchObject({ kind: "task", status: { state: "completed" } });
    const got = await rpc(
      server.url,
      JSON.stringify({ jsonrpc: "2.0", id: 6, method: "tasks/get", params: { id: sent.json.result.id } }),
    );
    expect(got.json.result.id).toBe(sent.json.result.id);
  });
});
