/**
 * Experiments in the agent's session database file (`<home>/sessions.sqlite`), on a connection
 * of their own. The session schema is versioned by `PRAGMA user_version` (@keel/store-sqlite);
 * these tables keep their version in `keel_migrations` under the component `experiments`, the
 * same table and shape PostgreSQL uses, so neither can move the other's version.
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { KeelError } from "@keel/kernel";
import { openSqlite, storeError } from "@keel/store-sqlite";
import type { CaseResult, ExperimentRecord, ExperimentStore, ExperimentSummary } from "../types.ts";
import {
  CASE_COLUMNS,
  caseParams,
  closedStore,
  EXPERIMENT_COLUMNS,
  experimentParams,
  listLimit,
  toCase,
  toExperiment,
  unknownExperiment,
} from "./rows.ts";

const COMPONENT = "experiments";
const WHAT = "session database";

/**
 * Migrations of the experiment tables: entry `i` moves version `i` to `i + 1`.
 * Contract: never edited once released; a new version appends an entry.
 */
export const SQLITE_EXPERIMENT_MIGRATIONS: readonly string[] = [
  `CREATE TABLE keel_experiments (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     dataset TEXT NOT NULL,
     dataset_hash TEXT NOT NULL,
     agent TEXT NOT NULL,
     config TEXT,
     baseline TEXT,
     status TEXT NOT NULL,
     started_at INTEGER NOT NULL,
     ended_at INTEGER,
     summary TEXT,
     metadata TEXT
   );
   CREATE INDEX keel_experiments_recent ON keel_experiments (started_at);
   CREATE TABLE keel_experiment_cases (
     experiment_id TEXT NOT NULL REFERENCES keel_experiments (id),
     case_id TEXT NOT NULL,
     idx INTEGER NOT NULL,
     input TEXT NOT NULL,
     session_id TEXT,
     status TEXT NOT NULL,
     output TEXT NOT NULL,
     scores TEXT NOT NULL,
     metrics TEXT NOT NULL,
     error TEXT,
     started_at INTEGER NOT NULL,
     ended_at INTEGER NOT NULL,
     PRIMARY KEY (experiment_id, case_id)
   );`,
];

/** Options of sqliteExperimentStore. Contract: only `path` is required. */
export interface SqliteExperimentStoreOptions {
  /** The database file: the agent's session database (`defaultSessionDbPath(home)`). */
  path: string;
  /** For viewing: nothing is created or written (every write throws KEEL_STORE_READ_ONLY); reads of a file without the tables are empty. Default false. */
  readOnly?: boolean;
  /** How long a statement waits for another process's lock. Default 5000 ms. */
  busyTimeoutMs?: number;
}

/**
 * An ExperimentStore in a SQLite file, beside the sessions.
 * Contract: WAL and a busy timeout as the session store has, so several processes may write
 * experiments and sessions at once; every write is one statement (atomic); errors are
 * KEEL_STORE_FAILED / KEEL_STORE_READ_ONLY / KEEL_STORE_CORRUPT naming the file; a `putCase`
 * or `finish` of an unknown experiment throws KEEL_STORE_FAILED; after `close()` every call throws.
 */
