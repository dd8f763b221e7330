/**
 * Which database the agent's stores use: the config's `store`, else KEEL_DATABASE_URL, else
 * SQLite files in the home. One setting switches the session log and every plugin's store.
 */
import { KeelError } from "@keel/kernel";
import type { KeelConfig, SessionStore } from "@keel/kernel";

/** The chosen backend. Contract: `shown` never contains the URL's password. */
export type Database = { kind: "sqlite" } | { kind: "postgres"; url: string; schema?: string; shown: string; source: string };

const PG = /^postgres(ql)?:\/\/\S+$/i;

/** The URL for messages: its password replaced by ***. */
export function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "postgres (an unparsable URL)";
  }
}

/**
 * The database a config and environment select.
 * Contract: the config's `store` wins over KEEL_DATABASE_URL; a KEEL_DATABASE_URL that is
 * neither "sqlite" nor a postgres URL throws KEEL_CONFIG_INVALID naming the variable.
 */
export function chooseDatabase(config: Pick<KeelConfig, "store">, env: NodeJS.ProcessEnv, filepath?: string): Database {
  const fromConfig = config.store !== undefined;
  const value = (fromConfig ? config.store : env.KEEL_DATABASE_URL?.trim()) || "sqlite";
  const source = fromConfig ? `${filepath ?? "the config"}: store` : "KEEL_DATABASE_URL";
  if (value === "sqlite") return { kind: "sqlite" };
  if (!PG.test(value)) throw new KeelError("KEEL_CONFIG_INVALID", `${source} must be "sqlite" or a postgres:// URL; it starts with ${JSON.stringify(value.slice(0, 12))}.`, { path: fromConfig ? "store" : "KEEL_DATABASE_URL" });
  const schema = env.KEEL_DATABASE_SCHEMA?.trim();
  return { kind: "postgres", url: value, ...(schema ? { schema } : {}), shown: maskUrl(value), source };
}

/** The session store on PostgreSQL (the driver is loaded only when it is used). */
export async function postgresSessionStore(db: Database & { kind: "postgres" }): Promise<SessionStore> {
  const { PostgresSessionStore } = await import("@keel/store-postgres");
  return new PostgresSessionStore({ url: db.url, ...(db.schema ? { schema: db.schema } : {}) });
}

/** Point the plugins (which read KEEL_DATABASE_URL) at the same database as the session log. */
export function shareDatabase(db: Database, env: NodeJS.ProcessEnv): void {
  env.KEEL_DATABASE_URL = db.kind === "postgres" ? db.url : "sqlite";
}
