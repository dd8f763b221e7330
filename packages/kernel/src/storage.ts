/**
 * Where an agent keeps its data: one rule for the session log and every plugin's store. The
 * `store` createAgent is given wins (a SessionStore, "sqlite" or a postgres:// URL), else
 * KEEL_DATABASE_URL, else SQLite files in the agent's home. Plugins are told the result
 * (PluginSetupContext.storage), so two agents in one process with their own homes or databases
 * never share a plugin's file.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { KeelError } from "./errors.ts";
import type { SessionStore, StoreDatabase } from "./session-store.ts";

/** Keel's home directory. Contract: `KEEL_HOME` when set and non-empty, else `~/.keel`. */
export function defaultKeelHome(env: NodeJS.ProcessEnv = process.env): string {
  const home = env["KEEL_HOME"];
  return home ? home : join(homedir(), ".keel");
}

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
 * The stores are packages of their own (@keel/store-sqlite, @keel/store-postgres) that build on
 * the kernel: this is the one place the kernel reaches one, by name, on first use, only when
 * createAgent was not given a store (its composition root).
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
export async function resolveStorage(
  options: { store?: SessionStore | string; home?: string },
  env: NodeJS.ProcessEnv = process.env,
): Promise<ResolvedStorage> {
  const home = resolve(options.home ?? defaultKeelHome(env));
  if (options.store !== undefined && typeof options.store !== "string") {
    const given = options.store;
    return { open: () => given, owns: false, storage: { home, database: given.database ?? { kind: "sqlite" } } };
  }
  const fromOptions = typeof options.store === "string";
  const value = (fromOptions ? (options.store as string) : env.KEEL_DATABASE_URL)?.trim();
  if (!value || value === "sqlite") {
    const sqlite = (await load("@keel/store-sqlite", "the default SQLite store")) as {
      SqliteSessionStore: new (o: { path: string }) => SessionStore;
    };
    let store: SessionStore | undefined;
    return {
      open: () => (store ??= new sqlite.SqliteSessionStore({ path: join(home, "sessions.sqlite") })),
      owns: true,
      storage: { home, database: { kind: "sqlite" } },
    };
  }
  const source = fromOptions ? "createAgent's `store`" : "KEEL_DATABASE_URL";
  if (!POSTGRES.test(value))
    throw new KeelError(
      "KEEL_AGENT_OPTIONS_INVALID",
      `${source} must be a SessionStore, "sqlite" or a postgres:// URL; it starts with ${JSON.stringify(/^[a-z][a-z0-9+.-]*:/i.exec(value)?.[0] ?? value.slice(0, 1))}.`,
      { path: "store" },
    );
  const schema = env.KEEL_DATABASE_SCHEMA?.trim() || undefined;
  const pg = (await load("@keel/store-postgres", source)) as {
    PostgresSessionStore: new (o: { url: string; schema?: string }) => SessionStore;
  };
  // Connects on first use: nothing is opened before the plugins are set up.
  const store = new pg.PostgresSessionStore({ url: value, ...(schema ? { schema } : {}) });
  return {
    open: () => store,
    owns: true,
    storage: { home, database: store.database ?? { kind: "postgres", url: value, ...(schema ? { schema } : {}) } },
  };
}

/** A store package, loaded on first use (it imports the kernel: a static import would be a cycle). */
async function load(name: string, what: string): Promise<unknown> {
  try {
    return await import(name);
  } catch (err) {
    throw new KeelError(
      "KEEL_STORE_FAILED",
      `${what} needs ${name}, which could not be loaded (${(err as Error)?.message ?? String(err)}). Install it beside @keel/kernel, or pass createAgent a store.`,
      { path: "store" },
      { cause: err },
    );
  }
}
