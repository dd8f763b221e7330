/**
 * `keel serve --mcp` on stdio, driven by the MCP SDK's own client in a real child process:
 * the tools, a conversation continued by session id, approvals asked through elicitation or
 * answered with the approve tool, progress and cancellation, and a malformed line answered
 * with its JSON-RPC error while stdout carries protocol only.
 */
import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { cleanEnv, helperProject, KEEL_BIN } from "./support/helper-agent.ts";
import type { HelperProject } from "./support/helper-agent.ts";

const open: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

async function connect(p: HelperProject, elicitation?: (message: string) => object): Promise<Client> {
  const client = new Client(
    { name: "test", version: "1.0.0" },
    elicitation ? { capabilities: { elicitation: {} } } : {},
  );
  if (elicitation) client.setRequestHandler(ElicitRequestSchema, async (req) => elicitation(req.params.message));
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [KEEL_BIN, "serve", "--mcp"],
    cwd: p.dir,
    env: cleanEnv({ KEEL_HOME: p.home }),
    stderr: "pipe",
  });
  await client.connect(transport);
  open.push(client);
  return client;
}

function text(r: unknown): string {
  return (r as CallToolResult).content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
}

function structured(r: unknown): { session_id: string; status: string; answer: string; pending?: unknown[] } {
  return (r as CallToolResult).structuredContent as never;
}

