import { createHash } from "node:crypto";
import type { WireErrorKind, WireReply, WireUsage } from "./types.ts";

/** A rendered stream: content frames first, then the frames that finish it. */
export interface RenderedStream {
  frames: string[];
  /** Index of the first finishing frame (what `truncate` leaves out). */
  finishAt: number;
  /** The in-band error frame(s) for `error_event`. */
  errorFrames(kind: WireErrorKind, afterFrames: number, responsesFailed: boolean): string[];
}

/** An HTTP error body and status in a provider's shape. */
export interface RenderedError {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** One SSE event; `event` omitted gives a data-only frame (Chat Completions). */
export function sse(data: unknown, event?: string): string {
  const json = typeof data === "string" ? data : JSON.stringify(data);
  return event ? `event: ${event}\ndata: ${json}\n\n` : `data: ${json}\n\n`;
}

/** `text` cut into `n` pieces of nearly equal length (by code point). Contract: pieces join to `text`; never empty pieces. */
export function split(text: string, n: number): string[] {
  const chars = Array.from(text);
  const parts = Math.max(1, Math.min(Math.floor(n), chars.length));
  if (!chars.length) return [];
  const out: string[] = [];
  for (let i = 0; i < parts; i++)
    out.push(
      chars.slice(Math.floor((i * chars.length) / parts), Math.floor(((i + 1) * chars.length) / parts)).join(""),
    );
  return out;
}

/**
 * `text` cut into about `n` pieces by UTF-16 unit, and also after every high surrogate, so a
 * surrogate pair always straddles two pieces. Contract: pieces join to `text`; never empty pieces.
 */
export function splitUnits(text: string, n: number): string[] {
  if (!text.length) return [];
  const cuts = new Set<number>();
  const parts = Math.max(1, Math.min(Math.floor(n), text.length));
  for (let i = 1; i < parts; i++) cuts.add(Math.floor((i * text.length) / parts));
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) cuts.add(i + 1);
  }
  const at = [0, ...[...cuts].filter((c) => c > 0 && c < text.length).sort((a, b) => a - b), text.length];
  return at.slice(1).map((end, i) => text.slice(at[i], end));
}

/** The deltas of one streamed text of `reply`: by code point, or straddling pairs with `splitPairs`. */
export function pieces(reply: { splitPairs?: boolean }, text: string, n: number): string[] {
  return reply.splitPairs ? splitUnits(text, n) : split(text, n);
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
let counter = 0;

/** A fresh id with a provider-looking prefix (deterministic per process). */
export function makeId(prefix: string, length = 24): string {
  let n = ++counter * 2654435761;
  let s = "";
  for (let i = 0; i < length; i++) {
    s += ALPHABET[n % ALPHABET.length];
    n = Math.floor(n / ALPHABET.length) + (i + 1) * 7919 + counter;
  }
  return `${prefix}${s}`;
}

/** Tokens by the usual rough rule (chars / 4). */
export function roughTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** Usage of a reply, with defaults estimated from the request body and the answer. */
export function usageOf(reply: WireReply, body: unknown): Required<WireUsage> {
  const u = reply.usage ?? {};
  const answer = (reply.text ?? "") + (reply.thinking?.text ?? "") + (reply.toolCalls ?? []).map(argsText).join("");
  return {
    input: u.input ?? roughTokens(JSON.stringify(body ?? "")),
    output: u.output ?? Math.max(1, roughTokens(answer)),
    cacheRead: u.cacheRead ?? 0,
    cacheWrite: u.cacheWrite ?? 0,
    cacheWrite1h: u.cacheWrite1h ?? 0,
    reasoning: u.reasoning ?? (reply.thinking ? roughTokens(reply.thinking.text) : 0),
  };
}

/** The arguments text of a scripted tool call. */
export function argsText(call: { args?: unknown; argsJson?: string }): string {
  return call.argsJson ?? JSON.stringify(call.args ?? {});
}

/** Default text chunk count. */
export function textChunks(reply: WireReply): number {
  return reply.chunks ?? 3;
}

/** Where a body breaks JSON's Unicode rules, as a strict parser (serde_json, yyjson) reports it. */
export interface UnicodeFault {
  /** `no_low`: a high surrogate without its low half; `lone_low`: a low one without its high half; `utf8`: bytes that are not UTF-8. */
  kind: "no_low" | "lone_low" | "utf8";
  /** 0-based character offset of the fault; `line`/`column` are 1-based. */
  char: number;
  line: number;
  column: number;
}

const hex4 = (s: string, i: number) =>
  /^[0-9a-fA-F]{4}$/.test(s.slice(i, i + 4)) ? parseInt(s.slice(i, i + 4), 16) : -1;

/**
 * The first lone surrogate in a JSON body — an escaped `\ud83d` without its pair, or a raw
 * one — or the first byte sequence that is not UTF-8 (how a raw lone surrogate arrives).
 * Contract: undefined for a body a strict parser accepts on these grounds.
 */
export function unicodeFault(bytes: Buffer, text: string): UnicodeFault | undefined {
  const at = (kind: UnicodeFault["kind"], char: number): UnicodeFault => {
    const before = text.slice(0, char);
    const line = before.split("\n").length;
    return { kind, char, line, column: char - before.lastIndexOf("\n") };
  };
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return at("utf8", Math.max(0, text.indexOf("\uFFFD")));
  }
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
      else return at("no_low", i);
      continue;
    }
    if (c >= 0xdc00 && c <= 0xdfff) return at("lone_low", i);
    if (c !== 92) continue;
    if (text[i + 1] !== "u") {
      i++; // an escaped character: `\\` must not start an escape of its own
      continue;
    }
    const v = hex4(text, i + 2);
    if (v >= 0xd800 && v <= 0xdbff) {
      const w = text[i + 6] === "\\" && text[i + 7] === "u" ? hex4(text, i + 8) : -1;
      if (w < 0xdc00 || w > 0xdfff) return at("no_low", i);
      i += 11;
    } else if (v >= 0xdc00 && v <= 0xdfff) return at("lone_low", i);
    else i += 5;
  }
  return undefined;
}

/** Prefix of the opaque blobs this server signs (thinking signatures, encrypted reasoning). */
export const SIGNED = "wsig1";

/**
 * An opaque blob bound to `text`, as a provider's signature is: the server checks that a
 * reasoning block sent back with one of these carries exactly the text it was issued for.
 */
export function signText(text: string): string {
  return `${SIGNED}${createHash("sha256").update(text).digest("base64url").slice(0, 32)}`;
}

/** False when `blob` is one of this server's and does not belong to `text` (edited reasoning). */
export function signatureFits(blob: unknown, text: string): boolean {
  return typeof blob !== "string" || !blob.startsWith(SIGNED) || blob === signText(text);
}
