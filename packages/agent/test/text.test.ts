/**
 * The kernel's text helper: cuts by code point, repairs lone surrogates, bounds tool results,
 * and the kernel never hands a provider a lone surrogate.
 */
import { describe, expect, it } from "vitest";
import { boundResult, createAgent, defineTool, definePlugin, preview, wellFormedProvider } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import {
  codePointLength,
  codePointSlice,
  droppedMarker,
  headOf,
  isWellFormed,
  tailOf,
  toWellFormed,
  truncate,
  wellFormedDeep,
} from "../../text/src/index.ts";
import type { AssistantMessage, Message, ModelProvider, ModelRequest, ToolResultMessage } from "../src/index.ts";

const SMILE = "😀"; // U+1F600: two UTF-16 units
const HIGH = "\ud83d";
const LOW = "\ude00";

describe("text by code points", () => {
  it("codePointLength counts a pair once and a lone surrogate once", () => {
    expect(codePointLength(`a${SMILE}b`)).toBe(3);
    expect(codePointLength(`a${HIGH}b${LOW}`)).toBe(4);
    expect(codePointLength("")).toBe(0);
  });

  it("toWellFormed replaces only lone surrogates with U+FFFD and keeps pairs", () => {
    expect(toWellFormed(`${SMILE}${HIGH}x${LOW}`)).toBe(`${SMILE}\uFFFDx\uFFFD`);
    const s = "plain";
    expect(toWellFormed(s)).toBe(s);
    expect(isWellFormed(`${HIGH}`)).toBe(false);
    expect(isWellFormed(SMILE)).toBe(true);
  });

  it("truncate keeps text that fits and cuts the rest by code point, the marker inside the limit", () => {
    expect(truncate(`${SMILE}${SMILE}`, 2)).toBe(`${SMILE}${SMILE}`); // 4 UTF-16 units, 2 code points: fits
    expect(truncate(`${SMILE}${SMILE}${SMILE}`, 2)).toBe(`${SMILE}…`);
    expect(truncate("abcdef", 4, { marker: "" })).toBe("abcd");
    expect(truncate("abcdef", 0)).toBe("");
  });

  it("a counting marker reports exactly how many code points were dropped and the result stays within the limit", () => {
    const text = SMILE.repeat(1_000);
    const out = truncate(text, 100, { marker: droppedMarker });
    expect(codePointLength(out)).toBeLessThanOrEqual(100);
    const dropped = Number(/\[(\d+) more chars\]/.exec(out)![1]);
    const kept = codePointLength(out.slice(0, out.indexOf("…")));
    expect(kept + dropped).toBe(1_000);
  });

  it("tail keeps the end as well, around the marker", () => {
    const out = truncate(`HEAD-${"x".repeat(100)}-TAIL`, 30, { tail: 5, marker: (n) => `[${n}]` });
    expect(out.startsWith("HEAD-")).toBe(true);
    expect(out.endsWith("-TAIL")).toBe(true);
    expect(codePointLength(out)).toBeLessThanOrEqual(30);
  });

  it("a marker longer than the limit is left out, never overflowing it", () => {
    expect(truncate("abcdefgh", 3, { marker: "[a long marker]" })).toBe("abc");
  });

  it("with graphemes, a cut never splits an emoji ZWJ sequence, a flag or a combining mark, and the count stays exact", () => {
    const FAMILY = "👨‍👩‍👧"; // 5 code points
    const text = `${FAMILY}🇫🇷e\u0301`.repeat(6);
    for (let n = 0; n <= codePointLength(text) + 1; n++) {
      const out = truncate(text, n, { graphemes: true, marker: (d) => `<${d}>` });
      expect(codePointLength(out)).toBeLessThanOrEqual(n);
      const kept = out.replace(/<\d+>$/, "");
      expect(kept).toMatch(/^(👨‍👩‍👧|🇫🇷|e\u0301)*$/u);
      const d = /<(\d+)>$/.exec(out)?.[1];
      if (d) expect(codePointLength(kept) + Number(d)).toBe(codePointLength(text));
      const both = truncate(text, n, { graphemes: true, tail: Math.floor(n / 2), marker: "|" });
      expect(codePointLength(both)).toBeLessThanOrEqual(n);
      for (const part of both.split("|")) expect(part).toMatch(/^(👨‍👩‍👧|🇫🇷|e\u0301)*$/u);
    }
  });

  it("headOf, tailOf and codePointSlice never split a pair", () => {
    const s = `a${SMILE}b${SMILE}c`;
    expect(headOf(s, 2)).toBe(`a${SMILE}`);
    expect(tailOf(s, 2)).toBe(`${SMILE}c`);
    expect(codePointSlice(s, 1, 4)).toBe(`${SMILE}b${SMILE}`);
    expect(codePointSlice(s, 4, 2)).toBe("");
  });

  it("preview keeps max code points then says how many more there were", () => {
    expect(preview(SMILE.repeat(10), 4)).toBe(`${SMILE.repeat(4)}… [6 more chars]`);
  });

  it("wellFormedDeep repairs strings and keys through objects and arrays, sharing untouched parts", () => {
    const clean = Object.freeze({ a: "ok", b: [1, "two"] });
    const v = { clean, bad: [`x${HIGH}`], [`k${LOW}`]: 1 };
    const out = wellFormedDeep(v);
    expect(out).not.toBe(v);
    expect(out.clean).toBe(clean);
    expect(out.bad).toEqual(["x\uFFFD"]);
    expect(Object.keys(out)).toContain("k\uFFFD");
    expect(wellFormedDeep(clean)).toBe(clean);
    const cyclic: Record<string, unknown> = { s: HIGH };
    cyclic.self = cyclic;
    expect((wellFormedDeep(cyclic) as { s: string }).s).toBe("\uFFFD");
  });

  it("wellFormedProvider keeps the provider's id and window and repairs what it is handed", async () => {
    const inner = scriptedProvider({ contextWindow: 1234, steps: [{ text: "ok" }] });
    const p = wellFormedProvider(inner);
    expect(p.id).toBe(inner.id);
    expect(p.contextWindow).toBe(1234);
    const req: ModelRequest = {
      system: `s${HIGH}`,
      messages: [{ role: "user", content: [{ type: "text", text: `u${LOW}` }] }],
      tools: [],
      options: {},
    };
    for await (const _ of p.stream(req, { signal: new AbortController().signal })) void _;
    expect(JSON.stringify(inner.requests[0])).not.toMatch(/\\ud[89a-f]/i);
    expect(req.system).toBe(`s${HIGH}`); // never mutated
  });
});

