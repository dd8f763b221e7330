/** A small BM25 index over skill names and descriptions: the router's relevance prior. */
import { tokenize } from "./text.ts";

/** A document of the index. */
export interface Bm25Doc {
  id: string;
  text: string;
}

/**
 * Okapi BM25 (k1 1.5, b 0.75) over tokenized documents.
 * Contract: `scores` returns a score ≥ 0 for every document id (0 when no term matches).
 */
export class Bm25Index {
  readonly ids: readonly string[];
  private readonly postings = new Map<string, Array<[doc: number, tf: number]>>();
  private readonly lengths: number[];
  private readonly avgLength: number;
  private readonly k1: number;
  private readonly b: number;

  constructor(docs: readonly Bm25Doc[], options: { k1?: number; b?: number } = {}) {
    this.k1 = options.k1 ?? 1.5;
    this.b = options.b ?? 0.75;
    this.ids = docs.map((d) => d.id);
    this.lengths = [];
    docs.forEach((doc, i) => {
      const tokens = tokenize(doc.text);
      this.lengths.push(tokens.length);
      const tf = new Map<string, number>();
      for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
      for (const [t, n] of tf) {
        let list = this.postings.get(t);
        if (!list) this.postings.set(t, (list = []));
        list.push([i, n]);
      }
    });
    this.avgLength = this.lengths.reduce((s, n) => s + n, 0) / Math.max(1, docs.length) || 1;
  }

  /** BM25 score of every document for the query terms, indexed like `ids`. */
  scores(queryTerms: readonly string[]): Float64Array {
    const out = new Float64Array(this.ids.length);
    const n = this.ids.length;
    for (const term of new Set(queryTerms)) {
      const list = this.postings.get(term);
      if (!list) continue;
      const idf = Math.log(1 + (n - list.length + 0.5) / (list.length + 0.5));
      for (const [doc, tf] of list) {
        const norm = tf + this.k1 * (1 - this.b + (this.b * this.lengths[doc]!) / this.avgLength);
        out[doc]! += (idf * tf * (this.k1 + 1)) / norm;
      }
    }
    return out;
  }
}
