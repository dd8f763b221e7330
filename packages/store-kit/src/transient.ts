/**
 * Which store failures pass by themselves (the one classification every store and the worker
 * share): a database that refuses or drops connections for a moment, a backend terminated by
 * an administrator or a failover, a lock another connection holds, a timeout. Anything else
 * (a corrupt or read-only file, refused credentials, a database that does not exist, a query
 * the server rejects) is not, and is reported as it is.
 */

/** Network errors that mean "not reachable now" (a name that does not resolve, ENOTFOUND, is a configuration error). */
const NETWORK = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTCONN",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENETRESET",
  "EAI_AGAIN",
]);

/**
 * PostgreSQL SQLSTATEs that pass: admin_shutdown, crash_shutdown, cannot_connect_now,
 * too_many_connections, serialization_failure, deadlock_detected, lock_not_available,
 * query_canceled (a statement timeout), idle_in_transaction_session_timeout. Class 08
 * (connection exception) is matched by its prefix.
 */
const SQLSTATE = new Set(["57P01", "57P02", "57P03", "53300", "40001", "40P01", "55P03", "57014", "25P03"]);

/** Codes of Keel's that are never transient, whatever caused them. */
const FINAL = new Set(["KEEL_STORE_CORRUPT", "KEEL_STORE_READ_ONLY"]);

/** node-postgres and pg-pool failures that carry no code. */
const MESSAGE =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Connection ended unexpectedly|server closed the connection unexpectedly|Client has encountered a connection error|the database system is (?:shutting down|starting up|in recovery mode)|terminating connection due to administrator command|database is locked|database table is locked/i;

/** SQLite's primary result codes SQLITE_BUSY (5) and SQLITE_LOCKED (6): another connection holds the lock. */
function sqliteBusy(errcode: unknown): boolean {
  return typeof errcode === "number" && ((errcode & 0xff) === 5 || (errcode & 0xff) === 6);
}

/**
 * True when a store failure is worth retrying after a wait: `err` or any error in its `cause`
 * chain is a connection refused, reset or timed out, a terminated backend, too many
 * connections, a serialization failure or deadlock, or SQLite's BUSY/LOCKED.
 * Contract: never throws (a hostile value is read inside a guard); false for
 * KEEL_STORE_CORRUPT and KEEL_STORE_READ_ONLY, for authentication failures, a missing database
 * and anything it does not know.
 */
export function isTransientStoreError(err: unknown): boolean {
  try {
    const seen = new Set<unknown>();
    for (let e = err, depth = 0; e && typeof e === "object" && depth < 8 && !seen.has(e); depth++) {
      seen.add(e);
      const o = e as { code?: unknown; errcode?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
      const code = typeof o.code === "string" ? o.code : undefined;
      if (code && FINAL.has(code)) return false;
      if (code && (NETWORK.has(code) || SQLSTATE.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
      if (sqliteBusy(o.errcode)) return true;
      if (typeof o.message === "string" && MESSAGE.test(o.message)) return true;
      // An AggregateError (a connection attempt to several addresses) passes when every one did.
      if (Array.isArray(o.errors) && o.errors.length && o.errors.every((x) => isTransientStoreError(x))) return true;
      e = o.cause;
    }
  } catch {
    // A value that throws on reading is no error a store raised.
  }
  return false;
}
