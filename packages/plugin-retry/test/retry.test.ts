/**
 * The retry controller through real kernel turns on the scripted provider: budgets per class
 * and per signature, the note the model reads, repeats denied without running, per-tool
 * options, argument normalisation, timeouts classified from the kernel's own result, a
 * classifier that throws, and counts that start afresh each turn.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { KeelEvent, Message, SessionStore } from "@keel/kernel";
import type { ScriptStep } from "@keel/testkit";
import { classifyFailure, normalizeArgs, retry } from "../src/index.ts";
import type { RetryOptions } from "../src/index.ts";

let runs: string[] = [];
const read = defineTool({
  name: "read",
  description: "Reads a file.",
  input: z.object({ path: z.string() }),
  category: "info",
  execute: ({ path }) => (
    runs.push(path), { content: `ENOENT: no such file or directory, open '${path}'`, isError: true }
  ),
});
const flaky = defineTool({
  name: "flaky",
  description: "Fails inside.",
  input: z.object({ n: z.number() }),
  category: "info",
  execute: ({ n }) => (runs.push(`flaky ${n}`), { content: "Error: segfault in worker", isError: true }),
});
const slow = defineTool({
  name: "slow",
  description: "Never ends.",
  category: "info",
  timeoutMs: 40,
  execute: (_a, tc) => new Promise((r) => tc.signal.addEventListener("abort", () => r("late"))),
});

const call = (id: string, name: string, args: unknown): ScriptStep => ({ toolCalls: [{ id, name, args }] });
const resultTexts = (messages: readonly Message[]) =>
  messages
    .filter((m) => m.role === "tool")
    .map((m) => (m.role === "tool" ? m.content.map((b) => (b.type === "text" ? b.text : "")).join("\n") : ""));
const diagnostics = async (store: SessionStore, id: string) =>
  ((await store.events(id)) as KeelEvent[]).flatMap((e) =>
    e.type === "diagnostic" && e.code.startsWith("TOOL_RETRY") ? [e.code] : [],
  );

async function turn(steps: ScriptStep[], options: RetryOptions = {}, limits = {}) {
  runs = [];
  const store = new MemorySessionStore();
  const agent = await createAgent({
    provider: scriptedProvider(steps),
    sideModel: false,
    store,
    tools: [read, flaky, slow],
    limits,
    plugins: [retry(options)],
  });
  const session = await agent.session();
  const result = await session.run("go");
  await agent.close();
  return { result, texts: resultTexts(session.messages), codes: await diagnostics(store, session.id) };
}

describe("retry controller", () => {
  it("not found gets two retries of the same call; the third failure says stop, and a fourth identical call is denied without running", async () => {
    const { texts, codes, result } = await turn([
      call("1", "read", { path: "a.txt" }),
      call("2", "read", { path: "a.txt" }),
      call("3", "read", { path: "a.txt" }),
      call("4", "read", { path: "a.txt" }),
      { text: "no such file" },
    ]);
    expect(result.text).toBe("no such file");
    expect(runs).toEqual(["a.txt", "a.txt", "a.txt"]);
    expect(texts[0]).toMatch(
      /^ENOENT[^\n]*\n\[retry: not found; check the name, path or id \(list or search first\) before calling again \(2 retries left\)\]$/,
    );
    expect(texts[1]).toContain("(1 retry left)");
    expect(texts[2]).toContain(
      "[retry: do not call read again with these arguments unless something changes first: not found 3 times. What you are looking for is not there",
    );
    expect(texts[3]).toMatch(/KEEL_TOOL_DENIED.*this exact call already failed 3 time\(s\) this turn \(not found\)/);
    expect(codes).toEqual(["TOOL_RETRY_ALLOWED", "TOOL_RETRY_ALLOWED", "TOOL_RETRY_EXHAUSTED", "TOOL_RETRY_BLOCKED"]);
  });

  it("the class budget is per tool across arguments: other paths still run, but each failure past the budget says stop", async () => {
    const { texts } = await turn([
      call("1", "read", { path: "a" }),
      call("2", "read", { path: "b" }),
      call("3", "read", { path: "c" }),
      call("4", "read", { path: "d" }),
      call("5", "read", { path: "a" }),
      { text: "gave up" },
    ]);
    // a, b, c: first failure and two retries of "not found"; d is past the budget; a was not out of retries.
    expect(runs).toEqual(["a", "b", "c", "d", "a"]);
    expect(texts.map((t) => /do not call/.test(t))).toEqual([false, false, true, true, true]);
  });

  it("internal failures get no retry: the first failure says stop, the repeat is denied, other arguments run", async () => {
    const { texts } = await turn([
      call("1", "flaky", { n: 1 }),
      call("2", "flaky", { n: 1 }),
      call("3", "flaky", { n: 2 }),
      { text: "broken" },
    ]);
    expect(runs).toEqual(["flaky 1", "flaky 2"]);
    expect(texts[0]).toContain("internal and this class gets no retries");
    expect(texts[1]).toContain("KEEL_TOOL_DENIED");
  });

  it("per-tool budgets, per-signature caps and off", async () => {
    const a = await turn(
      [call("1", "flaky", { n: 1 }), call("2", "flaky", { n: 1 }), call("3", "flaky", { n: 1 }), { text: "x" }],
      { tools: { flaky: { budgets: { internal: 5 }, maxPerSignature: 1 } } },
    );
    // Five retries for the class, but one for an exact repeat: the third identical call is denied.
    expect(runs).toEqual(["flaky 1", "flaky 1"]);
    expect(a.texts[0]).toContain("(1 retry left)");
    const b = await turn([call("1", "flaky", { n: 1 }), call("2", "flaky", { n: 1 }), { text: "x" }], {
      tools: { flaky: { off: true } },
    });
    expect(runs).toEqual(["flaky 1", "flaky 1"]);
    expect(b.texts).toEqual(["Error: segfault in worker", "Error: segfault in worker"]);
    expect(b.codes).toEqual([]);
  });

  it("arguments that differ only in key order or JSON spacing are the same call; whitespace inside a string is not", async () => {
    await turn([call("1", "flaky", { n: 1 }), call("2", "flaky", JSON.parse('{ "n" : 1 }')), { text: "x" }]);
    expect(runs).toEqual(["flaky 1"]);
    expect(normalizeArgs({ b: "two words", a: [1, { y: 2, x: 1 }] })).toBe(
      normalizeArgs({ a: [1, { x: 1, y: 2 }], b: "two words" }),
    );
    // An indentation fix is a different call (Python, YAML, an edit's old text).
    expect(normalizeArgs({ code: "def f():\n  return 1" })).not.toBe(normalizeArgs({ code: "def f():\n    return 1" }));
    // Long arguments that differ only at the end, and unreadable ones, never collide.
    const long = "x".repeat(5_000);
    expect(normalizeArgs({ q: `${long}1` })).not.toBe(normalizeArgs({ q: `${long}2` }));
    const hostile = () =>
      new Proxy(
        {},
        {
          ownKeys: () => {
            throw new Error("no");
          },
        },
      );
    expect(normalizeArgs(hostile())).not.toBe(normalizeArgs(hostile()));
    expect(normalizeArgs({ big: 10n })).toBe('{"big":"10n"}');
  });

  it("a tool timeout is classified from the kernel's own result (two retries)", async () => {
    const { texts, codes } = await turn([
      call("1", "slow", {}),
      call("2", "slow", {}),
      call("3", "slow", {}),
      { text: "too slow" },
    ]);
    expect(texts[0]).toContain("KEEL_TOOL_TIMEOUT");
    expect(texts[0]).toContain("[retry: timeout; retry with a smaller request");
    expect(texts[2]).toContain("do not call slow again");
    expect(codes).toEqual(["TOOL_RETRY_ALLOWED", "TOOL_RETRY_ALLOWED", "TOOL_RETRY_EXHAUSTED"]);
  });

  it("arguments the tool's schema refuses are invalid_arguments (the tool never ran): three retries, then stop, then denied", async () => {
    const bad = { path: 7 };
    const { texts, codes } = await turn([
      call("1", "read", bad),
      call("2", "read", bad),
      call("3", "read", bad),
      call("4", "read", bad),
      call("5", "read", bad),
      { text: "x" },
    ]);
    expect(runs).toEqual([]);
    expect(texts[0]).toMatch(
      /KEEL_TOOL_ARGS_INVALID[\s\S]*\[retry: invalid arguments; fix the arguments to match the tool's schema and call it again \(3 retries left\)\]/,
    );
    expect(texts[3]).toContain("do not call read again with these arguments");
    expect(texts[4]).toContain("KEEL_TOOL_DENIED");
    expect(codes).toEqual([
      "TOOL_RETRY_ALLOWED",
      "TOOL_RETRY_ALLOWED",
      "TOOL_RETRY_ALLOWED",
      "TOOL_RETRY_EXHAUSTED",
      "TOOL_RETRY_BLOCKED",
    ]);
  });

  it("a classifier of yours goes first; one that throws is reported and the built-in classes are used", async () => {
    const mine = await turn([call("1", "read", { path: "a" }), call("2", "read", { path: "a" }), { text: "x" }], {
      classify: ({ tool }) => (tool === "read" ? "permission_denied" : undefined),
    });
    expect(mine.texts[0]).toContain("permission denied");
    expect(mine.texts[0]).toContain("(1 retry left)");
    const broken = await turn([call("1", "read", { path: "a" }), { text: "x" }], {
      classify: () => {
        throw new Error("oops");
      },
    });
    expect(broken.codes).toEqual(["TOOL_RETRY_CLASSIFY_FAILED", "TOOL_RETRY_ALLOWED"]);
    expect(broken.texts[0]).toContain("not found");
  });

  it("a state-changing call that succeeds lifts the blocks: re-running after a fix is not a blind retry", async () => {
    let fixed = false;
    const test = defineTool({
      name: "test",
      description: "Runs the tests.",
      category: "exec",
      execute: () => (runs.push("test"), fixed ? "all pass" : { content: "Error: 1 failing", isError: true }),
    });
    const fix = defineTool({
      name: "fix",
      description: "Edits the code.",
      category: "edit",
      execute: () => ((fixed = true), "edited"),
    });
    const look = defineTool({ name: "look", description: "Reads.", category: "info", execute: () => "source" });
    runs = [];
    const agent = await createAgent({
      provider: scriptedProvider([
        call("1", "test", {}),
        call("2", "look", {}),
        call("3", "test", {}),
        call("4", "fix", {}),
        call("5", "test", {}),
        { text: "fixed" },
      ]),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [test, fix, look],
      plugins: [retry()],
    });
    const s = await agent.session();
    await s.run("make the tests pass");
    // A successful read changes nothing: the blind repeat is denied; after the edit, the tests run again.
    expect(runs).toEqual(["test", "test"]);
    expect(resultTexts(s.messages)).toEqual([
      expect.stringContaining("do not call test again with these arguments unless something changes first"),
      "source",
      expect.stringContaining("KEEL_TOOL_DENIED"),
      "edited",
      "all pass",
    ]);
    await agent.close();
  });

  it("counts start afresh each turn", async () => {
    runs = [];
    const agent = await createAgent({
      provider: scriptedProvider([
        call("1", "flaky", { n: 1 }),
        call("2", "flaky", { n: 1 }),
        { text: "first" },
        call("3", "flaky", { n: 1 }),
        { text: "second" },
      ]),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [flaky],
      plugins: [retry()],
    });
    const s = await agent.session();
    await s.run("one");
    await s.run("two");
    expect(runs).toEqual(["flaky 1", "flaky 1"]);
    await agent.close();
  });

  it("options are checked: a negative budget or an unknown class is a located error", async () => {
    await expect(
      createAgent({
        provider: scriptedProvider([]),
        sideModel: false,
        store: new MemorySessionStore(),
        plugins: [retry({ budgets: { timeout: -1 } })],
      }),
    ).rejects.toThrow(/@keel\/plugin-retry[\s\S]*budgets\.timeout/);
    await expect(
      createAgent({
        provider: scriptedProvider([]),
        sideModel: false,
        store: new MemorySessionStore(),
        plugins: [retry({ budgets: { slow: 1 } as never })],
      }),
    ).rejects.toThrow(/slow/);
  });

  it("classifies the common shapes of failure", () => {
    expect(classifyFailure("Error: KEEL_TOOL_ARGS_INVALID: Invalid arguments — path: expected string")).toBe(
      "invalid_arguments",
    );
    expect(classifyFailure("bash: foo: command not found")).toBe("not_found");
    expect(classifyFailure("HTTP 403 Forbidden")).toBe("permission_denied");
    expect(classifyFailure("EACCES: permission denied, open '/etc/shadow'")).toBe("permission_denied");
    expect(classifyFailure("request timed out after 30s")).toBe("timeout");
    expect(classifyFailure("[… 120 characters cut from this tool result (limits.maxToolResultChars is 100) …]")).toBe(
      "output_truncated",
    );
    expect(classifyFailure("Traceback (most recent call last): ZeroDivisionError")).toBe("internal");
  });
});
