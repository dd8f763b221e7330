/** Okapi BM25, the relevance every Keel retrieval shares (MCP tool ranking, skill routing, memory recall). */

/** BM25 parameters. Contract: k1 >= 0 and 0 <= b <= 1; the defaults are k1 1.5, b 0.75. */
export interface Bm25Params {
  k1: number;
  b: number;
}

/**
 * How idf is computed. Contract: `smoothed` is log(1 + (N − n + 0.5) / (n + 0.5)), > 0 for a
 * token some document holds and 0 for one none holds; `fts5` is exactly SQLite FTS5's
 * log((N − n + 0.5) / (n + 0.5)), floored at 1e-6 (a token in more than half the documents
 * still counts, barely).
 */
export type IdfForm = "smoothed" | "fts5";

/**
 * Inverse document frequency of a token held by `holding` of `documents` documents (counts
 * taken at different moments never make N < n: N is at least n).
 * Contract: falls as `holding` grows; see IdfForm for each form's value.
 */
export function bm25Idf(documents: number, holding: number, form: IdfForm = "smoothed"): number {
  const n = Math.max(documents, holding);
  if (form === "fts5") {
    const idf = Math.log((n - holding + 0.5) / (holding + 0.5));
    return idf > 0 ? idf : 1e-6;
  }
  if (holding <= 0) return 0;
  return Math.log(1 + (n - holding + 0.5) / (holding + 0.5));
}

/**
 * A BM25 index over documents given as tokens (see `tokenize`), with smoothed idf.
 * Contract: `score` returns one score >= 0 per document, in document order; a query token no
 * document holds adds nothing; a token repeated in the query counts each time; `weights`
 * scales a token's contribution (absent: 1). Scores are deterministic for the same input.
 */
export class Bm25 {
  /** Number of documents. */
  readonly size: number;
  private readonly tf: Array<Map<string, number>>;
  private readonly postings = new Map<string, Array<[doc: number, tf: number]>>();
  private readonly norm: number[];
  private readonly k1: number;

  constructor(docs: readonly (readonly string[])[], params: Partial<Bm25Params> = {}) {
    this.k1 = params.k1 ?? 1.5;
    const b = params.b ?? 0.75;
    this.size = docs.length;
    this.tf = docs.map((d, i) => {
      const m = new Map<string, number>();
      for (const t of d) m.set(t, (m.get(t) ?? 0) + 1);
      for (const [t, n] of m) {
        let list = this.postings.get(t);
        if (!list) this.postings.set(t, (list = []));
        list.push([i, n]);
      }
      return m;
    });
    const avg = docs.reduce((a, d) => a + d.length, 0) / Math.max(1, docs.length) || 1;
    // The length part of the denominator, k1 · (1 − b + b · len / avg), once per document.
    this.norm = docs.map((d) => this.k1 * (1 - b + (b * d.length) / avg));
  }

  /** Smoothed inverse document frequency of a token (0 when no document holds it). */
  idf(token: string): number {
    return bm25Idf(this.size, this.docFreq(token));
  }

  /** Number of documents holding `token`. */
  docFreq(token: string): number {
    return this.postings.get(token)?.length ?? 0;
  }

  /** Term frequencies of document `i`. */
  terms(i: number): ReadonlyMap<string, number> {
    return this.tf[i]!;
  }

  /** The BM25 score of every document for `query`, in document order. */
  score(query: readonly string[], weights?: ReadonlyMap<string, number>): number[] {
    const out = new Array<number>(this.size).fill(0);
    const k1 = this.k1;
    for (const q of query) {
      const list = this.postings.get(q);
      if (!list) continue;
      const w = (weights?.get(q) ?? 1) * bm25Idf(this.size, list.length);
      for (const [doc, f] of list) out[doc]! += (w * (f * (k1 + 1))) / (f + this.norm[doc]!);
    }
    return out;
  }
}
