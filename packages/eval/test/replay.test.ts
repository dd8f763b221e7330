/**
 * replaySession: a session recorded in a real SQLite file replays identically with the same
 * plugins, and a plugin change shows as the first request it changed and why.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool, messageText } from "@keel/agent";
import type { KeelEvent, KeelPlugin } from "@keel/kernel";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { replaySession } from "../src/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const script: ScriptStep[] = [
  { toolCalls: [{ id: "c1", name: "read", args: { path: "TODO.md" } }] },
  { toolCalls: [{ id: "c2", name: "read", args: { path: "NOTES.md" } }] },
  { text: "Two things are left." },
  { text: "You are welcome." },
];

function readTool(runs: { n: number }) {
  return defineTool({
    name: "read",
    description: "Reads a file.",
    execute: (args: unknown) => `contents of ${(args as { path: string }).path} (run ${++runs.n})`,
  });
}

function rules(text: string): KeelPlugin {
  return definePlugin({
    name: "rules",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("turn.pre_prompt_compile", () => ({
        kind: "prompt_section",
        id: "rules",
        domain: "policy",
        sectionId: "rules",
        content: text,
      }));
    },
  });
}

/** Rewrites tool output (as TACO would): `mark` is put in front of it. */
function marker(mark: string): KeelPlugin {
  return definePlugin({
    name: "marker",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("tool.post_result", (e) => ({
        kind: "tool_result_rewrite",
        content: `${mark}${messageText(e.result)}`,
        reason: "marked",
      }));
    },
  });
}

async function record(plugins: KeelPlugin[]): Promise<KeelEvent[]> {
  const dir = mkdtempSync(join(tmpdir(), "keel-replay-"));
  dirs.push(dir);
  const store = new SqliteSessionStore({ path: join(dir, "sessions.sqlite") });
  const agent = await createAgent({
    provider: scriptedProvider(script),
    store,
    home: dir,
    tools: [readTool({ n: 0 })],
    plugins,
  });
  const session = await agent.session();
  await session.run("What is left in TODO.md?");
  await session.run("Thanks");
  const id = session.id;
  await agent.close();
  const reopened = new SqliteSessionStore({ path: join(dir, "sessions.sqlite") });
  const events = await reopened.events(id);
  reopened.close();
  return events;
}

function replay(events: KeelEvent[], plugins: KeelPlugin[], tools: "log" | "live" = "log", runs = { n: 0 }) {
  return replaySession({
    events,
    tools,
    build: (rig) =>
      createAgent({
        provider: rig.provider,
        sideModel: rig.sideModel,
        store: rig.store,
        tools: [readTool(runs)],
        plugins: [...plugins, ...rig.plugins],
        approve: rig.approve,
      }),
  });
}

describe("replaySession", () => {
  it("the same plugins replay identically: every request's digest matches, tools are not run", async () => {
    const events = await record([rules("Be brief."), marker("> ")]);
    const runs = { n: 0 };
    const report = await replay(events, [rules("Be brief."), marker("> ")], "log", runs);
    expect(report.notes).toEqual([]);
    expect(report.requests).toHaveLength(4);
    expect(report.requests.every((r) => r.same && r.compared === "digest")).toBe(true);
    expect(report.turns.map((t) => [t.recorded.status, t.replayed.status, t.same])).toEqual([
      ["completed", "completed", true],
      ["completed", "completed", true],
    ]);
    expect(report.identical).toBe(true);
    expect(runs.n).toBe(0);
  });

  it("a changed prompt section: the first request differs, naming the section and the plugin that built it", async () => {
    const events = await record([rules("Be brief.")]);
    const report = await replay(events, [rules("Be thorough and cite files.")]);
    expect(report.identical).toBe(false);
    expect(report.firstDivergence).toBe(0);
    expect(report.requests[0]!.sections).toEqual([
      { sectionId: "rules", change: "changed", plugins: ["rules"], chars: [9, 27] },
    ]);
    expect(report.requests[0]!.systemSame).toBe(false);
    expect(report.requests[0]!.messages.same).toBe(true);
    expect(report.asked!.system).toContain("Be thorough and cite files.");
    expect(report.asked!.lastMessages.at(-1)).toEqual({ role: "user", text: "What is left in TODO.md?" });
  });

  it("a changed tool-output rewriter gets the raw recorded output: the request after the call differs, not the first", async () => {
    const events = await record([marker("> ")]);
    const report = await replay(events, [marker(">> ")]);
    expect(report.firstDivergence).toBe(1);
    expect(report.requests[0]!.same).toBe(true);
    expect(report.requests[1]).toMatchObject({ same: false, systemSame: true, messages: { same: false } });
    // The raw output went through today's rewriter once (not the recorded rewrite on top).
    expect(report.asked!.lastMessages.at(-1)!.text).toBe(">> contents of TODO.md (run 1)");
  });

  it("a new policy that denies a call shows as a tool change", async () => {
    const events = await record([]);
    const deny = definePlugin({
      name: "no-notes",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", (e) =>
          (e.call.args as { path?: string }).path === "NOTES.md"
            ? { kind: "tool_decision", decision: "deny", reason: "notes are private" }
            : undefined,
        );
      },
    });
    const report = await replay(events, [deny]);
    expect(report.toolChanges).toEqual([
      { callId: "c2", name: "read", recorded: "ok", replayed: "denied (deny by no-notes)" },
    ]);
    expect(report.firstDivergence).toBe(2);
  });

  it("--tools live runs the tools: identical when they return what they returned", async () => {
    const events = await record([]);
    const runs = { n: 0 };
    const report = await replay(events, [], "live", runs);
    expect(runs.n).toBe(2);
    expect(report.identical).toBe(true);
  });

  it("a recording with fewer answers than the replay asks: the turn fails with KEEL_REPLAY_NO_ANSWER", async () => {
    const events = await record([]);
    const lastAnswer = events.findLastIndex((e) => e.type === "model.responded");
    const cut = events.filter((_, i) => i !== lastAnswer);
    const report = await replay(cut, []);
    expect(report.identical).toBe(false);
    expect(report.turns[1]!.replayed.status).toBe("failed");
    expect(report.turns[1]!.same).toBe(false);
  });

  it("a log without turns is a clear error", async () => {
    const events = await record([]);
    await expect(replay(events.slice(0, 1), [])).rejects.toMatchObject({ code: "KEEL_REPLAY_EMPTY" });
  });
});

