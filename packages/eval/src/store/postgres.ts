/**
 * Experiments in the agent's PostgreSQL database and schema, beside the session log: one
 * component (`experiments`) of @keel/store-postgres's migration registry, on the process's
 * shared pool (the driver is loaded on first use), so `keel db migrate` brings it up too.
 */
import { KeelError } from "@keel/kernel";
import { PgComponent, pgError, quoteIdent, registerMigrations, resolveTarget } from "@keel/store-postgres";
import type { PostgresTarget } from "@keel/store-postgres";
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

/**
 * Migrations of the experiment tables (entry i: version i → i + 1; `{s}` is the schema). JSON
 * fields are TEXT, not jsonb (which reorders keys), so they read back exactly.
 * Contract: never edited once released.
 */
export const POSTGRES_EXPERIMENT_MIGRATIONS: readonly string[] = [
  `CREATE TABLE {s}.keel_experiments (
     id TEXT PRIMARY KEY,
     seq BIGINT GENERATED ALWAYS AS IDENTITY,
     name TEXT NOT NULL,
     dataset TEXT NOT NULL,
     dataset_hash TEXT NOT NULL,
     agent TEXT NOT NULL,
     config TEXT,
     baseline TEXT,
     status TEXT NOT NULL,
     started_at BIGINT NOT NULL,
     ended_at BIGINT,
     summary TEXT,
     metadata TEXT
   );
   CREATE INDEX keel_experiments_recent ON {s}.keel_experiments (started_at, seq);
   CREATE TABLE {s}.keel_experiment_cases (
     experiment_id TEXT NOT NULL REFERENCES {s}.keel_experiments (id),
     case_id TEXT NOT NULL,
     idx INTEGER NOT NULL,
     input TEXT NOT NULL,
     session_id TEXT,
     status TEXT NOT NULL,
     output TEXT NOT NULL,
     scores TEXT NOT NULL,
     metrics TEXT NOT NULL,
     error TEXT,
     started_at BIGINT NOT NULL,
     ended_at BIGINT NOT NULL,
     PRIMARY KEY (experiment_id, case_id)
   );`,
];

registerMigrations("experiments", POSTGRES_EXPERIMENT_MIGRATIONS);

/** PostgreSQL's SQLSTATE for a foreign key violation. */
const FOREIGN_KEY_VIOLATION = "23503";

/** Options of postgresExperimentStore. Contract: all optional; the default opens for writing. */
export interface PostgresExperimentStoreOptions {
  /** For viewing: the tables are never created or migrated, every write throws KEEL_STORE_READ_ONLY, and a schema without them reads as empty. Default false. */
  readOnly?: boolean;
}

/**
 * An ExperimentStore in a PostgreSQL database and schema.
 * Contract: the tables are migrated on first use (under the schema's advisory lock); errors
 * are KEEL_STORE_FAILED naming the database with its credentials masked; a `putCase` or
 * `finish` of an unknown experiment throws KEEL_STORE_FAILED; `close()` never ends a shared
 * pool; after it every call throws.
 */
export function postgresExperimentStore(
  target: PostgresTarget,
  options: PostgresExperimentStoreOptions = {},
): ExperimentStore {
  const pg = new PgComponent(target, "experiments", POSTGRES_EXPERIMENT_MIGRATIONS, "KEEL_STORE_FAILED");
  const view = options.readOnly ? resolveTarget(target, "The experiments store") : undefined;
  let closed = false;
  const open = () => {
    if (closed) throw closedStore(pg.where);
    if (view)
      throw new KeelError("KEEL_STORE_READ_ONLY", `The experiments on ${pg.where} were opened for viewing.`, {
        path: pg.where,
      });
  };
  /** A read: on the component (migrated first), or when viewing as it is, nothing while the tables are not there. */
  const read = async (action: string, sql: string, params: unknown[]): Promise<Array<Record<string, unknown>>> => {
    if (closed) throw closedStore(pg.where);
    if (!view) return pg.query(action, sql, params);
    try {
      const table = `${quoteIdent(view.schema)}.keel_experiment_cases`;
      const found = await view.pool.query("SELECT to_regclass($1) AS t", [table]);
      if ((found.rows[0] as { t: unknown } | undefined)?.t == null) return [];
      return (await view.pool.query(pg.sql(sql), params)).rows as Array<Record<string, unknown>>;
    } catch (err) {
      throw pgError(err, pg.where, action);
    }
  };
  const slots = (n: number) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(", ");
  return {
    async create(experiment: ExperimentRecord) {
      open();
      await pg.query(
        "create an experiment in",
        `INSERT INTO {s}.keel_experiments (${EXPERIMENT_COLUMNS}) VALUES (${slots(12)})`,
        experimentParams(experiment),
      );
    },
    async finish(id: string, status: "completed" | "failed", summary: ExperimentSummary, endedAt: number) {
      open();
      const rows = await pg.query(
        "finish an experiment in",
        "UPDATE {s}.keel_experiments SET status = $1, summary = $2, ended_at = $3 WHERE id = $4 RETURNING id",
        [status, JSON.stringify(summary), endedAt, id],
      );
      if (!rows.length) throw unknownExperiment(id, pg.where);
    },
    async putCase(result: CaseResult) {
      open();
      try {
        await pg.query(
          "store a case in",
          `INSERT INTO {s}.keel_experiment_cases (${CASE_COLUMNS}) VALUES (${slots(12)})
           ON CONFLICT (experiment_id, case_id) DO UPDATE SET idx = EXCLUDED.idx, input = EXCLUDED.input,
             session_id = EXCLUDED.session_id, status = EXCLUDED.status, output = EXCLUDED.output,
             scores = EXCLUDED.scores, metrics = EXCLUDED.metrics, error = EXCLUDED.error,
             started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at`,
          caseParams(result),
        );
      } catch (err) {
        if ((err as { cause?: { code?: string } }).cause?.code === FOREIGN_KEY_VIOLATION)
          throw unknownExperiment(result.experimentId, pg.where);
        throw err;
      }
    },
    async get(id: string) {
      const rows = await read(
        "read an experiment in",
        `SELECT ${EXPERIMENT_COLUMNS} FROM {s}.keel_experiments WHERE id = $1`,
        [id],
      );
      return rows[0] && toExperiment(rows[0]);
    },
    async list(o: { agent?: string; limit?: number } = {}) {
      const rows = await read(
        "list experiments in",
        `SELECT ${EXPERIMENT_COLUMNS} FROM {s}.keel_experiments WHERE ($1::text IS NULL OR agent = $1)
         ORDER BY started_at DESC, seq DESC LIMIT $2`,
        [o.agent ?? null, listLimit(o.limit) ?? null],
      );
      return rows.map(toExperiment);
    },
    async cases(experimentId: string) {
      const rows = await read(
        "read the cases in",
        `SELECT ${CASE_COLUMNS} FROM {s}.keel_experiment_cases WHERE experiment_id = $1 ORDER BY idx, case_id COLLATE "C"`,
        [experimentId],
      );
      return rows.map(toCase);
    },
    async close() {
      closed = true;
      pg.close();
    },
  };
}
