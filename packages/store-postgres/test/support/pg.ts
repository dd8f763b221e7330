/**
 * PostgreSQL for tests: the server CI and every machine run at 127.0.0.1:5432 (or
 * KEEL_TEST_PG_URL). Each store gets its own schema, dropped by dropTestSchemas(). A server
 * that cannot be reached fails the tests with what to do: it is never skipped.
 */
import pg from "pg";
import { PostgresSessionStore } from "../../src/index.ts";

export const PG_URL = process.env.KEEL_TEST_PG_URL || "postgres://postgres@127.0.0.1:5432/test";
const schemas: string[] = [];
let n = 0;

/** A fresh schema name, remembered for dropTestSchemas(). */
export function testSchema(): string {
  const name = `keel_test_${process.pid}_${Date.now().toString(36)}_${++n}`;
  schemas.push(name);
  return name;
}

/** A session store in a fresh schema. */
export function openTestStore(): PostgresSessionStore {
  return new PostgresSessionStore({ url: PG_URL, schema: testSchema() });
}

/** Throws a clear error when the test server is not there. */
export async function requirePostgres(): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (err) {
    throw new Error(
      `PostgreSQL is not reachable at ${PG_URL} (${(err as Error).message}). These tests need it: start it (pg_ctlcluster 15 main start --skip-systemctl-redirect) or point KEEL_TEST_PG_URL at one.`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Drop every schema this process created. */
export async function dropTestSchemas(): Promise<void> {
  if (!schemas.length) return;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    for (const s of schemas.splice(0)) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** A database target in a fresh schema (for any Keel store on PostgreSQL). */
export function testTarget(): { url: string; schema: string } {
  return { url: PG_URL, schema: testSchema() };
}

/** Every row of `schema.table` as JSON text (to check what really reached the database). */
export async function rawRows(schema: string, table: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (
      (await client.query(`SELECT row_to_json(t)::text AS j FROM "${schema}"."${table}" t`)).rows as Array<{
        j: string;
      }>
    ).map((r) => r.j);
  } finally {
    await client.end();
  }
}
