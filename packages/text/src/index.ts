/**
 * @keel/text: text as Keel handles it. Cut by code points (never inside a surrogate pair),
 * made well-formed before it reaches a model or a store, joined across streamed deltas, and
 * "did you mean" for a mistyped name; BM25 and the one tokenizer the retrieval plugins share.
 * One dependency (`stemmer`, the Porter stemmer); the kernel and the plugins share it.
 */
export { codePointLength, codePointSlice, deltaJoiner, droppedMarker, extendWellFormed, headOf, isWellFormed, tailOf, toWellFormed, truncate, wellFormedDeep } from "./cut.ts";
export type { TruncateOptions } from "./cut.ts";
export { Bm25, bm25Idf } from "./bm25.ts";
export type { Bm25Params, IdfForm } from "./bm25.ts";
export { closestName, didYouMean } from "./suggest.ts";
export { isStopword, stem, STOPWORDS, terms, tokenize } from "./terms.ts";
export type { Stemming, TokenizeOptions } from "./terms.ts";
