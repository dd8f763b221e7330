/**
 * The contextual skill router. Each skill's chance of helping a request is a logistic model
 * over the request: a BM25 relevance prior over the skill's name and description, plus learned
 * log-odds weights per (skill, request term), (skill, term bigram) and per skill. Each weight
 * has a Gaussian posterior (diagonal Laplace approximation, updated online from rewards);
 * a pick is Thompson sampling over those posteriors inside a relevance gate. A success also
 * counts, at `rivalWeight`, as a miss for the gate's other candidates on that request, so
 * near-duplicate skills get told apart.
 */
import { Bm25 } from "@keel/text/retrieval";
import type { Counts, PosteriorReader, PosteriorStore, WeightRow, WeightWrite } from "./posterior.ts";
import { fade, MemoryPosteriorStore } from "./posterior.ts";
import type { Rng } from "./random.ts";
import { createRng, sampleBeta, sampleNormal } from "./random.ts";
import { terms as termsOf, tokenize } from "./text.ts";

/** What the router knows about a skill. */
export interface RoutableSkill {
  name: string;
  description: string;
}

/** Tuning of the contextual router. Contract: every field optional; defaults are the benchmarked ones. */
export interface RouterTuning {
  /** Candidates (by posterior mean) that enter the Thompson draw. Default 8. */
  gate?: number;
  /** Scale of the Thompson draw around the mean: 1 is plain Thompson sampling, 0 greedy. Default 0.05. */
  temperature?: number;
  /** Log-odds of a skill with no relevance and no evidence. Default -4. */
  bias?: number;
  /** Log-odds added for the most relevant skill by BM25 (scaled by relevance / best). Default 4. */
  relevanceWeight?: number;
  /** Prior precision of every learned weight. Default 1. */
  priorPrecision?: number;
  /** IDF at which a term's feature value is 1 (values clamped to 0.1..1.5). Default 5. */
  idfScale?: number;
  /** Feature value of a term bigram (0 disables bigrams). Default 1. */
  bigramWeight?: number;
  /** Weight of the implied miss of the other gate candidates when a pick succeeds (0 disables). Default 3. */
  rivalWeight?: number;
  /** Discount per update (1 = none, e.g. 0.99 lets old evidence fade). Default 1. */
  discount?: number;
  /** Assumed chance that a reward is flipped (robust likelihood; 0 trusts every reward). Default 0.
   * Helps under noisy rewards but makes confident mistakes slow to unlearn. */
  rewardNoise?: number;
}

/** A routing decision. Contract: pass it back to `update` with the reward. */
export interface RoutePick {
  skill: string;
  /** Request terms (tokenized, stemmed, distinct). */
  terms: string[];
  /** Estimated probability the pick helps (logistic of the posterior mean). */
  probability: number;
  forced: boolean;
  /** Gate candidates, best draw first (empty for a forced pick). */
  candidates: string[];
}

const BIAS_FEATURE = "";
const DEFAULTS: Required<RouterTuning> = {
  gate: 8,
  temperature: 0.05,
  bias: -4,
  relevanceWeight: 4,
  priorPrecision: 1,
  idfScale: 5,
  bigramWeight: 1,
  rivalWeight: 3,
  discount: 1,
  rewardNoise: 0,
};
const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/**
 * Contextual Thompson sampling over skills.
 * Contract: deterministic for a given seed and history; `pick` returns undefined only when
 * there are no skills; `update` credits a pick with a reward in [0, 1].
 */
export class ContextualRouter {
  private skills: RoutableSkill[] = [];
  private position = new Map<string, number>();
  private index = new Bm25([]);
  private readonly rng: Rng;
  /** Built with a seed or an rng: every pick draws from that one sequence. */
  private readonly seeded: boolean;
  readonly store: PosteriorStore;
  readonly tuning: Required<RouterTuning>;

  constructor(
    options: {
      store?: PosteriorStore;
      rng?: Rng;
      seed?: number | string;
      skills?: readonly RoutableSkill[];
      tuning?: RouterTuning;
    } = {},
  ) {
    this.store = options.store ?? new MemoryPosteriorStore();
    this.rng = options.rng ?? createRng(options.seed);
    this.seeded = options.rng !== undefined || options.seed !== undefined;
    this.tuning = { ...DEFAULTS, ...stripUndefined(options.tuning ?? {}) };
    if (options.skills) this.setSkills(options.skills);
  }

