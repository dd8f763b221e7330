/**
 * A subagent's `ask` when the host has no approve() callback: the child pauses, and so does the
 * parent's task call, with the child's pending call listed in the parent session (id
 * `<task call>/<child call>`, `via` naming the child). The host answers there, possibly from
 * another process; resuming the parent resumes the child, whose answer becomes the task result.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool, definePlugin, MemorySessionStore, scriptedProvider, SqliteSessionStore } from "@keel/kernel";
import type { KeelEvent, ModelProvider, SessionStore } from "@keel/kernel";
import { tasks } from "../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-task-approvals-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let counted = 0;
const counter = defineTool({ name: "count", description: "Counts a kind of fruit.", input: z.object({ fruit: z.string() }), category: "info", execute: ({ fruit }) => (counted++, fruit === "apples" ? "12" : "7") });
/** Asks before every count. */
const guard = definePlugin({ name: "guard", version: "1.0.0", setup: (ctx) => ctx.on("tool.pre_call", (e) => (e.call.name === "count" ? { kind: "tool_decision", decision: "ask", reason: "counting costs money" } : undefined)) });
const events = async (store: SessionStore, id: string) => (await store.events(id)) as KeelEvent[];
const profiles = (child: ModelProvider) => ({ counter: { description: "Counts.", model: child, tools: [counter], plugins: [guard] } });

