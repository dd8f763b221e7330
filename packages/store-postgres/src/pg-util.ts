/** Small helpers shared by the PostgreSQL stores: identifiers, URLs for messages, error mapping. */
import type pg from "pg";
import { errorMessage, KeelError } from "@keel/kernel";
import { maskCredentials } from "@keel/secrets";
import { toWellFormed } from "@keel/text";
import type { ErrorCode } from "@keel/kernel";

/**
 * What Keel's stores use of a pool. Contract: a `pg.Pool` is one; the shared pools are
 * stand-ins that load the driver on their first query, so a process that never touches
 * PostgreSQL never pays for loading it.
 */
export interface PgPool {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }>;
  connect(): Promise<pg.PoolClient>;
  end(): Promise<void>;
}

/** A schema or table name as a quoted SQL identifier. Contract: throws for an empty name or one with NUL. */
export function quoteIdent(name: string): string {
  if (!name || name.includes("\0"))
    throw new KeelError("KEEL_STORE_FAILED", `${JSON.stringify(name)} is not a usable PostgreSQL schema name.`, {
      path: "store.schema",
    });
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * A connection URL for messages, its credentials (the userinfo password, `?password=`,
 * `?sslpassword=`, any libpq secret) replaced by ***.
 * @deprecated Use `maskCredentials` from @keel/secrets: the same function.
 */
export const maskUrl: (url: string) => string = maskCredentials;

/** The database for messages: the URL without its credentials (maskCredentials), or host:port/database of a given pool. */
export function describeUrl(url: string | undefined, pool: PgPool): string {
  if (url) return maskCredentials(url);
  const o = (pool as unknown as { options?: { host?: string; port?: number; database?: string } }).options ?? {};
  return `postgres://${o.host ?? "localhost"}:${o.port ?? 5432}/${o.database ?? ""}`;
}

/** Network failures that mean "the server is not there", not "the query was wrong". */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ETIMEDOUT", "ECONNRESET", "EAI_AGAIN"]);

/**
 * A driver error as a KeelError naming the database and what was being done.
 * Contract: KeelErrors pass through; an unreachable server says so and what to check; the
 * driver's message (which may echo the connection string) is masked by the KeelError.
 */
export function pgError(
  err: unknown,
  where: string,
  action: string,
  keelCode: ErrorCode = "KEEL_STORE_FAILED",
): KeelError {
  if (err instanceof KeelError) return err;
  const code = (err as { code?: string } | null)?.code;
  const why =
    code && UNREACHABLE.has(code)
      ? `the server is not reachable (${code}); start PostgreSQL or fix the connection URL (KEEL_DATABASE_URL)`
      : `${errorMessage(err)}${code ? ` (SQLSTATE ${code})` : ""}`;
  return new KeelError(keelCode, `Could not ${action} ${where}: ${why}.`, { path: where }, { cause: err });
}

/**
 * A client checked out of a pool, with a listener for its `error` event while it is out: the
 * pool listens only to idle clients, so a connection dropped between two queries of a
 * transaction (a terminated backend, a failover) would otherwise be an uncaught exception
 * that takes the process down. Contract: `release()` gives the client back, destroyed when it
 * failed or `broken`; the failure itself reaches the caller through its next query.
 */
export function checkedOut(client: pg.PoolClient): { release(broken?: boolean): void } {
  let failed = false;
  const onError = () => {
    failed = true;
  };
  client.on("error", onError);
  return {
    release(broken = false) {
      client.off("error", onError);
      client.release(broken || failed);
    },
  };
}

/**
 * Parameters as PostgreSQL text can hold them: a NUL (which TEXT refuses) becomes U+FFFD and a
 * lone surrogate is made well-formed, so a stray byte in a memory or a tool output is stored
 * instead of failing the write. Contract: other values pass unchanged.
 */
export function pgParams(params: readonly unknown[]): unknown[] {
  return params.map((p) => (typeof p === "string" ? toWellFormed(p).replaceAll("\0", "\uFFFD") : p));
}
