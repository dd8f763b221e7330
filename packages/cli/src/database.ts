/**
 * Which database the agent's stores use: the config's `store`, else KEEL_DATABASE_URL, else
 * SQLite files in the home. One setting switches the session log and every plugin's store.
 * (Importing @keel/store-postgres is cheap: its pools load the driver on first use.)
 */
import { PostgresSessionStore, selectDatabase } from "@keel/store-postgres";
import { maskCredentials } from "@keel/kernel";
import type { KeelConfig, SessionStore } from "@keel/agent";

/** The chosen backend. Contract: `shown` never contains a credential of the URL (maskCredentials: its password, `?password=`, `?sslpassword=`…). */
export type Database =
  | { kind: "sqlite" }
  | { kind: "postgres"; url: string; schema?: string; shown: string; source: string };

/**
 * The database a config and environment select.
 * Contract: the config's `store` wins over KEEL_DATABASE_URL; a value that is neither "sqlite"
 * nor a postgres URL throws KEEL_CONFIG_INVALID naming where it came from.
 */
export function chooseDatabase(config: Pick<KeelConfig, "store">, env: NodeJS.ProcessEnv, filepath?: string): Database {
  const fromConfig = config.store !== undefined;
  const source = fromConfig ? `${filepath ?? "the config"}: store` : "KEEL_DATABASE_URL";
  const target = selectDatabase(
    fromConfig ? config.store : env.KEEL_DATABASE_URL,
    source,
    fromConfig ? "store" : "KEEL_DATABASE_URL",
    env,
  );
  return target ? { kind: "postgres", ...target, shown: maskCredentials(target.url), source } : { kind: "sqlite" };
}

/** The session store on PostgreSQL. */
export function postgresSessionStore(db: Database & { kind: "postgres" }): SessionStore {
  return new PostgresSessionStore({ url: db.url, ...(db.schema ? { schema: db.schema } : {}) });
}
