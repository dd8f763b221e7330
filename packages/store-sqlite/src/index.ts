/**
 * @keel/store-sqlite: Keel's default session store, one SQLite file through node:sqlite (WAL,
 * no native build, leases in the same file), and the one way every Keel database is opened
 * (openSqlite: busy timeout first, WAL switch and migrations retried on SQLITE_BUSY, a quick
 * check before any write; ReopeningSqlite for a handle that must survive its file going away).
 */
export { defaultSessionDbPath, SQLITE_SCHEMA_VERSION, SqliteSessionStore } from "./sqlite-store.ts";
export type { SqliteSessionStoreOptions } from "./sqlite-store.ts";
export { isSqliteBusy, openSqlite, ReopeningSqlite, retryBusy, sqlitePrimaryCode, storeError } from "./sqlite-open.ts";
export type { OpenSqliteOptions } from "./sqlite-open.ts";
