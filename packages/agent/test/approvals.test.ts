/**
 * Durable approvals: an `ask` pauses the turn with the request in the session log; the host
 * answers from another process (or after a SIGKILL) and the turn continues where it stopped.
 * Cross-process cases run real child processes on a real SQLite file (support/approval-child.ts).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { AgentOptions, TurnResult } from "../src/index.ts";
import { streamResume, streamTurn } from "../../stream/src/index.ts";
import type { TurnStreamEvent } from "../../stream/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { keelErrorOf, ofType, pairResults, tempHomes } from "./support/helpers.ts";

const CHILD = fileURLToPath(new URL("./support/approval-child.ts", import.meta.url));
const homes = tempHomes("keel-approval-");
const children = new Set<ChildProcess>();

afterEach(async () => {
  for (const proc of children) {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise<void>((r) => proc.once("exit", () => r()));
      proc.kill("SIGKILL");
      await exited;
    }
  }
  children.clear();
  homes.cleanup();
});

/** Run the child to its end (or, with `until`, to that stdout marker) and return its marked lines. */
function child(
  home: string,
  mode: string,
  arg: object,
  until?: string,
): Promise<{ lines: Map<string, unknown>; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ["--no-warnings", CHILD, mode, JSON.stringify(arg)], {
    env: { ...process.env, KEEL_HOME: home, NOTE_FILE: path.join(home, "notes.txt") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(proc);
  const lines = new Map<string, unknown>();
  let out = "";
  let err = "";
  proc.stdout!.setEncoding("utf8").on("data", (c: string) => {
    out += c;
    for (const line of out.split("\n").slice(0, -1)) {
      const sp = line.indexOf(" ");
      lines.set(line.slice(0, sp), JSON.parse(line.slice(sp + 1)));
    }
    if (until && lines.has(until)) done();
  });
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  let done: () => void = () => {};
  return new Promise((resolve, reject) => {
    done = () => resolve({ lines, proc });
    proc.on("exit", (code) =>
      code === 0 ? resolve({ lines, proc }) : reject(new Error(`child ${mode} exited ${code}: ${err}`)),
    );
  });
}

const notes = (home: string) =>
  fs.existsSync(path.join(home, "notes.txt")) ? fs.readFileSync(path.join(home, "notes.txt"), "utf8") : "";
const postTurns = (home: string) =>
  fs.existsSync(path.join(home, "notes.txt.post"))
    ? fs.readFileSync(path.join(home, "notes.txt.post"), "utf8").length
    : 0;

const write = (id: string, text: string): ScriptStep => ({ toolCalls: [{ id, name: "write_note", args: { text } }] });

describe("durable approvals across processes", () => {
  it("pause → the process exits → a new process approves → the turn completes with the tool's real result", async () => {
    const home = homes.fresh();
    const first = await child(home, "start", {
      input: "note that release day is Thursday",
      script: [write("w1", "release: Thursday")],
    });
    const paused = first.lines.get("RESULT") as TurnResult;
    expect(paused.verdict).toEqual({ status: "paused", reason: "approval", pending: ["w1"] });
    expect(paused.pending).toMatchObject([
      {
        callId: "w1",
        name: "write_note",
        args: { text: "release: Thursday" },
        reason: "writes are reviewed",
        plugin: "guard",
      },
    ]);
    expect(notes(home)).toBe("");
    expect(postTurns(home)).toBe(0);

    const second = await child(home, "answer", {
      session: paused.sessionId,
      script: [{ text: "Noted." }],
      answers: [{ callId: "w1", approve: true }],
    });
    expect(second.lines.get("PENDING")).toMatchObject([{ callId: "w1", turnId: paused.turnId }]);
    const done = second.lines.get("RESULT") as TurnResult;
    expect(done).toMatchObject({ turnId: paused.turnId, verdict: { status: "completed" }, text: "Noted." });
    expect(notes(home)).toBe("release: Thursday\n");
    expect(postTurns(home)).toBe(1);

    const store = homes.open(home);
    const events = await store.events(paused.sessionId);
    const msgs = ofType(events, "message.appended").map((e) => e.message);
    const results = pairResults(msgs);
    expect(results.get("w1")!.text).toMatch(/^wrote "release: Thursday" \(pid \d+\)$/);
    expect(results.get("w1")!.text).toContain(`pid ${second.proc.pid}`);
    expect(events.map((e) => e.type).filter((t) => t.startsWith("turn.") || t.startsWith("approval."))).toEqual([
      "turn.started",
      "approval.requested",
      "turn.paused",
      "approval.resolved",
      "turn.resumed",
      "turn.completed",
    ]);
    expect(ofType(events, "tool.completed").map((e) => [e.callId, e.status, e.decision])).toEqual([
      ["w1", "ok", "ask→approved"],
    ]);
  }, 60_000);

  it("SIGKILL while waiting loses nothing: a new process finds the request and finishes the turn", async () => {
    const home = homes.fresh();
    const held = await child(home, "hold", { input: "save it", script: [write("w1", "kept")] }, "PAUSED");
    const paused = held.lines.get("PAUSED") as TurnResult;
    held.proc.kill("SIGKILL");
    await new Promise((r) => held.proc.once("exit", r));
    const after = await child(home, "answer", {
      session: paused.sessionId,
      script: [{ text: "Saved." }],
      answers: [{ callId: "w1", approve: true }],
    });
    expect(after.lines.get("PENDING")).toMatchObject([{ callId: "w1", args: { text: "kept" } }]);
    expect((after.lines.get("RESULT") as TurnResult).verdict.status).toBe("completed");
    expect(notes(home)).toBe("kept\n");
  }, 60_000);

  it("deny with a reason: the tool never runs and the model reads the reason", async () => {
    const home = homes.fresh();
    const paused = (await child(home, "start", { input: "x", script: [write("w1", "nope")] })).lines.get(
      "RESULT",
    ) as TurnResult;
    await child(home, "answer", {
      session: paused.sessionId,
      script: [{ text: "Understood." }],
      answers: [{ callId: "w1", approve: false, reason: "not on Fridays" }],
    });
    expect(notes(home)).toBe("");
    const events = await homes.open(home).events(paused.sessionId);
    const result = pairResults(ofType(events, "message.appended").map((e) => e.message)).get("w1")!;
    expect(result.isError).toBe(true);
    expect(result.text).toContain("denied by the user: not on Fridays");
    expect(ofType(events, "tool.completed").map((e) => [e.status, e.decision])).toEqual([
      ["denied", "deny by the user"],
    ]);
  }, 60_000);

  it('"always" is remembered for the session, in a later process too, and not in another session', async () => {
    const home = homes.fresh();
    const paused = (await child(home, "start", { input: "a", script: [write("w1", "one")] })).lines.get(
      "RESULT",
    ) as TurnResult;
    await child(home, "answer", {
      session: paused.sessionId,
      script: [{ text: "ok" }],
      answers: [{ callId: "w1", approve: true, always: true }],
    });
    const again = (
      await child(home, "again", {
        session: paused.sessionId,
        input: "b",
        script: [write("w2", "two"), { text: "ok again" }],
      })
    ).lines.get("RESULT") as TurnResult;
    expect(again.verdict.status).toBe("completed");
    expect(notes(home)).toBe("one\ntwo\n");
    const other = (await child(home, "start", { input: "c", script: [write("w3", "three")] })).lines.get(
      "RESULT",
    ) as TurnResult;
    expect(other.verdict.status).toBe("paused");
    const events = await homes.open(home).events(paused.sessionId);
    expect(ofType(events, "approval.resolved").map((e) => [e.callId, e.by, e.approved])).toEqual([
      ["w1", "host", true],
      ["w2", "always", true],
    ]);
  }, 60_000);
});

describe("durable approvals in one process", () => {
  const counter = { writes: [] as string[], reads: 0 };
  const tools = [
    defineTool({
      name: "write_note",
      description: "w",
      category: "edit",
      input: z.object({ text: z.string() }),
      execute: (a) => (counter.writes.push(a.text), `wrote ${a.text}`),
    }),
    defineTool({ name: "read_note", description: "r", execute: () => (counter.reads++, "notes") }),
  ];
  const asker = definePlugin({
    name: "guard",
    version: "1.0.0",
    setup: (ctx) =>
      ctx.on("tool.pre_call", (e) =>
        e.call.name === "write_note" ? { kind: "tool_decision", decision: "ask", reason: "review" } : undefined,
      ),
  });
  async function setup(steps: ScriptStep[], extra: Partial<AgentOptions> = {}) {
    counter.writes = [];
    counter.reads = 0;
    const provider = scriptedProvider(steps);
    const agent = await createAgent({ provider, store: new MemorySessionStore(), tools, plugins: [asker], ...extra });
    return { agent, provider, session: await agent.session() };
  }

  it("an allowed call in the same group runs before the pause; a later sequential call waits for the answer; one result per call", async () => {
    const { agent, session, provider } = await setup([
      {
        toolCalls: [
          { id: "r1", name: "read_note" },
          { id: "w1", name: "write_note", args: { text: "a" } },
          { id: "w2", name: "write_note", args: { text: "b" } },
        ],
      },
      { text: "done" },
    ]);
    const r = await session.run("go");
    // read_note and write_note are not in one parallel group (edit runs alone): r1 ran, w1 asked, w2 waits.
    expect(r.verdict).toEqual({ status: "paused", reason: "approval", pending: ["w1"] });
    expect(counter.reads).toBe(1);
    expect(counter.writes).toEqual([]);
    await session.approve("w1");
    const r2 = await session.resume();
    // w2 asks too: the turn pauses a second time.
    expect(r2.verdict).toEqual({ status: "paused", reason: "approval", pending: ["w2"] });
    expect(counter.writes).toEqual(["a"]);
    await session.deny("w2", { reason: "one is enough" });
    const r3 = await session.resume();
    expect(r3.verdict.status).toBe("completed");
    expect(r3.text).toBe("done");
    expect(counter.writes).toEqual(["a"]);
    const results = pairResults(session.messages);
    expect([...results.keys()]).toEqual(["r1", "w1", "w2"]);
    expect(results.get("w2")!.text).toContain("one is enough");
    // The model's second request carries every result.
    expect(provider.requests).toHaveLength(2);
    expect(provider.requests[1]!.messages.filter((m) => m.role === "tool")).toHaveLength(3);
    await agent.close();
  });

  it("misuse gets clear errors: run while paused, resume unanswered, unknown id, resume when nothing is paused", async () => {
    const { agent, session } = await setup([
      { toolCalls: [{ id: "w1", name: "write_note", args: { text: "a" } }] },
      { text: "ok" },
    ]);
    await session.run("go");
    expect((await keelErrorOf(() => session.run("next"))).code).toBe("KEEL_APPROVAL_PENDING");
    const unanswered = await keelErrorOf(() => session.resume());
    expect(unanswered.code).toBe("KEEL_APPROVAL_PENDING");
    expect(unanswered.message).toContain("write_note (w1)");
    expect((await keelErrorOf(() => session.approve("nope"))).code).toBe("KEEL_APPROVAL_UNKNOWN");
    await session.approve("w1");
    await session.resume();
    expect((await keelErrorOf(() => session.resume())).code).toBe("KEEL_NOT_PAUSED");
    expect((await keelErrorOf(() => session.approve("w1"))).code).toBe("KEEL_APPROVAL_UNKNOWN");
    await agent.close();
  });

  it("the approve() callback may answer { approved, always }: later asks for that tool do not reach it", async () => {
    const asked: string[] = [];
    const { agent, session } = await setup([write("w1", "a"), write("w2", "b"), { text: "ok" }], {
      approve: (req) => (asked.push(req.call.id), { approved: true, always: true }),
    });
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    expect(asked).toEqual(["w1"]);
    expect(counter.writes).toEqual(["a", "b"]);
    const resolved = ofType(await session.events(), "approval.resolved");
    expect(resolved.map((e) => [e.callId, e.by])).toEqual([
      ["w1", "callback"],
      ["w2", "always"],
    ]);
    await agent.close();
  });

  it("a callback's denial reason reaches the model", async () => {
    const { agent, session } = await setup([write("w1", "a"), { text: "ok" }], {
      approve: () => ({ approved: false, reason: "ask Bob" }),
    });
    await session.run("go");
    expect(pairResults(session.messages).get("w1")!.text).toContain("the user did not approve it (ask Bob)");
    await agent.close();
  });

  it("a stream shows the approval request and the paused verdict; resumeStream carries the rest", async () => {
    const { agent, session } = await setup([
      { text: "Let me write.", toolCalls: [{ id: "w1", name: "write_note", args: { text: "a" } }] },
      { text: "Written." },
    ]);
    const seen: TurnStreamEvent[] = [];
    for await (const e of streamTurn(session, "go")) seen.push(e);
    expect(seen.map((e) => e.type)).toEqual(
      expect.arrayContaining(["turn.started", "text", "approval.requested", "verdict"]),
    );
    expect(seen.at(-1)).toMatchObject({ type: "verdict", result: { verdict: { status: "paused" } } });
    expect(seen.find((e) => e.type === "approval.requested")).toMatchObject({
      callId: "w1",
      name: "write_note",
      args: { text: "a" },
      reason: "review",
      plugin: "guard",
    });
    await session.approve("w1");
    const rest: TurnStreamEvent[] = [];
    for await (const e of streamResume(session)) rest.push(e);
    expect(rest.map((e) => e.type)).toEqual(["turn.started", "tool.started", "tool.finished", "text", "verdict"]);
    expect(rest[0]).toMatchObject({ resumed: true });
    expect(rest.at(-1)).toMatchObject({ result: { text: "Written.", verdict: { status: "completed" } } });
    await agent.close();
  });

  it("a host's reason is made well-formed and cut to 2,000 code points before it is stored or sent", async () => {
    const { agent, session } = await setup([write("w1", "a"), { text: "ok" }]);
    await session.run("go");
    await session.deny("w1", { reason: `\ud83d${"😀".repeat(3_000)}` });
    await session.resume();
    const resolved = ofType(await session.events(), "approval.resolved")[0]!;
    expect(resolved.reason!.startsWith("\ufffd😀")).toBe(true);
    expect([...resolved.reason!].length).toBeLessThanOrEqual(2_000);
    expect(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(resolved.reason!)).toBe(false);
    expect(pairResults(session.messages).get("w1")!.text).toContain("\ufffd😀");
    await agent.close();
  });

  it("stream() and resumeStream() throw at the door (before any event) what run() and resume() would reject", async () => {
    const { agent, session } = await setup([write("w1", "a"), { text: "Written." }]);
    const codeOf = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return (err as { code?: string }).code;
      }
      return "no throw";
    };
    expect(codeOf(() => streamTurn(session, []))).toBe("KEEL_INPUT_INVALID");
    expect(codeOf(() => streamResume(session))).toBe("KEEL_NOT_PAUSED");
    const first = streamTurn(session, "go");
    expect(codeOf(() => streamTurn(session, "again"))).toBe("KEEL_TURN_BUSY");
    expect((await first.result).verdict.status).toBe("paused");
    expect(codeOf(() => streamTurn(session, "again"))).toBe("KEEL_APPROVAL_PENDING");
    expect(codeOf(() => streamResume(session))).toBe("KEEL_APPROVAL_PENDING");
    await session.approve("w1");
    expect((await streamResume(session).result).text).toBe("Written.");
    expect(counter.writes).toEqual(["a"]);
    await agent.close();
  });
});
