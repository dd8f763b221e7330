/**
 * The A2A endpoint against hostile or careless callers over real HTTP: a web page posting to
 * the loopback server, a second message on a task that is still working, a damaged task store.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "@keel/kernel";
import type { Agent, KeelPlugin } from "@keel/kernel";
import { ScriptedProvider } from "@keel/testkit";
import type { ProviderScriptInput } from "@keel/testkit";
import { resolveBind, SessionOwners, startA2a } from "../src/index.ts";
import type { A2aServer } from "../src/index.ts";

const review: KeelPlugin = {
  name: "review",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.pre_call", (e) =>
      e.call.name === "write_note"
        ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" }
        : undefined,
    );
  },
};

type Rig = { agent: Agent; provider: ScriptedProvider; server: A2aServer; notes: string[]; dir: string };
let rigs: Rig[] = [];
afterEach(async () => {
  for (const r of rigs) {
    await r.server.close();
    await r.agent.close();
    rmSync(r.dir, { recursive: true, force: true });
  }
  rigs = [];
});

async function serve(
  script: ProviderScriptInput,
  dir = mkdtempSync(join(tmpdir(), "keel-a2a-hostile-")),
): Promise<Rig> {
  const notes: string[] = [];
  const provider = new ScriptedProvider(script);
  const agent = await createAgent({
    name: "note-taker",
    provider,
    home: dir,
    plugins: [review],
    tools: [
      {
        name: "write_note",
        description: "Appends a note.",
        category: "edit",
        parameters: { type: "object", properties: { text: { type: "string" } } },
        execute: (args: unknown) => {
          notes.push((args as { text: string }).text);
          return "written";
        },
      },
    ],
  });
  const db = join(dir, "serve.sqlite");
  const server = await startA2a({ agent, owners: new SessionOwners(db), bind: resolveBind({}, {}), tasksPath: db });
  const rig = { agent, provider, server, notes, dir };
  rigs.push(rig);
  return rig;
}

function call(method: string, params: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
}

function message(text: string, more: Record<string, unknown> = {}): { message: Record<string, unknown> } {
  return { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...more } };
}

async function rpc(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, json: await res.json() };
}

describe("a web page cannot drive the loopback server", () => {
  it("a text/plain POST (what a page may send cross-site without a preflight) is refused before any turn runs", async () => {
    const { server, provider } = await serve([{ text: "ran" }]);
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const sent = await rpc(server.url, call("SendMessage", message("write the note")), {
        "content-type": type,
        origin: "http://evil.example",
      });
      expect(sent.status).toBe(415);
      expect(sent.json.error.message).toContain("application/json");
    }
    expect(provider.requests).toHaveLength(0);
    const ok = await rpc(server.url, call("SendMessage", message("hi")), {
      "content-type": "application/a2a+json; charset=utf-8",
    });
    expect(ok.json.result.task.status.state).toBe("TASK_STATE_COMPLETED");
  });
});
