/**
 * The token counter of a runtime without the o200k tokenizer (a Worker, a browser tab): every
 * part estimated at a quarter of its characters, with its UTF-8 length as the proven upper
 * bound (no byte-level BPE token is shorter than one byte). On Node, createAgent uses the o200k
 * counter (`@keel/agent/node`) instead.
 */
import type { Message, RequestTokenCount, TokenCounter, ToolSchema } from "@keel/kernel";

/** Tokens an image or a file counts for in an estimate (a 1024×1024 image is about 1,600). */
const MEDIA_TOKENS = 1_600;

const perMessage = new WeakMap<object, { tokens: number; bound: number }>();

function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdbff ? (i++, 4) : 3;
  }
  return n;
}

function ofText(text: string): { tokens: number; bound: number } {
  return { tokens: Math.ceil(text.length / 4), bound: utf8Length(text) };
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
    const system = ofText(request.system);
    const tools = ofText(request.tools.length ? JSON.stringify(request.tools) : "");
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
