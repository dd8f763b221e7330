/** Regressions found by an adversarial review of the adaptive visible set, stored curation and error classification. */
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import {
  AuditLog,
  normalizeInputSchema,
  createRanker,
  curate,
  cutAtSentence,
  inventoryHash,
  mcp,
  type McpCallError,
  McpServerConnection,
  presentTool,
  type CatalogEntry,
} from "../src/index.ts";
import { fixture, serverBin, SETTINGS, tempDirs, entry } from "./support.ts";

const dirs = tempDirs();
afterEach(() => dirs.cleanup());

const CATALOG: CatalogEntry[] = [
  entry("fs", "read_file", "Read the complete contents of a file from disk."),
  entry("fs", "write_file", "Create a new file or overwrite an existing file with new content."),
  entry("fs", "list_directory", "List the entries of a directory."),
  entry("git", "git_log", "Show the commit history of a repository."),
  ...Array.from({ length: 20 }, (_, i) =>
    entry(
      "misc",
      `helper_${i}`,
      `Helper ${i} for spreadsheets, slides, charts, calendars, contacts, tickets and, rarely, a file.`,
    ),
  ),
];
const HASH = inventoryHash(CATALOG.map((c) => ({ name: c.name, description: c.description })));
const ranker = createRanker(CATALOG);
const CUT = { minK: 2, ratio: 0.1, compactBelow: 0.9 };

describe("adaptive set", () => {
  it("a revealed (pinned) tool joins in full form even when this request also ranks it in the compact band", () => {
    const plain = curate({
      ranker,
      inventoryHash: HASH,
      query: "read the file",
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
      cut: CUT,
    });
    const weak = plain.keepSet.compact?.[0];
    expect(weak).toBeDefined();
    // The same request after tool_search revealed `weak`: it must be sent as revealed, in full.
    const r = curate({
      ranker,
      inventoryHash: HASH,
      query: "read the file",
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
      cut: CUT,
      pinned: [weak!],
    });
    expect(r.visible).toContain(weak);
    expect(r.keepSet.compact ?? []).not.toContain(weak);
  });

  it("a period inside a token at the cut (v1.2, e.g.) is not a sentence end", () => {
    const text = "Reads the files from disk. Works with v1.2 of the API and more words after it.";
    // The head of 41 code points ends with "v1." — the text goes on with "2", so that is no sentence end.
    expect(cutAtSentence(text, 42)).toBe("Reads the files from disk.…");
    // A real sentence end at the cut still counts.
    expect(cutAtSentence("Reads the files from disk. Works with v1 of it. And then more words.", 48)).toBe(
      "Reads the files from disk. Works with v1 of it.…",
    );
    // CJK full stops end a sentence with no space after them.
    expect(cutAtSentence("读取磁盘上的文件内容。返回完整的文本。如果路径不在允许的目录中则失败。", 24)).toBe(
      "读取磁盘上的文件内容。返回完整的文本。…",
    );
  });

  it("values (default, const, enum, examples) are data, not schemas: sent exactly as the server gave them", () => {
    const value = { $schema: "urn:x", description: "  two\n\n  lines ", title: "q" };
    const parameters = {
      type: "object",
      properties: {
        q: { type: "object", default: value, const: value, enum: [value], examples: [value] },
      },
    };
    const shown = presentTool({ tool: "t", description: "d", parameters }, "full", {
      descriptionChars: 400,
      compactDescriptionChars: 160,
    });
    const q = (shown.parameters.properties as Record<string, Record<string, unknown>>).q!;
    expect(q.default).toEqual(value);
    expect(q.const).toEqual(value);
    expect(q.enum).toEqual([value]);
    expect(q.examples).toEqual([value]);
  });
});

describe("tools revealed by tool_search, next turn", () => {
  it("the list sent after the reveal is the prefix of the next turn's (several hits, ranked in another order than the inventory)", async () => {
    const provider = scriptedProvider([
      {
        toolCalls: [
          { id: "s1", name: "tool_search", args: { query: "resource annotated structured long running", limit: 5 } },
        ],
      },
      { text: "found" },
      { text: "again" },
    ]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      plugins: [
        mcp({
          auditPath: join(dirs.make(), "a.sqlite"),
          servers: { everything: { command: process.execPath, args: [serverBin("server-everything")] } },
          topK: 2,
          adaptive: { searchRatio: 0 },
        }),
      ],
    });
    const session = await agent.session();
    await session.run("echo the message");
    await session.run("echo the message");
    const [, afterReveal, nextTurn] = provider.requests.map((r) =>
      r.tools.map((t) => `${t.name}\u0000${t.description}\u0000${JSON.stringify(t.parameters)}`),
    );
    expect(afterReveal!.length).toBeGreaterThan(4);
    expect(nextTurn).toEqual(afterReveal);
    await agent.close();
  });
});

