/**
 * Queued user messages end to end: steering skips the calls not yet started and is injected
 * before the next request; follow-ups re-enter the loop when the model would stop; both queues
 * survive a restart; one turn at a time; cancel() ends the running turn.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, defineTool, isKeelError, messageText } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";
import type { AgentOptions, Message, ToolDefinition } from "../src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { ofType, deferred, pingTool } from "./support/helpers.ts";

const tmpDirs: string[] = [];
afterEach(() => {
  for (const d of tmpDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tmpDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-queues-"));
  tmpDirs.push(dir);
  return path.join(dir, "sessions.sqlite");
}

const texts = (messages: readonly Message[]) => messages.map((m) => `${m.role}:${messageText(m)}`);
const lastUser = (messages: readonly Message[]) => {
  const m = messages.findLast((x) => x.role === "user");
  return m ? messageText(m) : undefined;
};

/** An exec tool that signals when it starts and finishes when `gate` resolves. */
function gatedTool() {
  const started = deferred();
  const gate = deferred<string>();
  let runs = 0;
  const tool = defineTool({
    name: "work",
    description: "Long-running work.",
    category: "exec",
    execute: async () => {
      runs++;
      started.resolve();
      return gate.promise;
    },
  });
  return { tool, started: started.promise, release: (v = "work done") => gate.resolve(v), runs: () => runs };
}

async function setup(steps: ScriptStep[], tools: ToolDefinition[], extra: Partial<AgentOptions> = {}) {
  const provider = scriptedProvider(steps);
  const agent = await createAgent({ provider, store: new MemorySessionStore(), tools, ...extra });
  const session = await agent.session();
  return { provider, agent, session };
}

describe("steering", () => {
  it("steer() while a tool runs skips the calls not yet started and injects the message before the next request", async () => {
    const work = gatedTool();
    const pings = { n: 0 };
    const { agent, session, provider } = await setup(
      [
        {
          toolCalls: [
            { id: "w", name: "work" },
            { id: "p1", name: "ping" },
            { id: "p2", name: "ping" },
          ],
        },
        { text: "changing course", expect: { lastUserIncludes: "use the other file" } },
      ],
      [work.tool, pingTool(pings)],
    );
    const running = session.run("start the job");
    await work.started;
    await session.steer("stop, use the other file");
    expect(session.steering.map((m) => m.text)).toEqual(["stop, use the other file"]);
    work.release();
    const r = await running;
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("changing course");
    expect(pings.n).toBe(0);
    expect(provider.requests).toHaveLength(2);
    // The running call finished normally; the two not yet started were skipped; then the steering message.
    expect(texts(provider.requests[1]!.messages)).toEqual([
      "user:start the job",
      "assistant:",
      "tool:work done",
      "tool:Skipped due to queued user message.",
      "tool:Skipped due to queued user message.",
      "user:stop, use the other file",
    ]);
    const tools = provider.requests[1]!.messages.filter((m) => m.role === "tool");
    expect(tools.map((m) => (m.role === "tool" ? [m.toolCallId, m.isError] : []))).toEqual([
      ["w", false],
      ["p1", true],
      ["p2", true],
    ]);
    expect(session.steering).toEqual([]);
    const events = await session.events();
    const queued = ofType(events, "message.queued");
    const dequeued = ofType(events, "message.dequeued");
    expect(queued).toHaveLength(1);
    expect(queued[0]).toMatchObject({ queue: "steering", text: "stop, use the other file" });
    expect(dequeued).toHaveLength(1);
    expect(dequeued[0]).toMatchObject({ queue: "steering", queueId: queued[0]!.queueId });
    // Dequeued within the turn, before the second request was compiled.
    const compiled = ofType(events, "prompt.compiled");
    expect(dequeued[0]!.turnId).toBe(r.turnId);
    expect(dequeued[0]!.seq).toBeLessThan(compiled[1]!.seq);
    expect(dequeued[0]!.seq).toBeGreaterThan(compiled[0]!.seq);
    expect(Object.fromEntries(ofType(events, "tool.completed").map((e) => [e.callId, e.status]))).toEqual({
      w: "ok",
      p1: "skipped",
      p2: "skipped",
    });
    await agent.close();
  });

  it("steering that arrives while the model answers without tools gets one more round", async () => {
    const { agent, session, provider } = await setup(
      [{ text: "first thoughts", delayMs: 30 }, { text: "considering your note" }],
      [pingTool({ n: 0 })],
    );
    const requested = deferred();
    agent.subscribe((e) => {
      if (e.type === "prompt.compiled") requested.resolve();
    });
    const running = session.run("question");
    await requested.promise; // the first request is on its way
    await session.steer("also consider X");
    const r = await running;
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("considering your note");
    expect(provider.requests).toHaveLength(2);
    expect(texts(provider.requests[0]!.messages)).toEqual(["user:question"]);
    expect(texts(provider.requests[1]!.messages)).toEqual([
      "user:question",
      "assistant:first thoughts",
      "user:also consider X",
    ]);
    await agent.close();
  });

  it("steering that arrives while the model streams a tool-calling response skips every call of it (none has started)", async () => {
    const pings = { n: 0 };
    const { agent, session, provider } = await setup(
      [
        {
          toolCalls: [
            { id: "p1", name: "ping" },
            { id: "p2", name: "ping" },
          ],
          delayMs: 30,
        },
        { text: "ok, stopping" },
      ],
      [pingTool(pings)],
    );
    const requested = deferred();
    agent.subscribe((e) => {
      if (e.type === "prompt.compiled") requested.resolve();
    });
    const running = session.run("go");
    await requested.promise;
    await session.steer("stop that");
    const r = await running;
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(pings.n).toBe(0);
    expect(texts(provider.requests[1]!.messages)).toEqual([
      "user:go",
      "assistant:",
      "tool:Skipped due to queued user message.",
      "tool:Skipped due to queued user message.",
      "user:stop that",
    ]);
    expect(ofType(await session.events(), "tool.started")).toEqual([]);
    await agent.close();
  });

  it("messages queued while no turn runs come before the next input, in the order they were sent", async () => {
    const { agent, session, provider } = await setup([{ text: "answer to all" }], [pingTool({ n: 0 })]);
    await session.steer("and a detail");
    await session.followUp("and another task");
    const r = await session.run("question");
    expect(r.text).toBe("answer to all");
    expect(provider.requests).toHaveLength(1);
    expect(texts(provider.requests[0]!.messages)).toEqual([
      "user:and a detail",
      "user:and another task",
      "user:question",
    ]);
    expect(session.steering).toEqual([]);
    expect(session.followUps).toEqual([]);
    await agent.close();
  });
});