export function sqliteExperimentStore(options: SqliteExperimentStoreOptions): ExperimentStore {
  const { path } = options;
  const readOnly = options.readOnly === true;
  const db = openSqlite(path, {
    what: WHAT,
    readOnly,
    busyTimeoutMs: options.busyTimeoutMs ?? 5_000,
    setup: (d) => {
      d.exec("PRAGMA foreign_keys=ON");
      migrate(d, path);
    },
  });
  let closed = false;
  let statements: ReturnType<typeof prepare> | undefined;
  /** The prepared statements; undefined while a read-only file has no experiment tables yet. */
  const stmts = () => {
    if (closed) throw closedStore(path);
    if (!statements && (!readOnly || version(db) > 0)) statements = prepare(db);
    return statements;
  };
  const write = <T>(action: string, fn: (s: ReturnType<typeof prepare>) => T): T => {
    if (readOnly)
      throw new KeelError("KEEL_STORE_READ_ONLY", `The ${WHAT} ${path} was opened for viewing; cannot ${action}.`, {
        path,
      });
    try {
      return fn(stmts()!);
    } catch (err) {
      throw storeError(err, path, WHAT, `${action} in`);
    }
  };
  const read = <T>(action: string, empty: T, fn: (s: ReturnType<typeof prepare>) => T): T => {
    try {
      const s = stmts();
      return s ? fn(s) : empty;
    } catch (err) {
      throw storeError(err, path, WHAT, `${action} in`);
    }
  };
  return {
    async create(experiment: ExperimentRecord) {
      write("create an experiment", (s) => s.create.run(...(experimentParams(experiment) as SQLInputValue[])));
    },
    async finish(id: string, status: "completed" | "failed", summary: ExperimentSummary, endedAt: number) {
      const changed = write(
        "finish an experiment",
        (s) => s.finish.run(status, JSON.stringify(summary), endedAt, id).changes,
      );
      if (Number(changed) === 0) throw unknownExperiment(id, path);
    },
    async putCase(result: CaseResult) {
      try {
        write("store a case", (s) => s.putCase.run(...(caseParams(result) as SQLInputValue[])));
      } catch (err) {
        // A case of an unknown experiment breaks the foreign key.
        if (/FOREIGN KEY/i.test(String((err as KeelError).cause ?? err)))
          throw unknownExperiment(result.experimentId, path);
        throw err;
      }
    },
    async get(id: string) {
      return read("read an experiment", undefined, (s) => {
        const row = s.get.get(id) as Record<string, unknown> | undefined;
        return row && toExperiment(row);
      });
    },
    async list(o: { agent?: string; limit?: number } = {}) {
      return read("list experiments", [], (s) =>
        (s.list.all({ agent: o.agent ?? null, limit: listLimit(o.limit) ?? -1 }) as Array<Record<string, unknown>>).map(
          toExperiment,
        ),
      );
    },
    async cases(experimentId: string) {
      return read("read the cases", [], (s) =>
        (s.cases.all(experimentId) as Array<Record<string, unknown>>).map(toCase),
      );
    },
    async close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}

function prepare(db: DatabaseSync): Record<"create" | "finish" | "putCase" | "get" | "list" | "cases", StatementSync> {
  const slots = (n: number) => Array.from({ length: n }, () => "?").join(", ");
  return {
    create: db.prepare(`INSERT INTO keel_experiments (${EXPERIMENT_COLUMNS}) VALUES (${slots(12)})`),
    finish: db.prepare("UPDATE keel_experiments SET status = ?, summary = ?, ended_at = ? WHERE id = ?"),
    putCase: db.prepare(
      `INSERT INTO keel_experiment_cases (${CASE_COLUMNS}) VALUES (${slots(12)})
       ON CONFLICT (experiment_id, case_id) DO UPDATE SET idx = excluded.idx, input = excluded.input,
         session_id = excluded.session_id, status = excluded.status, output = excluded.output,
         scores = excluded.scores, metrics = excluded.metrics, error = excluded.error,
         started_at = excluded.started_at, ended_at = excluded.ended_at`,
    ),
    get: db.prepare(`SELECT ${EXPERIMENT_COLUMNS} FROM keel_experiments WHERE id = ?`),
    list: db.prepare(
      `SELECT ${EXPERIMENT_COLUMNS} FROM keel_experiments WHERE (:agent IS NULL OR agent = :agent)
       ORDER BY started_at DESC, rowid DESC LIMIT :limit`,
    ),
    cases: db.prepare(
      `SELECT ${CASE_COLUMNS} FROM keel_experiment_cases WHERE experiment_id = ? ORDER BY idx, case_id`,
    ),
  };
}

/** The experiment tables' version in this file (0: none yet). */
function version(db: DatabaseSync): number {
  const meta = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'keel_migrations'").get();
  if (!meta) return 0;
  const row = db.prepare("SELECT version FROM keel_migrations WHERE component = ?").get(COMPONENT) as
    | { version: number }
    | undefined;
  return row ? Number(row.version) : 0;
}

/** Bring the experiment tables to the latest version; safe when several processes open a file at once. */
function migrate(db: DatabaseSync, path: string): void {
  const latest = SQLITE_EXPERIMENT_MIGRATIONS.length;
  if (version(db) === latest) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    db.exec(
      "CREATE TABLE IF NOT EXISTS keel_migrations (component TEXT PRIMARY KEY, version INTEGER NOT NULL, applied_at INTEGER NOT NULL)",
    );
    const from = version(db);
    if (from > latest)
      throw new KeelError(
        "KEEL_STORE_FAILED",
        `The experiment tables in ${path} are at version ${from} but this Keel only knows up to ${latest}; upgrade Keel to use them.`,
        { path },
      );
    for (let v = from; v < latest; v++) db.exec(SQLITE_EXPERIMENT_MIGRATIONS[v]!);
    db.prepare(
      `INSERT INTO keel_migrations (component, version, applied_at) VALUES (?, ?, ?)
       ON CONFLICT (component) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`,
    ).run(COMPONENT, latest, Date.now());
    db.exec("COMMIT");
  } catch (err) {
    db.exec("ROLLBACK");
    throw err;
  }
}
