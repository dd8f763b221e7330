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
    if (c.hex) return len >= 32 && h >= 3.0;
    // Real keys carry digits; identifiers near "token" (getAccessTokenForUser) do not.
    if (len < 16 || !c.digit || !(c.upper || c.lower)) return false;
    return h >= 3.5;
  }
  if (c.hex || len < 32 || len > 200) return false;
  if (!(c.upper && c.lower && c.digit)) return false;
  return h >= 4.5;
}
