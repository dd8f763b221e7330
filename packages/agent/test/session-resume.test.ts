/**
 * Resuming sessions from the durable log: unknown ids, replaying a completed session in a
 * new agent, the prompt manifest of every request, message edits on replay, turn ids on
 * events, and where the default SQLite store lives.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createAgent } from "../src/agent.ts";
import type { AgentOptions } from "../src/agent-options.ts";
import { isTerminalEvent } from "../../kernel/src/events.ts";
import { digestOf } from "../src/node/digest.ts";
import type { Message } from "../../kernel/src/messages.ts";
import { messageText } from "../../kernel/src/messages.ts";
import { definePlugin } from "../../kernel/src/plugin.ts";
import type { PluginEntry } from "../../kernel/src/plugin.ts";
import type { ModelProvider } from "../../kernel/src/provider.ts";
import { repairToolPairs } from "../../kernel/src/repair.ts";
import { scriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";
import type { ToolDefinition } from "../../kernel/src/tools.ts";
import { ofType, keelErrorOf, expectContiguousSeqs, tempHomes, userMsg } from "./support/helpers.ts";

const homes = tempHomes("keel-resume-");
const freshDir = homes.fresh;
const openStore = homes.open;

afterEach(() => {
  vi.unstubAllEnvs();
  homes.cleanup();
});

const lookup: ToolDefinition = {
  name: "lookup",
  description: "Look a key up.",
  parameters: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
  execute: (args: { key: string }) => `value of ${args.key} is 42`,
};

const kitSearch: ToolDefinition = {
  name: "kit_search",
  description: "Search the kit.",
  parameters: { type: "object", properties: { q: { type: "string" } } },
  execute: () => "kit result",
};

/** Two plugins writing one section, a third adding a tool bundle. */
const persona = definePlugin({
  name: "persona",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("turn.pre_prompt_compile", () => ({
      kind: "prompt_section",
      id: "persona.main",
      sectionId: "persona",
      title: "Persona",
      domain: "persona",
      content: "You are terse.",
    }));
  },
});
const style = definePlugin({
  name: "style",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("turn.pre_prompt_compile", () => ({
      kind: "prompt_section",
      id: "style.voice",
      sectionId: "persona",
      domain: "style",
      content: "Answer in one line.",
    }));
  },
});
const toolkit = definePlugin({
  name: "toolkit",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("turn.pre_tool_materialization", () => ({ kind: "tool_bundle", bundleId: "kit", tools: [kitSearch] }));
  },
});

const SECOND_INPUT = "And now summarize (turn two)";
const SUMMARY = "Summary of earlier: the value of alpha is 42.";

/** Masks the lookup result once it is in the history; in the second turn replaces the whole first turn with a summary. */
const editor = definePlugin({
  name: "editor",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("round.pre_request", (e) => {
      if (e.input === SECOND_INPUT && e.round === 1 && messageText(e.messages[0]!) !== SUMMARY) {
        const end = e.messages.length - 1; // keep the new user message
        return {
          kind: "message_edit",
          reason: "summarize the first turn",
          edits: [{ op: "replace", start: 0, end, messages: [userMsg(SUMMARY)] }],
        };
      }
      const result = e.messages.find((m) => m.role === "tool" && m.toolCallId === "c1");
      if (result && messageText(result) !== "[masked]") {
        return {
          kind: "message_edit",
          reason: "mask a bulky result",
          edits: [{ op: "mask_tool_result", toolCallId: "c1", text: "[masked]" }],
        };
      }
      return undefined;
    });
  },
});

/** A first turn with one tool round (lookup + kit_search), then a second plain turn. */
function twoTurnScript() {
  return scriptedProvider([
    {
      text: "Looking up.",
      toolCalls: [
        { id: "c1", name: "lookup", args: { key: "alpha" } },
        { id: "c2", name: "kit_search", args: { q: "alpha" } },
      ],
    },
    { text: "alpha is 42." },
    { text: "Done: alpha is 42.", expect: { lastUserIncludes: SECOND_INPUT } },
  ]);
}

