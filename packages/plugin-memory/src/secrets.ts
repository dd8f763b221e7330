/**
 * Memory's view of the shared scanner (@keel/secrets): the kinds of secret in a text, and
 * whether a redacted text is nothing but its secret. The store redacts every text it writes.
 */
import { redactSecrets as redactShared, scanSecrets } from "@keel/secrets";

/** Secret kinds found in `text` (empty when none). */
export function findSecrets(text: string): string[] {
  return [...new Set(scanSecrets(text).map((f) => f.kind))];
}

/** True when `text` holds secret-like content. */
export function looksSecret(text: string): boolean {
  return scanSecrets(text).length > 0;
}

/** `text` with every secret replaced by `[REDACTED:<kind>]`, and the kinds found. */
export function redactSecrets(text: string): { text: string; kinds: string[] } {
  const r = redactShared(text);
  return { text: r.text, kinds: [...new Set(r.findings.map((f) => f.kind))] };
}

/** True when nothing but placeholders, labels and punctuation is left after redaction. */
export function onlySecret(redacted: string): boolean {
  const rest = redacted
    .replace(/\[REDACTED:[a-z0-9_]+\]/g, " ")
    .replace(
      /\b(?:my|the|is|was|password|passwd|pwd|token|api|key|secret|access|auth|bearer|pin|for|remember|that|this|it|here|use|and|with|aws|github|slack|openai|anthropic)\b/gi,
      " ",
    );
  return !/[\p{L}\p{N}]{3,}/u.test(rest);
}
