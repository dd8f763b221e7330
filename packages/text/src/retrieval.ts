/**
 * @keel/text/retrieval: BM25 and the one tokenizer the retrieval plugins share (mcp, skills,
 * memory). A subpath of its own, so what imports only the cut helpers (the kernel) never
 * loads the stemmer.
 */
export { Bm25, bm25Idf } from "./bm25.ts";
export type { Bm25Params, IdfForm } from "./bm25.ts";
export { isStopword, stem, STOPWORDS, terms, tokenize } from "./terms.ts";
export type { Stemming, TokenizeOptions } from "./terms.ts";
