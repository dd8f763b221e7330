/** @keel/store-postgres: Keel's stores on PostgreSQL, for many instances sharing one database. */
export { PostgresSessionStore, SESSION_MIGRATIONS } from "./session-store.ts";
export type { PostgresStoreOptions } from "./session-store.ts";
export { migrate } from "./migrate.ts";
