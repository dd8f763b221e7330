/** Prompt-cache tier choice (MECHANICS: none below 1,024 input tokens; 1 h when reuse is expected after 300 s). */
import type { CacheTier, ModelRequest } from "@keel/kernel";
import { fileTokens } from "@keel/kernel";

/** Smallest prompt that gets a cache breakpoint. */
export const MIN_CACHE_TOKENS = 1024;

/** A cheap input-token estimate (chars / 4) of a whole request. */
export function estimateRequestTokens(request: ModelRequest): number {
  let chars = request.system.length;
  for (const t of request.tools) chars += t.name.length + t.description.length + JSON.stringify(t.parameters).length;
  for (const m of request.messages) {
    for (const b of m.content) {
      if (b.type === "text") chars += b.text.length;
      else if (b.type === "thinking") chars += b.text.length;
      else if (b.type === "tool_call") chars += b.name.length + JSON.stringify(b.args ?? {}).length;
      else if (b.type === "image") chars += 6000;
      else if (b.type === "file") chars += 4 * fileTokens(b.data);
    }
  }
  return Math.ceil(chars / 4);
}

/**
 * The tier for a request. Contract: `none` below MIN_CACHE_TOKENS or when asked; else the
 * request's `options.cache`; else 1 h when `expectedReuseMs` exceeds 300 s, otherwise 5 min.
 */
export function chooseCacheTier(request: ModelRequest, expectedReuseMs = 0, minTokens = MIN_CACHE_TOKENS): CacheTier {
  const asked = request.options.cache;
  if (asked === "none") return "none";
  if (estimateRequestTokens(request) < minTokens) return "none";
  if (asked) return asked;
  return expectedReuseMs > 300_000 ? "1h" : "5m";
}
