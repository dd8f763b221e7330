/** @keel/store-postgres: Keel's stores on PostgreSQL, for many instances sharing one database. */
export { PostgresSessionStore, SESSION_MIGRATIONS } from "./session-store.ts";
export type { PostgresStoreOptions } from "./session-store.ts";
export { migrate } from "./migrate.ts";
export { agentDatabase, endSharedPools, isPostgresUrl, resolveTarget, selectDatabase, sharedPool } from "./pool.ts";
export type { PgPool, PostgresTarget } from "./pool.ts";
export { describeUrl, maskUrl, pgError, quoteIdent } from "./pg-util.ts";
export { PgComponent } from "./component.ts";
export type { PgQuery } from "./component.ts";
export { migrateAll, registerMigrations, registeredComponents } from "./registry.ts";