describe("a subagent's ask without an approve() callback", () => {
  it("pauses the parent's task call; approved in another process, the child counts and its answer is the task result", async () => {
    counted = 0;
    const path = join(dir, "approve.sqlite");
    const store1 = new SqliteSessionStore({ path });
    const child1 = scriptedProvider([{ toolCalls: [{ id: "a1", name: "count", args: { fruit: "apples" } }] }]);
    const parent1 = scriptedProvider([{ toolCalls: [{ id: "t1", name: "task", args: { profile: "counter", prompt: "Count the apples." } }] }]);
    const agent1 = await createAgent({ name: "shop", provider: parent1, sideModel: false, store: store1, plugins: [tasks({ profiles: profiles(child1) })] });
    const s1 = await agent1.session();
    const r1 = await s1.run("How many apples?");
    expect(r1.verdict).toEqual({ status: "paused", reason: "approval", pending: ["t1/a1"] });
    const link = (await events(store1, s1.id)).find((e) => e.type === "child.started") as Extract<KeelEvent, { type: "child.started" }>;
    expect(s1.pendingApprovals()).toMatchObject([{ callId: "t1/a1", name: "count", args: { fruit: "apples" }, plugin: "guard", reason: "counting costs money", via: { callId: "t1", sessionId: link.childSessionId, child: "counter", childCallId: "a1" } }]);
    expect(counted).toBe(0);
    // The parent's task call has no result yet: it waits, as a call asking for itself would.
    expect(s1.messages.filter((m) => m.role === "tool")).toEqual([]);
    await agent1.close();

    // Another process: the host sees the child's call in the parent session and approves it there.
    const store2 = new SqliteSessionStore({ path });
    const child2 = scriptedProvider([{ text: '{"count":12}' }]);
    const parent2 = scriptedProvider([{ text: "There are 12 apples." }]);
    const agent2 = await createAgent({ name: "shop", provider: parent2, sideModel: false, store: store2, plugins: [tasks({ profiles: profiles(child2) })] });
    const s2 = await agent2.session(s1.id);
    expect(s2.pendingApprovals().map((p) => [p.callId, p.via?.sessionId])).toEqual([["t1/a1", link.childSessionId]]);
    await s2.approve("t1/a1", { reason: "fine" });
    const r2 = await s2.resume();
    expect(r2.verdict.status).toBe("completed");
    expect(r2.text).toBe("There are 12 apples.");
    expect(counted).toBe(1);
    const result = s2.messages.find((m) => m.role === "tool");
    expect(JSON.stringify(result)).toMatch(/\[task counter: session [0-9a-f-]{36}, 2 round\(s\), 1 tool call\(s\), \d+ tokens\]\\n\{\\"count\\":12\}/);
    // The child's log has the answer (from its parent's host) and its resumed turn; no second child was started.
    const childLog = await events(store2, link.childSessionId);
    expect(childLog.filter((e) => e.type === "approval.resolved")).toMatchObject([{ callId: "a1", approved: true, by: "host", reason: "fine" }]);
    expect(childLog.map((e) => e.type)).toContain("turn.resumed");
    expect(childLog.at(-1)?.type === "turn.completed" || childLog.some((e) => e.type === "turn.completed")).toBe(true);
    const parentLog = await events(store2, s1.id);
    expect(parentLog.filter((e) => e.type === "child.started")).toHaveLength(1);
    expect(parentLog.filter((e) => e.type === "approval.requested")).toMatchObject([{ callId: "t1/a1", via: { child: "counter", childCallId: "a1" } }]);
    await agent2.close();
  });

  it("a denial reaches the child as its call's error result; the parent gets the child's answer", async () => {
    counted = 0;
    const store = new MemorySessionStore();
    const child = scriptedProvider([{ toolCalls: [{ id: "a1", name: "count", args: { fruit: "apples" } }] }, { text: "I was not allowed to count." }]);
    const parent = scriptedProvider([{ toolCalls: [{ id: "t1", name: "task", args: { profile: "counter", prompt: "Count the apples." } }] }, { text: "Counting was refused." }]);
    const agent = await createAgent({ provider: parent, sideModel: false, store, plugins: [tasks({ profiles: profiles(child) })] });
    const s = await agent.session();
    await s.run("How many apples?");
    await s.deny("t1/a1", { reason: "too expensive today" });
    const r = await s.resume();
    expect(r.text).toBe("Counting was refused.");
    expect(counted).toBe(0);
    // The child model saw the denial with the host's reason.
    expect(JSON.stringify(child.requests[1]!.messages.at(-1))).toContain("too expensive today");
    expect(JSON.stringify(s.messages.find((m) => m.role === "tool"))).toContain("I was not allowed to count.");
    await agent.close();
  });

  it("two parallel tasks that both ask: both calls are pending in the parent, answered separately, each child resumed once", async () => {
    counted = 0;
    const store = new MemorySessionStore();
    // One scripted model serves both children; each child's requests are answered in order.
    const child = scriptedProvider([{ toolCalls: [{ id: "a1", name: "count", args: { fruit: "apples" } }] }, { toolCalls: [{ id: "a1", name: "count", args: { fruit: "pears" } }] }, { text: "counted" }, { text: "counted" }]);
    const parent = scriptedProvider([{ toolCalls: [{ id: "t1", name: "task", args: { profile: "counter", prompt: "apples" } }, { id: "t2", name: "task", args: { profile: "counter", prompt: "pears" } }] }, { text: "done" }]);
    const agent = await createAgent({ provider: parent, sideModel: false, store, plugins: [tasks({ maxFanOut: 2, profiles: profiles(child) })] });
    const s = await agent.session();
    const r1 = await s.run("Count both.");
    expect(r1.verdict.status === "paused" && [...r1.verdict.pending].sort()).toEqual(["t1/a1", "t2/a1"]);
    await s.approve("t1/a1");
    await expect(s.resume()).rejects.toMatchObject({ code: "KEEL_APPROVAL_PENDING" });
    await s.deny("t2/a1");
    const r2 = await s.resume();
    expect(r2.text).toBe("done");
    expect(counted).toBe(1);
    const results = s.messages.filter((m) => m.role === "tool");
    expect(results.map((m) => (m.role === "tool" ? m.toolCallId : ""))).toEqual(["t1", "t2"]);
    expect(results.every((m) => m.role === "tool" && !m.isError)).toBe(true);
    // Re-running a paused call did not count as a new task against maxFanOut (2).
    expect(JSON.stringify(results)).not.toContain("KEEL_TASK_FAN_OUT");
    expect((await events(store, s.id)).filter((e) => e.type === "child.started")).toHaveLength(2);
    await agent.close();
  });

  it("a grandchild's ask surfaces at the top with a path of call ids and resumes all the way down", async () => {
    counted = 0;
    const store = new MemorySessionStore();
    const leaf = scriptedProvider([{ toolCalls: [{ id: "a1", name: "count", args: { fruit: "apples" } }] }, { text: "12 apples" }]);
    const helper = scriptedProvider([{ toolCalls: [{ id: "d1", name: "task", args: { profile: "counter", prompt: "count apples" } }] }, { text: "the leaf says 12" }]);
    const parent = scriptedProvider([{ toolCalls: [{ id: "t1", name: "task", args: { profile: "helper", prompt: "find out" } }] }, { text: "12, via two subagents" }]);
    const agent = await createAgent({ provider: parent, sideModel: false, store, plugins: [tasks({ profiles: { helper: { description: "Helps.", model: helper, plugins: [tasks({ profiles: profiles(leaf) })] } } })] });
    const s = await agent.session();
    const r1 = await s.run("How many?");
    expect(r1.verdict).toMatchObject({ status: "paused", pending: ["t1/d1/a1"] });
    expect(s.pendingApprovals()[0]).toMatchObject({ name: "count", via: { callId: "t1", child: "helper", childCallId: "d1/a1" } });
    await s.approve("t1/d1/a1");
    const r2 = await s.resume();
    expect(r2.text).toBe("12, via two subagents");
    expect(counted).toBe(1);
    expect(JSON.stringify(helper.requests[1]!.messages.at(-1))).toContain("12 apples");
    await agent.close();
  });

  it("an approval reason is the child's; approving \"always\" applies in the child session, not to the parent's own tools", async () => {
    const store = new MemorySessionStore();
    const child = scriptedProvider([{ toolCalls: [{ id: "a1", name: "count", args: { fruit: "apples" } }] }, { text: "12" }]);
    const parent = scriptedProvider([{ toolCalls: [{ id: "t1", name: "task", args: { profile: "counter", prompt: "apples" } }] }, { toolCalls: [{ id: "p1", name: "count", args: { fruit: "pears" } }] }, { text: "ok" }]);
    const agent = await createAgent({ provider: parent, sideModel: false, store, tools: [counter], plugins: [guard, tasks({ profiles: profiles(child) })] });
    const s = await agent.session();
    await s.run("Count.");
    await s.approve("t1/a1", { always: true });
    const r = await s.resume();
    // The parent's own count still asks: "always" was given for the child's session.
    expect(r.verdict).toMatchObject({ status: "paused", pending: ["p1"] });
    await agent.close();
  });
});
