/**
 * The MUST of the design: the user's message is durable before any provider call, and a
 * process killed at any point resumes with nothing the user said lost.
 *
 * Each test runs a real turn in a child process (support/turn-child.ts), SIGKILLs it at a
 * chosen point, then resumes the session from the same SQLite file in this process.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "../src/agent.ts";
import type { KeelEvent } from "../../kernel/src/events.ts";
import { isTerminalEvent } from "../../kernel/src/events.ts";
import type { Message } from "../../kernel/src/messages.ts";
import { messageText } from "../../kernel/src/messages.ts";
import { INTERRUPTED_RESULT, repairToolPairs } from "../../kernel/src/repair.ts";
import { scriptedProvider } from "../../testkit/src/index.ts";
import { expectContiguousSeqs, tempHomes, userMsg } from "./support/helpers.ts";

const CHILD_SCRIPT = fileURLToPath(new URL("./support/turn-child.ts", import.meta.url));
/** Must match turn-child.ts. */
const ORPHAN_CALL_ID = "call_orphan_1";
const HANG_TOOL = "hang_probe";
const CHILD_AGENT = "crash-child";
/**
 * How long to wait for the child to reach a marker before failing (it loads the tokenizer first):
 * a hang bound, since a child on a loaded machine can take seconds to start, not a speed bound.
 */
const MARKER_TIMEOUT_MS = 40_000;
const TEST_TIMEOUT_MS = 90_000;

type Mode = "provider" | "tool" | "steer";

