/**
 * What the router learns, and where it is kept: per-(skill, feature) Gaussian posteriors over
 * log-odds weights (mean, precision), per-skill Beta arms (successes, failures), request-term
 * document frequencies and a global update tick. An optional discount fades evidence lazily:
 * a row read `d` ticks after it was written has its mean scaled by gamma^d and its precision
 * pulled back towards the prior by the same factor.
 */

/** Success and failure counts of a Beta arm. */
export interface Counts {
  successes: number;
  failures: number;
}

/** A Gaussian posterior over one log-odds weight, as of `tick`. */
export interface WeightRow {
  mean: number;
  precision: number;
  tick: number;
}

/** One weight to write. */
export interface WeightWrite {
  skill: string;
  feature: string;
  row: WeightRow;
}

/** Read access inside an update transaction. */
export interface PosteriorReader {
  /** Rows for every (skill, feature) pair stored, for these features: feature → skill → row (read-only; may be live). */
  weights(features: readonly string[], skills?: readonly string[]): Map<string, Map<string, WeightRow>>;
  /** Number of updates so far, and in how many of them each term occurred. */
  termStats(terms: readonly string[]): { updates: number; df: Map<string, number> };
}

/**
 * Storage of the router's posteriors.
 * Contract: `update` runs `fn` atomically (one transaction for SQLite, so two processes never
 * lose each other's writes); everything written inside is visible to later reads.
 */
export interface PosteriorStore extends PosteriorReader {
  arms(): Map<string, Counts>;
  /** Run `fn` atomically; a store on a server returns a promise that settles when it is written. */
  update(fn: (tx: PosteriorTx) => void): void | Promise<void>;
  /**
   * For a store whose reads need I/O: load what `probe` (a call that reads, e.g. `rank`) reads,
   * so the next synchronous reads see current rows. Absent for stores that read directly.
   */
  warm?(probe: () => void): Promise<void>;
  close?(): void;
}

/** Writes allowed inside `PosteriorStore.update`. */
export interface PosteriorTx extends PosteriorReader {
  writeWeights(rows: readonly WeightWrite[]): void;
  recordArm(skill: string, reward: number): void;
  /** Count one update with these request terms (advances the tick). */
  countUpdate(terms: readonly string[]): void;
}

/** A row as seen at tick `now` under discount `gamma`, towards a prior precision. */
export function fade(row: WeightRow, now: number, gamma: number, priorPrecision: number): WeightRow {
  if (gamma >= 1 || now <= row.tick) return row;
  const f = gamma ** (now - row.tick);
  return { mean: row.mean * f, precision: priorPrecision + (row.precision - priorPrecision) * f, tick: now };
}

/**
 * Posteriors in memory (benchmarks, tests, `store: "memory"`).
 * Contract: same semantics as the SQLite store; nothing persisted.
 */
export class MemoryPosteriorStore implements PosteriorStore {
  private readonly rows = new Map<string, Map<string, WeightRow>>();
  private readonly armCounts = new Map<string, Counts>();
  private readonly df = new Map<string, number>();
  private tick = 0;

  weights(features: readonly string[]): Map<string, Map<string, WeightRow>> {
    const out = new Map<string, Map<string, WeightRow>>();
    for (const f of new Set(features)) {
      const bySkill = this.rows.get(f);
      if (bySkill) out.set(f, bySkill);
    }
    return out;
  }

  termStats(terms: readonly string[]): { updates: number; df: Map<string, number> } {
    return { updates: this.tick, df: new Map(terms.map((t) => [t, this.df.get(t) ?? 0])) };
  }

  arms(): Map<string, Counts> {
    return new Map([...this.armCounts].map(([k, v]) => [k, { ...v }]));
  }

  update(fn: (tx: PosteriorTx) => void): void {
    fn({
      weights: (f) => this.weights(f),
      termStats: (t) => this.termStats(t),
      writeWeights: (rows) => {
        for (const { skill, feature, row } of rows) {
          let bySkill = this.rows.get(feature);
          if (!bySkill) this.rows.set(feature, (bySkill = new Map()));
          bySkill.set(skill, { ...row });
        }
      },
      recordArm: (skill, reward) => {
        const c = this.armCounts.get(skill) ?? { successes: 0, failures: 0 };
        this.armCounts.set(skill, { successes: c.successes + reward, failures: c.failures + 1 - reward });
      },
      countUpdate: (terms) => {
        for (const t of new Set(terms)) this.df.set(t, (this.df.get(t) ?? 0) + 1);
        this.tick++;
      },
    });
  }
}
