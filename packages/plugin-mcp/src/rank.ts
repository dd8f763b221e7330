import { Bm25 } from "@keel/text/retrieval";
import { intentWords } from "./intents.ts";
import { keelTokens, referenceTokens } from "./text.ts";

/**
 * One MCP tool as curation sees it.
 * Contract: `name` is the exposed (sanitised) name and unique in a catalog; `server` is the
 * server key; `tool` the tool's name on that server.
 */
export interface CatalogEntry {
  name: string;
  server: string;
  tool: string;
  description: string;
  /** What the server says about itself (its `instructions`, or the configured `description`). */
  serverDescription?: string;
}

/** A tool with its score for one query. Contract: higher is better; 0 means no match and no recent use. */
export interface RankedTool {
  name: string;
  server: string;
  score: number;
}

/** Which ranking to use. Contract: `reference` is exactly the MECHANICS.md formula. */
export type RankingMethod = "reference" | "keel";

/** Knobs of Keel's ranking. Contract: defaults are DEFAULT_KEEL_RANKING, measured on LiveMCPBench (README). */
export interface KeelRankingOptions {
  /** Times a tool's own name tokens count in its document. Default 2. */
  nameWeight: number;
  /** Weight of the (max-normalised) server relevance added to each of its tools. Default 0.5. */
  serverWeight: number;
  /** Pseudo-relevance feedback: terms taken from the top tools to widen the query (0 = off). Default 0 (measured: no gain once intents are on). */
  expansionTerms: number;
  /** How many top tools feed the expansion. Default 5. */
  expansionDocs: number;
  /** Weight of an expansion term relative to a query term. Default 0.3. */
  expansionWeight: number;
  /** Score factor for each further tool of a server already ranked above (diversity; 1 = off). Default 1 (measured: diversity lowers recall). */
  serverDecay: number;
  /** Add words for cues in the request (file paths and types, URLs, relative dates, calculations). Default true. */
  intents: boolean;
  /** Weight of intent words relative to query words. Default 0.5. */
  intentWeight: number;
}

export const DEFAULT_KEEL_RANKING: KeelRankingOptions = {
  nameWeight: 2,
  serverWeight: 0.5,
  expansionTerms: 0,
  expansionDocs: 5,
  expansionWeight: 0.3,
  serverDecay: 1,
  intents: true,
  intentWeight: 0.5,
};

/** Options of one ranking call. Contract: absent recent uses count as 0. */
export interface RankOptions {
  /** Calls per exposed tool name in the recent-use window (from the audit log). */
  recentUses?: ReadonlyMap<string, number>;
}

/**
 * A ranking index over a catalog of MCP tools. Build it once per inventory.
 * Contract: `rank` returns every catalog tool exactly once, best first; ties keep catalog
 * order (stable); an empty or unmatched query ranks by recent use, then catalog order.
 */
export interface ToolRanker {
  readonly method: RankingMethod;
  readonly entries: readonly CatalogEntry[];
  rank(query: string, options?: RankOptions): RankedTool[];
}

/** Build a ranker for `entries` with the chosen method. */
export function createRanker(
  entries: readonly CatalogEntry[],
  method: RankingMethod = "keel",
  keel: Partial<KeelRankingOptions> = {},
): ToolRanker {
  return method === "reference" ? referenceRanker(entries) : keelRanker(entries, { ...DEFAULT_KEEL_RANKING, ...keel });
}

function sortStable(entries: readonly CatalogEntry[], scores: readonly number[]): RankedTool[] {
  return entries
    .map((e, i) => ({ name: e.name, server: e.server, score: scores[i]!, i }))
    .sort((a, b) => b.score - a.score || a.i - b.i)
    .map(({ name, server, score }) => ({ name, server, score }));
}

/** MECHANICS.md: BM25(latest user text, description + server + tool-name tail), k1 1.5, b 0.75, tokens <= 3 chars dropped, + 0.5 x uses in 24 h. */
function referenceRanker(entries: readonly CatalogEntry[]): ToolRanker {
  const index = new Bm25(entries.map((e) => referenceTokens(`${e.description} ${e.server} ${e.tool}`)));
  return {
    method: "reference",
    entries,
    rank(query, options = {}) {
      const scores = index.score(referenceTokens(query));
      const recent = options.recentUses;
      return sortStable(
        entries,
        scores.map((s, i) => s + 0.5 * (recent?.get(entries[i]!.name) ?? 0)),
      );
    },
  };
}