interface Child {
  proc: ChildProcess;
  /** Resolve with the rest of the first stdout line starting with `marker `. */
  waitFor(marker: string): Promise<string>;
  /** SIGKILL the child and resolve with how it ended. */
  kill(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children = new Set<ChildProcess>();
const homes = tempHomes("keel-crash-");
const freshHome = homes.fresh;
const openStore = homes.open;

afterEach(async () => {
  // No leaked processes, also when a test failed before it killed its child.
  for (const proc of children) {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
      proc.kill("SIGKILL");
      await exited;
    }
  }
  children.clear();
  homes.cleanup();
});

function startChild(home: string, mode: Mode, args: string[]): Child {
  const proc = spawn(process.execPath, ["--no-warnings", CHILD_SCRIPT, mode, ...args], {
    env: { ...process.env, KEEL_HOME: home },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(proc);
  const lines: string[] = [];
  let partial = "";
  let stderr = "";
  const waiters = new Set<() => void>();
  proc.stdout!.setEncoding("utf8");
  proc.stderr!.setEncoding("utf8");
  proc.stdout!.on("data", (chunk: string) => {
    partial += chunk;
    const parts = partial.split("\n");
    partial = parts.pop()!;
    lines.push(...parts);
    for (const w of waiters) w();
  });
  proc.stderr!.on("data", (chunk: string) => (stderr += chunk));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once("exit", (code, signal) => resolve({ code, signal })),
  );

  return {
    proc,
    waitFor(marker) {
      return new Promise<string>((resolve, reject) => {
        const check = () => {
          const line = lines.find((l) => l.startsWith(`${marker} `));
          if (line === undefined) return false;
          done();
          resolve(line.slice(marker.length + 1));
          return true;
        };
        const timer = setTimeout(() => {
          done();
          reject(
            new Error(
              `turn-child (${mode}) did not write ${marker} within ${MARKER_TIMEOUT_MS} ms; stdout: ${JSON.stringify(lines)}; stderr: ${stderr}`,
            ),
          );
        }, MARKER_TIMEOUT_MS);
        const onExit = () => {
          // Lines written just before exiting may still be in the pipe; `close` comes after them.
          const settle = () => {
            if (check()) return;
            done();
            reject(
              new Error(
                `turn-child (${mode}) exited (code ${proc.exitCode}, signal ${proc.signalCode}) before writing ${marker}; stdout: ${JSON.stringify(lines)}; stderr: ${stderr}`,
              ),
            );
          };
          if (proc.stdout!.closed) settle();
          else proc.stdout!.once("close", settle);
        };
        const done = () => {
          clearTimeout(timer);
          waiters.delete(check);
          proc.off("exit", onExit);
        };
        waiters.add(check);
        proc.once("exit", onExit);
        check();
      });
    },
    async kill() {
      proc.kill("SIGKILL");
      return ended;
    },
  };
}

function userTexts(messages: readonly Message[]): string[] {
  return messages.filter((m) => m.role === "user").map(messageText);
}

/** A history a provider accepts: every tool call answered once, no stray results. */
function expectValidHistory(messages: readonly Message[]): void {
  expect(repairToolPairs(messages).messages).toBe(messages);
}

/** Kill the child at its marker and check what the log holds before any resume. */
async function killAt(child: Child, marker: string): Promise<string> {
  const sessionId = await child.waitFor(marker);
  const exit = await child.kill();
  // Killed, not exited on its own: the turn was still running when it died.
  expect(exit).toEqual({ code: null, signal: "SIGKILL" });
  expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
  return sessionId;
}

/** The events of the dangling turn: its turn.started and the user message it stored. */
function danglingTurn(events: readonly KeelEvent[], input: string): { turnId: string } {
  const started = events.filter((e) => e.type === "turn.started");
  expect(started).toHaveLength(1);
  const turn = started[0]!;
  expect(turn).toMatchObject({ type: "turn.started", input, trigger: "user" });
  const turnId = turn.turnId!;
  expect(turnId).toEqual(expect.any(String));
  const appended = events.find((e) => e.type === "message.appended" && e.message.role === "user");
  expect(appended).toMatchObject({ type: "message.appended", turnId, message: userMsg(input) });
  expect(appended!.seq).toBeGreaterThan(turn.seq);
  // Nothing ended the turn: the process died inside it.
  expect(events.filter(isTerminalEvent)).toEqual([]);
  return { turnId };
}

/** After `agent.session(id)`: exactly a session.resumed naming the turn, then its turn.interrupted. */
function expectResumeEvents(added: readonly KeelEvent[], turnId: string): void {
  expect(added.map((e) => e.type)).toEqual(["session.resumed", "turn.interrupted"]);
  expect(added[0]).toMatchObject({
    type: "session.resumed",
    agent: CHILD_AGENT,
    interruptedTurn: turnId,
    turnId: null,
  });
  expect(added[1]).toMatchObject({
    type: "turn.interrupted",
    turnId,
    verdict: { status: "interrupted", reason: "process_exit" },
  });
}

describe("crash safety: a SIGKILLed turn resumes with nothing the user said lost", () => {
  it(
    "killed while the provider call is in flight: the user message survives, the turn is marked interrupted, and the next turn sends the full history",
    async () => {
      const home = freshHome();
      const input = "Remember the vault code 7-3-1-9 (crash probe A, in-flight)";
      const next = "What was the vault code?";
      const sessionId = await killAt(startChild(home, "provider", [input]), "IN_FLIGHT");

      const store = openStore(home);
      const before = await store.events(sessionId);
      expectContiguousSeqs(before);
      const { turnId } = danglingTurn(before, input);

      const provider = scriptedProvider([{ text: "It was 7-3-1-9.", expect: { lastUserIncludes: next } }]);
      const agent = await createAgent({ name: CHILD_AGENT, store, provider });
      const session = await agent.session(sessionId);
      expect(session.resumed).toBe(true);
      expect(session.messages).toEqual([userMsg(input)]);

      const afterResume = await session.events();
      expectContiguousSeqs(afterResume);
      expect(afterResume.slice(0, before.length)).toEqual(before);
      expectResumeEvents(afterResume.slice(before.length), turnId);

      const result = await session.run(next);
      expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
      expect(result.text).toBe("It was 7-3-1-9.");
      expect(result.turnId).not.toBe(turnId);
      expect(provider.requests).toHaveLength(1);
      const sent = provider.requests[0]!.messages;
      expect(sent).toEqual([userMsg(input), userMsg(next)]);
      expectValidHistory(sent);
      await agent.close();

      // Resuming again: the interrupted turn is closed for good and the history is the same.
      const again = await createAgent({ name: CHILD_AGENT, store, provider: scriptedProvider([]) });
      const reopened = await again.session(sessionId);
      expect(reopened.messages).toEqual(session.messages);
      const all = await reopened.events();
      expectContiguousSeqs(all);
      expect(all.filter((e) => e.type === "turn.interrupted")).toHaveLength(1);
      expect(all.at(-1)).toMatchObject({ type: "session.resumed", turnId: null });
      expect(all.at(-1)).not.toHaveProperty("interruptedTurn");
      await again.close();
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "killed while a tool runs: the next request carries a synthesized error result for the orphaned call (context.repaired)",
    async () => {
      const home = freshHome();
      const input = "Probe the database please (crash probe B, in-tool)";
      const next = "Did the probe finish?";
      const sessionId = await killAt(startChild(home, "tool", [input]), "IN_TOOL");

      const store = openStore(home);
      const before = await store.events(sessionId);
      expectContiguousSeqs(before);
      const { turnId } = danglingTurn(before, input);
      const assistant = before.find((e) => e.type === "message.appended" && e.message.role === "assistant");
      expect(assistant).toMatchObject({
        turnId,
        message: {
          role: "assistant",
          content: expect.arrayContaining([
            { type: "tool_call", id: ORPHAN_CALL_ID, name: HANG_TOOL, args: { target: "db" } },
          ]),
        },
      });
      expect(before.find((e) => e.type === "tool.started")).toMatchObject({
        turnId,
        callId: ORPHAN_CALL_ID,
        name: HANG_TOOL,
      });
      expect(
        before.filter(
          (e) => e.type === "tool.completed" || (e.type === "message.appended" && e.message.role === "tool"),
        ),
      ).toEqual([]);

      const provider = scriptedProvider([{ text: "No, it was interrupted.", expect: { lastUserIncludes: next } }]);
      const agent = await createAgent({ name: CHILD_AGENT, store, provider });
      const session = await agent.session(sessionId);
      expect(userTexts(session.messages)).toEqual([input]);
      expect(session.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
      expectResumeEvents((await session.events()).slice(before.length), turnId);

      const result = await session.run(next);
      expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
      expect(provider.requests).toHaveLength(1);
      const sent = provider.requests[0]!.messages;
      expect(sent.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user"]);
      expect(sent[0]).toEqual(userMsg(input));
      expect(sent[2]).toEqual({
        role: "tool",
        toolCallId: ORPHAN_CALL_ID,
        toolName: HANG_TOOL,
        content: [{ type: "text", text: INTERRUPTED_RESULT }],
        isError: true,
      });
      expect(sent[3]).toEqual(userMsg(next));
      expectValidHistory(sent);

      const events = await session.events();
      expectContiguousSeqs(events);
      const repaired = events.filter((e) => e.type === "context.repaired");
      expect(repaired).toHaveLength(1);
      expect(repaired[0]).toMatchObject({
        turnId: result.turnId,
        synthesizedResults: [ORPHAN_CALL_ID],
        droppedResults: [],
      });
      await agent.close();

      // The repair is in the log: another resume rebuilds exactly the repaired history.
      const again = await createAgent({ name: CHILD_AGENT, store, provider: scriptedProvider([]) });
      const reopened = await again.session(sessionId);
      expect(reopened.messages).toEqual(session.messages);
      expectValidHistory(reopened.messages);
      await again.close();
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "killed right after steer() was queued: the steering text is restored on resume and reaches the model in the next turn",
    async () => {
      const home = freshHome();
      const input = "Deploy the service (crash probe C, steer)";
      const steerText = "Actually use the staging cluster, not production";
      const next = "Go ahead.";
      const sessionId = await killAt(startChild(home, "steer", [input, steerText]), "STEERED");

      const store = openStore(home);
      const before = await store.events(sessionId);
      expectContiguousSeqs(before);
      const { turnId } = danglingTurn(before, input);
      const queued = before.filter((e) => e.type === "message.queued");
      expect(queued).toHaveLength(1);
      expect(queued[0]).toMatchObject({ queue: "steering", text: steerText });
      const queueId = (queued[0] as Extract<KeelEvent, { type: "message.queued" }>).queueId;
      expect(before.filter((e) => e.type === "message.dequeued")).toEqual([]);

      const provider = scriptedProvider([{ text: "Deploying to staging." }]);
      const agent = await createAgent({ name: CHILD_AGENT, store, provider });
      const session = await agent.session(sessionId);
      expect(session.steering).toEqual([{ queueId, text: steerText }]);
      expect(session.followUps).toEqual([]);
      expect(session.messages).toEqual([userMsg(input)]);
      expectResumeEvents((await session.events()).slice(before.length), turnId);

      const result = await session.run(next);
      expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
      expect(provider.requests).toHaveLength(1);
      const sent = provider.requests[0]!.messages;
      const texts = userTexts(sent);
      expect(texts).toHaveLength(3);
      expect(texts[0]).toBe(input);
      expect(texts).toContain(steerText);
      expect(texts).toContain(next);
      expectValidHistory(sent);
      // Consumed exactly once: dequeued in the new turn, gone from the queue.
      expect(session.steering).toEqual([]);
      const dequeued = (await session.events()).filter((e) => e.type === "message.dequeued");
      expect(dequeued).toHaveLength(1);
      expect(dequeued[0]).toMatchObject({ queue: "steering", queueId, turnId: result.turnId });
      await agent.close();

      const again = await createAgent({ name: CHILD_AGENT, store, provider: scriptedProvider([]) });
      const reopened = await again.session(sessionId);
      expect(reopened.steering).toEqual([]);
      expect(reopened.messages).toEqual(session.messages);
      await again.close();
    },
    TEST_TIMEOUT_MS,
  );
});