  /** Replace the routable skills (the catalog changed). Learned weights are kept by name. */
  setSkills(skills: readonly RoutableSkill[]): void {
    this.skills = [...skills];
    this.position = new Map(this.skills.map((s, i) => [s.name, i]));
    this.index = new Bm25(this.skills.map((s) => tokenize(`${s.name} ${s.description}`)));
  }

  /** Skills by posterior mean for a request (no randomness), best first. */
  rank(query: string): Array<{ skill: string; probability: number }> {
    const scored = this.score(termsOf(query), this.store);
    return scored
      .map((s) => ({ skill: this.skills[s.i]!.name, probability: sigmoid(s.z) }))
      .sort((a, b) => b.probability - a.probability || a.skill.localeCompare(b.skill));
  }

  /**
   * Pick a skill for a request; `force` (a skill name in the catalog) skips the draw. `draw`
   * (the turn id) seeds this pick's draw when the router has no seed of its own, so a replay of
   * the turn draws the same.
   */
  pick(query: string, options: { force?: string; draw?: string } = {}): RoutePick | undefined {
    const terms = termsOf(query);
    if (options.force !== undefined && this.position.has(options.force)) {
      const z = this.score(terms, this.store, [options.force])[0]!.z;
      return { skill: options.force, terms, probability: sigmoid(z), forced: true, candidates: [] };
    }
    if (!this.skills.length) return undefined;
    const rng = !this.seeded && options.draw !== undefined ? createRng(options.draw) : this.rng;
    const scored = this.score(terms, this.store).map((s) => ({ ...s, tie: rng.next() }));
    scored.sort((a, b) => b.z - a.z || a.tie - b.tie);
    // No draw until some candidate has evidence in this context: a cold pick is the prior's own
    // top pick (a draw would flip near-ties); exploration starts with the first evidence.
    const top = scored.slice(0, Math.max(1, this.tuning.gate));
    const explore = top.some((s) => s.learned);
    const gate = top.map((s) => ({
      ...s,
      draw: s.z + (explore ? this.tuning.temperature * Math.sqrt(s.variance) * sampleNormal(rng) : 0),
    }));
    gate.sort((a, b) => b.draw - a.draw);
    const best = gate[0]!;
    return {
      skill: this.skills[best.i]!.name,
      terms,
      probability: sigmoid(best.z),
      forced: false,
      candidates: gate.map((g) => this.skills[g.i]!.name),
    };
  }

  /**
   * Load what routing `query` reads when the store needs I/O for it (PostgreSQL); a no-op otherwise.
   * Contract: call before `pick`/`rank` with the same query.
   */
  async prepare(query: string): Promise<void> {
    await this.store.warm?.(() => void this.rank(query));
  }

  /** Credit a pick with a reward (1 success, 0 failure, fractions allowed). Unknown skills are ignored; a server store returns a promise. */
  update(
    pick: Pick<RoutePick, "skill" | "terms"> & { candidates?: readonly string[] },
    reward: number,
  ): void | Promise<void> {
    if (!this.position.has(pick.skill)) return;
    const y = Math.min(1, Math.max(0, reward));
    const rivals =
      y > 0 && this.tuning.rivalWeight > 0
        ? (pick.candidates ?? []).filter((c) => c !== pick.skill && this.position.has(c))
        : [];
    return this.store.update((tx) => {
      const writes: WeightWrite[] = [];
      this.step(tx, pick.skill, pick.terms, y, 1, writes);
      for (const rival of rivals) this.step(tx, rival, pick.terms, 0, this.tuning.rivalWeight * y, writes);
      tx.writeWeights(writes);
      tx.recordArm(pick.skill, y);
      tx.countUpdate(pick.terms);
    });
  }

  private features(
    terms: readonly string[],
    reader: PosteriorReader,
  ): { values: Map<string, number>; updates: number } {
    const { updates, df } = reader.termStats(terms);
    const values = new Map<string, number>([[BIAS_FEATURE, 1]]);
    for (const t of terms) {
      const idf = Math.log((updates + 2) / ((df.get(t) ?? 0) + 0.5));
      values.set(t, Math.min(1.5, Math.max(0.1, idf / this.tuning.idfScale)));
    }
    if (this.tuning.bigramWeight > 0)
      for (let k = 0; k + 1 < terms.length; k++) values.set(`${terms[k]}_${terms[k + 1]}`, this.tuning.bigramWeight);
    return { values, updates };
  }

