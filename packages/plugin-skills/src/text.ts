/** The tokenizer options of skill routing (the tokenizer itself is @keel/text's). */
import { terms as termsWith, tokenize as tokenizeWith } from "@keel/text/retrieval";
import type { TokenizeOptions } from "@keel/text/retrieval";

/** Words of a request that name no particular skill (besides @keel/text's STOPWORDS). */
const SKILL_STOPWORDS = new Set("done like want us dont cant".split(" "));

/** Routing tokens: camelCase names split, stopwords dropped, Porter-stemmed. */
export const SKILL_TOKENS: TokenizeOptions = { camelCase: true, extraStopwords: SKILL_STOPWORDS };

/** Task-signature words: as SKILL_TOKENS but unstemmed and without camelCase splitting (a signature names a folder). */
export const SIGNATURE_TOKENS: TokenizeOptions = { extraStopwords: SKILL_STOPWORDS, stem: false };

/** Tokens of a text for relevance and the router's per-term evidence (SKILL_TOKENS). Contract: keeps order and repeats. */
export function tokenize(text: string): string[] {
  return tokenizeWith(text, SKILL_TOKENS);
}

/** Distinct tokens of a text, in first-seen order. */
export function terms(text: string): string[] {
  return termsWith(text, SKILL_TOKENS);
}