describe("replaySession: approvals and child sessions", () => {
  const asker = definePlugin({
    name: "asker",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "files are private" }));
    },
  });

  it("approvals are answered as recorded: an approved call and a refused one replay identically, nobody is asked", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-replay-"));
    dirs.push(dir);
    const store = new SqliteSessionStore({ path: join(dir, "sessions.sqlite") });
    const asked: string[] = [];
    const agent = await createAgent({
      provider: scriptedProvider(script),
      store,
      home: dir,
      tools: [readTool({ n: 0 })],
      plugins: [asker],
      approve: (r) => (asked.push(r.call.id), r.call.id === "c1"),
    });
    const session = await agent.session();
    await session.run("What is left in TODO.md?");
    const events = await store.events(session.id);
    await agent.close();
    expect(asked).toEqual(["c1", "c2"]);
    const report = await replay(events, [asker]);
    expect(report.notes).toEqual([]);
    expect(report.toolChanges).toEqual([]);
    expect(report.identical).toBe(true);
  });

  it("with live tools a delegating call runs again and its child session replays on its own recorded answers", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-replay-"));
    dirs.push(dir);
    const store = new SqliteSessionStore({ path: join(dir, "sessions.sqlite") });
    const runs = { n: 0 };
    const delegations = { n: 0 };
    const delegate = defineTool({
      name: "delegate",
      description: "Asks a helper.",
      execute: async (_args: unknown, ctx) => {
        delegations.n++;
        const run = await ctx.child({ name: "helper", input: "look it up" });
        return `helper said: ${run.result.text}`;
      },
    });
    const steps: ScriptStep[] = [
      { toolCalls: [{ id: "d1", name: "delegate" }] },
      { text: "the helper's answer" },
      { toolCalls: [{ id: "r1", name: "read", args: { path: "TODO.md" } }] },
      { text: "all done" },
    ];
    const agent = await createAgent({
      provider: scriptedProvider(steps),
      store,
      home: dir,
      tools: [delegate, readTool(runs)],
    });
    const session = await agent.session();
    await session.run("Ask the helper, then read TODO.md");
    const events = await store.events(session.id);
    const childIds = events.flatMap((e) => (e.type === "child.started" ? [e.childSessionId] : []));
    const children = Object.fromEntries(await Promise.all(childIds.map(async (id) => [id, await store.events(id)])));
    await agent.close();
    expect(delegations.n).toBe(1);
    const replayRuns = { n: 0 };
    const report = await replaySession({
      events,
      tools: "live",
      children,
      build: (rig) =>
        createAgent({
          provider: rig.provider,
          sideModel: rig.sideModel,
          store: rig.store,
          tools: [delegate, readTool(replayRuns)],
          plugins: rig.plugins,
          ...(rig.approve ? { approve: rig.approve } : {}),
          ...(rig.childSessionId ? { childSessionId: rig.childSessionId } : {}),
        }),
    });
    expect(delegations.n).toBe(2);
    expect(replayRuns.n).toBe(1);
    expect(report.notes).toEqual([]);
    expect(report.identical).toBe(true);
  });
});
