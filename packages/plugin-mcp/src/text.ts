/** The tokenizer options of tool ranking (the tokenizer itself is @keel/text's). */
import { tokenize } from "@keel/text/retrieval";
import type { TokenizeOptions } from "@keel/text/retrieval";

/**
 * Words too common to say anything about which tool fits. Narrower than @keel/text's
 * STOPWORDS: particles and negations ("up", "down", "out", "not") stay, as in "scroll down"
 * or "sign out" (measured: the wider list lowers the held-out check on LiveMCPBench, README).
 */
const TOOL_STOPWORDS = new Set(
  (
    "a an and are as at be but by can could do does for from get has have how i if in into is it its me my of on or our please " +
    "should so some than that the their them then there these this those to use used using via want was we what when where which " +
    "who will with would you your all any also about after before each more most other only such same very just need needs make " +
    "given give let lets tool tools mcp server"
  ).split(" "),
);

/**
 * Keel's ranking: camelCase and snake/kebab names split, TOOL_STOPWORDS dropped, CJK runs as
 * bigrams, the light stemmer (Porter's coarser stems cost recall on LiveMCPBench, README).
 */
export const KEEL_TOKENS: TokenizeOptions = {
  camelCase: true,
  cjkBigrams: true,
  stopwords: TOOL_STOPWORDS,
  stem: "light",
};

/** The MECHANICS.md reference: lowercase letter-and-digit runs of 4 characters or more, nothing dropped or stemmed. */
export const REFERENCE_TOKENS: TokenizeOptions = { apostrophes: false, stopwords: false, stem: false, minLength: 4 };

/** Tokens as the reference ranking cuts them (REFERENCE_TOKENS). */
export function referenceTokens(text: string): string[] {
  return tokenize(text, REFERENCE_TOKENS);
}

/** Keel's tokens (KEEL_TOKENS). */
export function keelTokens(text: string): string[] {
  return tokenize(text, KEEL_TOKENS);
}