describe("follow-ups", () => {
  it("a follow-up queued during a turn re-enters the loop after the model would stop; the verdict comes from the end", async () => {
    const work = gatedTool();
    const { agent, session, provider } = await setup(
      [
        { toolCalls: [{ id: "w", name: "work" }] },
        { text: "first task done" },
        { text: "second task cut short", stopReason: "max_tokens" },
      ],
      [work.tool],
    );
    const running = session.run("first task");
    await work.started;
    await session.followUp("then do the second task");
    work.release();
    const r = await running;
    expect(r.verdict).toEqual({ status: "completed", reason: "max_tokens" });
    expect(r.text).toBe("second task cut short");
    expect(r.rounds).toBe(3);
    expect(provider.requests).toHaveLength(3);
    // The follow-up is not injected before the model stopped...
    expect(lastUser(provider.requests[1]!.messages)).toBe("first task");
    // ...and is the last user message of the request after.
    const third = provider.requests[2]!.messages;
    expect(third.at(-1)!.role).toBe("user");
    expect(lastUser(third)).toBe("then do the second task");
    expect(texts(third).slice(-2)).toEqual(["assistant:first task done", "user:then do the second task"]);
    expect(session.followUps).toEqual([]);
    const events = await session.events();
    expect(ofType(events, "message.dequeued").map((e) => e.queue)).toEqual(["follow_up"]);
    const terminal = events.filter(
      (e) => e.type === "turn.completed" || e.type === "turn.failed" || e.type === "turn.interrupted",
    );
    expect(terminal).toHaveLength(1);
    await agent.close();
  });

  it("follow-ups are handled one batch after another, each after the model stops", async () => {
    const { agent, session, provider } = await setup([{ text: "a", delayMs: 20 }, { text: "b" }], [pingTool({ n: 0 })]);
    const running = session.run("q");
    await session.followUp("f1");
    await session.followUp("f2");
    const r = await running;
    expect(r.text).toBe("b");
    expect(provider.requests).toHaveLength(2);
    expect(texts(provider.requests[1]!.messages)).toEqual(["user:q", "assistant:a", "user:f1", "user:f2"]);
    await agent.close();
  });
});

