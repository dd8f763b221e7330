/**
 * @keel/text: text as Keel handles it. Cut by code points (never inside a surrogate pair),
 * made well-formed before it reaches a model or a store, joined across streamed deltas, and
 * "did you mean" for a mistyped name. BM25 and the tokenizer the retrieval plugins share are
 * the `@keel/text/retrieval` subpath (it loads the stemmer; this entry does not). The cutting and
 * suggesting functions live in the kernel (which depends on nothing of Keel's); this entry re-exports them.
 * `countOf` prints a count with its noun in the right number, for every count a person reads.
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
} from "@keel/kernel";
export type { TruncateOptions } from "@keel/kernel";
export { closestName, didYouMean } from "@keel/kernel";
export { countOf } from "./count.ts";
