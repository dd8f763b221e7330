/**
 * The router's posteriors, picks, streaks and revocations on PostgreSQL, shared by every
 * instance. The router reads synchronously, so a read is prepared first: `warm(probe)` runs
 * the probe against a recorder to learn which features and terms it reads, loads those rows,
 * and the real call reads them from that snapshot. An update runs its function the same way
 * inside one transaction that holds an advisory lock, so concurrent instances add up.
 */
import { headOf } from "@keel/text";
import { redact } from "@keel/secrets";
import { PgComponent, registerMigrations } from "@keel/store-postgres";
import type { PgQuery, PostgresTarget } from "@keel/store-postgres";
import type { Counts, PosteriorStore, PosteriorTx, WeightRow, WeightWrite } from "./posterior.ts";
import { safeTerm } from "./store.ts";
import type { SkillsStorage, StoredPick, Streak } from "./store.ts";

/** Migrations of the skills tables (entry i: version i → i + 1). Contract: never edited once released. */
export const SKILLS_MIGRATIONS: readonly string[] = [
  `CREATE TABLE {s}.keel_skill_weights (skill TEXT NOT NULL, feature TEXT NOT NULL, mean DOUBLE PRECISION NOT NULL, precision DOUBLE PRECISION NOT NULL, tick BIGINT NOT NULL, PRIMARY KEY (feature, skill));
   CREATE TABLE {s}.keel_skill_arms (skill TEXT PRIMARY KEY, successes DOUBLE PRECISION NOT NULL, failures DOUBLE PRECISION NOT NULL);
   CREATE TABLE {s}.keel_skill_terms (term TEXT PRIMARY KEY, df INTEGER NOT NULL);
   CREATE TABLE {s}.keel_skill_tick (id INTEGER PRIMARY KEY CHECK (id = 1), tick BIGINT NOT NULL);
   INSERT INTO {s}.keel_skill_tick VALUES (1, 0);
   CREATE TABLE {s}.keel_skill_picks (session_id TEXT NOT NULL, turn_id TEXT NOT NULL, skill TEXT NOT NULL, terms TEXT NOT NULL, candidates TEXT NOT NULL, forced BOOLEAN NOT NULL, signature TEXT NOT NULL, input TEXT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY (session_id, turn_id));
   CREATE INDEX keel_skill_picks_turn ON {s}.keel_skill_picks (turn_id);
   CREATE INDEX keel_skill_picks_ts ON {s}.keel_skill_picks (ts);
   CREATE TABLE {s}.keel_skill_streaks (namespace TEXT NOT NULL, signature TEXT NOT NULL, count INTEGER NOT NULL, examples TEXT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY (namespace, signature));
   CREATE TABLE {s}.keel_skill_revoked (signature TEXT PRIMARY KEY, ts BIGINT NOT NULL);`,
];
registerMigrations("skills", SKILLS_MIGRATIONS);

/** Picks kept for late feedback (as the SQLite store); trimmed every TRIM_EVERY saves. */
const KEEP_PICKS = 5000;
const TRIM_EVERY = 100;

interface Snapshot {
  tick: number;
  df: Map<string, number>;
  weights: Map<string, Map<string, WeightRow>>;
}

/** What a probe read. */
interface Recording {
  features: Set<string>;
  terms: Set<string>;
}

/**
 * The skills plugin's store on PostgreSQL.
 * Contract: as SkillsStore (every text redacted, every term and feature through `safeTerm`);
 * sync reads (`weights`, `termStats`, `arms`) answer from the last `warm` (empty before one);
 * `update` is one transaction under an advisory lock, so instances never lose each other's
 * credit; failures are KEEL_SKILL_STORE_FAILED naming the database without its password.
 */
export class PostgresSkillsStore implements PosteriorStore, SkillsStorage {
  readonly path: string;
  readonly #db: PgComponent;
  #snapshot: Snapshot = { tick: 0, df: new Map(), weights: new Map() };
  #arms = new Map<string, Counts>();
  #recording: Recording | undefined;
  #saves = 0;

