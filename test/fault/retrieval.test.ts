/**
 * Promises of issue 20 (retrieval, round two), each driven through the real `keel` binary
 * against the wire server (official Anthropic SDK), with its own KEEL_HOME:
 * MCP curation survives a new process (also while a server holding kept tools is still
 * starting there), MCP errors name their true cause, a key glued after an
 * underscore is never persisted, and a hostile tool output cannot stall compaction.
 */
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect } from "vitest";
import { ok, scenario, secrets, sessionOf } from "./support/secrets.ts";

const S = secrets();

const toolNames = (body: unknown) => ((body as { tools?: Array<{ name: string }> }).tools ?? []).map((t) => t.name).filter((n) => n.startsWith("mcp__"));
const toolResults = (body: { messages?: Array<{ content?: unknown }> }) => JSON.stringify((body.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content.filter((b: { type?: string }) => b.type === "tool_result") : [])));

describe("retrieval promises (issue 20)", () => {
  scenario("a tool revealed by tool_search in one process is still sent when the session goes on in a new process", { mcp: true, mcpTopK: 2 }, async (w) => {
    w.script.main.push({ toolCalls: [{ name: "tool_search", args: { query: "adds a tool and announces the change" } }] }, { text: "Found it." });
    const first = await ok(w.run("echo some text back", { json: true }));
    const revealed = "mcp__fx__add_tool";
    expect(toolResults(w.mainRequests()[1]!.body)).toContain(revealed);
    expect(toolNames(w.mainRequests()[0]!.body)).not.toContain(revealed);
    // A new keel process, the same session: the revealed tool is sent from its first request on.
    await ok(w.run("zzz qqq", { session: sessionOf(first) }));
    expect(toolNames(w.mainRequests().at(-1)!.body)).toContain(revealed);
    // Another session of the same home does not get it.
    await ok(w.run("zzz qqq"));
    expect(toolNames(w.mainRequests().at(-1)!.body)).not.toContain(revealed);
  });

  scenario("a session going on in a new process while a server holding its revealed tool is still starting waits for it: the first request sends the same tools", { mcp: true, mcpSlow: true, mcpTopK: 2 }, async (w) => {
    w.script.main.push({ toolCalls: [{ name: "tool_search", args: { query: "look up a record by its key" } }] }, { text: "Found it." });
    const first = await ok(w.run("echo some text back", { json: true }));
    const revealed = "mcp__slow__slow_lookup";
    expect(toolResults(w.mainRequests()[1]!.body)).toContain(revealed);
    const sameProcess = toolNames(w.mainRequests()[1]!.body);
    expect(sameProcess).toContain(revealed);
    // A new keel process, the same session, the slow server taking 3 s to start (past startGraceMs).
    await ok(w.run("zzz qqq", { session: sessionOf(first), env: { FAULT_MCP_DELAY: "3000" } }));
    expect(toolNames(w.mainRequests().at(-1)!.body)).toEqual(sameProcess);
  });

  scenario("an MCP server that cannot reach its upstream: the model is told so, not to fix its arguments", { mcp: true }, async (w) => {
    w.script.main.push({ toolCalls: [{ name: "mcp__fx__fail", args: { text: "upstream" } }] }, { text: "The service is unreachable." });
    await ok(w.run("fetch the page"));
    const result = toolResults(w.mainRequests()[1]!.body);
    expect(result).toContain("KEEL_MCP_UPSTREAM_UNREACHABLE");
    expect(result).toContain("ENOTFOUND");
    expect(result).not.toContain("Fix the arguments");
  });

  scenario("a Slack token glued after an underscore in an MCP error is stored redacted; no file holds it", { mcp: true }, async (w) => {
    w.script.main.push({ toolCalls: [{ name: "mcp__fx__fail", args: { text: `SLACK_BOT_${S.slack}` } }] }, { text: "The call failed." });
    await ok(w.run("Call the failing tool"));
    const db = new DatabaseSync(join(w.home, "mcp-audit.sqlite"), { readOnly: true });
    const audit = db.prepare("SELECT error FROM mcp_calls").all() as Array<{ error: string }>;
    db.close();
    expect(audit[0]!.error).toContain("SLACK_BOT_[REDACTED:slack_token]");
    expect(w.filesContaining([S.slack])).toEqual([]);
  });

  scenario("a tool output of 100 KB of 'a-a-a-…' (identifier extraction was quadratic: ~45 s) does not stall the turn", { bigTool: "a-".repeat(50_000) }, async (w) => {
    w.script.main.push({ toolCalls: [{ name: "dump_config", args: {} }] }, { text: "Done." });
    const t0 = Date.now();
    await ok(w.run("Dump the service configuration"));
    expect(Date.now() - t0).toBeLessThan(30_000);
  });
});
