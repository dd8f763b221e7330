/** The scanner: secretlint's rules, the gitleaks-derived rules, then entropy checks; spans merged. */
import { storedCredentialSpans } from "./connection.ts";
import { isHighEntropyToken } from "./entropy.ts";
import { isPlaceholder, PATTERN_RULES } from "./rules.ts";
import { secretlintFindings } from "./secretlint.ts";
import type { Redaction, SecretFinding } from "./types.ts";

/** Words that make the token after them a likely secret (lower case, split on case and punctuation). */
const KEY_WORDS = new Set([
  "secret",
  "secrets",
  "key",
  "keys",
  "apikey",
  "token",
  "tokens",
  "password",
  "passwords",
  "passwd",
  "pwd",
  "pass",
  "passphrase",
  "credential",
  "credentials",
  "cred",
  "creds",
  "auth",
  "bearer",
  "private",
  "signature",
  "sig",
  "cookie",
  "pat",
]);

/** Last words of a field that names an identifier of key material, not the material (`keyId`, `secretName`, `tokenArn`). */
const ID_SUFFIXES = new Set([
  "id",
  "ids",
  "name",
  "names",
  "arn",
  "fingerprint",
  "hash",
  "type",
  "kind",
  "url",
  "uri",
  "path",
]);

/** Words that make `key` or `token` a lookup key or a cursor (`idempotencyKey`, `cacheKey`, `publicKey`, `nextPageToken`). */
const NOT_SECRET: Record<string, ReadonlySet<string>> = {
  key: new Set([
    "idempotency",
    "cache",
    "public",
    "primary",
    "foreign",
    "partition",
    "sort",
    "routing",
    "dedup",
    "dedupe",
    "object",
    "row",
    "lookup",
  ]),
  token: new Set(["page", "next", "continuation", "cursor", "sync", "max", "count"]),
};

/**
 * Candidate tokens for the entropy checks: base64/base64url/hex-like runs, percent-escapes included
 * (a key in a URL or form body). `=` ends a token (base64 padding is kept with it): in
 * `?api_key=…` or `TOKEN=…` the name is then before the token, where the key words are looked for.
 */
const TOKEN = /(?:[A-Za-z0-9+/_\-.~]|%[0-9A-Fa-f]{2}){16,}={0,2}/g;
/** Characters before a token searched for a key word. */
const WINDOW = 48;
/** Cheap pre-check: no 12-character token run and no key word means no finding. */
const MAYBE = /[A-Za-z0-9+/=_.~-]{12}|pass|pwd|secret|token|key|pin|:\/\/|BEGIN|bearer|sig|auth/i;
const PLACEHOLDER = /\[REDACTED:[a-z0-9_]+\]/g;

function wordsBefore(text: string, at: number): string[] {
  const from = Math.max(0, at - WINDOW);
  let window = text.slice(from, at);
  const nl = window.lastIndexOf("\n");
  if (nl >= 0) window = window.slice(nl + 1);
  return window
    .replace(/([a-z])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z]+/)
    .filter(Boolean)
    .slice(-4);
}

/** Words of a field name (`apiKey`, `client_secret`, `x-auth-token`), lower case. */
function fieldWords(field: string): string[] {
  return field
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z]+/)
    .filter(Boolean);
}

/**
 * True when a field's name marks its value as key material (`password`, `apiKey`, `DB_PASS`,
 * `authorization`); not when it names an identifier of it (`keyId`, `secretName`) or a lookup key
 * or cursor (`idempotencyKey`, `cacheKey`, `publicKey`, `nextPageToken`).
 */
export function isKeyField(field: string): boolean {
  const words = fieldWords(field);
  if (words.length > 1 && ID_SUFFIXES.has(words[words.length - 1]!)) return false;
  return words.some((w) => {
    if (w === "authorization") return true;
    if (!KEY_WORDS.has(w)) return false;
    const kind = w === "keys" ? "key" : w === "tokens" ? "token" : w;
    return !NOT_SECRET[kind] || !words.some((q) => NOT_SECRET[kind]!.has(q));
  });
}

/**
 * How a text is read. `prose` (default): what a person, a model or a tool wrote; a random-looking
 * token alone is taken for a key. `value`: one value of structured data (a tool argument, a name,
 * a key, a payload field): a single random-looking token is an identifier unless `field` or a
 * word before it names a key; a value with white space in it is read as prose.
 */
export interface ScanOptions {
  as?: "prose" | "value";
  /** The name of the field the value sits in (its JSON key). */
  field?: string;
}

