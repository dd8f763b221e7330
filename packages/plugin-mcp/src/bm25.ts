/** BM25 parameters. Contract: k1 >= 0, 0 <= b <= 1 (reference: k1 1.5, b 0.75). */
export interface Bm25Params {
  k1: number;
  b: number;
}

/**
 * A BM25 index over pre-tokenised documents.
 * Contract: `score` returns one score per document, in document order; a query token absent
 * from every document adds nothing; repeated query tokens count once each time they appear.
 */
export class Bm25 {
  readonly size: number;
  private readonly tf: Array<Map<string, number>>;
  private readonly len: number[];
  private readonly df = new Map<string, number>();
  private readonly avg: number;
  private readonly params: Bm25Params;

  constructor(docs: readonly (readonly string[])[], params: Bm25Params = { k1: 1.5, b: 0.75 }) {
    this.params = params;
    this.size = docs.length;
    this.tf = docs.map((d) => {
      const m = new Map<string, number>();
      for (const t of d) m.set(t, (m.get(t) ?? 0) + 1);
      for (const t of m.keys()) this.df.set(t, (this.df.get(t) ?? 0) + 1);
      return m;
    });
    this.len = docs.map((d) => d.length);
    this.avg = this.len.reduce((a, b) => a + b, 0) / Math.max(1, docs.length) || 1;
  }

  /** Inverse document frequency of a token (0 when no document has it). */
  idf(token: string): number {
    const df = this.df.get(token) ?? 0;
    if (!df) return 0;
    return Math.log(1 + (this.size - df + 0.5) / (df + 0.5));
  }

  /** Number of documents holding `token`. */
  docFreq(token: string): number {
    return this.df.get(token) ?? 0;
  }

  /** Term frequencies of document `i`. */
  terms(i: number): ReadonlyMap<string, number> {
    return this.tf[i]!;
  }

  score(query: readonly string[], weights?: ReadonlyMap<string, number>): number[] {
    const { k1, b } = this.params;
    const out = new Array<number>(this.size).fill(0);
    for (const q of query) {
      const idf = this.idf(q);
      if (!idf) continue;
      const w = weights?.get(q) ?? 1;
      for (let i = 0; i < this.size; i++) {
        const f = this.tf[i]!.get(q);
        if (!f) continue;
        out[i]! += (w * idf * (f * (k1 + 1))) / (f + k1 * (1 - b + (b * this.len[i]!) / this.avg));
      }
    }
    return out;
  }
}
