/** The SQLite audit log: records, recent use by window, and a path that cannot be opened. */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { AuditLog, mcp } from "../src/index.ts";
import { fixture, tempDirs } from "./support.ts";

const dirs = tempDirs();
afterEach(() => dirs.cleanup());

describe("AuditLog", () => {
  it("redacts every text it writes: an error that echoes a key is stored without it, in the table and in the file's bytes", async () => {
    const dir = dirs.make();
    const path = join(dir, "mcp-audit.sqlite");
    const key = `xoxb-123456789012-1234567890123-${"Ab9".repeat(8)}`;
    const provider = scriptedProvider([
      { toolCalls: [{ id: "f", name: "mcp__fx__fail", args: { text: `token ${key}` } }] },
      { text: "ok" },
    ]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      plugins: [mcp({ servers: { fx: fixture("scripted-server.mjs") }, auditPath: path })],
    });
    const session = await agent.session();
    await session.run("fail with the key");
    await agent.close();
    const log = new AuditLog(path);
    const rows = log.all();
    log.close();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.error).toContain("token [REDACTED:slack_token]");
    const { readdirSync, readFileSync } = await import("node:fs");
    for (const f of readdirSync(dir)) expect(readFileSync(join(dir, f)).includes(key), f).toBe(false);
  });

  it("a path that cannot be opened is a diagnostic; tool calls still work", async () => {
    const provider = scriptedProvider([
      { toolCalls: [{ id: "e", name: "mcp__fx__echo", args: { text: "still works" } }] },
      { text: "ok" },
    ]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      plugins: [
        mcp({ servers: { fx: fixture("scripted-server.mjs") }, auditPath: "/dev/null/cannot/mcp-audit.sqlite" }),
      ],
    });
    const session = await agent.session();
    await session.run("echo");
    const events = await session.events();
    const diag = events.find((e) => e.type === "diagnostic" && e.code === "KEEL_MCP_AUDIT_FAILED");
    expect(diag && "message" in diag ? diag.message : "").toContain("/dev/null/cannot/mcp-audit.sqlite");
    const result = session.messages.find((m) => m.role === "tool");
    expect(result?.role === "tool" && result.content[0]?.type === "text" ? result.content[0].text : "").toBe(
      "still works",
    );
    await agent.close();
  });
});
