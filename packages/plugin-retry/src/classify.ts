/**
 * Failure classes of a tool result, from the kernel's own error codes first, then from the
 * words tools and servers commonly use. Pure and cheap: only the first 2,000 code points of a
 * result are read.
 */
import { codePointSlice } from "@keel/kernel";

/** Why a tool call failed, as the retry controller counts it. */
export type FailureClass = "invalid_arguments" | "not_found" | "permission_denied" | "timeout" | "internal" | "output_truncated";

export const FAILURE_CLASSES: readonly FailureClass[] = ["invalid_arguments", "not_found", "permission_denied", "timeout", "internal", "output_truncated"];

/** Pioneer's retry budget per class (MECHANICS "Retry controller"): retries allowed after the first failure. */
export const DEFAULT_BUDGETS: Readonly<Record<FailureClass, number>> = Object.freeze({ invalid_arguments: 3, not_found: 2, permission_denied: 1, timeout: 2, internal: 0, output_truncated: 3 });

const RULES: ReadonlyArray<readonly [FailureClass, RegExp]> = [
  ["timeout", /\bKEEL_TOOL_TIMEOUT\b|\btimed? ?out\b|\bETIMEDOUT\b|deadline exceeded|\b504\b/i],
  ["invalid_arguments", /\bKEEL_TOOL_ARGS_INVALID\b|invalid (?:argument|parameter|input|value|option)s?|missing (?:required )?(?:argument|parameter|field|property)|is required\b|unknown (?:argument|parameter|option|flag)|unexpected (?:argument|keyword|token)|validation (?:error|failed)|schema|expected \w+, (?:got|received)|\bEINVAL\b|\b400 Bad Request\b|\b422\b|usage:/i],
  ["permission_denied", /\bKEEL_TOOL_DENIED\b|permission denied|\bEACCES\b|\bEPERM\b|forbidden|\b403\b|unauthori[sz]ed|\b401\b|not (?:allowed|permitted)|access denied|read-only file ?system|\bEROFS\b/i],
  ["not_found", /\bKEEL_TOOL_UNKNOWN\b|not found|\bENOENT\b|no such (?:file|directory|table|column|key|host)|does not exist|doesn't exist|\b404\b|unknown (?:file|path|id|tool|command)|command not found/i],
  ["output_truncated", /characters cut from this tool result|output (?:was )?truncated|\btruncated\b|too (?:large|long|many results)|exceeds? (?:the )?(?:limit|maximum)/i],
];

/**
 * The class of a failed result's text. Contract: the first matching rule wins (timeout, invalid
 * arguments, permission, not found, truncated); anything else is `internal`.
 */
export function classifyFailure(text: string): FailureClass {
  const head = codePointSlice(text, 0, 2_000);
  for (const [cls, re] of RULES) if (re.test(head)) return cls;
  return "internal";
}

/**
 * Arguments in one canonical form: keys sorted, strings trimmed with runs of whitespace as one
 * space, numbers as JSON. Contract: equal for calls that differ only in key order or spacing;
 * at most 4,000 code points (a longer form is cut and tagged with its length).
 */
export function normalizeArgs(args: unknown): string {
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return v.trim().replace(/\s+/g, " ");
    if (v === null || typeof v !== "object") return typeof v === "number" && !Number.isFinite(v) ? String(v) : v;
    if (seen.has(v) || depth > 20) return "[…]";
    seen.add(v);
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = walk((v as Record<string, unknown>)[k], depth + 1);
    return out;
  };
  let json: string;
  try {
    json = JSON.stringify(walk(args, 0)) ?? "undefined";
  } catch {
    json = "[unreadable]";
  }
  const cut = codePointSlice(json, 0, 4_000);
  return cut.length < json.length ? `${cut}…(${json.length})` : json;
}
