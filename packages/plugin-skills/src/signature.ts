/** The task-signature bucketer of auto-drafting, and the guard that keeps a signature inside its folder. */
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { redact } from "@keel/secrets";
import { terms } from "@keel/text/retrieval";
import { SIGNATURE_TOKENS } from "./text.ts";

/**
 * Task signature of a request: secrets redacted (@keel/secrets), the redaction placeholders
 * dropped, the words of @keel/text's tokenizer (SIGNATURE_TOKENS: lowercase, no stopwords,
 * none under 2 characters, unstemmed), dedupe, take the 3 longest (ties: first seen), sort,
 * join with "-".
 * Contract: deterministic; "" when nothing is left; never holds a piece of a secret (the
 * longest tokens of a request are often its key).
 */
export function taskSignature(text: string): string {
  const clean = redact(text).replace(/\[REDACTED:[a-z0-9_]+\]/g, " ");
  const seen = terms(clean, SIGNATURE_TOKENS);
  const longest = seen
    .map((t, i) => ({ t, i }))
    .sort((a, b) => b.t.length - a.t.length || a.i - b.i)
    .slice(0, 3)
    .map((x) => x.t);
  return longest.sort().join("-");
}

/** A signature reduced to a safe folder name: [a-z0-9-], no leading/trailing "-", at most 96 chars; "" if nothing is left. */
export function sanitizeSignature(signature: string): string {
  return signature
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/-+/g, "-")
    .replace(/^-|-$/g, "")
    .slice(0, 96)
    .replace(/-$/, "");
}

/**
 * The folder of a signature's draft under `autoDir`.
 * Contract: returns undefined unless the sanitised signature is non-empty and the resolved
 * path is exactly one level below `autoDir`.
 */
export function draftDir(autoDir: string, signature: string): string | undefined {
  const safe = sanitizeSignature(signature);
  if (!safe || safe === "." || safe === "..") return undefined;
  const base = resolve(autoDir);
  const target = resolve(join(base, safe));
  const rel = relative(base, target);
  if (!rel || isAbsolute(rel) || rel.includes(sep) || rel.startsWith("..")) return undefined;
  return target;
}
