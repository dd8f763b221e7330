/** Shannon entropy and the high-entropy token check. */

/** Shannon entropy of `s` in bits per character (code points). Contract: 0 for "". */
export function shannonEntropy(s: string): number {
  const counts = new Map<string, number>();
  let n = 0;
  for (const ch of s) {
    counts.set(ch, (counts.get(ch) ?? 0) + 1);
    n++;
  }
  let h = 0;
  for (const c of counts.values()) {
    const p = c / n;
    h -= p * Math.log2(p);
  }
  return h;
}

/** Character classes present in a token. */
function classes(t: string): { upper: boolean; lower: boolean; digit: boolean; hex: boolean } {
  return { upper: /[A-Z]/.test(t), lower: /[a-z]/.test(t), digit: /[0-9]/.test(t), hex: /^[0-9a-fA-F-]+$/.test(t) };
}

/** A path segment or identifier part that reads as a word, a number or a version (not random case). */
const WORDY =
  /^(?:[a-z]+\d*|[A-Z]+\d*|[A-Z]?[a-z]+(?:[A-Z][a-z]+)*\d*|\d+|[a-z]{1,3}\d+[a-z]{0,3}|[0-9a-f]{4,}|[0-9A-F]{4,})$/;

/**
 * True when `token` is made of words: a file path, a URL's host and path, a dotted or
 * snake_case name, a version (`py310-test-devdeps/lib/python3.10/site-packages/io.py`,
 * `LLM_CTF_Dataset_Dev__2016__CSAW-Quals`, an image named by an upper-case UUID). Contract: at least three parts split on
 * `/ . _ - = + ~ %`, and at least 70% of them words, numbers, versions or single-case hex runs; a random key's
 * parts are mixed-case runs and fail.
 */
export function isWordPath(token: string): boolean {
  const parts = token.split(/[/._\-=+~%\s]+/).filter(Boolean);
  if (parts.length < 3) return false;
  return parts.filter((p) => WORDY.test(p)).length / parts.length >= 0.7;
}

/**
 * True when `token` looks like key material.
 * Contract: `nearKey` (a key-like word just before it) lowers the bar; alone, a token must be
 * long, mixed-case with digits and of high entropy, and hex (hashes, UUIDs) never counts.
 */
export function isHighEntropyToken(token: string, nearKey: boolean): boolean {
  const len = token.length;
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(token)) return false; // a UUID is an id
  const c = classes(token);
  const h = shannonEntropy(token);
  if (nearKey) {
    // Near a key word a path or dotted name (`/v1/messages/count_tokens`, `max_tokens=16000`) is still not a key.
    if (/[/.=]/.test(token) && isWordPath(token)) return false;
    if (c.hex) return len >= 32 && h >= 3.0;
    // Real keys carry digits; identifiers near "token" (getAccessTokenForUser) do not.
    if (len < 16 || !c.digit || !(c.upper || c.lower)) return false;
    return h >= 3.5;
  }
  if (c.hex || len < 32 || len > 200) return false;
  if (!(c.upper && c.lower && c.digit)) return false;
  if (isWordPath(token)) return false;
  return h >= 4.5;
}