async function runTwoTurns(
  home: string,
  plugins: PluginEntry[],
  provider: ModelProvider = twoTurnScript(),
  extra: Partial<AgentOptions> = {},
) {
  const store = openStore(home);
  const agent = await createAgent({ name: "resumer", store, provider, tools: [lookup], plugins, ...extra });
  const session = await agent.session();
  const first = await session.run("What is alpha?");
  const second = await session.run(SECOND_INPUT);
  expect(first.verdict).toEqual({ status: "completed", reason: "end_turn" });
  expect(second.verdict).toEqual({ status: "completed", reason: "end_turn" });
  const messages = session.messages;
  await agent.close();
  const events = await store.events(session.id);
  store.close();
  return { id: session.id, messages, events, turnIds: [first.turnId, second.turnId] };
}

describe("session resume", () => {
  it("agent.session(id) on an unknown id throws KEEL_SESSION_NOT_FOUND and creates nothing", async () => {
    const home = freshDir();
    const store = openStore(home);
    const agent = await createAgent({ name: "resumer", store, provider: scriptedProvider([]) });
    const err = await keelErrorOf(() => agent.session("no-such-session"));
    expect(err.code).toBe("KEEL_SESSION_NOT_FOUND");
    expect(err.message).toContain("no-such-session");
    expect(await store.getSession("no-such-session")).toBeUndefined();
    expect(await agent.sessions()).toEqual([]);
    await agent.close();
  });

  it("a completed session resumed by a new agent on the same file has the same messages, gap-free seqs, and is listed", async () => {
    const home = freshDir();
    const live = await runTwoTurns(home, []);
    expectContiguousSeqs(live.events);
    expect(live.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "tool",
      "assistant",
      "user",
      "assistant",
    ]);

    const store = openStore(home);
    const provider = scriptedProvider([{ text: "Third answer." }]);
    const agent = await createAgent({ name: "resumer", store, provider, tools: [lookup] });
    const session = await agent.session(live.id);
    expect(session.resumed).toBe(true);
    expect(session.messages).toEqual(live.messages);

    const events = await session.events();
    expectContiguousSeqs(events);
    expect(events.slice(0, live.events.length)).toEqual(live.events);
    const added = events.slice(live.events.length);
    expect(added.map((e) => e.type)).toEqual(["session.resumed"]);
    expect(added[0]).toMatchObject({ agent: "resumer", turnId: null });
    expect(added[0]).not.toHaveProperty("interruptedTurn");

    const listed = await agent.sessions();
    expect(listed.map((s) => s.id)).toEqual([live.id]);
    expect(listed[0]).toMatchObject({ id: live.id, agent: "resumer", eventCount: events.length });

    // The conversation continues where it stopped: the full history goes out, seqs and turn ids continue.
    const third = await session.run("One more question");
    expect(third.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(live.turnIds).not.toContain(third.turnId);
    expect(provider.requests[0]!.messages).toEqual([...live.messages, userMsg("One more question")]);
    const after = await session.events();
    expectContiguousSeqs(after);
    expect(new Set(ofType(after, "turn.started").map((e) => e.turnId)).size).toBe(3);
    await agent.close();
  });

  it("records a prompt manifest (prompt.compiled) for every provider request", async () => {
    const home = freshDir();
    const provider = twoTurnScript();
    const live = await runTwoTurns(home, [persona, style, toolkit], provider);
    const compiled = ofType(live.events, "prompt.compiled");
    expect(provider.requests).toHaveLength(3);
    expect(compiled).toHaveLength(provider.requests.length);
    expect(compiled.map((e) => e.turnId)).toEqual([live.turnIds[0], live.turnIds[0], live.turnIds[1]]);
    expect(compiled.map((e) => e.manifest.round)).toEqual([1, 2, 1]);

    for (const [i, { manifest }] of compiled.entries()) {
      const request = provider.requests[i]!;
      expect(manifest.sections).toEqual([
        {
          sectionId: "persona",
          title: "Persona",
          chars: expect.any(Number),
          plugins: ["persona", "style"],
          hash: digestOf("You are terse.\n\nAnswer in one line."),
        },
      ]);
      expect(manifest.digest?.system).toBe(digestOf(request.system));
      expect(manifest.sections[0]!.chars).toBe("You are terse.\n\nAnswer in one line.".length);
      expect(request.system).toContain("You are terse.");
      expect(request.system).toContain("Answer in one line.");
      expect(manifest.tools).toEqual([
        { name: "lookup", source: "builtin" },
        { name: "kit_search", source: "toolkit/kit" },
      ]);
      expect(manifest.tools.map((t) => t.name)).toEqual(request.tools.map((t) => t.name));
      expect(manifest.messageCount).toBe(request.messages.length);
      expect(manifest.systemChars).toBe(request.system.length);
      expect(manifest.tokenEstimate.total).toBeGreaterThan(0);
      expect(manifest.tokenEstimate.total).toBe(
        manifest.tokenEstimate.system + manifest.tokenEstimate.tools + manifest.tokenEstimate.messages,
      );
      expect(manifest.finalRound).toBe(false);
    }
    // The history grows between requests, and the manifest says so.
    expect(compiled.map((e) => e.manifest.messageCount)).toEqual([1, 4, 6]);
  });

  it("replays message_edit contributions (context.edited) on resume, so resumed messages equal the live ones", async () => {
    const home = freshDir();
    const provider = twoTurnScript();
    const live = await runTwoTurns(home, [editor], provider);

    // The edits reached the model.
    const maskedResult = provider.requests[1]!.messages.find((m) => m.role === "tool" && m.toolCallId === "c1");
    expect(maskedResult && messageText(maskedResult)).toBe("[masked]");
    expect(provider.requests[2]!.messages).toEqual([userMsg(SUMMARY), userMsg(SECOND_INPUT)]);
    expect(live.messages).toEqual([
      userMsg(SUMMARY),
      userMsg(SECOND_INPUT),
      { role: "assistant", content: [{ type: "text", text: "Done: alpha is 42." }] },
    ]);

    const edited = ofType(live.events, "context.edited");
    expect(edited.map((e) => ({ plugin: e.plugin, reason: e.reason, turnId: e.turnId }))).toEqual([
      { plugin: "editor", reason: "mask a bulky result", turnId: live.turnIds[0] },
      { plugin: "editor", reason: "summarize the first turn", turnId: live.turnIds[1] },
    ]);
    expect(edited[1]).toMatchObject({ before: 6, after: 2 });
    // The appended messages alone would not give the live history: the edits must be replayed.
    const appendedOnly: Message[] = ofType(live.events, "message.appended").map((e) => e.message);
    expect(appendedOnly).not.toEqual(live.messages);

    const store = openStore(home);
    const agent = await createAgent({
      name: "resumer",
      store,
      provider: scriptedProvider([]),
      tools: [lookup],
      plugins: [editor],
    });
    const session = await agent.session(live.id);
    expect(session.messages).toEqual(live.messages);
    expect(repairToolPairs(session.messages).messages).toBe(session.messages);
    await agent.close();
  });

  it("with trace: full, records phase.completed for every phase run, naming its handlers and their contributions", async () => {
    const home = freshDir();
    const provider = twoTurnScript();
    const live = await runTwoTurns(home, [persona, style, toolkit, editor], provider, { trace: "full" });
    const phases = ofType(live.events, "phase.completed");

    const compile = phases.filter((e) => e.phase === "turn.pre_prompt_compile");
    expect(compile.map((e) => e.turnId)).toEqual(live.turnIds);
    for (const e of compile) {
      expect(e.handlers.map((h) => [h.plugin, h.status, h.contributions])).toEqual([
        ["persona", "ok", 1],
        ["style", "ok", 1],
      ]);
      // The section merge records what became of each fragment.
      const records = ofType(live.events, "contributions.merged")
        .filter((p) => p.turnId === e.turnId && p.phase === "turn.pre_prompt_compile")
        .flatMap((p) => p.contributions);
      expect(records).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ plugin: "persona", kind: "prompt_section", status: "applied" }),
          expect.objectContaining({ plugin: "style", kind: "prompt_section", status: "applied" }),
        ]),
      );
    }

    const tools = phases.filter((e) => e.phase === "turn.pre_tool_materialization");
    expect(tools).toHaveLength(2);
    expect(tools[0]!.handlers).toEqual([
      expect.objectContaining({ plugin: "toolkit", status: "ok", contributions: 1 }),
    ]);

    // round.pre_request runs once per provider request.
    const preRequest = phases.filter((e) => e.phase === "round.pre_request");
    expect(preRequest).toHaveLength(provider.requests.length);
    expect(preRequest.map((e) => e.handlers.map((h) => h.plugin))).toEqual([["editor"], ["editor"], ["editor"]]);
    expect(preRequest.map((e) => e.handlers[0]!.contributions)).toEqual([0, 1, 1]);
    for (const e of phases) expect(e.durationMs).toBeGreaterThanOrEqual(0);
  });

  it("in default tracing, a phase whose handler failed is still recorded as phase.completed", async () => {
    const home = freshDir();
    const broken = definePlugin({
      name: "broken",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", () => {
          throw new Error("context source offline");
        });
      },
    });
    const live = await runTwoTurns(home, [broken]);
    const runs = ofType(live.events, "phase.completed").filter((e) => e.phase === "turn.pre_prompt_context");
    expect(runs.map((e) => e.turnId)).toEqual(live.turnIds);
    for (const e of runs)
      expect(e.handlers).toEqual([
        expect.objectContaining({
          plugin: "broken",
          status: "threw",
          error: expect.stringContaining("context source offline"),
        }),
      ]);
  });

  it("every event of a turn carries that turn's id; session-level events carry null", async () => {
    const home = freshDir();
    const live = await runTwoTurns(home, [persona, toolkit, editor], twoTurnScript(), { trace: "full" });
    const events = live.events;
    for (const turnId of live.turnIds) {
      const started = events.findIndex((e) => e.type === "turn.started" && e.turnId === turnId);
      const ended = events.findIndex((e) => isTerminalEvent(e) && e.turnId === turnId);
      expect(started).toBeGreaterThanOrEqual(0);
      expect(ended).toBeGreaterThan(started);
      const inside = events.slice(started, ended + 1);
      expect(inside.filter((e) => e.turnId !== turnId)).toEqual([]);
      // Everything between turn.started and the verdict: messages, manifests, tools, phases.
      expect(inside.some((e) => e.type === "message.appended")).toBe(true);
      expect(inside.some((e) => e.type === "prompt.compiled")).toBe(true);
      expect(inside.some((e) => e.type === "phase.completed")).toBe(true);
      expect(inside.filter(isTerminalEvent)).toHaveLength(1);
    }
    expect(ofType(events, "tool.started").map((e) => e.turnId)).toEqual([live.turnIds[0], live.turnIds[0]]);
    expect(ofType(events, "tool.completed").map((e) => e.turnId)).toEqual([live.turnIds[0], live.turnIds[0]]);
    // Events outside a turn are session-level.
    for (const e of events) {
      if (e.type === "session.created" || e.type === "session.resumed") expect(e.turnId).toBeNull();
      else if (e.turnId !== null) expect(live.turnIds).toContain(e.turnId);
    }
    expect(live.turnIds[0]).not.toBe(live.turnIds[1]);
  });

  it("without a `store`, createAgent keeps sessions in <home>/sessions.sqlite, in WAL mode", async () => {
    const decoy = freshDir();
    vi.stubEnv("KEEL_HOME", decoy);
    const home = path.join(freshDir(), "nested", "keel-home");
    const dbPath = path.join(home, "sessions.sqlite");

    const agent = await createAgent({ name: "homebody", home, provider: scriptedProvider([{ text: "Stored." }]) });
    expect(agent.store).toBeInstanceOf(SqliteSessionStore);
    expect((agent.store as SqliteSessionStore).path).toBe(dbPath);
    const session = await agent.session();
    expect((await session.run("Keep this")).verdict.status).toBe("completed");
    const events = await session.events();
    await agent.close();
    // The agent owned its store, so close() closed it.
    expect((await keelErrorOf(() => agent.store.getSession(session.id))).code).toBe("KEEL_STORE_FAILED");

    expect(fs.existsSync(dbPath)).toBe(true);
    expect(fs.existsSync(path.join(decoy, "sessions.sqlite"))).toBe(false);
    const db = new DatabaseSync(dbPath, { readOnly: true });
    try {
      expect(db.prepare("PRAGMA journal_mode").get()).toEqual(expect.objectContaining({ journal_mode: "wal" }));
      const row = db.prepare("SELECT COUNT(*) AS n FROM events WHERE session_id = ?").get(session.id) as { n: number };
      expect(row.n).toBe(events.length);
    } finally {
      db.close();
    }

    // Another agent on the same home (again without `store`) resumes it.
    const again = await createAgent({ name: "homebody", home, provider: scriptedProvider([]) });
    expect((await again.sessions()).map((s) => s.id)).toEqual([session.id]);
    const resumed = await again.session(session.id);
    expect(resumed.messages).toEqual([
      userMsg("Keep this"),
      { role: "assistant", content: [{ type: "text", text: "Stored." }] },
    ]);
    await again.close();
  });
});