describe("boundResult: the per-tool-result cap", () => {
  const result = (text: string): ToolResultMessage => ({
    role: "tool",
    toolCallId: "c1",
    toolName: "t",
    content: [{ type: "text", text }],
    isError: false,
  });

  it("returns a small well-formed result itself", () => {
    const r = result(`fine ${SMILE}`);
    expect(boundResult(r, 100)).toBe(r);
  });

  it("cuts a long result to the cap, keeping head and tail and saying how much was cut and by which limit", () => {
    const text = `BEGIN ${SMILE.repeat(50_000)} END`;
    const out = boundResult(result(text), 1_000);
    const t = (out.content[0] as { text: string }).text;
    expect(codePointLength(t)).toBeLessThanOrEqual(1_000);
    expect(t.startsWith("BEGIN ")).toBe(true);
    expect(t.endsWith(" END")).toBe(true);
    expect(t).toContain("limits.maxToolResultChars");
    const cut = Number(/(\d+) characters cut/.exec(t)![1]);
    expect(cut + codePointLength(t.replace(/\n\[… .* …\]\n/, ""))).toBe(codePointLength(text));
    expect(isWellFormed(t)).toBe(true);
  });

  it("repairs lone surrogates without cutting, and keeps images", () => {
    const r: ToolResultMessage = {
      role: "tool",
      toolCallId: "c",
      toolName: "t",
      content: [
        { type: "text", text: `a${HIGH}` },
        { type: "image", mediaType: "image/png", data: "AAAA" },
      ],
      isError: false,
    };
    const out = boundResult(r, 100);
    expect(out.content).toEqual([
      { type: "text", text: "a\uFFFD" },
      { type: "image", mediaType: "image/png", data: "AAAA" },
    ]);
  });
});

