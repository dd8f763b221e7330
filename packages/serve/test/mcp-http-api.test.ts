/**
 * startMcpHttp from code, with an agent built by createAgent: elicitation and progress reach an
 * HTTP caller within its request (the SSE stream), a failed turn is an isError result with its
 * reason, sessionsOf lists a caller's own, and an idle MCP session is closed (404 after) while
 * its Keel sessions stay its principal's.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import type { Agent } from "@keel/agent";
import { ScriptedProvider } from "@keel/testkit";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { resolveBind, SessionOwners, startMcpHttp } from "../src/index.ts";

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function setup(steps: ConstructorParameters<typeof ScriptedProvider>[0], idleMs?: number) {
  const dir = mkdtempSync(join(tmpdir(), "keel-serve-api-"));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const written: string[] = [];
  const agent: Agent = await createAgent({
    name: "api-helper",
    instructions: "Answers from code.",
    provider: new ScriptedProvider(steps),
    home: dir,
    tools: [
      {
        name: "write_note",
        description: "Appends a note.",
        category: "edit",
        parameters: { type: "object", properties: { text: { type: "string" } } },
        execute: (args: unknown) => {
          written.push((args as { text: string }).text);
          return "wrote it";
        },
      },
    ],
    plugins: [
      {
        name: "guard",
        version: "1.0.0",
        setup(ctx) {
          ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "reviewed" }));
        },
      },
    ],
  });
  cleanup.push(() => agent.close());
  const owners = new SessionOwners(join(dir, "serve.sqlite"));
  cleanup.push(() => owners.close());
  const server = await startMcpHttp({ agent, owners, bind: resolveBind({}, {}), ...(idleMs ? { idleMs } : {}) });
  cleanup.push(() => server.close());
  return { server, owners, written };
}

async function connect(url: string, elicit?: () => object): Promise<Client> {
  const c = new Client({ name: "t", version: "1" }, elicit ? { capabilities: { elicitation: {} } } : {});
  if (elicit) c.setRequestHandler(ElicitRequestSchema, async () => elicit());
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanup.unshift(() => c.close());
  return c;
}

const text = (r: unknown) => (r as CallToolResult).content.map((b) => (b.type === "text" ? b.text : "")).join("\n");

describe("startMcpHttp", () => {
  it("asks for approval through elicitation over HTTP, with progress on the same request", async () => {
    const { server, written, owners } = await setup([
      { toolCalls: [{ id: "w1", name: "write_note", args: { text: "hello" } }] },
      { text: "Noted." },
    ]);
    let asked = "";
    const c = await connect(server.url, () => ({ action: "accept", content: { decision: "allow" } }));
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked = req.params.message;
      return { action: "accept", content: { decision: "allow" } };
    });
    const progress: string[] = [];
    const values: number[] = [];
    const r = await c.callTool({ name: "ask", arguments: { input: "note hello" } }, undefined, {
      onprogress: (p) => {
        progress.push(p.message ?? "");
        values.push(p.progress);
      },
    });
    // Across the pause and the resume, progress only grows (the spec's rule).
    expect(values.every((v, i) => i === 0 || v > values[i - 1]!)).toBe(true);
    expect(progress).toContain("write_note waits for approval");
    expect(text(r)).toContain("Noted.");
    expect(asked).toContain("api-helper wants to call write_note");
    expect(written).toEqual(["hello"]);
    expect(progress).toEqual(expect.arrayContaining(["calling write_note", "write_note ok"]));
    const id = (r.structuredContent as { session_id: string }).session_id;
    // Without tokens the caller is its MCP session.
    const sid = (c.transport as StreamableHTTPClientTransport).sessionId!;
    expect(owners.sessionsOf(`mcp:${sid}`)).toEqual([id]);
    expect(owners.sessionsOf("stdio")).toEqual([]);
  });

  it("a failed turn is an isError result with its reason, not a stack", async () => {
    const { server } = await setup([{ error: { class: "auth", message: "bad key" } }]);
    const c = await connect(server.url);
    const r = await c.callTool({ name: "ask", arguments: { input: "hi" } });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain("The turn failed (provider_error");
    expect(text(r)).toMatch(/session_id: [0-9a-f-]{36}/);
    expect(text(r)).not.toMatch(/\n\s+at /);
  });

  it("closes an idle MCP session: its id is 404 after, and a new one starts clean", async () => {
    const { server } = await setup([{ text: "one" }, { text: "two" }], 200);
    const c = await connect(server.url);
    await c.callTool({ name: "ask", arguments: { input: "hi" } });
    const sid = (c.transport as StreamableHTTPClientTransport).sessionId!;
    // The client goes away without ending its session (its open GET stream kept it alive until now).
    await c.close();
    let status = 200;
    for (let i = 0; i < 100 && status !== 404; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const res = await fetch(server.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": sid,
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
      });
      status = res.status;
      await res.text();
      // A request keeps it alive: wait without sending once it answered.
      if (status === 200) await new Promise((r) => setTimeout(r, 400));
    }
    expect(status).toBe(404);
    const again = await connect(server.url);
    expect(text(await again.callTool({ name: "ask", arguments: { input: "hi" } }))).toContain("two");
  });
});
