/**
 * Fault class "Unbounded input": the kernel caps every tool result (limits.maxToolResultChars,
 * the cut saying how much was dropped) and never sends a request it knows exceeds the
 * model's context window (KEEL_CONTEXT_OVERFLOW, the user's message still stored). Driven
 * through the real `keel` binary and the official SDKs against the wire server.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWireServer } from "../../packages/wire-server/src/index.ts";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import { DEFAULT_LIMITS } from "../../packages/kernel/src/index.ts";
import { keelChat, keelRun, makeHome, requestsSince, sessionIdOf, storedEvents, wireEnv } from "./support/unicode.ts";
import type { FaultHome } from "./support/unicode.ts";

let server: WireServer;
const homes: FaultHome[] = [];
const home = () => {
  const h = makeHome("keel-fault-input-");
  homes.push(h);
  return h;
};
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(async () => {
  await server.close();
  for (const h of homes) h.cleanup();
});

const toolText = (body: { messages?: unknown[]; input?: unknown[] }): string => {
  // The tool result as each wire format carries it.
  const m = JSON.stringify(body.messages ?? body.input ?? []);
  const i = m.indexOf("HEAD-OF-RESULT");
  return i < 0 ? "" : m.slice(i, m.indexOf("TAIL-OF-RESULT") + "TAIL-OF-RESULT".length);
};
const MB = 1024 * 1024;

describe("fault: unbounded input — one tool result is capped by the kernel", () => {
  let capped: { h: FaultHome; session: string } | undefined;

  it("a 20 MB tool result is cut to limits.maxToolResultChars (default 100,000): head, tail and how much was dropped go to the provider, not the rest", async () => {
    const h = home();
    const from = server.requests.length;
    server.enqueue(
      { toolCalls: [{ name: "emit", args: {} }], api: "anthropic" },
      { text: "A very long output.", api: "anthropic" },
    );
    const run = await keelRun(h, wireEnv(server, h, { FAULT_TOOL: "huge", FAULT_HUGE_MB: "20" }), ["use emit"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(30_000);
    const reqs = requestsSince(server, from);
    expect(reqs.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    const sent = toolText(reqs[1]!.body);
    expect(sent.startsWith("HEAD-OF-RESULT")).toBe(true);
    expect(sent.endsWith("TAIL-OF-RESULT")).toBe(true);
    const dropped = Number(
      /\[… (\d+) characters cut from this tool result \(limits\.maxToolResultChars is 100000\) …\]/.exec(sent)?.[1],
    );
    expect(dropped).toBeGreaterThan(20 * MB - 200_000);
    expect(reqs[1]!.size).toBeLessThan(DEFAULT_LIMITS.maxToolResultChars * 1.2);
    capped = { h, session: sessionIdOf(run) };
  });

  it("on disk the capped result is what was stored (no 20 MB in sessions.sqlite)", () => {
    expect(capped).toBeDefined();
    const { h } = capped!;
    const tool = storedEvents(h.home).filter((e) => e.type === "message.appended" && e.data.includes('"role":"tool"'));
    expect(tool).toHaveLength(1);
    expect(tool[0]!.data.length).toBeLessThan(DEFAULT_LIMITS.maxToolResultChars + 2_000);
    expect(tool[0]!.data).toContain("characters cut from this tool result");
    const bytes =
      statSync(join(h.home, "sessions.sqlite")).size +
      (() => {
        try {
          return statSync(join(h.home, "sessions.sqlite-wal")).size;
        } catch {
          return 0;
        }
      })();
    expect(bytes).toBeLessThan(3 * MB);
  });

  it("the next turn of that session does not resend the raw result: its request stays small", async () => {
    expect(capped).toBeDefined();
    const { h, session } = capped!;
    const from = server.requests.length;
    server.enqueue({ text: "Still fine.", api: "anthropic" });
    const run = await keelRun(h, wireEnv(server, h), ["--session", session, "and now?"]);
    expect(run.code, run.stderr).toBe(0);
    const [req] = requestsSince(server, from);
    expect(req!.outcome).toBe("completed");
    expect(req!.size).toBeLessThan(DEFAULT_LIMITS.maxToolResultChars * 1.2);
    expect(toolText(req!.body)).toContain("characters cut from this tool result");
  });

  it("a plugin's tool (tool_bundle) is capped the same way, at a cap set in the config, on OpenAI Responses", async () => {
    const h = home();
    const from = server.requests.length;
    server.enqueue(
      { toolCalls: [{ name: "plugin_emit", args: {} }], api: "responses" },
      { text: "ok", api: "responses" },
    );
    const run = await keelRun(
      h,
      wireEnv(server, h, {
        FAULT_TOOL: "huge",
        FAULT_HUGE_MB: "2",
        FAULT_PLUGIN_TOOL: "1",
        FAULT_MAX_RESULT: "5000",
        FAULT_MODEL: "openai:gpt-4.1",
      }),
      ["use plugin_emit"],
    );
    expect(run.code, run.stderr).toBe(0);
    const reqs = requestsSince(server, from);
    expect(reqs.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    const sent = toolText(reqs[1]!.body);
    expect(sent).toContain("(limits.maxToolResultChars is 5000)");
    expect(sent.length).toBeLessThan(5_200);
    expect(reqs[1]!.size).toBeLessThan(20_000);
  });

  it("an invalid cap in the config (0) is refused before any agent starts: exit 2 naming limits.maxToolResultChars", async () => {
    const h = home();
    const from = server.requests.length;
    const run = await keelRun(h, wireEnv(server, h, { FAULT_MAX_RESULT: "0" }), ["hi"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("limits.maxToolResultChars");
    expect(server.requests.length).toBe(from);
  });
});

describe("fault: unbounded input — no request known to exceed the context window is sent", () => {
  let overflowed: { h: FaultHome; session: string } | undefined;

  it("a 5 MB user message: no request reaches the provider, the turn fails with KEEL_CONTEXT_OVERFLOW saying what to do, the message is stored", async () => {
    const h = home();
    const from = server.requests.length;
    const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
    let big = "BIG-MESSAGE-START ";
    for (let i = 0; big.length < 5 * MB; i++) big += `${words[(i * 3) % words.length]} `;
    const run = await keelChat(h, wireEnv(server, h), [big]);
    expect(run.code, run.stderr).toBe(0); // chat goes on after a failed turn
    expect(run.ms).toBeLessThan(30_000);
    expect(server.requests.length).toBe(from);
    expect(run.stderr).toContain("KEEL_CONTEXT_OVERFLOW");
    expect(run.stderr).toMatch(/context window is 200000; it was not sent/);
    expect(run.stderr).toMatch(/compaction plugin|new session/);
    expect(run.stderr).toContain("failed (context_overflow)");
    const session = sessionIdOf(run);
    const events = storedEvents(h.home).filter((e) => e.session === session);
    const user = events.find((e) => e.type === "message.appended" && e.data.includes("BIG-MESSAGE-START"));
    expect(user).toBeDefined();
    expect(user!.data.length).toBeGreaterThan(5 * MB);
    const failed = events.find((e) => e.type === "turn.failed");
    expect(JSON.parse(failed!.data).verdict).toMatchObject({
      status: "failed",
      reason: "context_overflow",
      code: "KEEL_CONTEXT_OVERFLOW",
    });
    expect(events.some((e) => e.type === "guard.tripped" && e.data.includes("context_ceiling"))).toBe(true);
    expect(events.some((e) => e.type === "prompt.compiled")).toBe(false);
    overflowed = { h, session };
  });

  it("resuming a session whose history holds the oversize message fails fast with the same code and exit 1, still sending nothing", async () => {
    expect(overflowed).toBeDefined();
    const { h, session } = overflowed!;
    const from = server.requests.length;
    const run = await keelRun(h, wireEnv(server, h), ["--session", session, "a short question"]);
    expect(run.code).toBe(1);
    expect(run.ms).toBeLessThan(30_000);
    expect(run.stderr).toContain("KEEL_CONTEXT_OVERFLOW");
    expect(server.requests.length).toBe(from);
    const stored = storedEvents(h.home).filter(
      (e) => e.session === session && e.type === "message.appended" && e.data.includes("a short question"),
    );
    expect(stored).toHaveLength(1);
  });

  it("the same holds on OpenAI (gpt-4.1, a 1M-token window): the 5 MB message is not sent", async () => {
    const h = home();
    const from = server.requests.length;
    // Digits tokenize densely (about 2 million tokens here), so this does not fit 1M tokens.
    let big = "";
    while (big.length < 5 * MB) big += "12345 67890 ";
    const run = await keelChat(h, wireEnv(server, h, { FAULT_MODEL: "openai:gpt-4.1" }), [big]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(30_000);
    expect(run.stderr).toContain("KEEL_CONTEXT_OVERFLOW");
    expect(run.stderr).toMatch(/context window is 1047576/);
    expect(server.requests.length).toBe(from);
  });

  it("a message that fits the window is sent as usual (the check is on counted tokens, not a size guess)", async () => {
    const h = home();
    const from = server.requests.length;
    server.enqueue({ text: "Read it.", api: "anthropic" });
    const run = await keelRun(h, wireEnv(server, h), ["word ".repeat(20_000).trim()]);
    expect(run.code, run.stderr).toBe(0);
    expect(requestsSince(server, from).map((r) => r.outcome)).toEqual(["completed"]);
  });
});
