/**
 * The components whose tables live on PostgreSQL (the session log, each plugin's store), so
 * `keel db migrate` can bring every one of them up to date before instances start.
 */
import { migrate } from "./migrate.ts";
import { pgError, quoteIdent } from "./pg-util.ts";
import { resolveTarget } from "./pool.ts";
import type { PostgresTarget } from "./pool.ts";

const components = new Map<string, readonly string[]>();

/** Make a component's migrations known. Contract: called at module load; the last registration of a name wins. */
export function registerMigrations(component: string, migrations: readonly string[]): void {
  components.set(component, migrations);
}

/** The registered component names, sorted. */
export function registeredComponents(): string[] {
  return [...components.keys()].sort();
}

/**
 * Migrate every registered component (`only`: those named) in the target's schema.
 * Contract: each component in its own transaction under the schema's advisory lock; returns
 * what each was brought to and how many steps ran; the first failure throws KEEL_STORE_FAILED.
 */
export async function migrateAll(
  target: PostgresTarget,
  only?: readonly string[],
): Promise<Array<{ component: string; version: number; applied: number }>> {
  const { pool, schema, where } = resolveTarget(target, "keel db migrate");
  quoteIdent(schema);
  const out: Array<{ component: string; version: number; applied: number }> = [];
  for (const component of registeredComponents()) {
    if (only && !only.includes(component)) continue;
    const migrations = components.get(component)!;
    try {
      out.push({ component, version: migrations.length, applied: await migrate(pool, schema, component, migrations) });
    } catch (err) {
      throw pgError(err, where, `migrate the ${component} tables in`);
    }
  }
  return out;
}
