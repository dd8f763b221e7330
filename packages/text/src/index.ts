/**
 * @keel/text: text as Keel handles it. Cut by code points (never inside a surrogate pair),
 * made well-formed before it reaches a model or a store, joined across streamed deltas, and
 * "did you mean" for a mistyped name. BM25 and the tokenizer the retrieval plugins share are
 * the `@keel/text/retrieval` subpath (it loads the stemmer; this entry does not).
 */
export {
  codePointLength,
  codePointSlice,
  deltaJoiner,
  droppedMarker,
  extendWellFormed,
  headOf,
  isWellFormed,
  tailOf,
  toWellFormed,
  truncate,
  wellFormedDeep,
  wellFormedOnce,
} from "./cut.ts";
export type { TruncateOptions } from "./cut.ts";
export { closestName, didYouMean } from "./suggest.ts";