describe("stored curation", () => {
  it("a damaged row with repeated names or compact names outside the keep-set is read back clean", () => {
    const path = join(dirs.make(), "a.sqlite");
    new AuditLog(path).close();
    const db = new DatabaseSync(path);
    const state = {
      inventoryHash: "h",
      keep: ["a", "b", "a"],
      compact: ["b", "zz", "b"],
      pinned: ["a", "a"],
      basis: { a: "d1", b: "d2" },
    };
    db.prepare("INSERT INTO mcp_sessions (session_id, ts, state) VALUES (?, ?, ?)").run(
      "s",
      Date.now(),
      JSON.stringify(state),
    );
    db.close();
    const log = new AuditLog(path);
    expect(log.loadCuration("s")).toEqual({
      inventoryHash: "h",
      keep: ["a", "b"],
      compact: ["b"],
      pinned: ["a"],
      basis: { a: "d1", b: "d2" },
    });
    log.close();
  });
});

describe("error classification", () => {
  it("an HTTP client that gave up after error responses (429s) reached its host: not an unreachable upstream", async () => {
    const c = new McpServerConnection("fx", fixture("scripted-server.mjs"), SETTINGS);
    await c.connect();
    const never = new AbortController().signal;
    const call = (text: string) =>
      c.callTool("fail", { text }, { signal: never, timeoutMs: 5_000 }).then(
        (): McpCallError => {
          throw new Error("the call succeeded");
        },
        (e: unknown) => e as McpCallError,
      );
    try {
      const limited = await call(
        "error: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/items (Caused by ResponseError('too many 429 error responses'))",
      );
      expect(limited.kind).toBe("protocol_error");
      const prefetch = await call("error: prefetch failed: cursor expired");
      expect(prefetch.kind).toBe("protocol_error");
      const disconnect = await call("error: DisconnectError: the user left the room");
      expect(disconnect.kind).toBe("protocol_error");
      // Real network failures stay `upstream`.
      const refused = await call(
        "error: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: / (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object>: Failed to establish a new connection: [Errno 111] Connection refused'))",
      );
      expect(refused.kind).toBe("upstream");
      const tls = await call(
        "error: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: / (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed')))",
      );
      expect(tls.kind).toBe("upstream");
      const httpx = await call("error: httpx.ConnectError: [Errno -2] Name or service not known");
      expect(httpx.kind).toBe("upstream");
      // -32001 sent by the server at once (JSON-RPC leaves -32000..-32099 to servers) is its own error, not our timeout.
      const own = await call("error -32001: the report is not ready yet");
      expect(own.kind).toBe("protocol_error");
      expect(own.message).toContain("the report is not ready yet");
    } finally {
      await c.close();
    }
  });
});

describe("hostile schemas", () => {
  it("a tool whose schema nests thousands of levels deep does not take the other MCP tools down", async () => {
    const provider = scriptedProvider([
      { toolCalls: [{ id: "c1", name: "mcp__fx__echo", args: { text: "still here" } }] },
      { text: "done" },
    ]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      plugins: [
        mcp({
          auditPath: join(dirs.make(), "a.sqlite"),
          servers: { fx: fixture("scripted-server.mjs", { FIXTURE_DEEP: "20000" }) },
        }),
      ],
    });
    const session = await agent.session();
    const result = await session.run("echo the text");
    expect(result.verdict.status).toBe("completed");
    expect(provider.requests[0]!.tools.map((t) => t.name)).toContain("mcp__fx__echo");
    expect(JSON.stringify(session.messages)).toContain("still here");
    await agent.close();
    // The hostile tool stays listed, with no parameters declared; ordinary nesting is kept.
    const nest = (n: number): unknown => (n ? { type: "object", properties: { a: nest(n - 1) } } : { type: "string" });
    expect(normalizeInputSchema(nest(1_000))).toEqual({ type: "object", properties: {} });
    expect(normalizeInputSchema(nest(20))).toEqual(nest(20));
  });
});
