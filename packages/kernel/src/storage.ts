/**
 * Where an agent keeps its data: one rule for the session log and every plugin's store. The
 * `store` createAgent is given wins (a SessionStore, "sqlite" or a postgres:// URL), else
 * KEEL_DATABASE_URL, else SQLite files in the agent's home. Plugins are told the result
 * (PluginSetupContext.storage), so two agents in one process with their own homes or databases
 * never share a plugin's file.
 */
import { resolve } from "node:path";
import { KeelError } from "./errors.ts";
import type { SessionStore, StoreDatabase } from "./session-store.ts";
import { defaultKeelHome, defaultSessionDbPath, SqliteSessionStore } from "./sqlite-store.ts";

/**
 * Where the agent a plugin is set up in keeps its data.
 * Contract: a plugin's default files go under `home`; with `database.kind === "postgres"` its
 * tables go in that database and schema; a plugin never reads KEEL_HOME or KEEL_DATABASE_URL.
 */
export interface AgentStorage {
  /** The agent's home folder, absolute. */
  readonly home: string;
  readonly database: StoreDatabase;
}

/**
 * The store an agent writes to, whether it opens it (and closes it), and what its plugins are told.
 * Contract: `open()` creates nothing on disk before it is called (an agent whose plugin setup
 * fails leaves no file behind); it returns the same store every time.
 */
export interface ResolvedStorage {
  open(): SessionStore;
  owns: boolean;
  storage: AgentStorage;
}

const POSTGRES = /^postgres(ql)?:\/\/\S+$/i;

/**
 * Resolve an agent's stores. Contract: a SessionStore given is used as it is; a string (or, when
 * none is given, KEEL_DATABASE_URL) must be "sqlite" or a postgres:// URL, else
 * KEEL_AGENT_OPTIONS_INVALID at `store` naming where it came from and quoting only its scheme;
 * PostgreSQL needs @keel/store-postgres installed (KEEL_STORE_FAILED saying so otherwise).
 */
export async function resolveStorage(options: { store?: SessionStore | string; home?: string }, env: NodeJS.ProcessEnv = process.env): Promise<ResolvedStorage> {
  const home = resolve(options.home ?? defaultKeelHome(env));
  if (options.store !== undefined && typeof options.store !== "string") {
    const given = options.store;
    return { open: () => given, owns: false, storage: { home, database: given.database ?? { kind: "sqlite" } } };
  }
  const fromOptions = typeof options.store === "string";
  const value = (fromOptions ? (options.store as string) : env.KEEL_DATABASE_URL)?.trim();
  if (!value || value === "sqlite") {
    let store: SessionStore | undefined;
    return { open: () => (store ??= new SqliteSessionStore({ path: defaultSessionDbPath(home) })), owns: true, storage: { home, database: { kind: "sqlite" } } };
  }
  const source = fromOptions ? "createAgent's `store`" : "KEEL_DATABASE_URL";
  if (!POSTGRES.test(value)) throw new KeelError("KEEL_AGENT_OPTIONS_INVALID", `${source} must be a SessionStore, "sqlite" or a postgres:// URL; it starts with ${JSON.stringify(/^[a-z][a-z0-9+.-]*:/i.exec(value)?.[0] ?? value.slice(0, 1))}.`, { path: "store" });
  const schema = env.KEEL_DATABASE_SCHEMA?.trim() || undefined;
  const pg = await loadPostgres(source);
  // Connects on first use: nothing is opened before the plugins are set up.
  const store = new pg.PostgresSessionStore({ url: value, ...(schema ? { schema } : {}) });
  return { open: () => store, owns: true, storage: { home, database: store.database ?? { kind: "postgres", url: value, ...(schema ? { schema } : {}) } } };
}

/** @keel/store-postgres, loaded only when an agent is put on PostgreSQL. */
async function loadPostgres(source: string): Promise<{ PostgresSessionStore: new (o: { url: string; schema?: string }) => SessionStore }> {
  const name = "@keel/store-postgres";
  try {
    return (await import(name)) as { PostgresSessionStore: new (o: { url: string; schema?: string }) => SessionStore };
  } catch (err) {
    throw new KeelError("KEEL_STORE_FAILED", `${source} names a PostgreSQL database, and @keel/store-postgres could not be loaded (${(err as Error)?.message ?? String(err)}). Install it beside @keel/kernel, or pass createAgent a store.`, { path: "store" }, { cause: err });
  }
}
