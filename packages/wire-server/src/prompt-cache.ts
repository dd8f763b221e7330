/**
 * A model of Anthropic's prompt cache: prefixes end at block boundaries (tools, then system, then
 * message content); a breakpoint (`cache_control`) writes its prefix for 5 min or 1 h; a request
 * reads the longest cached prefix found within 20 blocks before one of its breakpoints. Prefixes
 * under 1,024 tokens (chars / 4) are not cached.
 */
import { createHash } from "node:crypto";

const LOOKBACK = 20;
const MIN_TOKENS = 1024;

/** Cache reads and writes a request causes, in tokens. */
export interface CacheUsage {
  total: number;
  read: number;
  write5m: number;
  write1h: number;
}

/** Cached prefix hash → expiry (epoch ms). */
export type CacheStore = Map<string, number>;

function strip(block: unknown): unknown {
  if (!block || typeof block !== "object") return block;
  const { cache_control: _, ...rest } = block as Record<string, unknown>;
  return rest;
}

/** Apply one request to the cache. Contract: updates `store`; returns what was read and written. */
export function applyPromptCache(store: CacheStore, body: any, now = Date.now()): CacheUsage {
  const blocks: unknown[] = [...(body?.tools ?? [])];
  if (Array.isArray(body?.system)) blocks.push(...body.system);
  else if (typeof body?.system === "string") blocks.push({ type: "text", text: body.system });
  for (const m of body?.messages ?? []) {
    if (typeof m.content === "string") blocks.push({ role: m.role, type: "text", text: m.content });
    else for (const b of m.content ?? []) blocks.push({ role: m.role, ...(b as object) });
  }
  const hash = createHash("sha256");
  let chars = 0;
  const prefixes: { key: string; tokens: number; ttl?: string }[] = [];
  for (const b of blocks) {
    const text = JSON.stringify(strip(b));
    hash.update(text);
    chars += text.length;
    const cc = (b as { cache_control?: { ttl?: string } } | null)?.cache_control;
    prefixes.push({
      key: hash.copy().digest("hex"),
      tokens: Math.ceil(chars / 4),
      ...(cc ? { ttl: cc.ttl ?? "5m" } : {}),
    });
  }
  const total = Math.ceil(chars / 4);
  let read = 0;
  for (let i = 0; i < prefixes.length; i++) {
    if (!prefixes[i]!.ttl) continue;
    for (let j = i; j >= Math.max(0, i - LOOKBACK); j--) {
      const p = prefixes[j]!;
      if ((store.get(p.key) ?? 0) > now) {
        read = Math.max(read, p.tokens);
        break;
      }
    }
  }
  let write5m = 0;
  let write1h = 0;
  let written = read;
  for (const p of prefixes) {
    if (!p.ttl || p.tokens < MIN_TOKENS) continue;
    const ms = p.ttl === "1h" ? 3_600_000 : 300_000;
    store.set(p.key, Math.max(store.get(p.key) ?? 0, now + ms));
    if (p.tokens > written) {
      if (p.ttl === "1h") write1h += p.tokens - written;
      else write5m += p.tokens - written;
      written = p.tokens;
    }
  }
  return { total, read, write5m, write1h };
}
