import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KeelError } from "../../kernel/src/errors.ts";
import type { Message } from "../../kernel/src/messages.ts";
import type { ModelEvent, ModelRequest } from "../../kernel/src/provider.ts";
import { ProviderError } from "../../kernel/src/provider.ts";
import { ScriptedProvider, parseProviderScript, scriptedProvider } from "../../testkit/src/index.ts";
import type { ToolSchema } from "../../kernel/src/provider.ts";

const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
const tool = (name: string): ToolSchema => ({ name, description: name, parameters: { type: "object" } });

function req(over: Partial<ModelRequest> = {}): ModelRequest {
  return { system: "You are a test.", messages: [user("hello there")], tools: [], options: {}, ...over };
}

async function collect(p: ScriptedProvider, request = req(), signal = new AbortController().signal) {
  const events: ModelEvent[] = [];
  try {
    for await (const e of p.stream(request, { signal })) events.push(e);
    return { events, error: undefined as unknown };
  } catch (error) {
    return { events, error };
  }
}

const response = (events: ModelEvent[]) => {
  const last = events.at(-1);
  if (last?.type !== "response") throw new Error("no response event");
  return last;
};

describe("ScriptedProvider streaming", () => {
  it("streams text in chunks that concatenate to the text", async () => {
    const text = "The quick brown fox jumps over the lazy dog, twice over.";
    const p = scriptedProvider([{ text, chunkSize: 10 }]);
    const { events, error } = await collect(p);
    expect(error).toBeUndefined();
    const deltas = events.filter((e) => e.type === "text_delta");
    expect(deltas).toHaveLength(Math.ceil(text.length / 10));
    expect(deltas.map((d) => d.text).join("")).toBe(text);
    const r = response(events);
    expect(r.message).toEqual({ role: "assistant", content: [{ type: "text", text }] });
    expect(r.stopReason).toBe("end_turn");
    expect(events.filter((e) => e.type === "response")).toHaveLength(1);
  });

  it("defaults chunkSize to 16 and never splits a surrogate pair", async () => {
    const text = `${"a".repeat(15)}😀${"b".repeat(20)}`;
    const { events } = await collect(scriptedProvider([{ text }]));
    const deltas = events.filter((e) => e.type === "text_delta").map((d) => d.text);
    expect(deltas[0]).toBe(`${"a".repeat(15)}😀`);
    expect(deltas.join("")).toBe(text);
  });

  it("emits one tool call with a default id and tool_use stop reason", async () => {
    const p = scriptedProvider([{ toolCalls: [{ name: "read", args: { path: "a.txt" } }] }]);
    const { events } = await collect(p);
    expect(events[0]).toEqual({ type: "tool_call_delta", id: "call_0_0", name: "read", argsText: '{"path":"a.txt"}' });
    const r = response(events);
    expect(r.message.content).toEqual([{ type: "tool_call", id: "call_0_0", name: "read", args: { path: "a.txt" } }]);
    expect(r.stopReason).toBe("tool_use");
  });

  it("emits several tool calls in order, after text, with explicit and default ids", async () => {
    const p = scriptedProvider([
      { text: "ok" },
      {
        text: "Let me look.",
        toolCalls: [{ name: "ls" }, { id: "mine", name: "cat", args: ["x"] }, { name: "grep", args: { q: 1 } }],
      },
    ]);
    await collect(p);
    const { events } = await collect(p);
    expect(events.map((e) => e.type)).toEqual([
      "text_delta",
      "tool_call_delta",
      "tool_call_delta",
      "tool_call_delta",
      "response",
    ]);
    const r = response(events);
    expect(r.message.content).toEqual([
      { type: "text", text: "Let me look." },
      { type: "tool_call", id: "call_1_0", name: "ls", args: {} },
      { type: "tool_call", id: "mine", name: "cat", args: ["x"] },
      { type: "tool_call", id: "call_1_2", name: "grep", args: { q: 1 } },
    ]);
  });

  it("streams thinking before text and puts the thinking block first", async () => {
    const p = scriptedProvider([{ thinking: "Hmm, let me think about it.", text: "Answer.", chunkSize: 8 }]);
    const { events } = await collect(p);
    const types = events.map((e) => e.type);
    expect(types.lastIndexOf("thinking_delta")).toBeLessThan(types.indexOf("text_delta"));
    expect(
      events
        .filter((e) => e.type === "thinking_delta")
        .map((e) => e.text)
        .join(""),
    ).toBe("Hmm, let me think about it.");
    expect(response(events).message.content.map((b) => b.type)).toEqual(["thinking", "text"]);
  });

  it("omits an empty text block", async () => {
    const { events } = await collect(scriptedProvider([{ text: "", toolCalls: [{ name: "x" }] }]));
    expect(response(events).message.content.map((b) => b.type)).toEqual(["tool_call"]);
  });

  it("uses scripted stop reasons", async () => {
    const p = scriptedProvider([
      { text: "cut", stopReason: "max_tokens" },
      { toolCalls: [{ name: "a" }], stopReason: "end_turn" },
    ]);
    expect(response((await collect(p)).events).stopReason).toBe("max_tokens");
    expect(response((await collect(p)).events).stopReason).toBe("end_turn");
  });

  it("estimates usage by default and honours scripted usage", async () => {
    const p = scriptedProvider([
      { text: "x".repeat(40) },
      { text: "hi", usage: { inputTokens: 123, cacheReadTokens: 7 } },
      {},
    ]);
    const request = req({ system: "s".repeat(400), messages: [user("u".repeat(400))] });
    const u1 = response((await collect(p, request)).events).usage;
    expect(u1).toEqual({ inputTokens: 200, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 });
    const u2 = response((await collect(p, request)).events).usage;
    expect(u2).toEqual({ inputTokens: 123, outputTokens: 1, cacheReadTokens: 7, cacheWriteTokens: 0 });
    const u3 = response((await collect(p, req({ system: "", messages: [] }))).events).usage;
    expect(u3.inputTokens! + u3.outputTokens!).toBeGreaterThan(0);
  });

  it("records requests as copies, counts remaining and builds the id", async () => {
    const p = new ScriptedProvider({ model: "demo", contextWindow: 1000, steps: [{ text: "a" }, { text: "b" }] });
    expect(p.id).toBe("scripted:demo");
    expect(p.contextWindow).toBe(1000);
    expect(scriptedProvider([]).id).toBe("scripted:script");
    expect(scriptedProvider([]).contextWindow).toBe(200_000);
    const messages = [user("first")];
    expect(p.remaining).toBe(2);
    await collect(p, req({ messages }));
    messages.push(user("second"));
    expect(p.remaining).toBe(1);
    expect(p.requests).toHaveLength(1);
    expect(p.requests[0]!.messages).toHaveLength(1);
  });
});

