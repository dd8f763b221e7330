/**
 * Fault class 5 (silent loss), for subagents: `keel run` SIGKILLed while a task's child session
 * is mid-turn. The next run on the parent session marks the parent's turn interrupted and
 * closes the child's open turn too (nothing left running in any log), the user's words of both
 * are on disk, and the session goes on: a new turn delegates again to a fresh child, or
 * continues the killed child's session (the cut-off call names it) where it stopped.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../packages/store-sqlite/src/index.ts";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { KEEL_BIN, offlineEnv, REPO, runKeel } from "../../packages/cli/test/support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-fault-children-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const TASKS = pathToFileURL(join(REPO, "packages/plugin-tasks/src/index.ts")).href;

function eventsOf(home: string): Map<string, KeelEvent[]> {
  const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite"), readOnly: true });
  try {
    return new Map(store.listSessions({ limit: 100 }).map((s) => [s.id, store.events(s.id) as KeelEvent[]]));
  } finally {
    store.close();
  }
}

describe("fault/children: a subagent killed mid-turn", () => {
  it("SIGKILL while the child's model is answering: the next run closes the parent's and the child's turns as interrupted and delegates again", async () => {
    writeFileSync(
      join(root, "agent.config.mjs"),
      `import { tasks } from ${JSON.stringify(TASKS)};
export default {
  name: "kids",
  plugins: [tasks({ profiles: { slow: { description: "Thinks slowly." } } })],
  offline: { script: { steps: [
    { when: { lastUserIncludes: "delegate" }, toolCalls: [{ id: "t1", name: "task", args: { profile: "slow", prompt: "ponder the question" } }] },
    { when: { lastUserIncludes: "ponder" }, hang: true },
    { when: { lastUserIncludes: "again" }, toolCalls: [{ id: "t2", name: "task", args: { profile: "slow", prompt: "quick answer please" } }] },
    { when: { lastUserIncludes: "quick answer" }, text: "42" },
    { when: { lastUserIncludes: "again" }, text: "The child says 42." },
  ] } },
};\n`,
    );
    const home = join(root, ".keel");
    const env = offlineEnv({ KEEL_HOME: home });
    const child = spawn(process.execPath, [KEEL_BIN, "run", "delegate this"], {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    // Kill once the child session's turn has started (it then hangs on its model).
    await expect
      .poll(
        () =>
          [...eventsOf(home).values()].some((ev) =>
            ev.some((e) => e.type === "turn.started" && e.trigger === "subagent"),
          ),
        { timeout: 20_000, interval: 100 },
      )
      .toBe(true);
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));

    const before = eventsOf(home);
    const parentId = [...before].find(([, ev]) => !(ev[0] as { parent?: unknown }).parent)![0];
    const childId = [...before].find(([, ev]) => (ev[0] as { parent?: unknown }).parent)![0];
    expect(before.get(childId)!.some((e) => e.type === "message.appended" && e.message.role === "user")).toBe(true);

    const next = await runKeel(["run", "--session", parentId, "do it again"], { cwd: root, env });
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toContain("The child says 42.");
    const after = eventsOf(home);
    const parent = after.get(parentId)!;
    const firstTurn = (parent.find((e) => e.type === "turn.started") as KeelEvent).turnId;
    expect(
      parent
        .filter((e) => e.turnId === firstTurn && e.type.startsWith("turn.") && e.type !== "turn.started")
        .map((e) => e.type),
    ).toEqual(["turn.interrupted"]);
    expect(after.get(childId)!.at(-1)).toMatchObject({ type: "turn.interrupted", verdict: { reason: "process_exit" } });
    // The new turn delegated to a new child, which answered.
    const links = parent
      .filter((e) => e.type === "child.started")
      .map((e) => (e as { childSessionId: string }).childSessionId);
    expect(links).toHaveLength(2);
    expect(after.get(links[1]!)!.filter((e) => e.type === "turn.completed")).toHaveLength(1);
  }, 60_000);

  it("SIGKILL mid-task, then the parent continues the killed child's session: the cut-off call names it, and the child picks up with its history", async () => {
    const dir = mkdtempSync(join(root, "continue-"));
    const config = (steps: object[]) =>
      writeFileSync(
        join(dir, "agent.config.mjs"),
        `import { tasks } from ${JSON.stringify(TASKS)};
export default { name: "kids", plugins: [tasks({ profiles: { slow: { description: "Thinks slowly." } } })], offline: { script: { steps: ${JSON.stringify(steps)} } } };\n`,
      );
    config([
      {
        when: { lastUserIncludes: "delegate" },
        toolCalls: [{ id: "t1", name: "task", args: { profile: "slow", prompt: "ponder the question" } }],
      },
      { when: { lastUserIncludes: "ponder" }, hang: true },
    ]);
    const home = join(dir, ".keel");
    const env = offlineEnv({ KEEL_HOME: home });
    const child = spawn(process.execPath, [KEEL_BIN, "run", "delegate this"], {
      cwd: dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    await expect
      .poll(
        () =>
          [...eventsOf(home).values()].some((ev) =>
            ev.some((e) => e.type === "turn.started" && e.trigger === "subagent"),
          ),
        { timeout: 20_000, interval: 100 },
      )
      .toBe(true);
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const before = eventsOf(home);
    const parentId = [...before].find(([, ev]) => !(ev[0] as { parent?: unknown }).parent)![0];
    const childId = [...before].find(([, ev]) => (ev[0] as { parent?: unknown }).parent)![0];

    // The next process's model continues that child session (its id is what the cut-off result names).
    config([
      {
        when: { lastUserIncludes: "carry on" },
        toolCalls: [
          { id: "t2", name: "task", args: { profile: "slow", prompt: "finish pondering", session: childId } },
        ],
      },
      { when: { lastUserIncludes: "finish pondering" }, text: "42, after pondering" },
      { when: { lastUserIncludes: "carry on" }, text: "The child finished: 42." },
    ]);
    const next = await runKeel(["run", "--session", parentId, "carry on"], { cwd: dir, env });
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toContain("The child finished: 42.");
    const after = eventsOf(home);
    const cut = after
      .get(parentId)!
      .find(
        (e) => e.type === "message.appended" && e.message.role === "tool" && e.message.toolCallId === "t1",
      ) as Extract<KeelEvent, { type: "message.appended" }>;
    expect(JSON.stringify(cut.message.content)).toContain(
      `child session ${childId} (\\"slow\\") keeps the child's work so far`,
    );
    // One child session in all: its killed turn closed, the follow-up turn saw the first prompt and completed.
    expect(after.size).toBe(2);
    const kid = after.get(childId)!;
    expect(kid.filter((e) => e.type.startsWith("turn.") && e.type !== "turn.started").map((e) => e.type)).toEqual([
      "turn.interrupted",
      "turn.completed",
    ]);
    const users = kid
      .filter((e) => e.type === "message.appended" && e.message.role === "user")
      .map((e) => JSON.stringify((e as Extract<KeelEvent, { type: "message.appended" }>).message.content));
    expect(users.join(" ")).toMatch(/ponder the question[\s\S]*finish pondering/);
  }, 60_000);
});
