/**
 * Identifier extraction: the paths, symbols, numbers, ids and error names a text carries.
 * Regex-based and deterministic; used by the reduction, masking stubs, summaries and the bench.
 */

const PATTERNS: RegExp[] = [
  // Every run a match may scan from any start is bounded ({1,256}): unbounded, a long run with
  // no match ("a-a-a-…", "1.1.1.…") was rescanned from each word boundary, quadratic in its length.
  // Paths: a/b/c.ext, ./x, /abs/path, also with :line suffixes stripped later.
  /(?:~|\.{1,2})?(?:\/[\w.@+-]+)+\/?|\b[\w.@+-]{1,256}(?:\/[\w.@+-]+)+/g,
  // File names with an extension.
  /\b[\w-]{1,256}\.(?:py|js|ts|tsx|jsx|mjs|cjs|json|ya?ml|toml|cfg|ini|md|rst|txt|c|h|cc|cpp|hpp|rs|go|java|kt|rb|php|sh|sql|html|css|lock|xml|csv|log|traj)\b/g,
  // Error and exception names.
  /\b[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)\b/g,
  // Dotted names (module.attr, obj.method), not plain numbers.
  /\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b/g,
  // snake_case, camelCase, PascalCase with two humps, dunder names.
  /\b_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+_*\b/g,
  /\b[a-z]+[A-Z][A-Za-z0-9]*\b/g,
  /\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b/g,
  // Ids mixing letters and digits (order ids, hashes, versions like v1.2.3).
  /\b(?=[A-Za-z0-9_-]{0,256}\d)(?=[A-Za-z0-9_-]{0,256}[A-Za-z])[A-Za-z0-9_-]{5,}\b/g,
  /\bv?\d+(?:\.\d+){1,3}\b/g,
  // Hex values and numbers of three digits or more (incl. negative and decimals).
  /\b0x[0-9a-fA-F]+\b/g,
  /-?\b\d{3,}(?:\.\d+)?\b/g,
];

const TRAILING = /[.,:;)\]}'"`]+$/;
const SKIP = new Set(["e.g", "i.e", "etc", "http", "https", "www", "self.assert"]);

/** Longest identifier kept: a longer "path" is a blob (base64, a URL-encoded payload), and an index carrying it is no stub. */
const MAX_IDENTIFIER = 200;

/**
 * The identifiers of `text`, unique, in order of first appearance.
 * Contract: deterministic; each is 3 to 200 characters; trailing punctuation is removed.
 */
export function extractIdentifiers(text: string, limit = Infinity): string[] {
  const found = new Map<string, number>();
  for (const re of PATTERNS) {
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      const id = m[0].replace(TRAILING, "");
      if (id.length < 3 || id.length > MAX_IDENTIFIER || SKIP.has(id.toLowerCase()) || found.has(id)) continue;
      found.set(id, m.index);
    }
  }
  const ordered = [...found.entries()].sort((a, b) => a[1] - b[1]).map(([id]) => id);
  return Number.isFinite(limit) ? ordered.slice(0, limit) : ordered;
}

const ERROR_LINE =
  /\b(?:error|exception|traceback|failed|failure|fatal|panic|denied|not found|no such|exit (?:code|status)|returned non-zero|warning|assert(?:ion)?|segmentation|killed|timed? ?out|cannot|unable)\b/i;

/** True when a line reports an error, a failure or an exit status. */
export function isErrorLine(line: string): boolean {
  return ERROR_LINE.test(line);
}

const QUOTED = /"([^"\\\n]{3,100})"(\s*:)?/g;

/**
 * Identifiers ranked by salience: error names first, then paths, then names, then the rest
 * (numbers, ids); a name quoted only as a JSON object key (`"user_id":`), never as a quoted
 * value, is a field name, not a fact, and comes last.
 * Contract: deterministic; linear in the text's length (adversarial runs included).
 */
export function salientIdentifiers(text: string, limit: number): string[] {
  const all = extractIdentifiers(text);
  const keys = new Set<string>();
  const values = new Set<string>();
  if (text.includes('":')) for (const m of text.matchAll(QUOTED)) (m[2] ? keys : values).add(m[1]!);
  const rank = (id: string): number => {
    if (keys.has(id) && !values.has(id)) return 4;
    if (/(?:Error|Exception)$/.test(id)) return 0;
    if (id.includes("/") || /\.\w{1,5}$/.test(id)) return 1;
    if (/[A-Za-z]/.test(id) && /[_.A-Z]/.test(id.slice(1))) return 2;
    return 3;
  };
  return all
    .map((id, i) => ({ id, i, r: rank(id) }))
    .sort((a, b) => a.r - b.r || a.i - b.i)
    .slice(0, limit)
    .map((x) => x.id);
}
