/**
 * Credentials in connection strings: the one place that knows which parts of a database URL
 * (or a libpq `key=value` string) are secret. `maskCredentials` is what every message, log
 * line and status line that can hold a URL or a driver's error goes through; the scanner
 * (`scanSecrets`, `redact`) uses the same spans for text that is stored.
 */
import { isPlaceholder, plausiblePassword } from "./rules.ts";

/**
 * libpq's connection parameters that hold a secret: the ones `PQconndefaults()` marks with
 * the display character `*` (password, the client key's passphrase `sslpassword`, and since
 * PostgreSQL 18 `oauth_client_secret`). node-postgres reads every URL query parameter into its
 * config, so each of these is honoured in `postgres://…?key=value` as well.
 */
export const LIBPQ_SECRET_KEYS: readonly string[] = ["password", "sslpassword", "oauth_client_secret"];

/** Other drivers' and services' names for a secret parameter (`passwd`, `api_key`, `access_token`, SAS `sig`…). */
const SECRET_NAME = /passw|passphrase|secret|credential|(?:^|[_-])(?:pwd|token|sig|signature|api_?key|apikey|access_?key|private_?key)$/i;

/**
 * True when a connection or URL query parameter named `name` holds a secret: one of libpq's
 * (`LIBPQ_SECRET_KEYS`) or a name that says so (`passwd`, `db_password`, `api_key`, `token`,
 * `access_token`, `client_secret`, `sig`…). Contract: case-insensitive; paths (`sslkey`,
 * `sslcert`, `passfile`) and modes (`sslmode`, `require_auth`) are not secrets.
 */
export function isSecretParameter(name: string): boolean {
  const n = name.trim().toLowerCase();
  return LIBPQ_SECRET_KEYS.includes(n) || SECRET_NAME.test(n);
}

/**
 * A span of `text` that holds a credential. Contract: UTF-16 offsets, end exclusive; `where`
 * says what holds it: a URL's userinfo, a query (or form) parameter, or a keyword/value pair;
 * `key` is the parameter's name (decoded) for the last two.
 */
export interface CredentialSpan {
  start: number;
  end: number;
  where: "userinfo" | "query" | "keyword";
  key?: string;
}