describe("ScriptedProvider errors", () => {
  it("throws a classified error before streaming", async () => {
    const p = scriptedProvider([
      { text: "never", error: { class: "rate_limited", status: 429, message: "slow down" } },
      { text: "ok" },
    ]);
    const { events, error } = await collect(p);
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).errorClass).toBe("rate_limited");
    expect((error as ProviderError).status).toBe(429);
    expect((error as ProviderError).message).toBe("slow down");
    expect((error as ProviderError).retryable).toBe(true);
    // The failed step was consumed: the next call gets the next step.
    expect(p.remaining).toBe(1);
    expect(response((await collect(p)).events).message.content).toEqual([{ type: "text", text: "ok" }]);
  });

  it("throws mid-stream after the given number of deltas", async () => {
    const p = scriptedProvider([{ text: "abcdefghijkl", chunkSize: 4, error: { class: "network", afterDeltas: 2 } }]);
    const { events, error } = await collect(p);
    expect(events).toEqual([
      { type: "text_delta", text: "abcd" },
      { type: "text_delta", text: "efgh" },
    ]);
    expect((error as ProviderError).errorClass).toBe("network");
  });

  it("throws before the response when afterDeltas exceeds the deltas", async () => {
    const { events, error } = await collect(
      scriptedProvider([{ text: "abc", error: { class: "overloaded", afterDeltas: 99 } }]),
    );
    expect(events.map((e) => e.type)).toEqual(["text_delta"]);
    expect((error as ProviderError).errorClass).toBe("overloaded");
  });

  it("hangs until aborted, then rejects promptly with class aborted", async () => {
    const p = scriptedProvider([{ hang: true, text: "never" }]);
    const ac = new AbortController();
    const start = performance.now();
    setTimeout(() => ac.abort(), 20);
    const { events, error } = await collect(p, req(), ac.signal);
    const elapsed = performance.now() - start;
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).errorClass).toBe("aborted");
    expect(elapsed).toBeGreaterThanOrEqual(15);
    expect(elapsed).toBeLessThan(500);
  });

  it("aborts during delayMs without waiting for the delay", async () => {
    const p = scriptedProvider([{ delayMs: 10_000, text: "late" }]);
    const ac = new AbortController();
    const start = performance.now();
    setTimeout(() => ac.abort(), 20);
    const { error } = await collect(p, req(), ac.signal);
    expect((error as ProviderError).errorClass).toBe("aborted");
    expect(performance.now() - start).toBeLessThan(500);
  });

  it("waits delayMs before the first delta", async () => {
    const start = performance.now();
    const { events } = await collect(scriptedProvider([{ delayMs: 40, text: "x" }]));
    expect(performance.now() - start).toBeGreaterThanOrEqual(35);
    expect(response(events).message.content).toEqual([{ type: "text", text: "x" }]);
  });

  it("rejects at once when the signal is already aborted, and stops mid-stream on abort", async () => {
    const ac = new AbortController();
    ac.abort();
    const { error } = await collect(scriptedProvider([{ text: "x" }]), req(), ac.signal);
    expect((error as ProviderError).errorClass).toBe("aborted");

    const ac2 = new AbortController();
    const events: ModelEvent[] = [];
    const p = scriptedProvider([{ text: "a".repeat(64), chunkSize: 8 }]);
    const err = await (async () => {
      try {
        for await (const e of p.stream(req(), { signal: ac2.signal })) {
          events.push(e);
          if (events.length === 3) ac2.abort();
        }
      } catch (e) {
        return e;
      }
    })();
    expect(events).toHaveLength(3);
    expect((err as ProviderError).errorClass).toBe("aborted");
  });

  it("throws KEEL_SCRIPT_EXHAUSTED with the step count when no step is left", async () => {
    const p = scriptedProvider([{ text: "one" }, { text: "two" }]);
    await collect(p);
    await collect(p);
    const { error } = await collect(p);
    expect(error).toBeInstanceOf(KeelError);
    expect((error as KeelError).code).toBe("KEEL_SCRIPT_EXHAUSTED");
    expect((error as KeelError).message).toContain(
      "Request 3 arrived but the script has no step left for it (2 steps, 2 used)",
    );
    expect(p.remaining).toBe(0);
  });

  it("rejects an invalid script with KEEL_SCRIPT_INVALID and the zod path", () => {
    const bad = { steps: [{ text: "a" }, { text: "b" }, { toolCalls: [{ name: "" }] }] };
    let err: unknown;
    try {
      new ScriptedProvider(bad as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KeelError);
    expect((err as KeelError).code).toBe("KEEL_SCRIPT_INVALID");
    expect((err as KeelError).location.path).toBe("steps.2.toolCalls.0.name");
    expect((err as KeelError).message).toContain("steps.2.toolCalls.0.name");

    expect(() => parseProviderScript([{ error: { class: "boom" } }])).toThrow(/steps\.0\.error\.class/);
    expect(() => parseProviderScript({ steps: [{ txt: "typo" }] })).toThrow(/KEEL_SCRIPT_INVALID/);
    expect(() => parseProviderScript("nope")).toThrow(/KEEL_SCRIPT_INVALID/);
  });
});

