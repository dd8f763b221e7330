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
  for (let i = 0; i < parts; i++) out.push(chars.slice(Math.floor((i * chars.length) / parts), Math.floor(((i + 1) * chars.length) / parts)).join(""));
  return out;
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