const SCHEME = /[A-Za-z][A-Za-z0-9+.-]{0,30}:\/\//g;
/** `key = value` of a libpq keyword/value string; the value single-quoted (with \-escapes) or up to whitespace. */
const KEYWORD = /(?<![A-Za-z0-9_.?&%-])([A-Za-z_][A-Za-z0-9_]{0,63})[ \t]*=[ \t]*('(?:[^'\\\n]|\\.)*'?|[^\s'"`,;)\]}]+)/g;
/** `?key=value` / `&key=value` of a URL query or form body; the key may be %-encoded. */
const QUERY_PARAM = /[?&]([^=&#\s?]{1,96})=/g;

function decoded(s: string): string {
  try {
    return decodeURIComponent(s.replaceAll("+", " "));
  } catch {
    return s;
  }
}

/** The credential spans of the URL whose scheme ends at `schemeEnd` and which ends at `to`. */
function urlSpans(text: string, to: number, schemeEnd: number, spans: CredentialSpan[]): void {
  const rest = text.slice(schemeEnd, to);
  const q = rest.search(/[?#]/);
  const head = q < 0 ? rest : rest.slice(0, q);
  // The userinfo ends at the last "@" of the authority. A password the URL parser would split
  // (an unencoded "/", "?" or "#" in it) still counts: the last "@" before the query, else an
  // "@" after it when what precedes the "?" is not host:port.
  let at = head.lastIndexOf("@");
  if (at < 0 && q >= 0 && rest.lastIndexOf("@") > q && !/^[^:/@]*:\d*(?:\/|$)/.test(head) && head.includes(":")) at = rest.lastIndexOf("@");
  if (at >= 0) {
    const colon = rest.indexOf(":");
    if (colon >= 0 && colon < at) spans.push({ start: schemeEnd + colon + 1, end: schemeEnd + at, where: "userinfo" });
  }
  const queryAt = rest.indexOf("?", at < 0 ? 0 : at);
  if (queryAt < 0) return;
  const query = text.slice(0, to);
  QUERY_PARAM.lastIndex = schemeEnd + queryAt;
  for (let m = QUERY_PARAM.exec(query); m; m = QUERY_PARAM.exec(query)) {
    const valueStart = m.index + m[0].length;
    let valueEnd = valueStart;
    while (valueEnd < to && query[valueEnd] !== "&" && query[valueEnd] !== "#") valueEnd++;
    const key = decoded(m[1]!);
    if (isSecretParameter(key) && valueEnd > valueStart) spans.push({ start: valueStart, end: valueEnd, where: "query", key });
    QUERY_PARAM.lastIndex = valueEnd;
  }
}

/**
 * Every credential in `text`: the password of a `scheme://user:password@host` URL (any
 * scheme; a password with characters a URL parser would split on included), the value of a
 * secret query parameter (`?password=`, `&sslpassword=`, `%`-encoded names too), and the
 * value of a secret `key=value` of a libpq keyword/value string (`host=db password='a b'`).
 * `whole`: `text` is one setting (a URL's password or query value may hold spaces); else it is
 * free text, where a URL ends at whitespace. Contract: spans are sorted and do not overlap.
 */
export function credentialSpans(text: string, whole = false): CredentialSpan[] {
  const spans: CredentialSpan[] = [];
  if (typeof text !== "string" || !/[:=]/.test(text)) return spans;
  const urls: Array<[number, number]> = [];
  SCHEME.lastIndex = 0;
  for (let m = SCHEME.exec(text); m; m = SCHEME.exec(text)) {
    const start = m.index;
    const schemeEnd = start + m[0].length;
    let end = whole ? text.length : schemeEnd;
    if (!whole) while (end < text.length && !/\s/.test(text[end]!)) end++;
    urlSpans(text, end, schemeEnd, spans);
    urls.push([start, end]);
    SCHEME.lastIndex = end;
  }
  // Outside URLs: form bodies (`user=a&password=b`) and libpq keyword/value strings.
  const inUrl = (i: number) => urls.some(([a, b]) => i >= a && i < b);
  QUERY_PARAM.lastIndex = 0;
  for (let m = QUERY_PARAM.exec(text); m; m = QUERY_PARAM.exec(text)) {
    if (inUrl(m.index)) continue;
    const valueStart = m.index + m[0].length;
    let valueEnd = valueStart;
    while (valueEnd < text.length && !/[&#\s]/.test(text[valueEnd]!)) valueEnd++;
    const key = decoded(m[1]!);
    if (isSecretParameter(key) && valueEnd > valueStart) spans.push({ start: valueStart, end: valueEnd, where: "query", key });
    QUERY_PARAM.lastIndex = Math.max(valueEnd, m.index + 1);
  }
  KEYWORD.lastIndex = 0;
  for (const m of text.matchAll(KEYWORD)) {
    if (inUrl(m.index) || !isSecretParameter(m[1]!)) continue;
    const value = m[2]!;
    const start = m.index + m[0].length - value.length;
    spans.push({ start, end: start + value.length, where: "keyword", key: m[1]! });
  }
  spans.sort((a, b) => a.start - b.start || b.end - a.end);
  const merged: CredentialSpan[] = [];
  for (const s of spans) {
    const last = merged[merged.length - 1];
    if (last && s.start < last.end) last.end = Math.max(last.end, s.end);
    else merged.push({ ...s });
  }
  return merged;
}

/** What stands in for a masked credential. */
const MASK = "***";

/**
 * `text` with every credential it may carry replaced by `***`: the password of a
 * `scheme://user:password@host` URL, secret query parameters (`password`, `sslpassword`,
 * `oauth_client_secret` and names that say "secret", `?token=`, `&api_key=`…) and secret
 * values of a libpq keyword/value string (`password='…'`). Text that starts with a URL is one
 * setting (a connection URL, whose password may hold spaces); any other text is searched for
 * URLs and `key=value` pairs. Use it for every connection URL and driver error that is shown,
 * logged or put in an error message.
 * Contract: never throws; returns no character of a credential it found; everything else
 * (scheme, user, host, port, database, other parameters) is kept as it was; idempotent.
 */
export function maskCredentials(text: string): string {
  if (typeof text !== "string") return String(text);
  const whole = /^\s*[A-Za-z][A-Za-z0-9+.-]{0,30}:\/\//.test(text);
  const spans = credentialSpans(text, whole);
  if (!spans.length) return text;
  let out = "";
  let at = 0;
  for (const s of spans) {
    out += text.slice(at, s.start) + MASK;
    at = s.end;
  }
  return out + text.slice(at);
}

/**
 * Credential spans the scanner reports for stored text: every secret query parameter as
 * `maskCredentials` finds it; a URL's password unless it is a placeholder (`user:pass@`); a
 * keyword/value secret only for libpq's own keys and a plausible value (stored text is full of
 * `token = …` in source code). Contract: a value already `[REDACTED:…]` or `***` is not reported.
 */
export function storedCredentialSpans(text: string): CredentialSpan[] {
  return credentialSpans(text).filter((s) => {
    const value = text.slice(s.start, s.end);
    if (/^(?:\[REDACTED:[a-z0-9_]+\]|\*+)$/.test(value)) return false;
    if (s.where === "userinfo") return !isPlaceholder(decoded(value));
    if (s.where === "keyword") {
      const bare = value.replace(/^'|'$/g, "");
      return LIBPQ_SECRET_KEYS.includes(s.key!.toLowerCase()) && plausiblePassword(bare);
    }
    return true;
  });
}