describe("ScriptedProvider expectations", () => {
  it("passes when the request matches", async () => {
    const p = scriptedProvider([{ text: "ok", expect: { lastUserIncludes: "weather", toolsInclude: ["search"] } }]);
    const { error } = await collect(
      p,
      req({ messages: [user("old"), user("what is the weather?")], tools: [tool("search"), tool("read")] }),
    );
    expect(error).toBeUndefined();
  });

  it("fails with invalid_request naming what was expected", async () => {
    const p = scriptedProvider([
      { text: "a", expect: { lastUserIncludes: "weather" } },
      { text: "b", expect: { toolsInclude: ["search", "read"] } },
      { text: "c", expect: { noTools: true } },
    ]);
    const e1 = (await collect(p, req({ messages: [user("weather"), user("something else")] }))).error as ProviderError;
    expect(e1).toBeInstanceOf(ProviderError);
    expect(e1.errorClass).toBe("invalid_request");
    expect(e1.message).toContain('"weather"');
    expect(e1.message).toContain("something else");
    const e2 = (await collect(p, req({ tools: [tool("read")] }))).error as ProviderError;
    expect(e2.errorClass).toBe("invalid_request");
    expect(e2.message).toContain("search");
    const e3 = (await collect(p, req({ tools: [tool("read")] }))).error as ProviderError;
    expect(e3.errorClass).toBe("invalid_request");
    expect(e3.message).toContain("no tools");
  });
});

