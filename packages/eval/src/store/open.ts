/** The experiment store of an agent: where its sessions are, on SQLite or PostgreSQL. */
import type { AgentStorage } from "@keel/kernel";
import { agentDatabase } from "@keel/store-postgres";
import { defaultSessionDbPath } from "@keel/store-sqlite";
import type { ExperimentStore } from "../types.ts";
import { postgresExperimentStore } from "./postgres.ts";
import { sqliteExperimentStore } from "./sqlite.ts";

/** Options of openExperimentStore. Contract: all optional; the default opens for writing. */
export interface OpenExperimentStoreOptions {
  /**
   * For viewing (`keel studio`): nothing is created, migrated or written (a SQLite file is
   * opened read-only), every write throws KEEL_STORE_READ_ONLY, and a database without the
   * experiment tables reads as empty. Default false.
   */
  readOnly?: boolean;
}

/**
 * The experiment store beside an agent's sessions.
 * Contract: SQLite: the session database `<storage.home>/sessions.sqlite` (tables created on
 * open unless `readOnly`; a read-only open of a missing file throws KEEL_STORE_FAILED);
 * PostgreSQL (`storage.database.kind === "postgres"`): the same database, pool and schema as
 * the session log. Errors are KeelErrors (KEEL_STORE_*), never holding a password.
 */
export async function openExperimentStore(
  storage: AgentStorage,
  options: OpenExperimentStoreOptions = {},
): Promise<ExperimentStore> {
  const pg = agentDatabase(storage);
  if (pg) return postgresExperimentStore(pg, options.readOnly ? { readOnly: true } : {});
  return sqliteExperimentStore({
    path: defaultSessionDbPath(storage.home),
    ...(options.readOnly ? { readOnly: true } : {}),
  });
}
