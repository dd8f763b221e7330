/**
 * The tokens SQLite's `porter unicode61 remove_diacritics 2` tokenizer makes of a text, so a
 * store without FTS5 (PostgreSQL) indexes and ranks the same words: letters and digits are
 * token characters, everything else separates; case and diacritics are folded; tokens of
 * three characters or more are Porter-stemmed. (Emoji newer than Unicode 6.1, which FTS5
 * keeps as tokens, are separators here.)
 */
import { stemmer } from "stemmer";

const TOKEN = /(?:[A-Za-z0-9]|[^\x00-\x7F\p{Z}\p{P}\p{S}\p{C}])+/gu;
const MARKS = /\p{M}/gu;
/** Longer tokens are indexed as they are (FTS5's porter step leaves them alone too). */
const MAX_STEM = 64;

/** Folded, stemmed tokens of `text`, in order (repeats kept). Contract: never returns an empty token. */
export function ftsTokens(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.normalize("NFD").match(TOKEN) ?? []) {
    const t = raw.replace(MARKS, "").toLowerCase();
    if (!t) continue;
    out.push(t.length >= 3 && t.length <= MAX_STEM ? stemmer(t) : t);
  }
  return out;
}

/**
 * The prefix a query word that no memory holds is matched by instead: the first `letters`
 * letters of its one token, if there are at least 4 and they are no digits. Undefined when the
 * word makes several tokens, or when the stemmer would change the prefix (FTS5 stems a prefix
 * query's text, PostgreSQL does not: only prefixes it leaves alone search the same on both).
 */
export function variantPrefix(word: string, letters: number): string | undefined {
  const tokens = ftsTokens(word);
  if (tokens.length !== 1 || letters < 4) return undefined;
  // Letters are code points: a UTF-16 cut would split a letter beyond the BMP ("𠀀").
  const cps = [...tokens[0]!].slice(0, letters);
  const p = cps.join("");
  if (cps.length < 4 || /\d/.test(p)) return undefined;
  const again = ftsTokens(p);
  return again.length === 1 && again[0] === p ? p : undefined;
}
