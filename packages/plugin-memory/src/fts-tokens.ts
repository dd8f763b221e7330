/**
 * The tokens SQLite's `porter unicode61 remove_diacritics 2` tokenizer makes of a text, so a
 * store without FTS5 (PostgreSQL) indexes and ranks the same words: letters and digits are
 * token characters, everything else separates; case and diacritics are folded; tokens of
 * three characters or more are Porter-stemmed. (Emoji newer than Unicode 6.1, which FTS5
 * keeps as tokens, are separators here.)
 */
import { tokenize } from "@keel/text/retrieval";
import type { TokenizeOptions } from "@keel/text/retrieval";

/** FTS5's tokens: apostrophes separate, diacritics folded, nothing dropped, Porter-stemmed (@keel/text's default stemmer). */
export const FTS_TOKENS: TokenizeOptions = { apostrophes: false, foldDiacritics: true, stopwords: false, minLength: 1 };

/** Folded, stemmed tokens of `text`, in order (repeats kept). Contract: never returns an empty token. */
export function ftsTokens(text: string): string[] {
  return tokenize(text, FTS_TOKENS);
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
