/**
 * Deterministic recall: full-text candidates from the store, query-side processing
 * (stopwords, stemming by the index, speakers, time expressions, dates, neighbour turns),
 * then the MECHANICS ranking (key, category, scope, recency, importance, confidence) and caps.
 */
import { looksSecret } from "./secrets.ts";
import { dateWindows, eventSpan, hasTimeExpression, isFrameWord, isWhenQuestion, queryTerms } from "./text.ts";
import type { Memory, MemoryScope, MemoryStore, SearchHit } from "./types.ts";
import { SCOPE_RANK } from "./types.ts";
import { codePointLength, truncate } from "@keel/text";
import { terms as termsOf } from "@keel/text/retrieval";

/** Tunables of the relevance stage (defaults chosen on LoCoMo conversations 0–4 only). */
export interface RelevanceTuning {
  /** Full-text candidates fetched per query. */
  candidates: number;
  /** Share of a matching neighbour's relevance given to an adjacent memory (0 = off). */
  neighbourWeight: number;
  /** How many write-order neighbours on each side count. */
  neighbourSpan: number;
  /** Weight of the pseudo-relevance-feedback pass (0 = off). */
  feedbackWeight: number;
  /** Bonus (in relevance units) for a memory that happened inside a date window the query names. */
  dateBonus: number;
  /** Bonus for a memory whose speaker label ("Name: …") is named in the query. */
  speakerBonus: number;
  /** Extra share of relevance for a memory whose speaker is named in the query. */
  speakerBoost: number;
  /** Share lost per extra step of distance: weight / (1 + decay·(distance − 1)). */
  neighbourDecay: number;
  /** Share of a question's relevance given to the memory right after it (its likely answer). */
  answerWeight: number;
  /** Share of the best relevance in the same source session added to each candidate (0 = off). */
  sessionWeight: number;
  /** Seeds whose neighbours are lifted. */
  seeds: number;
  /** Scale of the MECHANICS prior (key, category, scope, recency, importance, confidence); 1 = as specified. */
  priorWeight: number;
  /** Relevance kept by a memory that only asks a question (its answer is the next memory). */
  questionFactor: number;
  /** For a "when" question: extra share of relevance for a memory that carries a time expression. */
  timeBoost: number;
  /** Neighbour weight multiplier for a "when" question (the dated turn, not its exchange). */
  timeNeighbour: number;
  /** Extra share of relevance (a factor of 1 + this) for a memory inside a date window the query names. */
  dateBoost: number;
  /** Extra candidates fetched from inside the date windows a query names (0 = off). */
  dateCandidates: number;
  /** A query word no memory of the namespace holds is matched by the first this many letters of its stem (0 = off). */
  variants: number;
  /** Drop the words that frame a question about a person ("describe", "considered", "based on", …) from the query. */
  frameWords: boolean;
  /** Match date windows against the span a memory's own relative words point to ("last week"), not only its date. */
  eventDates: boolean;
}

export const DEFAULT_TUNING: RelevanceTuning = {
  candidates: 60,
  neighbourWeight: 0.35,
  neighbourSpan: 3,
  feedbackWeight: 0,
  dateBonus: 2,
  speakerBonus: 0,
  questionFactor: 1,
  sessionWeight: 0.2,
  seeds: 6,
  neighbourDecay: 0.5,
  answerWeight: 0.8,
  priorWeight: 1,
  timeBoost: 1,
  timeNeighbour: 1,
  eventDates: true,
  speakerBoost: 1.5,
  dateBoost: 2,
  frameWords: true,
  dateCandidates: 40,
  variants: 5,
};

/** A recall request. Contract: `namespace` is the only namespace read. */
export interface RecallRequest {
  namespace: string;
  query: string;
  now?: number;
  /** Items returned (after caps); default 8. */
  limit?: number;
  /** Total characters of returned content; default 4,000. */
  maxChars?: number;
  /** Characters per item; default 500. */
  itemChars?: number;
  category?: string;
  primaryScope?: MemoryScope;
  scopes?: readonly MemoryScope[];
  /** `ranked` (default): the full pipeline; `bm25`: plain full-text order (baseline). */
  mode?: "ranked" | "bm25";
  /** Return secret-like memories too (default false). */
  showSecrets?: boolean;
  tuning?: Partial<RelevanceTuning>;
}

