/**
 * SQLite persistence (`node:sqlite`): the router's posteriors, the picks of recent turns
 * (so feedback can arrive later, from another process), signature streaks and revocations.
 */
import type { DatabaseSync } from "node:sqlite";
import { createHash } from "node:crypto";
import { openSqlite } from "@keel/store-sqlite";
import { containsSecret, isHighEntropyToken, redact } from "@keel/secrets";
import type { Counts, PosteriorStore, PosteriorTx, WeightRow, WeightWrite } from "./posterior.ts";
import { headOf } from "@keel/text";

/**
 * A routing term or feature as stored: one that looks like key material is replaced by a
 * short one-way hash, so the posterior still learns from it and no secret reaches the file.
 */
export function safeTerm(term: string): string {
  if (term.length < 16 || (!isHighEntropyToken(term, true) && !containsSecret(term))) return term;
  return `#${createHash("sha256").update(term).digest("hex").slice(0, 16)}`;
}

/** A stored pick of one turn. */
export interface StoredPick {
  sessionId: string;
  turnId: string;
  skill: string;
  terms: string[];
  candidates: string[];
  forced: boolean;
  signature: string;
  input: string;
}

/** A signature's run of consecutive successes, in one namespace. */
export interface Streak {
  signature: string;
  /** The namespace whose turns built the streak (the draft is scoped to it). */
  namespace: string;
  count: number;
  examples: Array<{ input: string; answer: string; skill?: string }>;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS weights (skill TEXT NOT NULL, feature TEXT NOT NULL, mean REAL NOT NULL, precision REAL NOT NULL, tick INTEGER NOT NULL, PRIMARY KEY (feature, skill)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS arms (skill TEXT PRIMARY KEY, successes REAL NOT NULL, failures REAL NOT NULL);
CREATE TABLE IF NOT EXISTS terms (term TEXT PRIMARY KEY, df INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS picks (session_id TEXT NOT NULL, turn_id TEXT NOT NULL, skill TEXT NOT NULL, terms TEXT NOT NULL, candidates TEXT NOT NULL, forced INTEGER NOT NULL, signature TEXT NOT NULL, input TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (session_id, turn_id));
CREATE INDEX IF NOT EXISTS picks_turn ON picks (turn_id);
CREATE TABLE IF NOT EXISTS ns_streaks (namespace TEXT NOT NULL, signature TEXT NOT NULL, count INTEGER NOT NULL, examples TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (namespace, signature));
CREATE TABLE IF NOT EXISTS revoked (signature TEXT PRIMARY KEY, ts INTEGER NOT NULL);
`;

/**
 * Scrub a database written before redaction (user_version 0): picks' inputs and terms are
 * redacted, the old un-namespaced streaks (raw inputs) are dropped; secure_delete overwrites
 * the freed pages.
 */
function scrubLegacy(db: DatabaseSync): void {
  const v = (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
  if (v >= 1) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    db.exec("DROP TABLE IF EXISTS streaks");
    const upd = db.prepare("UPDATE picks SET input = ?, terms = ?, signature = ? WHERE rowid = ?");
    for (const r of db.prepare("SELECT rowid AS id, input, terms, signature FROM picks").all() as Array<{
      id: number;
      input: string;
      terms: string;
      signature: string;
    }>) {
      let terms: string[] = [];
      try {
        terms = (JSON.parse(r.terms) as unknown[]).filter((t): t is string => typeof t === "string").map(safeTerm);
      } catch {
        // unreadable terms are dropped
      }
      upd.run(redact(r.input), JSON.stringify(terms), redact(r.signature), r.id);
    }
    db.exec("PRAGMA user_version = 1");
    db.exec("COMMIT");
  } catch (err) {
    db.exec("ROLLBACK");
    throw err;
  }
}

/**
 * What the skills plugin keeps besides posteriors: picks (for late feedback), streaks and
 * revocations. Contract: implemented by SkillsStore (SQLite, synchronous) and
 * PostgresSkillsStore (async); callers await every result.
 */
export interface SkillsStorage extends PosteriorStore {
  readonly path: string;
  savePick(p: StoredPick): void | Promise<void>;
  getPick(turnId: string, sessionId?: string): StoredPick | undefined | Promise<StoredPick | undefined>;
  bumpStreak(
    signature: string,
    success: boolean,
    example: { input: string; answer: string; skill?: string },
    namespace?: string,
  ): Streak | Promise<Streak>;
  resetStreak(signature: string): void | Promise<void>;
  revoke(signature: string): void | Promise<void>;
  isRevoked(signature: string): boolean | Promise<boolean>;
  close(): void;
}

/** How many picks are kept for late feedback. */
const KEEP_PICKS = 5000;

/**
 * The plugin's SQLite database.
 * Contract: WAL mode with synchronous NORMAL (a commit survives a killed process; a power
 * loss may drop the last ones), a 5 s busy timeout, secure_delete on; every posterior update is one
 * IMMEDIATE transaction, so concurrent processes add up instead of overwriting each other;
 * every text it writes (pick inputs, streak examples, signatures) is redacted by
 * @keel/secrets and every term or feature passes `safeTerm`, so no caller can persist a secret.
 */
export class SkillsStore implements SkillsStorage {
  readonly path: string;
  private readonly db: DatabaseSync;

  constructor(path: string) {
    this.path = path;
    // Busy timeout first; the WAL switch and the schema are retried while another process
    // opens the same fresh file (concurrent first opens), and a malformed file is refused.
    this.db = openSqlite(path, {
      what: "skills database",
      setup: (db) => {
        db.exec("PRAGMA secure_delete = ON");
        // Learned statistics, not the user's words: a commit survives a killed process (WAL);
        // only a power loss may drop the last few, and no fsync per turn (~15 ms here).
        db.exec("PRAGMA synchronous = NORMAL");
        db.exec(SCHEMA);
        scrubLegacy(db);
      },
    });
  }

  private tick(): number {
    const row = this.db.prepare("SELECT value FROM meta WHERE key = 'tick'").get() as { value: string } | undefined;
    return row ? Number(row.value) : 0;
  }

  weights(features: readonly string[], skills?: readonly string[]): Map<string, Map<string, WeightRow>> {
    const out = new Map<string, Map<string, WeightRow>>();
    const fs = [...new Set(features)];
    if (!fs.length) return out;
    let sql = `SELECT skill, feature, mean, precision, tick FROM weights WHERE feature IN (${fs.map(() => "?").join(",")})`;
    const params: string[] = [...fs];
    if (skills) {
      sql += ` AND skill IN (${skills.map(() => "?").join(",")})`;
      params.push(...skills);
    }
    for (const r of this.db.prepare(sql).all(...params) as Array<{
      skill: string;
      feature: string;
      mean: number;
      precision: number;
      tick: number;
    }>) {
      let m = out.get(r.feature);
      if (!m) out.set(r.feature, (m = new Map()));
      m.set(r.skill, { mean: r.mean, precision: r.precision, tick: r.tick });
    }
    return out;
  }

  termStats(terms: readonly string[]): { updates: number; df: Map<string, number> } {
    const df = new Map<string, number>(terms.map((t) => [t, 0]));
    const ts = [...new Set(terms)];
    if (ts.length)
      for (const r of this.db
        .prepare(`SELECT term, df FROM terms WHERE term IN (${ts.map(() => "?").join(",")})`)
        .all(...ts) as Array<{ term: string; df: number }>)
        df.set(r.term, r.df);
    return { updates: this.tick(), df };
  }

  arms(): Map<string, Counts> {
    const rows = this.db.prepare("SELECT skill, successes, failures FROM arms").all() as Array<{
      skill: string;
      successes: number;
      failures: number;
    }>;
    return new Map(rows.map((r) => [r.skill, { successes: r.successes, failures: r.failures }]));
  }

  update(fn: (tx: PosteriorTx) => void): void {
    this.transaction(() =>
      fn({
        weights: (f, s) => this.weights(f, s),
        termStats: (t) => this.termStats(t),
        writeWeights: (rows: readonly WeightWrite[]) => {
          const st = this.db.prepare(
            "INSERT INTO weights (skill, feature, mean, precision, tick) VALUES (?, ?, ?, ?, ?) ON CONFLICT (feature, skill) DO UPDATE SET mean = excluded.mean, precision = excluded.precision, tick = excluded.tick",
          );
          for (const { skill, feature, row } of rows)
            st.run(skill, safeTerm(feature), row.mean, row.precision, row.tick);
        },
        recordArm: (skill, reward) => {
          this.db
            .prepare(
              "INSERT INTO arms (skill, successes, failures) VALUES (?, ?, ?) ON CONFLICT (skill) DO UPDATE SET successes = successes + excluded.successes, failures = failures + excluded.failures",
            )
            .run(skill, reward, 1 - reward);
        },
        countUpdate: (terms) => {
          const st = this.db.prepare(
            "INSERT INTO terms (term, df) VALUES (?, 1) ON CONFLICT (term) DO UPDATE SET df = df + 1",
          );
          for (const t of new Set(terms.map(safeTerm))) st.run(t);
          this.db
            .prepare(
              "INSERT INTO meta (key, value) VALUES ('tick', '1') ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
            )
            .run();
        },
      }),
    );
  }

  /** Run `fn` in one IMMEDIATE transaction. */
  transaction<T>(fn: () => T): T {
    this.db.exec("BEGIN IMMEDIATE");
    try {
      const out = fn();
      this.db.exec("COMMIT");
      return out;
    } catch (err) {
      this.db.exec("ROLLBACK");
      throw err;
    }
  }

  savePick(p: StoredPick): void {
    this.db
      .prepare(
        "INSERT OR REPLACE INTO picks (session_id, turn_id, skill, terms, candidates, forced, signature, input, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      )
      .run(
        p.sessionId,
        p.turnId,
        p.skill,
        JSON.stringify(p.terms.map(safeTerm)),
        JSON.stringify(p.candidates),
        p.forced ? 1 : 0,
        redact(p.signature),
        headOf(redact(p.input), 4000),
        Date.now(),
      );
    this.db
      .prepare(
        `DELETE FROM picks WHERE rowid IN (SELECT rowid FROM picks ORDER BY ts DESC LIMIT -1 OFFSET ${KEEP_PICKS})`,
      )
      .run();
  }

  /** The pick of a turn (by turn id, optionally within a session). */
  getPick(turnId: string, sessionId?: string): StoredPick | undefined {
    const r = (
      sessionId === undefined
        ? this.db.prepare("SELECT * FROM picks WHERE turn_id = ? ORDER BY ts DESC LIMIT 1").get(turnId)
        : this.db.prepare("SELECT * FROM picks WHERE turn_id = ? AND session_id = ?").get(turnId, sessionId)
    ) as Record<string, unknown> | undefined;
    if (!r) return undefined;
    return {
      sessionId: String(r.session_id),
      turnId: String(r.turn_id),
      skill: String(r.skill),
      terms: JSON.parse(String(r.terms)),
      candidates: JSON.parse(String(r.candidates)),
      forced: r.forced === 1,
      signature: String(r.signature),
      input: String(r.input),
    };
  }

  /** Add a success to a signature's streak in `namespace` (or reset it on failure); returns the streak after. */
  bumpStreak(
    signature: string,
    success: boolean,
    example: { input: string; answer: string; skill?: string },
    namespace = "default",
  ): Streak {
    const sig = redact(signature);
    return this.transaction(() => {
      if (!success) {
        this.db.prepare("DELETE FROM ns_streaks WHERE namespace = ? AND signature = ?").run(namespace, sig);
        return { signature: sig, namespace, count: 0, examples: [] };
      }
      const row = this.db
        .prepare("SELECT count, examples FROM ns_streaks WHERE namespace = ? AND signature = ?")
        .get(namespace, sig) as { count: number; examples: string } | undefined;
      const examples = [
        ...(row ? (JSON.parse(row.examples) as Streak["examples"]) : []),
        {
          input: headOf(redact(example.input), 2000),
          answer: headOf(redact(example.answer), 2000),
          ...(example.skill ? { skill: example.skill } : {}),
        },
      ].slice(-5);
      const count = (row?.count ?? 0) + 1;
      this.db
        .prepare("INSERT OR REPLACE INTO ns_streaks (namespace, signature, count, examples, ts) VALUES (?, ?, ?, ?, ?)")
        .run(namespace, sig, count, JSON.stringify(examples), Date.now());
      return { signature: sig, namespace, count, examples };
    });
  }

  /** Reset a signature's streak in every namespace (a thumbs down on a pick). */
  resetStreak(signature: string): void {
    this.db.prepare("DELETE FROM ns_streaks WHERE signature = ?").run(redact(signature));
  }

  streak(signature: string, namespace = "default"): number {
    const row = this.db
      .prepare("SELECT count FROM ns_streaks WHERE namespace = ? AND signature = ?")
      .get(namespace, redact(signature)) as { count: number } | undefined;
    return row?.count ?? 0;
  }

  revoke(signature: string): void {
    this.db.prepare("INSERT OR IGNORE INTO revoked (signature, ts) VALUES (?, ?)").run(signature, Date.now());
    this.db.prepare("DELETE FROM ns_streaks WHERE signature = ?").run(signature);
  }

  isRevoked(signature: string): boolean {
    return this.db.prepare("SELECT 1 FROM revoked WHERE signature = ?").get(signature) !== undefined;
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }
}
