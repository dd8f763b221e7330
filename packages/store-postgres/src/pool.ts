/**
 * Where Keel's stores live when they are on PostgreSQL: one setting (a connection URL, from
 * the config's `store` or KEEL_DATABASE_URL) and one pool per URL per process, shared by the
 * session log and every plugin's store.
 */
import type pg from "pg";
import { KeelError, maskCredentials } from "@keel/kernel";
import { headOf } from "@keel/text";
import type { StoreDatabase } from "@keel/kernel";
import { describeUrl } from "./pg-util.ts";

export type { PgPool } from "./pg-util.ts";
import type { PgPool } from "./pg-util.ts";

/**
 * A PostgreSQL database for Keel's stores.
 * Contract: give `url` or `pool`; `schema` (default KEEL_DATABASE_SCHEMA, else `public`)
 * holds every Keel table, each component migrated separately.
 */
export interface PostgresTarget {
  /** A connection URL, `postgres://user:password@host:5432/db`. */
  url?: string;
  /** A pool to use instead, e.g. a `pg.Pool` (never ended by a store). */
  pool?: PgPool;
  /** The schema holding Keel's tables (created if missing). */
  schema?: string;
}

/** True for a `postgres://` or `postgresql://` URL. */
export function isPostgresUrl(value: unknown): boolean {
  return typeof value === "string" && /^postgres(ql)?:\/\/\S+$/i.test(value.trim());
}

/**
 * The database a setting names: undefined for unset, empty or "sqlite" (the SQLite files);
 * `{ url, schema }` for a postgres URL (schema from KEEL_DATABASE_SCHEMA).
 * Contract: anything else throws KEEL_CONFIG_INVALID naming `source`, at `path`, quoting at
 * most 12 code points of the value, credentials masked first (never a whole URL, which may hold a password).
 */
export function selectDatabase(
  value: string | undefined,
  source: string,
  path: string,
  env: NodeJS.ProcessEnv = process.env,
): { url: string; schema?: string } | undefined {
  const url = value?.trim();
  if (!url || url === "sqlite") return undefined;
  if (!isPostgresUrl(url))
    throw new KeelError(
      "KEEL_CONFIG_INVALID",
      `${source} must be "sqlite" or a postgres:// URL; it starts with ${JSON.stringify(headOf(maskCredentials(url), 12))}.`,
      { path },
    );
  const schema = env.KEEL_DATABASE_SCHEMA?.trim();
  return { url, ...(schema ? { schema } : {}) };
}

/**
 * The database an agent's plugins share with its session log (PluginSetupContext.storage), or
 * undefined when the agent is on SQLite. Contract: plugins call this, never read KEEL_DATABASE_URL.
 */
export function agentDatabase(storage: { readonly database: StoreDatabase }): PostgresTarget | undefined {
  const d = storage.database;
  if (d.kind !== "postgres") return undefined;
  return {
    ...(d.url !== undefined ? { url: d.url } : {}),
    ...(d.pool !== undefined ? { pool: d.pool as PgPool } : {}),
    ...(d.schema !== undefined ? { schema: d.schema } : {}),
  };
}

function msFromEnv(name: string, dflt: number): number {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : dflt;
}

/** A pool created on its first use (the driver is imported then). */
class LazyPool implements PgPool {
  #real: Promise<pg.Pool> | undefined;
  readonly #url: string;
  constructor(url: string) {
    this.#url = url;
  }
  #pool(): Promise<pg.Pool> {
    return (this.#real ??= import("pg").then(({ default: driver }) => {
      // A server that accepts and never answers must not hang a turn: bounded connect and query waits.
      const pool = new driver.Pool({
        connectionString: this.#url,
        max: 10,
        allowExitOnIdle: true,
        connectionTimeoutMillis: msFromEnv("KEEL_DATABASE_CONNECT_TIMEOUT_MS", 10_000),
        query_timeout: msFromEnv("KEEL_DATABASE_QUERY_TIMEOUT_MS", 60_000),
      });
      pool.on("error", () => undefined);
      return pool;
    }));
  }
  async query(text: string, params?: unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }> {
    return (await this.#pool()).query(text, params);
  }
  async connect(): Promise<pg.PoolClient> {
    return (await this.#pool()).connect();
  }
  async end(): Promise<void> {
    if (this.#real) await (await this.#real).end();
  }
}

const pools = new Map<string, PgPool>();

/**
 * The process's pool for `url`, created on first use.
 * Contract: one pool per URL per process (at most 10 connections); connecting gives up after
 * KEEL_DATABASE_CONNECT_TIMEOUT_MS (10 s), a query after KEEL_DATABASE_QUERY_TIMEOUT_MS
 * (60 s); idle connections do not
 * keep the process alive; an idle client's error (a server restart) is swallowed so the next
 * query reports it instead of crashing the process.
 */
export function sharedPool(url: string): PgPool {
  let pool = pools.get(url);
  if (!pool) pools.set(url, (pool = new LazyPool(url)));
  return pool;
}

/** End every shared pool (tests, a host shutting down). Contract: later sharedPool() calls make new pools. */
export async function endSharedPools(): Promise<void> {
  const all = [...pools.values()];
  pools.clear();
  await Promise.all(all.map((p) => p.end().catch(() => undefined)));
}

/** The pool, schema and printable name of a target. Contract: throws KEEL_STORE_FAILED without `url` or `pool`. */
export function resolveTarget(
  target: PostgresTarget,
  what: string,
  env: NodeJS.ProcessEnv = process.env,
): { pool: PgPool; schema: string; where: string } {
  if (!target.pool && !target.url)
    throw new KeelError(
      "KEEL_STORE_FAILED",
      `${what} needs a database: give \`url\` or \`pool\`, or set KEEL_DATABASE_URL.`,
      { path: "store" },
    );
  const pool = target.pool ?? sharedPool(target.url!);
  return {
    pool,
    schema: target.schema ?? (env.KEEL_DATABASE_SCHEMA?.trim() || "public"),
    where: describeUrl(target.url, pool),
  };
}