  /** Log-odds of each skill, its posterior variance, and whether any weight of it was learned for these features. */
  private score(
    terms: readonly string[],
    reader: PosteriorReader,
    only?: readonly string[],
  ): Array<{ i: number; z: number; variance: number; learned: boolean }> {
    const { values, updates } = this.features(terms, reader);
    const rows = reader.weights([...values.keys()], only);
    const rel = this.index.score(terms);
    let max = 0;
    for (const r of rel) max = Math.max(max, r);
    const { bias, relevanceWeight, priorPrecision: q0, discount } = this.tuning;
    const indices = only ? only.map((n) => this.position.get(n)!) : this.skills.map((_, i) => i);
    return indices.map((i) => {
      const name = this.skills[i]!.name;
      let z = bias + relevanceWeight * (max > 0 ? rel[i]! / max : 0);
      let variance = 0;
      let learned = false;
      for (const [f, x] of values) {
        const stored = rows.get(f)?.get(name);
        const w = stored ? fade(stored, updates, discount, q0) : undefined;
        learned ||= stored !== undefined;
        z += x * (w?.mean ?? 0);
        variance += (x * x) / (w?.precision ?? q0);
      }
      return { i, z, variance, learned };
    });
  }

  private step(
    tx: PosteriorReader,
    skill: string,
    terms: readonly string[],
    y: number,
    rate: number,
    writes: WeightWrite[],
  ): void {
    const { values, updates } = this.features(terms, tx);
    const { priorPrecision: q0, discount } = this.tuning;
    const z = this.score(terms, tx, [skill])[0]!.z;
    const p = sigmoid(z);
    const eps = Math.min(0.49, Math.max(0, this.tuning.rewardNoise));
    const q = eps + (1 - 2 * eps) * p;
    const slope = (1 - 2 * eps) * p * (1 - p);
    const gradient = eps > 0 ? (slope * (y - q)) / (q * (1 - q)) : y - p;
    const curvature = eps > 0 ? (slope * slope) / (q * (1 - q)) : p * (1 - p);
    const rows = tx.weights([...values.keys()], [skill]);
    for (const [feature, x] of values) {
      const stored = rows.get(feature)?.get(skill);
      const w: WeightRow = stored ? fade(stored, updates, discount, q0) : { mean: 0, precision: q0, tick: updates };
      const precision = w.precision + rate * curvature * x * x;
      writes.push({
        skill,
        feature,
        row: { mean: w.mean + (rate * gradient * x) / precision, precision, tick: updates },
      });
    }
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The reference router: context-free Thompson sampling, one Beta(successes+1, failures+1)
 * arm per skill. Contract: ignores the request; deterministic for a seed.
 */
export class ThompsonSampler {
  private readonly arms = new Map<string, Counts>();
  private readonly rng: Rng;

  constructor(options: { rng?: Rng; seed?: number | string; arms?: readonly string[] } = {}) {
    this.rng = options.rng ?? createRng(options.seed);
    for (const a of options.arms ?? []) this.arms.set(a, { successes: 0, failures: 0 });
  }

  /** Set an arm's counts (seeding). */
  set(arm: string, counts: Counts): void {
    this.arms.set(arm, { ...counts });
  }

  /** The counts of an arm. */
  get(arm: string): Counts {
    return { ...(this.arms.get(arm) ?? { successes: 0, failures: 0 }) };
  }

  /** argmax of one Beta draw per arm; undefined without arms. */
  pick(): string | undefined {
    let best: string | undefined;
    let bestDraw = -1;
    for (const [arm, c] of this.arms) {
      const draw = sampleBeta(this.rng, c.successes + 1, c.failures + 1);
      if (draw > bestDraw) (best = arm), (bestDraw = draw);
    }
    return best;
  }

  /** Record a reward (1 success, 0 failure) for an arm. */
  update(arm: string, reward: number): void {
    const c = this.arms.get(arm) ?? { successes: 0, failures: 0 };
    this.arms.set(arm, { successes: c.successes + reward, failures: c.failures + 1 - reward });
  }
}
