/**
 * Failure classes of a tool result, from the kernel's own error codes first, then from the
 * words tools and servers commonly use. Pure and cheap: only the first 2,000 code points of a
 * result are read.
 */
import { createHash, randomUUID } from "node:crypto";
import { canonicalJson } from "@keel/kernel";
import { codePointSlice } from "@keel/text";

/** Why a tool call failed, as the retry controller counts it. */
export type FailureClass =
  | "invalid_arguments"
  | "not_found"
  | "permission_denied"
  | "timeout"
  | "internal"
  | "output_truncated";

export const FAILURE_CLASSES: readonly FailureClass[] = [
  "invalid_arguments",
  "not_found",
  "permission_denied",
  "timeout",
  "internal",
  "output_truncated",
];

/** Pioneer's retry budget per class (MECHANICS "Retry controller"): retries allowed after the first failure. */
export const DEFAULT_BUDGETS: Readonly<Record<FailureClass, number>> = Object.freeze({
  invalid_arguments: 3,
  not_found: 2,
  permission_denied: 1,
  timeout: 2,
  internal: 0,
  output_truncated: 3,
});

const RULES: ReadonlyArray<readonly [FailureClass, RegExp]> = [
  ["timeout", /\bKEEL_TOOL_TIMEOUT\b|\btimed? ?out\b|\bETIMEDOUT\b|deadline exceeded|\b504\b/i],
  [
    "invalid_arguments",
    /\bKEEL_TOOL_ARGS_INVALID\b|invalid (?:argument|parameter|input|value|option)s?|missing (?:required )?(?:argument|parameter|field|property)|is required\b|unknown (?:argument|parameter|option|flag)|unexpected (?:argument|keyword|token)|validation (?:error|failed)|schema|expected \w+, (?:got|received)|\bEINVAL\b|\b400 Bad Request\b|\b422\b|usage:/i,
  ],
  [
    "permission_denied",
    /\bKEEL_TOOL_DENIED\b|permission denied|\bEACCES\b|\bEPERM\b|forbidden|\b403\b|unauthori[sz]ed|\b401\b|not (?:allowed|permitted)|access denied|read-only file ?system|\bEROFS\b/i,
  ],
  [
    "not_found",
    /\bKEEL_TOOL_UNKNOWN\b|not found|\bENOENT\b|no such (?:file|directory|table|column|key|host)|does not exist|doesn't exist|\b404\b|unknown (?:file|path|id|tool|command)|command not found/i,
  ],
  [
    "output_truncated",
    /characters cut from this tool result|output (?:was )?truncated|\btruncated\b|too (?:large|long|many results)|exceeds? (?:the )?(?:limit|maximum)/i,
  ],
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
 * Arguments in one canonical form: object keys sorted; strings exactly as given (whitespace
 * can matter: indentation, YAML, an edit's old text). Contract: equal only for calls whose
 * arguments are equal up to key order; a long form is a head plus a hash of the whole;
 * arguments that cannot be read give a form no other call shares.
 */
export function normalizeArgs(args: unknown): string {
  let json: string;
  try {
    json = canonicalJson(args);
  } catch {
    // Unreadable (a throwing getter, a revoked Proxy) or absurdly deep: never "the same call" as another.
    return `[unreadable ${randomUUID()}]`;
  }
  const head = codePointSlice(json, 0, 1_000);
  return head.length < json.length ? `${head}…#${createHash("sha256").update(json).digest("hex").slice(0, 32)}` : json;
}
