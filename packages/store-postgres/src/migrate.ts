/** Versioned migrations, applied once per schema and component under an advisory lock. */
import type { PgPool } from "./pool.ts";
import { KeelError } from "@keel/kernel";
import { checkedOut, quoteIdent } from "./pg-util.ts";

/**
 * Bring `component`'s tables in `schema` to `migrations.length`.
 * Contract: entry `i` moves version `i` to `i + 1` and runs in the same transaction as the
 * version bump; instances starting together wait on one advisory lock, so each entry runs
 * once; a database ahead of this Keel throws KEEL_STORE_FAILED and changes nothing.
 */
export async function migrate(
  pool: PgPool,
  schema: string,
  component: string,
  migrations: readonly string[],
): Promise<number> {
  const s = quoteIdent(schema);
  const client = await pool.connect();
  const held = checkedOut(client);
  let broken = false;
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 4241))", [`keel-migrate:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.keel_migrations (component TEXT PRIMARY KEY, version INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
    );
    const row = (await client.query(`SELECT version FROM ${s}.keel_migrations WHERE component = $1`, [component]))
      .rows[0] as { version: number } | undefined;
    const from = row?.version ?? 0;
    if (from > migrations.length) {
      throw new KeelError(
        "KEEL_STORE_FAILED",
        `The ${component} tables in schema ${schema} are at version ${from} but this Keel only knows up to ${migrations.length}; upgrade Keel to use them.`,
        { path: "store" },
      );
    }
    for (let v = from; v < migrations.length; v++) await client.query(migrations[v]!.replaceAll("{s}", s));
    await client.query(
      `INSERT INTO ${s}.keel_migrations (component, version) VALUES ($1, $2) ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version, applied_at = now()`,
      [component, migrations.length],
    );
    await client.query("COMMIT");
    return migrations.length - from;
  } catch (err) {
    try {
      await client.query("ROLLBACK");
    } catch {
      broken = true;
    }
    throw err;
  } finally {
    held.release(broken);
  }
}
