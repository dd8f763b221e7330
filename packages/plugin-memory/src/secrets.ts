/**
 * Secret-like text: API keys, tokens, passwords, private keys, JWTs, connection strings
 * with credentials. Memory redacts them before storing and hides anything that still looks
 * secret when reading.
 */

interface Rule {
  kind: string;
  re: RegExp;
  /** Replace only this capture group (keeps the label, e.g. "password: "). */
  group?: number;
}

const RULES: readonly Rule[] = [
  { kind: "private_key", re: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g },
  { kind: "jwt", re: /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  { kind: "api_key", re: /\b(?:sk|pk|rk)-(?:[A-Za-z0-9_-]{2,}-)?[A-Za-z0-9_-]{16,}/g },
  { kind: "api_key", re: /\b(?:ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abprs]|npm)_[A-Za-z0-9_-]{16,}|\bxox[abprs]-[A-Za-z0-9-]{10,}/g },
  { kind: "api_key", re: /\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_-]{30,}/g },
  { kind: "connection_string", re: /\b[a-z][a-z0-9+.-]{1,20}:\/\/[^\s:@/]+:([^\s@/]+)@/gi, group: 1 },
  { kind: "bearer_token", re: /\bBearer\s+([A-Za-z0-9._~+/-]{16,}=*)/g, group: 1 },
  {
    kind: "password",
    re: /\b(?:password|passwd|pwd|passphrase|secret|api[_ -]?key|access[_ -]?token|auth[_ -]?token|token|pin)\b(?:\s+(?:is|was)\s+|\s*[:=]\s*)["'`]?([^\s"'`,;]{4,})/gi,
    group: 1,
  },
  { kind: "credential", re: /\b[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)\s*=\s*["']?([^\s"']{6,})/g, group: 1 },
];

const PLACEHOLDER = /\[REDACTED:[a-z_]+\]/;

/** Secret kinds found in `text` (empty when none). */
export function findSecrets(text: string): string[] {
  const kinds = new Set<string>();
  for (const r of RULES) {
    r.re.lastIndex = 0;
    for (const m of text.matchAll(r.re)) {
      const value = r.group ? m[r.group] : m[0];
      if (value && !PLACEHOLDER.test(value) && (r.kind !== "password" || plausibleSecret(value))) kinds.add(r.kind);
    }
  }
  return [...kinds];
}

/** A password-rule value that is a word of prose ("my password is long") is not a secret. */
function plausibleSecret(v: string): boolean {
  if (/^(?:is|was|for|the|a|an|and|to|of|that|this|here|there|changed|reset|expired|required|manager|protected)$/i.test(v)) return false;
  return /\d/.test(v) || /[^A-Za-z]/.test(v) || v.length >= 8;
}

/** True when `text` holds secret-like content. */
export function looksSecret(text: string): boolean {
  return findSecrets(text).length > 0;
}

/** `text` with every secret-like value replaced by `[REDACTED:<kind>]`, and the kinds found. */
export function redactSecrets(text: string): { text: string; kinds: string[] } {
  const kinds = new Set<string>();
  let out = text;
  for (const r of RULES) {
    r.re.lastIndex = 0;
    out = out.replace(r.re, (...args: unknown[]) => {
      const whole = args[0] as string;
      const value = r.group ? (args[r.group] as string | undefined) : whole;
      if (!value || PLACEHOLDER.test(value) || (r.kind === "password" && !plausibleSecret(value))) return whole;
      kinds.add(r.kind);
      return r.group ? whole.replace(value, `[REDACTED:${r.kind}]`) : `[REDACTED:${r.kind}]`;
    });
  }
  return { text: out, kinds: [...kinds] };
}

/** True when nothing but placeholders, labels and punctuation is left after redaction. */
export function onlySecret(redacted: string): boolean {
  const rest = redacted.replace(/\[REDACTED:[a-z_]+\]/g, " ").replace(/\b(?:my|the|is|was|password|passwd|pwd|token|api|key|secret|access|auth|bearer|pin|for|remember|that|this|it|here|use|and)\b/gi, " ");
  return !/[\p{L}\p{N}]{3,}/u.test(rest);
}