function entropyFindings(text: string, options: ScanOptions | undefined): SecretFinding[] {
  const out: SecretFinding[] = [];
  // A value that is one token (no white space) is an identifier unless its field or a key word before it says otherwise.
  const bare = options?.as !== "value" || /\s/.test(text);
  const fieldKey = options?.field !== undefined && isKeyField(options.field);
  TOKEN.lastIndex = 0;
  for (const m of text.matchAll(TOKEN)) {
    let token = m[0].replace(/[.\-~]+$/, "");
    const start = m.index;
    if (token.length < 16) continue;
    // Inline data (data:…;base64,), SRI hashes (sha512-…) and SSH public keys are not secrets.
    const before = text.slice(Math.max(0, start - 24), start);
    if (
      /base64,$/.test(before) ||
      /(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-nistp\d+)\s+$/.test(before) ||
      /^sha(?:1|256|384|512)-/.test(token)
    )
      continue;
    token = token.replace(/^[.\-~/]+/, "");
    const s = start + (m[0].length - m[0].replace(/^[.\-~/]+/, "").length);
    const nearKey = fieldKey || wordsBefore(text, s).some((w) => KEY_WORDS.has(w));
    if (!nearKey && !bare) continue;
    if (isHighEntropyToken(token.includes("%") ? percentDecoded(token) : token, nearKey))
      out.push({
        kind: "high_entropy",
        rule: nearKey ? "entropy:near-key" : "entropy",
        start: s,
        end: s + token.length,
      });
  }
  return out;
}

/** `token` with its %XX escapes decoded (as it is when a URL-encoded key is used); unchanged when it is not valid. */
function percentDecoded(token: string): string {
  try {
    return decodeURIComponent(token);
  } catch {
    return token;
  }
}

/** A `scheme://user:password@` finding whose password is a placeholder (`user:pass@example.com`). */
function placeholderUrl(text: string, f: SecretFinding): boolean {
  const m = /:\/\/[^\s:@/]*:([^\s@/]*)@/.exec(text.slice(f.start, f.end));
  return m !== null && isPlaceholder(m[1]!);
}

/** Each rule's pattern with match indices (`d`): where the captured secret is, not where its text first occurs in the match. */
const INDEXED = PATTERN_RULES.map((r) => ({
  rule: r,
  re: new RegExp(r.re.source, r.re.flags.includes("d") ? r.re.flags : `${r.re.flags}d`),
}));

function patternFindings(text: string): SecretFinding[] {
  const out: SecretFinding[] = [];
  for (const { rule: r, re } of INDEXED) {
    re.lastIndex = 0;
    for (const m of text.matchAll(re)) {
      const value = m[r.group];
      const at = m.indices?.[r.group];
      if (!value || !at || (r.accept && !r.accept(value))) continue;
      out.push({ kind: r.kind, rule: `keel:${r.id}`, start: at[0], end: at[1] });
    }
  }
  // Connection strings: `?password=`, `&sslpassword=`, libpq's `password='…'` (see connection.ts).
  for (const s of storedCredentialSpans(text))
    out.push({
      kind: s.where === "userinfo" ? "url_password" : "password",
      rule: `keel:connection-${s.where}`,
      start: s.start,
      end: s.end,
    });
  return out;
}

/** Widen a span so it never splits a surrogate pair. */
function snap(text: string, f: SecretFinding): SecretFinding {
  let { start, end } = f;
  start = Math.max(0, start);
  end = Math.min(text.length, end);
  if (start > 0 && /[\uDC00-\uDFFF]/.test(text[start] ?? "") && /[\uD800-\uDBFF]/.test(text[start - 1] ?? "")) start--;
  if (end < text.length && /[\uDC00-\uDFFF]/.test(text[end] ?? "") && /[\uD800-\uDBFF]/.test(text[end - 1] ?? ""))
    end++;
  return { ...f, start, end };
}

/** Spans inside an existing `[REDACTED:…]` placeholder are not findings (redaction is idempotent). */
function placeholders(text: string): Array<[number, number]> {
  PLACEHOLDER.lastIndex = 0;
  return [...text.matchAll(PLACEHOLDER)].map((m) => [m.index, m.index + m[0].length]);
}

/**
 * Every secret in `text`, merged into non-overlapping spans, in text order.
 * Contract: deterministic; never throws; spans never split a surrogate pair; a span inside a
 * `[REDACTED:…]` placeholder is not reported, so scanning redacted text finds nothing new.
 */
export function scanSecrets(text: string, options?: ScanOptions): SecretFinding[] {
  if (
    typeof text !== "string" ||
    text.length < 8 ||
    (!MAYBE.test(text) && !(options?.field && isKeyField(options.field)))
  )
    return [];
  const held = placeholders(text);
  const raw = [...secretlintFindings(text), ...patternFindings(text), ...entropyFindings(text, options)]
    .map((f) => snap(text, f))
    .filter(
      (f) =>
        f.end > f.start &&
        !held.some(([a, b]) => f.start >= a && f.end <= b) &&
        !(f.rule === "secretlint:basicauth" && placeholderUrl(text, f)),
    );
  raw.sort((a, b) => a.start - b.start || b.end - a.end);
  const merged: SecretFinding[] = [];
  for (const f of raw) {
    const last = merged[merged.length - 1];
    if (last && f.start < last.end) {
      if (f.end > last.end) last.end = f.end;
      if (last.kind === "high_entropy" && f.kind !== "high_entropy") (last.kind = f.kind), (last.rule = f.rule);
      continue;
    }
    merged.push({ ...f });
  }
  return merged;
}

