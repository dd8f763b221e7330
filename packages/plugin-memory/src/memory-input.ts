/** What every MemoryStore does to an input before it writes it, and the ranking constants they share. */
import { KeelError } from "@keel/kernel";
import { redact, redactValue } from "@keel/secrets";
import type { MemoryInput, MemoryScope, SearchQuery } from "./types.ts";

/** Characters of the previous memory in the same session indexed with a memory (document expansion). */
export const CONTEXT_CHARS = 400;
/** Most full-text matches scored by one search (the rarest terms are kept within it). */
export const SCORE_BUDGET = 800;
/** Writes after which cached term document counts are dropped. */
export const DF_REFRESH_WRITES = 2000;

/** Beyond any date a JS Date holds (ms). */
const TIME_LIMIT = 8.64e15;

/**
 * A search's date ranges as [start, end) pairs both stores bind the same way: a range with NaN
 * is dropped, ±Infinity held at the Date limits. Null when the query asks for no range (an
 * empty list when every range it gave was dropped: nothing then matches).
 */
export function searchRanges(within: SearchQuery["within"]): Array<[number, number]> | null {
  if (!within?.length) return null;
  const clamp = (t: number) => Math.min(TIME_LIMIT, Math.max(-TIME_LIMIT, t));
  return within
    .filter((r) => !Number.isNaN(r.start) && !Number.isNaN(r.end))
    .map((r) => [Math.floor(clamp(r.start)), Math.ceil(clamp(r.end))]);
}

const SCOPES = new Set<MemoryScope>(["user", "project", "global"]);

function unit(name: string, v: number | undefined, dflt: number): number {
  const x = v ?? dflt;
  if (typeof x !== "number" || !Number.isFinite(x) || x < 0 || x > 1)
    throw new KeelError("KEEL_MEMORY_INPUT_INVALID", `${name} must be a number in [0, 1], got ${String(x)}.`, {
      path: name,
    });
  return x;
}

/** A validated input with every text redacted. */
export interface CheckedInput {
  namespace: string;
  scope: MemoryScope;
  content: string;
  key: string | null;
  category: string | null;
  importance: number;
  confidence: number;
  at: number;
}

/**
 * Validate and redact an input at the one write path of a store, so no caller (tool,
 * extractor, host) can store a secret. Contract: throws KEEL_MEMORY_INPUT_INVALID at the
 * offending field.
 */
export function checkInput(input: MemoryInput): CheckedInput {
  const content = typeof input.content === "string" ? redact(input.content.trim()) : "";
  if (!content) throw new KeelError("KEEL_MEMORY_INPUT_INVALID", "content is empty.", { path: "content" });
  if (typeof input.namespace !== "string" || !input.namespace)
    throw new KeelError("KEEL_MEMORY_INPUT_INVALID", "namespace is empty.", { path: "namespace" });
  const scope = input.scope ?? "user";
  if (!SCOPES.has(scope))
    throw new KeelError(
      "KEEL_MEMORY_INPUT_INVALID",
      `scope must be user, project or global, got ${JSON.stringify(scope)}.`,
      { path: "scope" },
    );
  return {
    namespace: input.namespace,
    scope,
    content,
    importance: unit("importance", input.importance, 0.5),
    confidence: unit("confidence", input.confidence, 0.8),
    key: input.key?.trim() ? redactValue(input.key.trim()) : null,
    category: input.category?.trim() ? redactValue(input.category.trim()) : null,
    at: input.at ?? Date.now(),
  };
}
