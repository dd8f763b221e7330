import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { Tiktoken } from "js-tiktoken/lite";
import { describe, expect, it } from "vitest";
import type { Message } from "../../kernel/src/index.ts";
import {
  IMAGE_TOKENS,
  MESSAGE_OVERHEAD_TOKENS,
  TokenCounter,
  defaultTokenCounter,
  estimateTokens,
  utf8Length,
} from "../src/counter.ts";
import type { ToolSchema } from "../../kernel/src/index.ts";

const direct = new Tiktoken(createRequire(import.meta.url)("js-tiktoken/ranks/o200k_base"));
const encodeLen = (s: string) => direct.encode(s).length;

const sample =
  "Keel is a hook-and-plugin microkernel for LLM agents. Ünïcödé, emoji 😀, code: `const x = 42;`\n\tand numbers 1234567.";
const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });

describe("TokenCounter counts", () => {
  it("agrees with a direct o200k_base encode", () => {
    const c = new TokenCounter();
    expect(c.countText(sample)).toBe(encodeLen(sample));
    expect(c.countText(sample)).toBeGreaterThan(10);
    expect(c.countText("")).toBe(0);
  });

  it("counts special-token text as plain text instead of throwing", () => {
    const c = new TokenCounter();
    expect(c.countText("a <|endoftext|> b")).toBeGreaterThan(3);
  });

  it("counts a message as its parts in one encode plus overhead and flat images", () => {
    const c = new TokenCounter();
    const m: Message = {
      role: "assistant",
      content: [
        { type: "thinking", text: "think" },
        { type: "text", text: sample },
        { type: "tool_call", id: "c1", name: "read_file", args: { path: "/tmp/a.txt" } },
      ],
    };
    const expected =
      encodeLen(["think", sample, "read_file", '{"path":"/tmp/a.txt"}'].join("\n")) + MESSAGE_OVERHEAD_TOKENS;
    expect(c.countMessage(m)).toBe(expected);
    expect(c.stats.encodes).toBe(1);

    const withImages: Message = {
      role: "user",
      content: [
        { type: "text", text: "look" },
        { type: "image", mediaType: "image/png", data: "AAAA".repeat(10_000) },
        { type: "image", mediaType: "image/png", data: "" },
      ],
    };
    expect(c.countMessage(withImages)).toBe(encodeLen("look") + MESSAGE_OVERHEAD_TOKENS + 2 * IMAGE_TOKENS);
    const result: Message = {
      role: "tool",
      toolCallId: "c1",
      toolName: "read_file",
      content: [{ type: "text", text: "contents" }],
      isError: false,
    };
    expect(c.countMessage(result)).toBe(encodeLen("read_file\ncontents") + MESSAGE_OVERHEAD_TOKENS);
  });

  it("counts pathological text exactly and fast: long runs, and long pieces that switch class (one piece, no run to cut)", () => {
    const c = new TokenCounter();
    c.countText("warm up");
    // Exact against the oracle where the oracle itself is quick enough (its merge is quadratic).
    for (const t of [
      "x".repeat(1_200),
      `${" ".repeat(1_200)}end`,
      "aé".repeat(600),
      "\r\n".repeat(600),
      "\u00a0".repeat(1_200),
      "我们的系统使用插件和钩子来构建智能代理".repeat(20),
      "\uDE00".repeat(1_000),
      "straße".repeat(200),
    ]) {
      expect(c.countText(t), JSON.stringify(t.slice(0, 12))).toBe(encodeLen(t));
    }
    // Inputs that took 2.5-45 s when each took one quadratic merge; a guard against that, not a timing target.
    const start = performance.now();
    for (const t of [
      "aé".repeat(100_000),
      "straße".repeat(16_666),
      " \u202f".repeat(25_000),
      "\t\u2028".repeat(25_000),
      "\uDE00".repeat(50_000),
      "x".repeat(50_000),
    ])
      expect(c.countText(t)).toBeGreaterThan(0);
    expect(performance.now() - start).toBeLessThan(5_000);
    const b64 = Buffer.from(Array.from({ length: 6_000 }, (_, i) => (i * 7919) % 256)).toString("base64");
    expect(c.countText(b64)).toBe(encodeLen(b64));
  });

  it("the piece cache keeps no counted text alive (a piece is a slice of the text it came from)", () => {
    const run = spawnSync(
      process.execPath,
      [
        "--expose-gc",
        "--input-type=module",
        "-e",
        `
      const { TokenCounter } = await import(${JSON.stringify(new URL("../src/counter.ts", import.meta.url).href)});
      const c = new TokenCounter();
      c.countText("warm");
      globalThis.gc(); const before = process.memoryUsage().heapUsed;
      const base = "the quick brown fox jumps over the lazy dog, and then some more words follow here.\\n".repeat(4000);
      for (let i = 0; i < 80; i++) c.countText(("uniqueidentifier" + String.fromCharCode(97 + (i % 26), 97 + Math.floor(i / 26)) + " " + base + i).split("").join(""));
      globalThis.gc(); globalThis.gc();
      console.log(Math.round((process.memoryUsage().heapUsed - before) / 1e6));`,
      ],
      { encoding: "utf8", env: { ...process.env, KEEL_CACHE_DIR: tmpdir() } },
    );
    expect(run.status, run.stderr).toBe(0);
    // 80 texts of 340 KB each: kept alive they would be about 27 MB (UTF-16: 54 MB).
    expect(Number(run.stdout.trim().split("\n").at(-1))).toBeLessThan(10);
    // Counting 27 MB in a child process: seconds alone, far more on a loaded machine.
  }, 60_000);

  it("loads neither the o200k ranks nor their cache at import time; the first count loads the vocabulary (from a fresh cache: decoded, then read back)", () => {
    const url = new URL("../src/counter.ts", import.meta.url).href;
    const code = `const { createRequire } = await import("node:module");
      const cache = createRequire(${JSON.stringify(url)}).cache;
      const ranks = () => Object.keys(cache).some((k) => k.includes("o200k_base"));
      const { TokenCounter } = await import(${JSON.stringify(url)});
      const c = new TokenCounter();
      const before = { ranks: ranks(), loaded: c.loaded };
      const n = c.countText("hello world");
      console.log(JSON.stringify({ before, after: { ranks: ranks(), loaded: c.loaded }, n }));`;
    const dir = mkdtempSync(join(tmpdir(), "keel-tokens-"));
    try {
      const run = () =>
        spawnSync(process.execPath, ["--input-type=module", "-e", code], {
          encoding: "utf8",
          cwd: fileURLToPath(new URL("..", import.meta.url)),
          env: { ...process.env, KEEL_CACHE_DIR: dir },
        });
      const first = run();
      expect(first.status, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout.trim().split("\n").at(-1)!)).toEqual({
        before: { ranks: false, loaded: false },
        after: { ranks: true, loaded: true },
        n: encodeLen("hello world"),
      });
      expect(readdirSync(dir)).toHaveLength(1);
      const second = run();
      expect(second.status, second.stderr).toBe(0);
      expect(JSON.parse(second.stdout.trim().split("\n").at(-1)!)).toEqual({
        before: { ranks: false, loaded: false },
        after: { ranks: false, loaded: true },
        n: encodeLen("hello world"),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a request whose UTF-8 size is below exactAbove is estimated without loading the ranks, with its byte count as the bound; above it, counted exactly", () => {
    const url = new URL("../src/counter.ts", import.meta.url).href;
    const code = `const { TokenCounter, utf8Length } = await import(${JSON.stringify(url)});
      const c = new TokenCounter();
      // 40,000 ASCII chars: the old bound (3 x UTF-16 length, 120,000) was above 90,000; the bytes are not.
      const ascii = { system: "You help.", messages: [{ role: "user", content: [{ type: "text", text: "word ".repeat(8_000) }] }], tools: [{ name: "t", description: "d", parameters: { type: "object" } }] };
      const a = c.countRequest(ascii, { exactAbove: 90_000 });
      const loadedAfterAscii = c.loaded;
      // 30,000 emoji are 120,000 bytes: above the line, so the counts are exact (and the ranks load).
      const emoji = { system: "", messages: [{ role: "user", content: [{ type: "text", text: "🎉".repeat(30_000) }] }], tools: [] };
      const b = c.countRequest(emoji, { exactAbove: 90_000 });
      console.log(JSON.stringify({ a: { exact: a.exact, bound: a.bound }, loadedAfterAscii, b: { exact: b.exact, total: b.total, loaded: c.loaded } }));`;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
      encoding: "utf8",
      cwd: fileURLToPath(new URL("..", import.meta.url)),
    });
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout.trim().split("\n").at(-1)!);
    expect(out.a.exact).toBe(false);
    expect(out.a.bound).toBeGreaterThan(40_000);
    expect(out.a.bound).toBeLessThan(40_200);
    expect(out.loadedAfterAscii).toBe(false);
    expect(out.b).toMatchObject({ exact: true, loaded: true });
    expect(out.b.total).toBeGreaterThan(30_000);
  });

  it("the byte bound is never below the exact count, whatever the script (ASCII, CJK, emoji, lone surrogates, JSON)", () => {
    const c = new TokenCounter();
    const rnd = (() => {
      let x = 7;
      return () => (x = (x * 48271) % 2147483647) / 2147483647;
    })();
    const alphabet = ["a", "Z", " ", "\n", "{", '"', "é", "我", "🎉", "\ud83d", "\udc00", "٣", "\u0000", "0", "_"];
    for (let k = 0; k < 300; k++) {
      const text = Array.from(
        { length: Math.floor(rnd() * 400) },
        () => alphabet[Math.floor(rnd() * alphabet.length)],
      ).join("");
      expect(utf8Length(text)).toBe(Buffer.byteLength(text));
      expect(c.countText(text), JSON.stringify(text)).toBeLessThanOrEqual(utf8Length(text));
    }
  });

  it("estimateTokens is chars/4 rounded up", () => {
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("abcd")).toBe(1);
    expect(estimateTokens("abcde")).toBe(2);
  });
});