/** True when `text` holds a secret. Contract: same as `scanSecrets(text).length > 0`. */
export function containsSecret(text: string): boolean {
  return scanSecrets(text).length > 0;
}

/**
 * `text` with each secret replaced by `[REDACTED:<kind>]`.
 * Contract: idempotent (`redactSecrets(redactSecrets(t).text).findings` is empty); the
 * output never contains a finding's text; text outside findings is kept as it is.
 */
export function redactSecrets(text: string, options?: ScanOptions): Redaction {
  if (typeof text !== "string") return { text: String(text), findings: [] };
  const findings = scanSecrets(text, options);
  if (!findings.length) return { text, findings };
  let out = "";
  let at = 0;
  for (const f of findings) {
    out += `${text.slice(at, f.start)}[REDACTED:${f.kind}]`;
    at = f.end;
  }
  return { text: out + text.slice(at), findings };
}

/** `text` redacted (the text only). Contract: `redactSecrets(text).text`. */
export function redact(text: string): string {
  return redactSecrets(text).text;
}

/**
 * One value of structured data redacted: a known secret format, or a random-looking token in a
 * key-named field (`password`, `apiKey`) or after a key word, is replaced; an identifier (a call
 * id, a session or job id, a tool or skill name, a memory key) is kept as it is.
 * Contract: `redactSecrets(value, { as: "value", field }).text`.
 */
export function redactValue(value: string, field?: string): string {
  return redactSecrets(value, { as: "value", ...(field !== undefined ? { field } : {}) }).text;
}

const MAX_DATA_DEPTH = 64;

/**
 * A deep copy of structured data (tool arguments, a plugin's data, a job payload) with every
 * string redacted as a value of its field (redactValue; an array's items take the array's
 * field). Keys are kept.
 * Contract: never mutates `value` and never throws: a getter or toJSON that throws stores
 * "[unreadable]", a cycle "[Circular]", a value nested deeper than 64 levels
 * "[REDACTED:too_deep]"; other objects are copied as JSON would see them (toJSON, else their
 * own enumerable fields).
 */
export function redactData(value: unknown, field?: string): unknown {
  return dataCopy(value, field, 0, new Set());
}

/** Fields holding the value of a `{ name, value }` entry (an env list, a secrets API). */
const VALUE_FIELDS = new Set(["value", "Value", "val"]);

/** The key-named `name` (or `key`) of a `{ name, value }` entry, which names its value; undefined otherwise. */
function siblingName(obj: Record<string, unknown>): string | undefined {
  try {
    for (const k of ["name", "Name", "key", "Key"]) {
      if (!Object.hasOwn(obj, k)) continue;
      const n = obj[k];
      if (typeof n === "string" && isKeyField(n)) return n;
    }
  } catch {
    // A getter that throws: its own field is stored as "[unreadable]"; it names nothing.
  }
  return undefined;
}

function dataCopy(value: unknown, field: string | undefined, depth: number, path: Set<object>): unknown {
  if (typeof value === "string") return redactValue(value, field);
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DATA_DEPTH) return "[REDACTED:too_deep]";
  if (path.has(value)) return "[Circular]";
  path.add(value);
  try {
    if (Array.isArray(value)) {
      // A [name, value] pair (a header list): a key-named first item names the second.
      const named = value.length === 2 && typeof value[0] === "string" && isKeyField(value[0]) ? value[0] : undefined;
      return value.map((v, i) => dataCopy(v, named !== undefined && i === 1 ? named : field, depth + 1, path));
    }
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") return dataCopy(toJSON.call(value), field, depth + 1, path);
    const out: Record<string, unknown> = {};
    const named = siblingName(value as Record<string, unknown>);
    for (const k of Object.keys(value)) {
      try {
        out[k] = dataCopy(
          (value as Record<string, unknown>)[k],
          named !== undefined && VALUE_FIELDS.has(k) ? named : k,
          depth + 1,
          path,
        );
      } catch {
        out[k] = "[unreadable]";
      }
    }
    return out;
  } catch {
    return "[unreadable]";
  } finally {
    path.delete(value);
  }
}

/**
 * A deep copy of a JSON-like value with every string redacted (object keys kept).
 * Contract: never mutates `value` (frozen input is fine); cycles and non-plain objects are
 * kept by reference; depth is capped at 64 (deeper values become "[REDACTED:too_deep]").
 */
export function redactDeep<T>(value: T, depth = 0): T {
  if (typeof value === "string") return redact(value) as T;
  if (value === null || typeof value !== "object") return value;
  if (depth >= 64) return "[REDACTED:too_deep]" as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1)) as T;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = redactDeep(v, depth + 1);
  return out as T;
}