  constructor(target: PostgresTarget) {
    this.#db = new PgComponent(target, "skills", SKILLS_MIGRATIONS, "KEEL_SKILL_STORE_FAILED");
    this.path = this.#db.where;
  }

  weights(features: readonly string[], skills?: readonly string[]): Map<string, Map<string, WeightRow>> {
    if (this.#recording) {
      for (const f of features) this.#recording.features.add(f);
      return new Map();
    }
    const only = skills ? new Set(skills) : undefined;
    const out = new Map<string, Map<string, WeightRow>>();
    for (const f of new Set(features)) {
      const row = this.#snapshot.weights.get(f);
      if (!row) continue;
      out.set(f, only ? new Map([...row].filter(([s]) => only.has(s))) : row);
    }
    return out;
  }

  termStats(terms: readonly string[]): { updates: number; df: Map<string, number> } {
    if (this.#recording) for (const t of terms) this.#recording.terms.add(t);
    return { updates: this.#snapshot.tick, df: new Map(terms.map((t) => [t, this.#snapshot.df.get(t) ?? 0])) };
  }

  /** The arms as of the last `warm`. */
  arms(): Map<string, Counts> {
    return new Map([...this.#arms].map(([k, v]) => [k, { ...v }]));
  }

  /** Load what `probe` reads (and the arms), so the next synchronous reads see the database. */
  async warm(probe: () => void): Promise<void> {
    const rec = this.#record(probe);
    this.#snapshot = await this.#load(this.#db.runner("read the router's posteriors in"), rec);
    const rows = await this.#db.query<{ skill: string; successes: number; failures: number }>(
      "read the arms in",
      "SELECT skill, successes, failures FROM {s}.keel_skill_arms",
    );
    this.#arms = new Map(rows.map((r) => [r.skill, { successes: Number(r.successes), failures: Number(r.failures) }]));
  }

  #record(probe: () => void): Recording {
    const rec: Recording = { features: new Set(), terms: new Set() };
    this.#recording = rec;
    try {
      probe();
    } finally {
      this.#recording = undefined;
    }
    return rec;
  }

  async #load(q: PgQuery, rec: Recording): Promise<Snapshot> {
    const tick = Number((await q("SELECT tick FROM {s}.keel_skill_tick WHERE id = 1"))[0]?.tick ?? 0);
    const terms = [...rec.terms];
    const df = new Map<string, number>();
    if (terms.length) {
      const safe = terms.map(safeTerm);
      const rows = await q<{ term: string; df: number }>(
        "SELECT term, df FROM {s}.keel_skill_terms WHERE term = ANY($1::text[])",
        [safe],
      );
      const bySafe = new Map(rows.map((r) => [r.term, Number(r.df)]));
      terms.forEach((t, i) => {
        df.set(t, bySafe.get(safe[i]!) ?? 0);
      });
    }
    const features = [...rec.features];
    const weights = new Map<string, Map<string, WeightRow>>();
    if (features.length) {
      const safe = features.map(safeTerm);
      const original = new Map(safe.map((s, i) => [s, features[i]!]));
      const rows = await q<{ skill: string; feature: string; mean: number; precision: number; tick: string }>(
        "SELECT skill, feature, mean, precision, tick FROM {s}.keel_skill_weights WHERE feature = ANY($1::text[])",
        [safe],
      );
      for (const r of rows) {
        const f = original.get(r.feature) ?? r.feature;
        let m = weights.get(f);
        if (!m) weights.set(f, (m = new Map()));
        m.set(r.skill, { mean: Number(r.mean), precision: Number(r.precision), tick: Number(r.tick) });
      }
    }
    return { tick, df, weights };
  }

  /** Run `fn` against the database's current rows and write what it writes, in one locked transaction. */
  update(fn: (tx: PosteriorTx) => void): Promise<void> {
    const noop = () => undefined;
    const rec = this.#record(() =>
      fn({
        weights: (f, s) => this.weights(f, s),
        termStats: (t) => this.termStats(t),
        writeWeights: noop,
        recordArm: noop,
        countUpdate: noop,
      }),
    );
    return this.#db.tx("update the router's posteriors in", async (q) => {
      await q("SELECT pg_advisory_xact_lock(hashtextextended($1, 4243))", [`keel-skills:${this.#db.schema}`]);
      const snap = await this.#load(q, rec);
      const writes: WeightWrite[] = [];
      const arms: Array<[string, number]> = [];
      let counted: readonly string[] | undefined;
      const read = (features: readonly string[], skills?: readonly string[]) => {
        const only = skills ? new Set(skills) : undefined;
        const out = new Map<string, Map<string, WeightRow>>();
        for (const f of new Set(features)) {
          const row = snap.weights.get(f);
          if (row) out.set(f, only ? new Map([...row].filter(([s]) => only.has(s))) : row);
        }
        return out;
      };
      fn({
        weights: read,
        termStats: (t) => ({ updates: snap.tick, df: new Map(t.map((x) => [x, snap.df.get(x) ?? 0])) }),
        writeWeights: (rows) => void writes.push(...rows),
        recordArm: (skill, reward) => void arms.push([skill, reward]),
        countUpdate: (terms) => void (counted = terms),
      });
      if (writes.length) {
        await q(
          `INSERT INTO {s}.keel_skill_weights (skill, feature, mean, precision, tick) SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[], $5::bigint[])
           ON CONFLICT (feature, skill) DO UPDATE SET mean = EXCLUDED.mean, precision = EXCLUDED.precision, tick = EXCLUDED.tick`,
          [
            writes.map((w) => w.skill),
            writes.map((w) => safeTerm(w.feature)),
            writes.map((w) => w.row.mean),
            writes.map((w) => w.row.precision),
            writes.map((w) => w.row.tick),
          ],
        );
      }
      for (const [skill, reward] of arms) {
        await q(
          "INSERT INTO {s}.keel_skill_arms (skill, successes, failures) VALUES ($1, $2, $3) ON CONFLICT (skill) DO UPDATE SET successes = {s}.keel_skill_arms.successes + EXCLUDED.successes, failures = {s}.keel_skill_arms.failures + EXCLUDED.failures",
          [skill, reward, 1 - reward],
        );
      }
      if (counted) {
        const terms = [...new Set(counted.map(safeTerm))];
        if (terms.length)
          await q(
            "INSERT INTO {s}.keel_skill_terms (term, df) SELECT t, 1 FROM unnest($1::text[]) t ON CONFLICT (term) DO UPDATE SET df = {s}.keel_skill_terms.df + 1",
            [terms],
          );
        await q("UPDATE {s}.keel_skill_tick SET tick = tick + 1 WHERE id = 1");
      }
    });
  }

  async savePick(p: StoredPick): Promise<void> {
    await this.#db.query(
      "save a pick in",
      `INSERT INTO {s}.keel_skill_picks (session_id, turn_id, skill, terms, candidates, forced, signature, input, ts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (session_id, turn_id) DO UPDATE SET skill = EXCLUDED.skill, terms = EXCLUDED.terms, candidates = EXCLUDED.candidates, forced = EXCLUDED.forced, signature = EXCLUDED.signature, input = EXCLUDED.input, ts = EXCLUDED.ts`,
      [
        p.sessionId,
        p.turnId,
        p.skill,
        JSON.stringify(p.terms.map(safeTerm)),
        JSON.stringify(p.candidates),
        p.forced,
        redact(p.signature),
        headOf(redact(p.input), 4000),
        Date.now(),
      ],
    );
    if (++this.#saves % TRIM_EVERY === 0) {
      await this.#db.query(
        "trim old picks in",
        `DELETE FROM {s}.keel_skill_picks WHERE ts < (SELECT ts FROM {s}.keel_skill_picks ORDER BY ts DESC OFFSET ${KEEP_PICKS - 1} LIMIT 1)`,
      );
    }
  }

  async getPick(turnId: string, sessionId?: string): Promise<StoredPick | undefined> {
    const rows =
      sessionId === undefined
        ? await this.#db.query(
            "read a pick in",
            "SELECT * FROM {s}.keel_skill_picks WHERE turn_id = $1 ORDER BY ts DESC LIMIT 1",
            [turnId],
          )
        : await this.#db.query(
            "read a pick in",
            "SELECT * FROM {s}.keel_skill_picks WHERE turn_id = $1 AND session_id = $2",
            [turnId, sessionId],
          );
    const r = rows[0];
    if (!r) return undefined;
    return {
      sessionId: String(r.session_id),
      turnId: String(r.turn_id),
      skill: String(r.skill),
      terms: JSON.parse(String(r.terms)),
      candidates: JSON.parse(String(r.candidates)),
      forced: r.forced === true,
      signature: String(r.signature),
      input: String(r.input),
    };
  }

  async bumpStreak(
    signature: string,
    success: boolean,
    example: { input: string; answer: string; skill?: string },
    namespace = "default",
  ): Promise<Streak> {
    const sig = redact(signature);
    return this.#db.tx("record a streak in", async (q) => {
      if (!success) {
        await q("DELETE FROM {s}.keel_skill_streaks WHERE namespace = $1 AND signature = $2", [namespace, sig]);
        return { signature: sig, namespace, count: 0, examples: [] };
      }
      const row = (
        await q<{ count: number; examples: string }>(
          "SELECT count, examples FROM {s}.keel_skill_streaks WHERE namespace = $1 AND signature = $2 FOR UPDATE",
          [namespace, sig],
        )
      )[0];
      const examples = [
        ...(row ? (JSON.parse(row.examples) as Streak["examples"]) : []),
        {
          input: headOf(redact(example.input), 2000),
          answer: headOf(redact(example.answer), 2000),
          ...(example.skill ? { skill: example.skill } : {}),
        },
      ].slice(-5);
      const count = (row ? Number(row.count) : 0) + 1;
      await q(
        "INSERT INTO {s}.keel_skill_streaks (namespace, signature, count, examples, ts) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, signature) DO UPDATE SET count = EXCLUDED.count, examples = EXCLUDED.examples, ts = EXCLUDED.ts",
        [namespace, sig, count, JSON.stringify(examples), Date.now()],
      );
      return { signature: sig, namespace, count, examples };
    });
  }

  async resetStreak(signature: string): Promise<void> {
    await this.#db.query("reset a streak in", "DELETE FROM {s}.keel_skill_streaks WHERE signature = $1", [
      redact(signature),
    ]);
  }

  async streak(signature: string, namespace = "default"): Promise<number> {
    const r = await this.#db.query(
      "read a streak in",
      "SELECT count FROM {s}.keel_skill_streaks WHERE namespace = $1 AND signature = $2",
      [namespace, redact(signature)],
    );
    return r[0] ? Number(r[0].count) : 0;
  }

  async revoke(signature: string): Promise<void> {
    await this.#db.tx("revoke a draft in", async (q) => {
      await q("INSERT INTO {s}.keel_skill_revoked (signature, ts) VALUES ($1, $2) ON CONFLICT DO NOTHING", [
        signature,
        Date.now(),
      ]);
      await q("DELETE FROM {s}.keel_skill_streaks WHERE signature = $1", [signature]);
    });
  }

  async isRevoked(signature: string): Promise<boolean> {
    return (
      (
        await this.#db.query("read revocations in", "SELECT 1 FROM {s}.keel_skill_revoked WHERE signature = $1", [
          signature,
        ])
      ).length > 0
    );
  }

  close(): void {
    this.#db.close();
  }
}