/** A recalled memory with its scores. */
export interface Recalled {
  memory: Memory;
  /** Final rank score. */
  score: number;
  /** Relevance part of it (full-text, neighbours, feedback, dates). */
  relevance: number;
  /** Content as shown (truncated to the item cap). */
  text: string;
}

const DAY = 86_400_000;

/** The MECHANICS prior of a memory for a query (everything but the backend score). */
export function prior(
  m: Memory,
  q: { terms: ReadonlySet<string>; category?: string; primaryScope: MemoryScope; now: number },
): number {
  let s = 0;
  if (m.key) {
    const words = queryTerms(m.key);
    if (words.length && words.every((w) => q.terms.has(w))) s += 2.0;
  }
  if (m.category && (m.category === q.category || q.terms.has(m.category.toLowerCase()))) s += 0.5;
  if (m.scope === q.primaryScope) s += 0.6;
  s += 0.4 / (1 + SCOPE_RANK[m.scope]);
  const ageDays = Math.max(0, (q.now - m.occurredAt) / DAY);
  s += 0.4 / (1 + ageDays / 30);
  s += 0.8 * m.importance + 0.2 * m.confidence;
  return s;
}

/** The lower-case first name of a leading speaker label ("Caroline: …"), if any. */
function speakerOf(content: string): string | undefined {
  const m = /^(\p{Lu}[\p{L}'-]*)(?: \p{Lu}[\p{L}'-]*)?:\s/u.exec(content);
  return m ? m[1]!.toLowerCase() : undefined;
}

/** True when a memory only asks: its last sentence ends with "?" (ignoring a trailing attachment note). */
function isQuestion(content: string): boolean {
  return /\?\s*(?:\[[^\]]*\])?\s*$/.test(content);
}

/** Expansion terms from the top hits: content words shared by at least two of them. */
function feedbackTerms(top: readonly SearchHit[], exclude: ReadonlySet<string>, max: number): string[] {
  const df = new Map<string, number>();
  for (const h of top)
    for (const t of new Set(queryTerms(h.memory.content, 64)))
      if (!exclude.has(t) && !/^\d+$/.test(t)) df.set(t, (df.get(t) ?? 0) + 1);
  return [...df]
    .filter(([, n]) => n >= 2)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, max)
    .map(([t]) => t);
}

/**
 * Recall memories for a query.
 * Contract: reads only `namespace`; never returns superseded, forgotten or (unless
 * `showSecrets`) secret-like memories; respects limit, total and per-item character caps.
 */