describe("the kernel never sends a lone surrogate", () => {
  const surrogateIn = (v: unknown) => /\\ud[89a-f][0-9a-f]{2}/i.test(JSON.stringify(v));

  it("a tool returning lone surrogates is stored well-formed, capped, and the request carries no lone surrogate", async () => {
    const provider = scriptedProvider([{ toolCalls: [{ name: "broken", args: {} }] }, { text: "done" }]);
    const broken = defineTool({
      name: "broken",
      description: "returns broken text",
      execute: () => `half ${HIGH} emoji ${LOW} and ${"x".repeat(500)}`,
    });
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      tools: [broken],
      limits: { maxToolResultChars: 300 },
    });
    const session = await agent.session();
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    const tool = session.messages.find((m): m is ToolResultMessage => m.role === "tool")!;
    const text = (tool.content[0] as { text: string }).text;
    expect(isWellFormed(text)).toBe(true);
    expect(text).toContain("half \uFFFD emoji \uFFFD");
    expect(codePointLength(text)).toBeLessThanOrEqual(300);
    expect(text).toContain("characters cut from this tool result");
    expect(surrogateIn(provider.requests)).toBe(false);
    await agent.close();
  });

  it("every request is wellFormedDeep of its history: clean messages go as they are, a repaired one is the same copy in every later request", async () => {
    const answers: AssistantMessage[] = [
      {
        role: "assistant",
        content: [
          { type: "text", text: `one ${HIGH}` },
          { type: "tool_call", id: `c${LOW}`, name: "echo", args: { q: `x${HIGH}` } },
        ],
      },
      { role: "assistant", content: [{ type: "tool_call", id: "c2", name: "echo", args: { q: "fine" } }] },
      { role: "assistant", content: [{ type: "text", text: "done" }] },
      { role: "assistant", content: [{ type: "text", text: `again ${LOW}` }] },
    ];
    const requests: ModelRequest[] = [];
    const provider: ModelProvider = {
      id: "p",
      async *stream(request) {
        requests.push(request);
        const message = answers[requests.length - 1]!;
        yield {
          type: "response",
          message,
          stopReason: message.content.length > 1 ? "tool_use" : "end_turn",
          usage: {},
        };
      },
    };
    const echo = defineTool({ name: "echo", description: "echo", execute: () => `ok ${HIGH}` });
    const agent = await createAgent({ provider, store: new MemorySessionStore(), tools: [echo] });
    const session = await agent.session();
    await session.run(`go ${HIGH}`);
    await session.run("and again");
    expect(requests).toHaveLength(4);
    const history = session.messages;
    requests.forEach((r, k) => {
      const sent = history.slice(0, r.messages.length);
      expect(r.messages).toEqual(wellFormedDeep(sent));
      expect(surrogateIn(r)).toBe(false);
      r.messages.forEach((m, j) => {
        if (!surrogateIn(sent[j])) expect(m).toBe(sent[j]);
        else if (k > 0 && j < requests[k - 1]!.messages.length) expect(m).toBe(requests[k - 1]!.messages[j]);
      });
    });
    // The user's message and the first answer were repaired: the same copies in all four requests.
    expect(requests[3]!.messages[0]).toBe(requests[0]!.messages[0]);
    expect(requests[3]!.messages[1]).toBe(requests[1]!.messages[1]);
    await agent.close();
  });

  it("a history that already holds a lone surrogate (an older version's session) still gets well-formed requests", async () => {
    const store = new MemorySessionStore();
    const provider = scriptedProvider([{ text: "first" }, { text: "second" }]);
    const agent = await createAgent({ provider, store });
    const session = await agent.session();
    await session.run(`user typed half an emoji ${HIGH}`);
    // The user message is stored as typed; every request built from it is repaired.
    expect(JSON.stringify(session.messages)).toMatch(/\\ud83d/);
    await session.run("and again");
    expect(provider.requests).toHaveLength(2);
    expect(surrogateIn(provider.requests)).toBe(false);
    expect(JSON.stringify(provider.requests[1]!.messages)).toContain("half an emoji \uFFFD");
    await agent.close();
  });

  it("system prompt sections, prompt context, tool schemas and a plugin's side-model call are repaired too", async () => {
    const side = scriptedProvider([{ text: "side answer" }]);
    const provider = scriptedProvider([{ text: "ok" }]);
    const plugin = definePlugin({
      name: "broken-text",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", () => ({
          kind: "prompt_context",
          id: "c",
          domain: "d",
          content: `context ${HIGH}`,
        }));
        ctx.on("turn.pre_prompt_compile", () => ({
          kind: "prompt_section",
          id: "s",
          sectionId: "s",
          domain: "d",
          content: `section ${LOW}`,
        }));
        ctx.on("turn.pre_policy", async (_e, hook) => {
          const { complete } = await import("../src/index.ts");
          await complete(hook.model!, {
            messages: [{ role: "user", content: [{ type: "text", text: `side ${HIGH}` }] }],
          });
          return undefined;
        });
      },
    });
    const tool = defineTool({ name: "t", description: `describes ${HIGH}`, execute: () => "x" });
    const agent = await createAgent({
      provider,
      sideModel: side,
      store: new MemorySessionStore(),
      instructions: `be ${LOW}`,
      tools: [tool],
      plugins: [plugin],
    });
    const r = await (await agent.session()).run("hi");
    expect(r.verdict.status).toBe("completed");
    expect(surrogateIn(provider.requests)).toBe(false);
    expect(side.requests).toHaveLength(1);
    expect(surrogateIn(side.requests)).toBe(false);
    const sent = provider.requests[0]!;
    expect(sent.system).toContain("context \uFFFD");
    expect(sent.system).toContain("section \uFFFD");
    expect(sent.system).toContain("be \uFFFD");
    expect(sent.tools[0]!.description).toBe("describes \uFFFD");
    await agent.close();
  });

  it("the message stored for the user is never altered by the repair", async () => {
    const provider = scriptedProvider([{ text: "ok" }]);
    const agent = await createAgent({ provider, store: new MemorySessionStore() });
    const session = await agent.session();
    await session.run(`x${HIGH}`);
    const user = session.messages[0] as Message;
    expect((user.content[0] as { text: string }).text).toBe(`x${HIGH}`);
    await agent.close();
  });
});
