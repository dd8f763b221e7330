import { createHash } from "node:crypto";
import type { CatalogEntry, RankedTool, RankOptions, ToolRanker } from "./rank.ts";

/**
 * The append-only set of MCP tools kept visible in one conversation, tied to an inventory.
 * Contract: `keep` only grows while `inventoryHash` stays the same (names in the order they
 * were first kept); a different inventory starts a new, empty set; `compact` (a subset of
 * `keep`) names the tools sent in compact form, fixed when they joined, so a kept tool's
 * definition never changes and the provider's prompt cache stays valid.
 */
export interface KeepSet {
  inventoryHash: string;
  keep: string[];
  compact?: string[];
}

/**
 * Where the ranked list is cut (the adaptive visible set).
 * Contract: after `minK` tools joined, a tool scoring below `ratio` × the best score does not
 * join; a joining tool scoring below `compactBelow` × the best score joins in compact form.
 */
export interface CutOptions {
  minK: number;
  ratio: number;
  compactBelow: number;
}

/** Hash of an MCP inventory. Contract: depends on names, descriptions and schemas only, not on their order. */
export function inventoryHash(
  tools: ReadonlyArray<{ name: string; description: string; parameters?: unknown }>,
): string {
  const h = createHash("sha256");
  for (const line of tools
    .map((t) => `${t.name}\u0000${t.description}\u0000${JSON.stringify(t.parameters ?? null)}`)
    .sort())
    h.update(line).update("\n");
  return h.digest("hex").slice(0, 16);
}

/** Inputs of one curation. Contract: `ranker` and `inventoryHash` describe the same inventory. */
export interface CurateInput {
  ranker: ToolRanker;
  /** Hash of the ranker's inventory (see inventoryHash). */
  inventoryHash: string;
  /** The request: the latest user text. */
  query: string;
  /** How many ranked tools join the keep-set per request. */
  topK: number;
  /** The most tools a request may carry, built-in tools and tool_search included. */
  hardCap: number;
  /** Tools that are not MCP tools and always stay (built-ins, other plugins' tools, tool_search). */
  fixedCount: number;
  /** The keep-set so far (from the previous turn of this conversation). */
  previous?: KeepSet;
  /** Tools that must be kept (revealed through tool_search earlier). */
  pinned?: readonly string[];
  rankOptions?: RankOptions;
  /** The adaptive cut; absent: the top K with a positive score join, all in full form. */
  cut?: CutOptions;
}

/**
 * What curation decided.
 * Contract: `visible` is a subsequence of `keepSet.keep` holding only names of the ranker's
 * inventory; `added` and `capped` are subsets of `keepSet.keep`.
 */
export interface CurateResult {
  /** Names the model sees this request: keep-set order (stable prefix), capped. */
  visible: string[];
  /** The keep-set after this request. */
  keepSet: KeepSet;
  /** The ranking of this request. */
  ranked: RankedTool[];
  /** Names this request added to the keep-set. */
  added: string[];
  /** Kept names left out of `visible` by the hard cap. */
  capped: string[];
  /** True when the inventory changed and the keep-set started over. */
  reset: boolean;
}

/**
 * Decide which MCP tools a request carries.
 * Contract: pinned tools not kept yet (in full form, in inventory order), then the top K tools
 * with a positive score, cut by `cut` when given (all tools, in full form, when there are at
 * most K), join an append-only keep-set; the keep-set resets when the inventory hash changes;
 * `visible` is the keep-set in insertion order, except that when it would exceed `hardCap - fixedCount` the best-ranked
 * kept tools are shown (still in insertion order) and the rest reported in `capped`.
 */
export function curate(input: CurateInput): CurateResult {
  const reset = !!input.previous && input.previous.inventoryHash !== input.inventoryHash;
  const keep = input.previous && !reset ? [...input.previous.keep] : [];
  const compact = input.previous && !reset ? [...(input.previous.compact ?? [])] : [];
  const known = new Set(input.ranker.entries.map((e) => e.name));
  const ranked = input.ranker.rank(input.query, input.rankOptions);
  const added: string[] = [];
  const pinned = new Set(input.pinned ?? []);
  const add = (name: string, compactForm = false) => {
    if (!known.has(name) || keep.includes(name)) return;
    keep.push(name);
    added.push(name);
    if (compactForm) compact.push(name);
  };
  // A catalog no larger than K needs no curation: all of it is kept.
  const small = ranked.length <= input.topK;
  const cut = small ? undefined : input.cut;
  const best = ranked[0]?.score ?? 0;
  // Revealed tools first (full form, also when this request ranks them low), in inventory order:
  // where the request that revealed them listed them, so that list stays the prefix of this one.
  const position = new Map(input.ranker.entries.map((e, i) => [e.name, i]));
  for (const p of [...pinned].filter((n) => position.has(n)).sort((a, b) => position.get(a)! - position.get(b)!))
    add(p);
  let joined = 0;
  for (const r of ranked.slice(0, input.topK)) {
    if (!(r.score > 0 || small)) continue;
    if (cut && joined >= cut.minK && r.score < cut.ratio * best) break;
    joined++;
    add(r.name, !!cut && r.score < cut.compactBelow * best);
  }
  const room = Math.max(0, input.hardCap - input.fixedCount);
  // Kept names the inventory lacks now (a server still starting, or gone) stay kept but unsent.
  let visible = keep.every((n) => known.has(n)) ? keep : keep.filter((n) => known.has(n));
  let capped: string[] = [];
  if (visible.length > room) {
    const order = new Map(ranked.map((r, i) => [r.name, i]));
    const top = new Set(
      [...visible]
        .sort((a, b) => Number(pinned.has(b)) - Number(pinned.has(a)) || order.get(a)! - order.get(b)!)
        .slice(0, room),
    );
    capped = visible.filter((n) => !top.has(n));
    visible = visible.filter((n) => top.has(n));
  }
  return {
    visible: [...visible],
    keepSet: { inventoryHash: input.inventoryHash, keep, ...(compact.length ? { compact } : {}) },
    ranked,
    added,
    capped,
    reset,
  };
}

/** One tool_search hit. Contract: `score` > 0. */
export interface SearchHit {
  name: string;
  server: string;
  description: string;
  score: number;
}

/**
 * The tools matching a tool_search query, best first.
 * Contract: at most `limit` hits, each with a positive score and, after the first, at least
 * `minRatio` × the first hit's score (default 0: no relevance cut).
 */
export function searchTools(
  ranker: ToolRanker,
  query: string,
  limit: number,
  options?: RankOptions,
  minRatio = 0,
): SearchHit[] {
  const byName = new Map<string, CatalogEntry>(ranker.entries.map((e) => [e.name, e]));
  const ranked = ranker.rank(query, options);
  const floor = minRatio * (ranked[0]?.score ?? 0);
  return ranked
    .filter((r, i) => r.score > 0 && (i === 0 || r.score >= floor))
    .slice(0, limit)
    .map((r) => ({ name: r.name, server: r.server, description: byName.get(r.name)!.description, score: r.score }));
}