describe("TokenCounter caching", () => {
  it("recounting a long history after one new message costs one encode", () => {
    const c = new TokenCounter();
    const history: Message[] = [];
    for (let i = 0; i < 500; i++)
      history.push(
        i % 2
          ? { role: "assistant", content: [{ type: "text", text: `reply ${i} ${sample}` }] }
          : user(`question ${i}`),
      );
    const first = c.countMessages(history);
    expect(c.stats.encodes).toBe(500);
    const hitsBefore = c.stats.cacheHits;

    const added = user("one more question about tokens");
    history.push(added);
    const second = c.countMessages(history);
    expect(c.stats.encodes).toBe(501);
    expect(c.stats.cacheHits - hitsBefore).toBe(500);
    expect(second - first).toBe(encodeLen("one more question about tokens") + MESSAGE_OVERHEAD_TOKENS);
  });

  it("caches by object identity: an equal but new message is encoded again", () => {
    const c = new TokenCounter();
    c.countMessage(user("same"));
    c.countMessage(user("same"));
    expect(c.stats.encodes).toBe(2);
  });

  it("caches tool counts per tool object", () => {
    const c = new TokenCounter();
    const tools: ToolSchema[] = [
      {
        name: "read",
        description: "Read a file",
        parameters: { type: "object", properties: { path: { type: "string" } } },
      },
      {
        name: "write",
        description: "Write a file",
        parameters: { type: "object", properties: { path: { type: "string" }, text: { type: "string" } } },
      },
    ];
    const n = c.countTools(tools);
    const expected = tools.reduce(
      (s, t) => s + encodeLen(JSON.stringify({ name: t.name, description: t.description, parameters: t.parameters })),
      0,
    );
    expect(n).toBe(expected);
    expect(c.stats).toEqual({ encodes: 2, cacheHits: 0 });
    expect(c.countTools(tools)).toBe(n);
    expect(c.stats).toEqual({ encodes: 2, cacheHits: 2 });
  });

  it("countRequest sums its parts and reuses the last system count", () => {
    const c = new TokenCounter();
    const tools: ToolSchema[] = [{ name: "ls", description: "List", parameters: { type: "object" } }];
    const messages = [user("hi"), user("there")];
    const r = c.countRequest({ system: sample, messages, tools });
    expect(r.system).toBe(encodeLen(sample));
    expect(r.tools).toBe(c.countTools(tools));
    expect(r.messages).toBe(c.countMessages(messages));
    expect(r.total).toBe(r.system + r.tools + r.messages);
    const encodes = c.stats.encodes;
    expect(c.countRequest({ system: sample, messages, tools })).toEqual(r);
    expect(c.stats.encodes).toBe(encodes);
  });

  it("defaultTokenCounter is a shared instance", () => {
    expect(defaultTokenCounter()).toBe(defaultTokenCounter());
    expect(defaultTokenCounter()).toBeInstanceOf(TokenCounter);
  });
});