describe("durable queues", () => {
  it("queued messages survive closing the agent and are consumed by the next run in a new agent", async () => {
    const db = tmpDb();
    const store1 = new SqliteSessionStore({ path: db });
    const agent1 = await createAgent({ provider: scriptedProvider([]), store: store1 });
    const s1 = await agent1.session();
    await s1.steer("steer me");
    await s1.followUp("follow me");
    await agent1.close();
    store1.close();

    const store2 = new SqliteSessionStore({ path: db });
    const provider2 = scriptedProvider([{ text: "saw all three", expect: { lastUserIncludes: "go" } }]);
    const agent2 = await createAgent({ provider: provider2, store: store2 });
    const s2 = await agent2.session(s1.id);
    expect(s2.steering.map((m) => m.text)).toEqual(["steer me"]);
    expect(s2.followUps.map((m) => m.text)).toEqual(["follow me"]);
    const r = await s2.run("go");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("saw all three");
    expect(texts(provider2.requests[0]!.messages)).toEqual(["user:steer me", "user:follow me", "user:go"]);
    expect(s2.steering).toEqual([]);
    expect(s2.followUps).toEqual([]);
    await agent2.close();
    store2.close();

    // Consumed means consumed: a third process finds both queues empty and the messages in the history.
    const store3 = new SqliteSessionStore({ path: db });
    const agent3 = await createAgent({ provider: scriptedProvider([]), store: store3 });
    const s3 = await agent3.session(s1.id);
    expect(s3.steering).toEqual([]);
    expect(s3.followUps).toEqual([]);
    expect(texts(s3.messages)).toEqual(["user:steer me", "user:follow me", "user:go", "assistant:saw all three"]);
    await agent3.close();
    store3.close();
  });

  it("a queue partly consumed before a crash restores only what is left", async () => {
    const db = tmpDb();
    const store1 = new SqliteSessionStore({ path: db });
    const agent1 = await createAgent({ provider: scriptedProvider([{ text: "handled steering" }]), store: store1 });
    const s1 = await agent1.session();
    await s1.steer("consumed");
    const r1 = await s1.run("first");
    expect(r1.verdict.status).toBe("completed");
    await s1.followUp("left over");
    await agent1.close();
    store1.close();

    const store2 = new SqliteSessionStore({ path: db });
    const agent2 = await createAgent({ provider: scriptedProvider([]), store: store2 });
    const s2 = await agent2.session(s1.id);
    expect(s2.steering).toEqual([]);
    expect(s2.followUps.map((m) => m.text)).toEqual(["left over"]);
    await agent2.close();
    store2.close();
  });
});

describe("one turn at a time, and cancel()", () => {
  it("run() while a turn runs rejects with KEEL_TURN_BUSY and leaves the running turn alone", async () => {
    const { agent, session, provider } = await setup(
      [{ text: "slow answer", delayMs: 40 }, { text: "next" }],
      [pingTool({ n: 0 })],
    );
    const first = session.run("one");
    expect(session.busy).toBe(true);
    let err: unknown;
    try {
      await session.run("two");
    } catch (e) {
      err = e;
    }
    expect(isKeelError(err) && err.code).toBe("KEEL_TURN_BUSY");
    const r = await first;
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("slow answer");
    expect(provider.requests).toHaveLength(1);
    expect(texts(session.messages)).toEqual(["user:one", "assistant:slow answer"]);
    const started = ofType(await session.events(), "turn.started");
    expect(started.map((e) => e.input)).toEqual(["one"]);
    // Free again once the turn ended.
    expect(session.busy).toBe(false);
    expect((await session.run("three")).text).toBe("next");
    await agent.close();
  });

  it("session.cancel() cancels the running turn mid-stream", async () => {
    const { agent, session, provider } = await setup([{ hang: true }, { text: "after cancel" }], [pingTool({ n: 0 })]);
    const running = session.run("question");
    setTimeout(() => session.cancel(), 10);
    const r = await running;
    expect(r.verdict).toEqual({ status: "interrupted", reason: "aborted" });
    expect(ofType(await session.events(), "turn.interrupted")).toHaveLength(1);
    expect(session.busy).toBe(false);
    const r2 = await session.run("again");
    expect(r2.verdict.status).toBe("completed");
    expect(provider.requests).toHaveLength(2);
    await agent.close();
  });

  it("session.cancel() cancels the running turn mid-tool, and queued messages stay for the next turn", async () => {
    const work = gatedTool();
    const { agent, session, provider } = await setup(
      [{ toolCalls: [{ id: "w", name: "work" }] }, { text: "never in this turn" }],
      [work.tool],
    );
    const running = session.run("go");
    await work.started;
    await session.followUp("later");
    session.cancel();
    const r = await running;
    expect(r.verdict).toEqual({ status: "interrupted", reason: "aborted" });
    expect(provider.requests).toHaveLength(1);
    expect(session.followUps.map((m) => m.text)).toEqual(["later"]);
    const res = session.messages.find((m) => m.role === "tool");
    expect(res && messageText(res)).toContain("Cancelled");
    await agent.close();
  });

  it("cancel() without a running turn is a no-op", async () => {
    const { agent, session } = await setup([{ text: "fine" }], [pingTool({ n: 0 })]);
    session.cancel();
    const r = await session.run("q");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    await agent.close();
  });
});