describe("ScriptedProvider.fromFile", () => {
  const dir = mkdtempSync(join(tmpdir(), "keel-script-"));

  it("loads a JSON script", async () => {
    const file = join(dir, "ok.json");
    writeFileSync(file, JSON.stringify({ model: "file-model", steps: [{ text: "from file" }] }));
    const p = ScriptedProvider.fromFile(file);
    expect(p.id).toBe("scripted:file-model");
    expect(response((await collect(p)).events).message.content).toEqual([{ type: "text", text: "from file" }]);
  });

  it("reports bad JSON, a missing file and schema errors as KEEL_SCRIPT_INVALID", () => {
    const badJson = join(dir, "bad.json");
    writeFileSync(badJson, "{ not json");
    expect(() => ScriptedProvider.fromFile(badJson)).toThrow(/KEEL_SCRIPT_INVALID.*bad\.json/);
    expect(() => ScriptedProvider.fromFile(join(dir, "missing.json"))).toThrow(/KEEL_SCRIPT_INVALID/);
    const badSchema = join(dir, "schema.json");
    writeFileSync(badSchema, JSON.stringify([{ delayMs: -1 }]));
    try {
      ScriptedProvider.fromFile(badSchema);
      expect.unreachable();
    } catch (e) {
      expect((e as KeelError).code).toBe("KEEL_SCRIPT_INVALID");
      expect((e as KeelError).location.path).toBe("steps.0.delayMs");
      expect((e as KeelError).message).toContain("schema.json");
    }
  });
});

describe("scripted provider: steps for several conversations", () => {
  it("a step with `when` waits for a request whose last user message matches; others run in order", async () => {
    const { complete: done } = await import("../src/index.ts");
    const { scriptedProvider: sp } = await import("../../testkit/src/index.ts");
    const p = sp({
      steps: [
        { when: { lastUserIncludes: "weather" }, text: "sunny" },
        { text: "first plain" },
        { when: { lastUserIncludes: "time" }, text: "noon" },
        { text: "second plain" },
      ],
    });
    const ask = async (q: string) =>
      (await done(p, { messages: [{ role: "user", content: [{ type: "text", text: q }] }] })).text;
    expect(await ask("what time is it")).toBe("first plain");
    expect(await ask("the time, please")).toBe("noon");
    expect(await ask("and the weather?")).toBe("sunny");
    expect(await ask("anything")).toBe("second plain");
    expect(p.remaining).toBe(0);
    await expect(ask("more")).rejects.toThrow(/KEEL_SCRIPT_EXHAUSTED.*no step left/);
  });
});
