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

/** Every secret parameter's name holds one of these (a cheap test before the exact one). */
const SECRET_HINT = /pass|secret|credential|pwd|token|sig|key/i;

/** Other drivers' and services' names for a secret parameter (`passwd`, `api_key`, `access_token`, SAS `sig`…). */
const SECRET_NAME =
  /passw|passphrase|secret|credential|(?:^|[_-])(?:pwd|token|sig|signature|api_?key|apikey|access_?key|private_?key)$/i;

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

/** A URL scheme, matched backwards from its "://" (scanning for "://" first keeps long texts linear). */
const SCHEME_BEFORE = /[A-Za-z][A-Za-z0-9+.-]{0,30}$/;
const SPACE = /\s/g;
/** Where a form or query value outside a URL ends. */
const VALUE_END = /[&#\s]/g;
/** The key of a libpq `key = value` pair, matched backwards from its "=" (nothing key-like just before it). */
const KEYWORD_BEFORE = /(?<![A-Za-z0-9_.?&%-])([A-Za-z_][A-Za-z0-9_]{0,63})[ \t]*$/;
/** A keyword's value after its "=": single-quoted (with \-escapes) or up to whitespace or punctuation. */
const KEYWORD_VALUE = /[ \t]*('(?:[^'\\\n]|\\.)*'?|[^\s'"`,;)\]}]+)/y;
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
  if (at < 0 && q >= 0 && rest.lastIndexOf("@") > q && !/^[^:/@]*:\d*(?:\/|$)/.test(head) && head.includes(":"))
    at = rest.lastIndexOf("@");
  if (at >= 0) {
    const colon = rest.indexOf(":");
    if (colon >= 0 && colon < at) spans.push({ start: schemeEnd + colon + 1, end: schemeEnd + at, where: "userinfo" });
  }
  const queryAt = rest.indexOf("?", Math.max(at, 0));
  if (queryAt < 0) return;
  // Only the URL's own text is searched (a search from its query on would run through the rest of the text).
  const from = schemeEnd + queryAt;
  const query = text.slice(from, to);
  QUERY_PARAM.lastIndex = 0;
  for (let m = QUERY_PARAM.exec(query); m; m = QUERY_PARAM.exec(query)) {
    const valueStart = m.index + m[0].length;
    let valueEnd = valueStart;
    while (valueEnd < query.length && query[valueEnd] !== "&" && query[valueEnd] !== "#") valueEnd++;
    const key = SECRET_HINT.test(m[1]!) || m[1]!.includes("%") ? decoded(m[1]!) : "";
    if (isSecretParameter(key) && valueEnd > valueStart)
      spans.push({ start: from + valueStart, end: from + valueEnd, where: "query", key });
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
  for (let sep = text.indexOf("://"); sep >= 0; sep = text.indexOf("://", Math.max(sep + 3, urls.at(-1)?.[1] ?? 0))) {
    const scheme = SCHEME_BEFORE.exec(text.slice(Math.max(0, sep - 31), sep));
    if (!scheme || (urls.length && sep < urls.at(-1)![1])) continue;
    const start = sep - scheme[0].length;
    const schemeEnd = sep + 3;
    let end = text.length;
    if (!whole) {
      SPACE.lastIndex = schemeEnd;
      const ws = SPACE.exec(text);
      if (ws) end = ws.index;
    }
    urlSpans(text, end, schemeEnd, spans);
    urls.push([start, end]);
  }
  // Outside URLs: form bodies (`user=a&password=b`) and libpq keyword/value strings. The URLs
  // are sorted and disjoint: a binary search says whether an offset is inside one.
  const inUrl = (i: number) => {
    let lo = 0;
    let hi = urls.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const [a, b] = urls[mid]!;
      if (i < a) hi = mid - 1;
      else if (i >= b) lo = mid + 1;
      else return true;
    }
    return false;
  };
  QUERY_PARAM.lastIndex = 0;
  for (let m = QUERY_PARAM.exec(text); m; m = QUERY_PARAM.exec(text)) {
    if (inUrl(m.index)) continue;
    const valueStart = m.index + m[0].length;
    VALUE_END.lastIndex = valueStart;
    const valueEnd = VALUE_END.exec(text)?.index ?? text.length;
    const key = SECRET_HINT.test(m[1]!) || m[1]!.includes("%") ? decoded(m[1]!) : "";
    if (isSecretParameter(key) && valueEnd > valueStart)
      spans.push({ start: valueStart, end: valueEnd, where: "query", key });
    QUERY_PARAM.lastIndex = Math.max(valueEnd, m.index + 1);
  }
  for (let eq = text.indexOf("="); eq >= 0; eq = text.indexOf("=", eq + 1)) {
    const before = text.slice(Math.max(0, eq - 80), eq);
    if (!SECRET_HINT.test(before)) continue;
    const key = KEYWORD_BEFORE.exec(before);
    if (!key || !isSecretParameter(key[1]!) || inUrl(eq)) continue;
    KEYWORD_VALUE.lastIndex = eq + 1;
    const value = KEYWORD_VALUE.exec(text);
    if (!value) continue;
    const start = eq + 1 + value[0].length - value[1]!.length;
    spans.push({ start, end: start + value[1]!.length, where: "keyword", key: key[1]! });
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
