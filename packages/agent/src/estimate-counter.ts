/**
 * The token counter of a runtime without the o200k tokenizer (a Worker, a browser tab): each
 * part estimated by what its characters cost in a byte-level BPE (prose letters a quarter of a
 * token, digits a third, punctuation and long unbroken runs such as base64 or hex more, a
 * non-Latin character one, an emoji two), erring high so a ceiling or a budget is not passed
 * unseen; its UTF-8 length is the proven upper bound (no such token is shorter than one byte).
 * On Node, createAgent uses the o200k counter (`@keel/agent/node`) instead.
 */
import type { Message, RequestTokenCount, TokenCounter, ToolSchema } from "@keel/kernel";

/** Tokens an image or a file counts for in an estimate (a 1024×1024 image is about 1,600). */
const MEDIA_TOKENS = 1_600;

const perMessage = new WeakMap<object, { tokens: number; bound: number }>();
const perTools = new WeakMap<readonly ToolSchema[], { tokens: number; bound: number }>();
let lastSystem: { text: string; part: { tokens: number; bound: number } } = { text: "", part: { tokens: 0, bound: 0 } };

function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdbff ? (i++, 4) : 3;
  }
  return n;
}

/** A run of word characters this long without a break is an identifier, a hash or base64, not prose. */
const LONG_RUN = 12;

/** Estimated o200k tokens of `text`. Contract: pure; never below a quarter of its code points. */
export function estimateTokens(text: string): number {
  let tokens = 0;
  let run = 0;
  const endRun = (): void => {
    // Prose words cost about a quarter of a token a letter; long unbroken runs (hex, base64) about 0.7.
    if (run > LONG_RUN) tokens += run * 0.45;
    run = 0;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a)) {
      tokens += 0.25;
      run++;
    } else if (c >= 0x30 && c <= 0x39) {
      tokens += 0.34;
      run++;
    } else if (c === 0x20 || c === 0x0a || c === 0x09) {
      endRun();
      tokens += 0.1;
    } else if (c < 0x80) {
      // Punctuation: JSON's quotes, braces and colons are often tokens of their own.
      if (c !== 0x2b && c !== 0x2f && c !== 0x3d && c !== 0x5f && c !== 0x2d) endRun();
      else run++;
      tokens += 0.6;
    } else if (c >= 0xd800 && c <= 0xdbff) {
      endRun();
      tokens += 2;
      i++;
    } else {
      endRun();
      tokens += 1;
    }
  }
  endRun();
  return Math.ceil(tokens);
}

function ofText(text: string): { tokens: number; bound: number } {
  return { tokens: estimateTokens(text), bound: utf8Length(text) };
}

function ofMessage(m: Message): { tokens: number; bound: number } {
  let e = perMessage.get(m);
  if (e) return e;
  e = { tokens: 4, bound: 4 };
  const blocks = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
  for (const b of blocks as ReadonlyArray<{ type: string; text?: string }>) {
    const media = b.type === "image" || b.type === "file";
    const part = media ? { tokens: MEDIA_TOKENS, bound: MEDIA_TOKENS } : ofText(b.text ?? JSON.stringify(b) ?? "");
    e.tokens += part.tokens;
    e.bound += part.bound;
  }
  perMessage.set(m, e);
  return e;
}

/** Contract: `exact` is always false; `bound` is at least `total`. */
export const estimateCounter: TokenCounter = {
  countRequest(request: {
    system: string;
    messages: readonly Message[];
    tools: readonly ToolSchema[];
  }): RequestTokenCount {
    const system = request.system === lastSystem.text ? lastSystem.part : ofText(request.system);
    lastSystem = { text: request.system, part: system };
    // A turn sends the same system prompt and tool list every round: each is estimated once.
    let tools = perTools.get(request.tools);
    if (!tools)
      perTools.set(request.tools, (tools = ofText(request.tools.length ? JSON.stringify(request.tools) : "")));
    let messages = 0;
    let bound = system.bound + tools.bound;
    for (const m of request.messages) {
      const e = ofMessage(m);
      messages += e.tokens;
      bound += e.bound;
    }
    const total = system.tokens + tools.tokens + messages;
    return { exact: false, bound: Math.max(bound, total), system: system.tokens, tools: tools.tokens, messages, total };
  },
};