function keelRanker(entries: readonly CatalogEntry[], o: KeelRankingOptions): ToolRanker {
  const docs = entries.map((e) => {
    const name = keelTokens(e.tool);
    const doc = [...keelTokens(e.description), ...keelTokens(e.server)];
    for (let i = 0; i < o.nameWeight; i++) doc.push(...name);
    return doc;
  });
  const tools = new Bm25(docs);
  const servers = [...new Set(entries.map((e) => e.server))];
  const serverIdx = new Map(servers.map((s, i) => [s, i]));
  const serverDocs = servers.map(() => [] as string[]);
  for (const [i, e] of entries.entries()) {
    const d = serverDocs[serverIdx.get(e.server)!]!;
    if (!d.length) d.push(...keelTokens(e.server), ...keelTokens(e.server), ...keelTokens(e.serverDescription ?? ""));
    d.push(...docs[i]!);
  }
  const serverIndex = new Bm25(serverDocs);

  const scoreWith = (q: readonly string[], weights?: ReadonlyMap<string, number>): number[] => {
    const t = normalize(tools.score(q, weights));
    if (!o.serverWeight) return t;
    const s = normalize(serverIndex.score(q, weights));
    return t.map((v, i) => v + o.serverWeight * s[serverIdx.get(entries[i]!.server)!]!);
  };

  return {
    method: "keel",
    entries,
    rank(query, options = {}) {
      const q = keelTokens(query);
      const intent = o.intents ? keelTokens(intentWords(query)).filter((t) => !q.includes(t)) : [];
      const base = new Map<string, number>(q.map((t) => [t, 1]));
      for (const t of intent) base.set(t, o.intentWeight);
      let scores = scoreWith([...base.keys()], base);
      if (o.expansionTerms > 0 && q.length) {
        const expanded = expand(tools, q, scores, o);
        if (expanded.size) {
          const weights = new Map(base);
          for (const [t, w] of expanded) if (!weights.has(t)) weights.set(t, w);
          scores = scoreWith([...weights.keys()], weights);
        }
      }
      const recent = options.recentUses;
      if (recent?.size) scores = scores.map((s, i) => s + 0.15 * Math.log1p(recent.get(entries[i]!.name) ?? 0));
      return o.serverDecay < 1 ? diversify(entries, scores, o.serverDecay) : sortStable(entries, scores);
    },
  };
}

/** Greedy order where each further tool of a server already placed counts `decay`^n of its score. */
function diversify(entries: readonly CatalogEntry[], scores: readonly number[], decay: number): RankedTool[] {
  const sorted = sortStable(entries, scores);
  const out: RankedTool[] = [];
  const placed = new Map<string, number>();
  const pending = sorted.map((r, i) => ({ ...r, i }));
  while (pending.length) {
    let best = 0;
    let bestScore = -Infinity;
    for (let j = 0; j < pending.length; j++) {
      const p = pending[j]!;
      const s = p.score * decay ** (placed.get(p.server) ?? 0);
      if (s > bestScore) {
        bestScore = s;
        best = j;
      }
      if (p.score <= bestScore && p.score >= 0) break;
    }
    const [p] = pending.splice(best, 1);
    placed.set(p!.server, (placed.get(p!.server) ?? 0) + 1);
    out.push({ name: p!.name, server: p!.server, score: bestScore });
  }
  return out;
}

function normalize(scores: number[]): number[] {
  let max = 0;
  for (const s of scores) if (s > max) max = s;
  return max > 0 ? scores.map((s) => s / max) : scores;
}

/** Terms of the top documents, weighted by frequency there times idf, that are not in the query. */
function expand(
  index: Bm25,
  query: readonly string[],
  scores: readonly number[],
  o: KeelRankingOptions,
): Map<string, number> {
  const top = scores
    .map((s, i) => ({ s, i }))
    .filter((x) => x.s > 0)
    .sort((a, b) => b.s - a.s)
    .slice(0, o.expansionDocs);
  const weight = new Map<string, number>();
  const qs = new Set(query);
  for (const { s, i } of top) {
    const terms = index.terms(i);
    let total = 0;
    for (const f of terms.values()) total += f;
    for (const [t, f] of terms) if (!qs.has(t)) weight.set(t, (weight.get(t) ?? 0) + (s * f) / total);
  }
  const ranked = [...weight]
    .map(([t, w]) => [t, w * index.idf(t)] as const)
    .sort((a, b) => b[1] - a[1])
    .slice(0, o.expansionTerms);
  const max = ranked[0]?.[1] ?? 0;
  return new Map(max > 0 ? ranked.map(([t, w]) => [t, (o.expansionWeight * w) / max]) : []);
}