export async function recall(store: MemoryStore, req: RecallRequest): Promise<Recalled[]> {
  const t = { ...DEFAULT_TUNING, ...req.tuning };
  const limit = req.limit ?? 8;
  const maxChars = req.maxChars ?? 4000;
  const itemChars = req.itemChars ?? 500;
  const now = req.now ?? Date.now();
  const terms =
    req.mode === "bm25"
      ? termsOf(req.query, { stopwords: false, stem: false, minLength: 1 })
      : queryTerms(req.query).filter((w) => !t.frameWords || !isFrameWord(w));
  if (!terms.length) return [];
  const base = {
    namespace: req.namespace,
    terms,
    limit: req.mode === "bm25" ? limit * 4 : t.candidates,
    ...(req.mode === "bm25" ? { plain: true } : t.variants > 0 ? { variants: t.variants } : {}),
    ...(req.scopes ? { scopes: req.scopes } : {}),
  };
  const hits = await store.search(base);
  const windows =
    req.mode !== "bm25" && (t.dateBonus > 0 || t.dateBoost > 0)
      ? dateWindows(req.query, now).filter((w) => Number.isFinite(w.start) && Number.isFinite(w.end))
      : [];
  if (windows.length && t.dateCandidates > 0) {
    // Candidates from inside the named windows, widened by what a memory's own words may point to
    // (a memory up to 45 days later may say "last month", up to 10 days earlier "next week").
    const seen = new Set(hits.map((h) => h.memory.id));
    const within = windows.slice(0, 12).map((w) => ({ start: w.start - 10 * DAY, end: w.end + 45 * DAY }));
    for (const h of await store.search({ ...base, limit: t.dateCandidates, within }))
      if (!seen.has(h.memory.id)) seen.add(h.memory.id), hits.push(h);
  }
  let ranked: Array<{ memory: Memory; relevance: number; score: number }>;
  if (req.mode === "bm25") {
    ranked = hits.map((h) => ({ memory: h.memory, relevance: h.score, score: h.score }));
  } else {
    const rel = new Map<number, { memory: Memory; relevance: number }>();
    for (const h of hits) rel.set(h.memory.id, { memory: h.memory, relevance: h.score });
    const top = hits[0]?.score ?? 0;
    if (t.feedbackWeight > 0 && hits.length >= 3) {
      const extra = feedbackTerms(hits.slice(0, 5), new Set(terms), 6);
      if (extra.length) {
        const second = await store.search({ ...base, terms: extra });
        const top2 = second[0]?.score || 1;
        for (const h of second) {
          const add = (t.feedbackWeight * top * h.score) / top2;
          const r = rel.get(h.memory.id);
          if (r) r.relevance += add;
          else rel.set(h.memory.id, { memory: h.memory, relevance: add });
        }
      }
    }
    const named = new Set(terms);
    for (const r of rel.values()) {
      const sp = speakerOf(r.memory.content);
      if (sp && named.has(sp)) r.relevance = r.relevance * (1 + t.speakerBoost) + t.speakerBonus;
    }
    const asksWhen = isWhenQuestion(req.query);
    if (asksWhen && t.timeBoost > 0)
      for (const r of rel.values()) if (hasTimeExpression(r.memory.content)) r.relevance *= 1 + t.timeBoost;
    if (windows.length)
      for (const r of rel.values()) {
        const span = t.eventDates ? eventSpan(r.memory.content) : { back: 0, fwd: 0 };
        const from = r.memory.occurredAt - span.back * DAY;
        const to = r.memory.occurredAt + span.fwd * DAY;
        if (windows.some((w) => to >= w.start && from < w.end))
          r.relevance = r.relevance * (1 + t.dateBoost) + t.dateBonus;
      }
    if (t.neighbourWeight > 0 && hits.length) {
      const seeds = [...rel.values()].sort((a, b) => b.relevance - a.relevance).slice(0, t.seeds);
      const near = await store.neighbours(
        req.namespace,
        seeds.map((s) => s.memory),
        t.neighbourSpan,
      );
      const lift = new Map<number, { memory: Memory; add: number }>();
      for (const s of seeds) {
        const asks = isQuestion(s.memory.content);
        const list = near.get(s.memory.id) ?? [];
        const at = list.findIndex((n) => n.id > s.memory.id);
        const pos = at < 0 ? list.length : at;
        for (const [i, n] of list.entries()) {
          const dist = i < pos ? pos - i : i - pos + 1;
          const w =
            (asks && n.id > s.memory.id ? Math.max(t.neighbourWeight, t.answerWeight) : t.neighbourWeight) *
            (asksWhen ? t.timeNeighbour : 1);
          const add = (w * s.relevance) / (1 + t.neighbourDecay * (dist - 1));
          const cur = lift.get(n.id);
          if (!cur || cur.add < add) lift.set(n.id, { memory: n, add });
        }
      }
      for (const [id, l] of lift) {
        const r = rel.get(id);
        if (r) r.relevance += l.add;
        else rel.set(id, { memory: l.memory, relevance: l.add });
      }
    }
    if (t.sessionWeight > 0) {
      const best = new Map<string, number>();
      for (const r of rel.values()) {
        const sid = r.memory.source.sessionId;
        if (sid !== undefined) best.set(sid, Math.max(best.get(sid) ?? 0, r.relevance));
      }
      for (const r of rel.values()) {
        const sid = r.memory.source.sessionId;
        if (sid !== undefined) r.relevance += t.sessionWeight * (best.get(sid) ?? 0);
      }
    }
    if (t.questionFactor !== 1)
      for (const r of rel.values()) if (isQuestion(r.memory.content)) r.relevance *= t.questionFactor;
    const q = {
      terms: new Set(terms),
      primaryScope: req.primaryScope ?? "user",
      now,
      ...(req.category ? { category: req.category } : {}),
    };
    ranked = [...rel.values()].map((r) => ({ ...r, score: r.relevance + t.priorWeight * prior(r.memory, q) }));
  }
  ranked.sort((a, b) => b.score - a.score || b.memory.id - a.memory.id);
  const out: Recalled[] = [];
  let chars = 0;
  for (const r of ranked) {
    if (out.length >= limit) break;
    if (!req.showSecrets && looksSecret(r.memory.content)) continue;
    const text = truncate(r.memory.content, itemChars);
    const n = codePointLength(text);
    if (chars + n > maxChars) continue;
    chars += n;
    out.push({ memory: r.memory, score: r.score, relevance: r.relevance, text });
  }
  return out;
}
