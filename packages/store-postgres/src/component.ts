/**
 * One Keel component's tables on PostgreSQL (a plugin's store): migrated once on first use,
 * queried through one pool, every driver error turned into the component's KeelError code.
 */
import type pg from "pg";
import type { PgPool } from "./pool.ts";
import { KeelError } from "@keel/kernel";
import type { ErrorCode } from "@keel/kernel";
import { migrate } from "./migrate.ts";
import { checkedOut, pgError, pgParams, quoteIdent } from "./pg-util.ts";
import { resolveTarget } from "./pool.ts";
import type { PostgresTarget } from "./pool.ts";

/** Runs SQL inside a component's transaction or on its pool. */
export type PgQuery = <R = Record<string, unknown>>(sql: string, params?: readonly unknown[]) => Promise<R[]>;

/**
 * A component's access to its tables.
 * Contract: `{s}` in SQL is the quoted schema; every call waits for the migration; errors are
 * KeelErrors with `code` naming `where` (the URL without its password); after `close()` every
 * call throws `code`. `close()` never ends a shared pool.
 */
export class PgComponent {
  readonly pool: PgPool;
  readonly schema: string;
  /** The database, for messages. */
  readonly where: string;
  readonly #s: string;
  #ready: Promise<void> | undefined;
  #closed = false;

  readonly component: string;
  readonly migrations: readonly string[];
  readonly code: ErrorCode;

  constructor(target: PostgresTarget, component: string, migrations: readonly string[], code: ErrorCode) {
    this.component = component;
    this.migrations = migrations;
    this.code = code;
    const r = resolveTarget(target, `The ${component} store`);
    this.pool = r.pool;
    this.schema = r.schema;
    this.where = r.where;
    this.#s = quoteIdent(r.schema);
  }

  /** Create or migrate the tables. Contract: once per instance; a failure is retried by the next call. */
  ready(): Promise<void> {
    return (this.#ready ??= migrate(this.pool, this.schema, this.component, this.migrations).then(
      () => undefined,
      (err: unknown) => {
        this.#ready = undefined;
        throw pgError(err, this.where, `prepare the ${this.component} tables in`, this.code);
      },
    ));
  }

  /** `sql` with `{s}` replaced by the quoted schema. */
  sql(text: string): string {
    return text.replaceAll("{s}", this.#s);
  }

  /** One statement on the pool. */
  async query<R = Record<string, unknown>>(
    action: string,
    text: string,
    params: readonly unknown[] = [],
  ): Promise<R[]> {
    await this.#open();
    try {
      return (await this.pool.query(this.sql(text), pgParams(params))).rows as R[];
    } catch (err) {
      throw pgError(err, this.where, action, this.code);
    }
  }

  /** `query` with `action` bound, as a PgQuery (for code that runs in or out of a transaction). */
  runner(action: string): PgQuery {
    return (text, params) => this.query(action, text, params);
  }

  /** `body` in one transaction (committed when it resolves, rolled back when it throws). */
  async tx<T>(action: string, body: (q: PgQuery) => Promise<T>): Promise<T> {
    await this.#open();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw pgError(err, this.where, action, this.code);
    }
    const held = checkedOut(client);
    let broken = false;
    try {
      await client.query("BEGIN");
      const q: PgQuery = async (text, params = []) => (await client.query(this.sql(text), pgParams(params))).rows;
      const out = await body(q);
      await client.query("COMMIT");
      return out;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => (broken = true));
      throw pgError(err, this.where, action, this.code);
    } finally {
      held.release(broken);
    }
  }

  /** Refuse further calls. */
  close(): void {
    this.#closed = true;
  }

  async #open(): Promise<void> {
    if (this.#closed)
      throw new KeelError(this.code, `The ${this.component} store on ${this.where} is closed.`, { path: this.where });
    await this.ready();
  }
}
