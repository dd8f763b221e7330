/**
 * Full turns through the kernel (createAgent + scriptedProvider) with real MCP servers:
 * curated tools in the request, hidden tools revealed by tool_search, start failures as
 * diagnostics, no shadowing of built-ins, cancellation through MCP, the audit log, and no
 * child process left after close.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, defineTool, type KeelEvent, type Message } from "@keel/agent";
import { MemorySessionStore, scriptedProvider, type ScriptStep } from "@keel/testkit";
import { SqliteSessionStore } from "@keel/store-sqlite";
import mcpDefault, { AuditLog, mcp, type McpOptions } from "../src/index.ts";
import { alive, childPids, fixture, serverBin, tempDirs, until } from "./support.ts";

const dirs = tempDirs();
afterEach(() => dirs.cleanup());

const EVERYTHING = { command: process.execPath, args: [serverBin("server-everything")] };

async function setup(
  steps: ScriptStep[],
  options: McpOptions,
  extra: { tools?: Parameters<typeof createAgent>[0]["tools"] } = {},
) {
  const auditPath = join(dirs.make(), "mcp-audit.sqlite");
  const provider = scriptedProvider(steps);
  const agent = await createAgent({
    provider,
    store: new MemorySessionStore(),
    plugins: [mcp({ auditPath, ...options })],
    ...extra,
  });
  const session = await agent.session();
  return { provider, agent, session, auditPath };
}

const toolResults = (messages: readonly Message[]) => messages.filter((m) => m.role === "tool");
const resultText = (m: Message) =>
  m.role === "tool" ? m.content.map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join("") : "";
const ofType = <T extends KeelEvent["type"]>(events: readonly KeelEvent[], type: T) =>
  events.filter((e) => e.type === type) as Extract<KeelEvent, { type: T }>[];

describe("mcp() in a full turn", () => {
  it("exports the factory as default and named", () => {
    expect(mcpDefault).toBe(mcp);
    expect(mcp().name).toBe("@keel/plugin-mcp");
  });

  it("the model calls a curated MCP tool; only curated tools are advertised; the call is audited", async () => {
    const { provider, agent, session, auditPath } = await setup(
      [{ toolCalls: [{ id: "c1", name: "mcp__everything__echo", args: { message: "hello" } }] }, { text: "done" }],
      { servers: { everything: EVERYTHING }, topK: 3 },
    );
    const result = await session.run("echo the message hello back to me");
    expect(result.verdict.status).toBe("completed");
    const sent = provider.requests[0]!.tools.map((t) => t.name);
    expect(sent).toContain("mcp__everything__echo");
    expect(sent).toContain("tool_search");
    expect(sent.filter((n) => n.startsWith("mcp__")).length).toBeLessThanOrEqual(3);
    expect(sent).not.toContain("mcp__everything__get-tiny-image");
    const echo = provider.requests[0]!.tools.find((t) => t.name === "mcp__everything__echo")!;
    expect(echo.parameters).toMatchObject({ type: "object", properties: { message: { type: "string" } } });
    expect(resultText(toolResults(session.messages)[0]!)).toBe("Echo: hello");

    const events = await session.events();
    const done = ofType(events, "tool.completed")[0]!;
    expect(done).toMatchObject({ name: "mcp__everything__echo", status: "ok" });
    expect(provider.requests[0]!.system).toContain("Connected MCP servers (tools): everything (");
    const curation = ofType(events, "diagnostic").find((d) => d.code === "mcp.curation")!;
    expect(curation.message).toMatch(/of 1\d tools visible/);

    await agent.close();
    const audit = new AuditLog(auditPath);
    const rows = audit.all();
    audit.close();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      server: "everything",
      tool: "echo",
      name: "mcp__everything__echo",
      outcome: "ok",
      bytes: "Echo: hello".length,
      sessionId: session.id,
    });
    expect(rows[0]!.durationMs).toBeGreaterThan(0);
  });

  it("tool_search reveals a hidden tool for the rest of the turn and keeps it in later turns", async () => {
    const { provider, agent, session } = await setup(
      [
        { toolCalls: [{ id: "s1", name: "tool_search", args: { query: "tiny image" } }] },
        { toolCalls: [{ id: "c1", name: "mcp__everything__get-tiny-image", args: {} }] },
        { text: "here it is" },
        { text: "second turn" },
      ],
      { servers: { everything: EVERYTHING }, topK: 2 },
    );
    await session.run("add two numbers with get sum");
    const [first, second] = provider.requests;
    expect(first!.tools.map((t) => t.name)).not.toContain("mcp__everything__get-tiny-image");
    expect(second!.tools.map((t) => t.name)).toContain("mcp__everything__get-tiny-image");
    const [search, image] = toolResults(session.messages);
    expect(resultText(search!)).toContain("mcp__everything__get-tiny-image");
    expect(image!.role === "tool" && image!.content.some((b) => b.type === "image")).toBe(true);
    const revealed = ofType(await session.events(), "tools.revealed")[0]!;
    expect(revealed.names).toContain("mcp__everything__get-tiny-image");

    // Next turn: the revealed tool stays visible, after the tools kept before (stable prefix).
    await session.run("anything else?");
    const third = provider.requests[3]!.tools.map((t) => t.name).filter((n) => n.startsWith("mcp__"));
    const firstMcp = first!.tools.map((t) => t.name).filter((n) => n.startsWith("mcp__"));
    expect(third.slice(0, firstMcp.length)).toEqual(firstMcp);
    expect(third).toContain("mcp__everything__get-tiny-image");
    await agent.close();
  });

  it("a session resumed by a new agent (as in a new process) sends the same curated and revealed tools, from the audit file", async () => {
    const dir = dirs.make();
    const auditPath = join(dir, "mcp-audit.sqlite");
    const options: McpOptions = { auditPath, servers: { everything: EVERYTHING }, topK: 2, adaptive: false };
    const p1 = scriptedProvider([
      { toolCalls: [{ id: "s1", name: "tool_search", args: { query: "tiny image" } }] },
      { text: "found it" },
      { text: "second turn" },
    ]);
    const a1 = await createAgent({
      provider: p1,
      store: new SqliteSessionStore({ path: join(dir, "sessions.sqlite") }),
      plugins: [mcp(options)],
    });
    const s1 = await a1.session();
    await s1.run("add two numbers with get sum");
    await s1.run("print environment variables");
    // What the next turn sends in the same process: the keep-set, the revealed tool included.
    const before = p1.requests[2]!.tools.map((t) => t.name).filter((n) => n.startsWith("mcp__"));
    expect(before).toContain("mcp__everything__get-tiny-image");
    await a1.close();

    // A new agent, new plugin instance, new server processes; the same files.
    const p2 = scriptedProvider([{ text: "still here" }, { text: "fresh" }]);
    const a2 = await createAgent({
      provider: p2,
      store: new SqliteSessionStore({ path: join(dir, "sessions.sqlite") }),
      plugins: [mcp(options)],
    });
    const s2 = await a2.session(s1.id);
    await s2.run("print environment variables");
    const after = p2.requests[0]!.tools.map((t) => t.name).filter((n) => n.startsWith("mcp__"));
    // The kept set is the prefix (the provider's prompt cache stays valid), the revealed tool included.
    expect(after.slice(0, before.length)).toEqual(before);
    // A fresh session on the same agent starts from its own ranking, without the revealed tool.
    const fresh = await a2.session();
    await fresh.run("print environment variables");
    expect(p2.requests[1]!.tools.map((t) => t.name).filter((n) => n.startsWith("mcp__"))).not.toContain(
      "mcp__everything__get-tiny-image",
    );
    await a2.close();
    const rows = new AuditLog(auditPath);
    expect(rows.loadCuration(s1.id)?.pinned).toContain("mcp__everything__get-tiny-image");
    expect(rows.loadCuration("no-such-session")).toBeUndefined();
    rows.close();
  });

  it("tools the kernel's preflight plan reveals stay in the keep-set for later turns", async () => {
    const auditPath = join(dirs.make(), "a.sqlite");
    const provider = scriptedProvider([
      { text: '{"plan": "1. fetch the tiny image", "reveal": ["mcp__everything__get-tiny-image"]}' },
      { text: "turn one" },
      { text: '{"plan": "nothing needed", "reveal": []}' },
      { text: "turn two" },
    ]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      preflight: true,
      plugins: [mcp({ auditPath, servers: { everything: EVERYTHING }, topK: 2 })],
    });
    const session = await agent.session();
    await session.run("show me a picture");
    expect(provider.requests[1]!.tools.map((t) => t.name)).toContain("mcp__everything__get-tiny-image");
    const second = await session.run("zzz");
    expect(second.verdict.status).toBe("completed");
    // Second turn: the preflight reveals nothing, yet the tool stays (pinned in the keep-set).
    expect(provider.requests).toHaveLength(4);
    const last = provider.requests[3]!;
    expect(last.tools.map((t) => t.name)).toContain("mcp__everything__get-tiny-image");
    await agent.close();
  });

  it("a server that fails to start is a diagnostic naming it, and the turn goes on with the others; built-ins are never shadowed", async () => {
    const echoCalls: unknown[] = [];
    const builtin = defineTool({
      name: "mcp__fx__echo",
      description: "A built-in that happens to look like an MCP tool.",
      execute: (args) => (echoCalls.push(args), "built-in echo"),
    });
    const { provider, agent, session } = await setup(
      [{ toolCalls: [{ id: "b1", name: "mcp__fx__echo", args: { text: "x" } }] }, { text: "ok" }],
      {
        servers: {
          broken: { command: process.execPath, args: ["-e", "console.error('boom: no credentials'); process.exit(2)"] },
          fx: fixture("scripted-server.mjs"),
        },
      },
      { tools: [builtin] },
    );
    const result = await session.run("echo x");
    expect(result.verdict.status).toBe("completed");
    const events = await session.events();
    const failed = ofType(events, "diagnostic").find((d) => d.code === "KEEL_MCP_SERVER_START_FAILED")!;
    expect(failed.message).toContain('"broken"');
    expect(failed.message).toContain("boom: no credentials");
    expect(failed.plugin).toBe("@keel/plugin-mcp");
    // The built-in keeps its name and runs; the MCP tool got a distinct, suffixed name.
    expect(echoCalls).toEqual([{ text: "x" }]);
    const names = provider.requests[0]!.tools.map((t) => t.name);
    expect(names.filter((n) => n === "mcp__fx__echo")).toHaveLength(1);
    expect(names.some((n) => /^mcp__fx__echo_[0-9a-f]{8}$/.test(n))).toBe(true);
    expect(names).toContain("mcp__fx__weird_name_with_dots");
    expect(names).not.toContain("tool_search");
    expect(ofType(events, "diagnostic").some((d) => d.code === "KEEL_TOOL_DUPLICATE")).toBe(false);
    await agent.close();
  });

  it("the model is told the true cause: an unreachable upstream is not blamed on the arguments, a server bug neither", async () => {
    const { agent, session, auditPath } = await setup(
      [
        {
          toolCalls: [
            { id: "u1", name: "mcp__fx__fail", args: { text: "upstream" } },
            { id: "i1", name: "mcp__fx__fail", args: { text: "internal" } },
          ],
        },
        { text: "both failed" },
      ],
      { servers: { fx: fixture("scripted-server.mjs") } },
    );
    await session.run("fetch the page");
    const [upstream, internal] = toolResults(session.messages).map(resultText);
    expect(upstream).toContain("KEEL_MCP_UPSTREAM_UNREACHABLE");
    expect(upstream).toContain("ENOTFOUND api.example.invalid");
    expect(upstream).toContain("the arguments are not the cause");
    expect(upstream).not.toContain("Fix the arguments");
    expect(internal).toContain("KEEL_MCP_CALL_FAILED");
    expect(internal).not.toContain("Fix the arguments");
    await agent.close();
    const audit = new AuditLog(auditPath);
    expect(audit.all().map((r) => r.outcome)).toEqual(["upstream", "protocol_error"]);
    audit.close();
  });

  it("a protocol error and a timeout become error results; cancelling the turn cancels the call through MCP", async () => {
    const log = join(dirs.make(), "notes.jsonl");
    const { agent, session, auditPath } = await setup(
      [
        {
          toolCalls: [
            { id: "f1", name: "mcp__fx__fail", args: {} },
            { id: "h1", name: "mcp__fx__hang", args: {} },
          ],
        },
        { text: "both failed" },
        { toolCalls: [{ id: "h2", name: "mcp__fx__hang", args: {} }] },
        { text: "never reached" },
      ],
      { servers: { fx: { ...fixture("scripted-server.mjs", { FIXTURE_LOG: log }), timeoutMs: 500 } } },
    );
    await session.run("fail and hang");
    const [fail, hang] = toolResults(session.messages);
    expect(fail!.role === "tool" && fail!.isError).toBe(true);
    expect(resultText(fail!)).toContain("KEEL_MCP_CALL_REJECTED");
    expect(resultText(fail!)).toContain("Fix the arguments");
    expect(resultText(hang!)).toContain("KEEL_MCP_CALL_TIMEOUT");
    await until(
      () => existsSync(log) && readFileSync(log, "utf8").includes("notifications/cancelled"),
      5_000,
      "cancel after timeout",
    );

    const ctrl = new AbortController();
    const run = session.run("hang again", { signal: ctrl.signal });
    for (let i = 0; i < 200 && !ofType(await session.events(), "tool.started").some((e) => e.callId === "h2"); i++)
      await new Promise((r) => setTimeout(r, 25));
    await new Promise((r) => setTimeout(r, 100));
    ctrl.abort();
    const aborted = await run;
    expect(aborted.verdict.status).toBe("interrupted");
    await until(
      () => readFileSync(log, "utf8").split("notifications/cancelled").length >= 3,
      5_000,
      "cancel after abort",
    );
    await agent.close();
    const audit = new AuditLog(auditPath);
    expect(audit.all().map((r) => r.outcome)).toEqual(["rejected", "timeout", "cancelled"]);
    audit.close();
  });

  it("two sessions share the servers, which close with the last session; the hard cap counts built-ins", async () => {
    const builtin = defineTool({ name: "ping", description: "Answers pong.", execute: () => "pong" });
    const { provider, agent, session } = await setup(
      [{ text: "a" }, { text: "b" }],
      { servers: { everything: EVERYTHING }, hardCap: 4 },
      { tools: [builtin] },
    );
    const other = await agent.session();
    await session.run("echo a message and add numbers with get sum and print env");
    const names = provider.requests[0]!.tools.map((t) => t.name);
    expect(names).toHaveLength(4);
    expect(names).toContain("ping");
    expect(names).toContain("tool_search");
    const pids = childPids().filter(alive);
    expect(pids).toHaveLength(1);
    await session.close();
    expect(alive(pids[0]!)).toBe(true);
    await other.run("still there?");
    expect(provider.requests[1]!.tools.some((t) => t.name.startsWith("mcp__everything__"))).toBe(true);
    await other.close();
    await until(() => !alive(pids[0]!), 8_000, "the server to exit with the last session");
    await agent.close();
  });

  it("a server that crashes mid-call gives that call an error result and is restarted for the next", async () => {
    const { agent, session, auditPath } = await setup(
      [
        { toolCalls: [{ id: "x1", name: "mcp__fx__echo", args: { text: "before" } }] },
        { toolCalls: [{ id: "x2", name: "mcp__fx__crash", args: {} }] },
        { toolCalls: [{ id: "x3", name: "mcp__fx__echo", args: { text: "after" } }] },
        { text: "ok" },
      ],
      { servers: { fx: fixture("scripted-server.mjs") }, restart: { baseDelayMs: 50 } },
    );
    const pidsBefore = childPids().filter(alive);
    await session.run("crash it");
    const [before, crash, after] = toolResults(session.messages);
    expect(resultText(before!)).toBe("before");
    expect(crash!.role === "tool" && crash!.isError).toBe(true);
    expect(resultText(crash!)).toContain("KEEL_MCP_SERVER_CRASHED");
    expect(resultText(crash!)).toContain("crashing on purpose");
    expect(resultText(after!)).toBe("after");
    expect(childPids().filter(alive)).not.toEqual(pidsBefore);
    await agent.close();
    const audit = new AuditLog(auditPath);
    expect(audit.all().map((r) => r.outcome)).toEqual(["ok", "crashed", "ok"]);
    audit.close();
  });

  it("closing the agent ends every server process", async () => {
    const { agent, session } = await setup([{ text: "hi" }], {
      servers: {
        everything: EVERYTHING,
        fx: fixture("scripted-server.mjs"),
        memory: {
          command: process.execPath,
          args: [serverBin("server-memory")],
          env: { MEMORY_FILE_PATH: join(dirs.make(), "m.jsonl") },
        },
      },
    });
    await session.run("hi");
    const pids = childPids().filter(alive);
    expect(pids.length).toBeGreaterThanOrEqual(3);
    await agent.close();
    await until(() => pids.every((p) => !alive(p)), 8_000, "children to exit");
  });
});