describe("keel serve --mcp (stdio)", () => {
  it("lists its tools, answers, and continues a session the agent remembers", async () => {
    const p = helperProject();
    const client = await connect(p);
    expect(client.getServerVersion()?.name).toBe("helper");
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["approve", "ask", "sessions"]);
    const ask = tools.find((t) => t.name === "ask")!;
    expect(ask.description).toContain("helper");
    expect(ask.description).toContain("release calendar");
    // What any client reads is the agent's description, never its instructions.
    expect(client.getInstructions()).toContain("release calendar");
    expect(`${client.getInstructions()}${JSON.stringify(tools)}`).not.toContain("vault");
    expect(ask.outputSchema).toBeDefined();

    const first = await client.callTool({ name: "ask", arguments: { input: "the release is Thursday" } });
    expect(first.isError).toBeFalsy();
    const s1 = structured(first);
    expect(s1).toMatchObject({ status: "completed", answer: "heard 1: the release is Thursday" });
    expect(text(first)).toContain(`session_id: ${s1.session_id}`);

    const second = await client.callTool({ name: "ask", arguments: { input: "when?", session_id: s1.session_id } });
    expect(structured(second)).toMatchObject({
      session_id: s1.session_id,
      answer: "heard 2: the release is Thursday | when?",
    });
    const fresh = await client.callTool({ name: "ask", arguments: { input: "hello" } });
    expect(structured(fresh).session_id).not.toBe(s1.session_id);
    expect(structured(fresh).answer).toBe("heard 1: hello");

    const listed = await client.callTool({ name: "sessions", arguments: {} });
    const ids = (listed.structuredContent as { sessions: Array<{ session_id: string }> }).sessions.map(
      (s) => s.session_id,
    );
    expect(ids.sort()).toEqual([s1.session_id, structured(fresh).session_id].sort());
    expect(p.owned().every((o) => o.principal === "stdio")).toBe(true);

    const unknown = await client.callTool({ name: "ask", arguments: { input: "x", session_id: "not-a-session" } });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toContain('No session "not-a-session"');
    const bad = await client.callTool({ name: "ask", arguments: { input: 42 } });
    expect(bad.isError).toBe(true);
    expect(text(bad)).not.toMatch(/\n\s+at /);
  });

  it("asks for an approval through elicitation when the client can be asked", async () => {
    const p = helperProject();
    const asked: string[] = [];
    const client = await connect(p, (message) => {
      asked.push(message);
      return { action: "accept", content: { decision: "allow" } };
    });
    const r = await client.callTool({ name: "ask", arguments: { input: "note ship on Thursday" } });
    expect(r.isError, text(r)).toBeFalsy();
    expect(structured(r)).toMatchObject({ status: "completed", answer: "Done: wrote ship on Thursday" });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("write_note");
    // Why it asks, and which plugin asked.
    expect(asked[0]).toContain("(notes are reviewed — asked by guard)");
    expect(p.notes()).toBe("ship on Thursday\n");

    const declined = await connect(p, () => ({ action: "decline" }));
    const d = await declined.callTool({ name: "ask", arguments: { input: "note never" } });
    expect(structured(d).status).toBe("completed");
    expect(structured(d).answer).toContain("declined by the caller");
    expect(p.notes()).toBe("ship on Thursday\n");
  });

  it("without elicitation the turn pauses, says which calls wait, and approve answers and resumes it", async () => {
    const p = helperProject();
    const client = await connect(p);
    const r = await client.callTool({ name: "ask", arguments: { input: "note ship on Friday" } });
    const s = structured(r);
    expect(s.status).toBe("paused");
    expect(s.pending).toEqual([
      expect.objectContaining({
        tool: "write_note",
        args: { text: "ship on Friday" },
        reason: "notes are reviewed",
        plugin: "guard",
      }),
    ]);
    expect(text(r)).toContain("approve tool");
    expect(p.notes()).toBe("");

    const again = await client.callTool({ name: "ask", arguments: { input: "hi", session_id: s.session_id } });
    expect(again.isError).toBe(true);
    expect(text(again)).toContain("paused for approval");
    const wrong = await client.callTool({
      name: "approve",
      arguments: { session_id: s.session_id, decision: "allow", call_id: "nope" },
    });
    expect(wrong.isError).toBe(true);

    const listed = await client.callTool({ name: "sessions", arguments: {} });
    expect(text(listed)).toContain("waits for");

    const done = await client.callTool({ name: "approve", arguments: { session_id: s.session_id, decision: "allow" } });
    expect(done.isError, text(done)).toBeFalsy();
    expect(structured(done)).toMatchObject({
      session_id: s.session_id,
      status: "completed",
      answer: "Done: wrote ship on Friday",
    });
    expect(p.notes()).toBe("ship on Friday\n");
    const none = await client.callTool({ name: "approve", arguments: { session_id: s.session_id, decision: "allow" } });
    expect(text(none)).toContain("waits for no approval");
  });

  it("sends progress while a turn runs and a cancelled request aborts the turn", async () => {
    const p = helperProject();
    const client = await connect(p);
    const progress: string[] = [];
    const r = await client.callTool({ name: "ask", arguments: { input: "hello" } }, undefined, {
      onprogress: (n) => progress.push(n.message ?? ""),
    });
    expect(structured(r).status).toBe("completed");
    expect(progress).toContain("turn started");
    expect(progress).toContain("round 1 answered");

    const first = structured(await client.callTool({ name: "ask", arguments: { input: "start" } }));
    const ctl = new AbortController();
    let started: () => void = () => {};
    const running = new Promise<void>((r) => (started = r));
    const waiting = client.callTool(
      { name: "ask", arguments: { input: "wait for it", session_id: first.session_id } },
      undefined,
      { signal: ctl.signal, onprogress: () => started() },
    );
    await running;
    // One turn at a time per session: a second ask while it runs is told so, not queued or crossed.
    const concurrent = await client.callTool({
      name: "ask",
      arguments: { input: "me too", session_id: first.session_id },
    });
    expect(concurrent.isError).toBe(true);
    expect(text(concurrent)).toContain("is running a turn");
    ctl.abort();
    await expect(waiting).rejects.toThrow();
    // The turn was aborted (not left running): the session takes the next turn.
    let next: unknown;
    for (let i = 0; i < 100; i++) {
      next = await client.callTool({ name: "ask", arguments: { input: "after", session_id: first.session_id } });
      if (!text(next).includes("running a turn")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(structured(next).answer).toContain("after");
    expect(p.eventTypes(first.session_id)).toContain("turn.interrupted");
  });

  it("answers a malformed line with its JSON-RPC error and goes on; stdout is protocol only", async () => {
    const p = helperProject();
    const child = spawn(process.execPath, [KEEL_BIN, "serve", "--mcp"], {
      cwd: p.dir,
      env: cleanEnv({ KEEL_HOME: p.home }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const lines = () => out.split("\n").filter(Boolean);
    const until = async (n: number) => {
      for (let i = 0; i < 600 && lines().length < n && child.exitCode === null; i++)
        await new Promise((r) => setTimeout(r, 50));
    };
    child.stdin.write("this is not json\n");
    await until(1);
    child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: 7, method: 42 })}\n`);
    await until(2);
    child.stdin.write(
      `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } })}\n`,
    );
    await until(3);
    child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: 2, method: "no/such/method" })}\n`);
    await until(4);
    // The model logs with console.log: that goes to stderr, never between protocol lines.
    child.stdin.write(
      `${JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "ask", arguments: { input: "hi" } } })}\n`,
    );
    await until(5);
    child.stdin.end();
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    const msgs = lines().map((l) => JSON.parse(l) as { id: unknown; error?: { code: number }; result?: unknown });
    expect(msgs[0]).toMatchObject({ id: null, error: { code: -32700 } });
    expect(msgs[1]).toMatchObject({ id: 7, error: { code: -32600 } });
    expect(msgs[2]).toMatchObject({ id: 1, result: { serverInfo: { name: "helper" } } });
    expect(msgs[3]).toMatchObject({ id: 2, error: { code: -32601 } });
    expect(msgs[4]).toMatchObject({ id: 3, result: { structuredContent: { answer: "heard 1: hi" } } });
    expect(err).toContain("the model was called");
    expect(code, err).toBe(0);
    expect(err).toContain("serving helper over MCP on stdio");
    expect(`${out}${err}`).not.toMatch(/\n\s+at /);
  });
});
