/**
 * The session log on PostgreSQL: the same contract as the SQLite store, for several instances
 * sharing one database. Leases are rows decided on the database's clock, so hosts with skewed
 * clocks agree on who holds a session.
 */
import type pg from "pg";
import type { PgPool } from "./pool.ts";
import { KeelError } from "@keel/kernel";
import { redactEvent, takeLease, toJson, turnStateChanges } from "@keel/store-kit";
import type {
  AppendOptions,
  HeldLease,
  KeelEvent,
  LeaseRequest,
  SessionInfo,
  SessionStore,
  StoreDatabase,
  TurnToContinue,
} from "@keel/kernel";
import type { LeaseClaim, LeaseOutcome, SessionLease } from "@keel/store-kit";
import { checkedOut, pgError, quoteIdent } from "./pg-util.ts";
import { resolveTarget } from "./pool.ts";
import { registerMigrations } from "./registry.ts";
import type { PostgresTarget } from "./pool.ts";
import { migrate } from "./migrate.ts";

/**
 * Migrations of the session tables: entry `i` moves them from version `i` to `i + 1`.
 * Contract: entries are never edited once released; `{s}` is the quoted schema.
 */
export const SESSION_MIGRATIONS: readonly string[] = [
  `CREATE TABLE {s}.keel_sessions (
     id TEXT PRIMARY KEY,
     n BIGINT GENERATED ALWAYS AS IDENTITY,
     agent TEXT NOT NULL,
     created_at BIGINT NOT NULL,
     updated_at BIGINT NOT NULL,
     event_count INTEGER NOT NULL DEFAULT 0
   );
   CREATE INDEX keel_sessions_recent ON {s}.keel_sessions (updated_at DESC, n DESC);
   CREATE TABLE {s}.keel_events (
     session_id TEXT NOT NULL REFERENCES {s}.keel_sessions(id),
     seq INTEGER NOT NULL,
     ts BIGINT NOT NULL,
     turn_id TEXT,
     type TEXT NOT NULL,
     data TEXT NOT NULL,
     PRIMARY KEY (session_id, seq)
   );
   CREATE INDEX keel_events_type ON {s}.keel_events (type);
   CREATE TABLE {s}.keel_leases (
     session_id TEXT PRIMARY KEY,
     owner TEXT NOT NULL,
     pid INTEGER NOT NULL,
     host TEXT NOT NULL,
     acquired_at BIGINT NOT NULL,
     expires_at BIGINT NOT NULL
   );`,
  // v2: each session's turn state (running, paused, answered or idle), kept with each append, so
  // a worker finds the turns to continue without reading every log. Filled from the logs once (a
  // pause a host answered since is "answered", as the appends would have made it).
  `ALTER TABLE {s}.keel_sessions ADD COLUMN turn_state TEXT;
   UPDATE {s}.keel_sessions s SET turn_state = (
     SELECT CASE e.type WHEN 'turn.started' THEN 'running' WHEN 'turn.resumed' THEN 'running'
       WHEN 'turn.paused' THEN 'paused' ELSE NULL END
     FROM {s}.keel_events e WHERE e.session_id = s.id
       AND e.type IN ('turn.started', 'turn.resumed', 'turn.paused', 'turn.completed', 'turn.failed', 'turn.interrupted')
     ORDER BY e.seq DESC LIMIT 1);
   UPDATE {s}.keel_sessions s SET turn_state = 'answered' WHERE turn_state = 'paused' AND EXISTS (
     SELECT 1 FROM {s}.keel_events a WHERE a.session_id = s.id AND a.type = 'approval.resolved'
       AND a.data LIKE '%"by":"host"%'
       AND a.seq > (SELECT MAX(p.seq) FROM {s}.keel_events p WHERE p.session_id = s.id AND p.type = 'turn.paused'));
   CREATE INDEX keel_sessions_to_continue ON {s}.keel_sessions (updated_at) WHERE turn_state IN ('running', 'answered');`,
];

registerMigrations("sessions", SESSION_MIGRATIONS);

/** Options of the PostgreSQL session store (a URL or a shared pool, and a schema). */
export type PostgresStoreOptions = PostgresTarget;

const NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/**
 * A SessionStore on PostgreSQL.
 * Contract: as SqliteSessionStore. Every append is one transaction that also bumps the
 * session's `updatedAt` and `eventCount`, committed with `synchronous_commit = on` when
 * `durable`; a duplicate `(sessionId, seq)` throws KEEL_SESSION_BUSY; an unknown session
 * throws KEEL_SESSION_NOT_FOUND; every string is redacted by @keel/secrets before it is
 * written. Tables are created or migrated on first use (under an advisory lock, so instances
 * starting together migrate once). A server that cannot be reached gives KEEL_STORE_FAILED
 * naming the URL without its password. After `close()` every method throws KEEL_STORE_FAILED.
 */
export class PostgresSessionStore implements SessionStore {
  /** The database, for messages (the URL without its password). */
  readonly path: string;
  /** Where the sessions are: an agent's plugins put their tables in the same database and schema. */
  readonly database: StoreDatabase;
  readonly #pool: PgPool;
  readonly #s: string;
  readonly #schema: string;
  #ready: Promise<void> | undefined;
  #closed = false;

  constructor(options: PostgresStoreOptions) {
    const { pool, schema, where } = resolveTarget(options, "PostgresSessionStore");
    this.#pool = pool;
    this.#schema = schema;
    this.#s = quoteIdent(schema);
    this.path = where;
    this.database = {
      kind: "postgres",
      ...(options.url !== undefined ? { url: options.url } : {}),
      ...(options.pool !== undefined ? { pool: options.pool } : {}),
      schema,
    };
  }

  /** Create or migrate the tables; every method waits for it. Contract: runs once per store. */
  ready(): Promise<void> {
    const ready = (this.#ready ??= migrate(this.#pool, this.#schema, "sessions", SESSION_MIGRATIONS).then(
      () => undefined,
      (err: unknown) => {
        this.#ready = undefined; // the next call tries again (the server may be back)
        throw pgError(err, this.path, "prepare the session tables in");
      },
    ));
    return ready;
  }

  async createSession(info: { id: string; agent: string; createdAt: number }): Promise<void> {
    await this.#open(true);
    try {
      await this.#pool.query(
        `INSERT INTO ${this.#s}.keel_sessions (id, agent, created_at, updated_at) VALUES ($1, $2, $3, $3)`,
        [info.id, info.agent, info.createdAt],
      );
    } catch (err) {
      if ((err as { code?: string }).code === "23505")
        throw new KeelError(
          "KEEL_STORE_FAILED",
          `Session "${info.id}" already exists in ${this.path}.`,
          { path: this.path },
          { cause: err },
        );
      throw pgError(err, this.path, `create session "${info.id}" in`);
    }
  }

  async getSession(id: string): Promise<SessionInfo | undefined> {
    await this.#open();
    const rows = await this.#query(
      `SELECT id, agent, created_at, updated_at, event_count FROM ${this.#s}.keel_sessions WHERE id = $1`,
      [id],
      `read session "${id}" in`,
    );
    return rows[0] ? toSessionInfo(rows[0]) : undefined;
  }

  /** Sessions, most recently updated first (ties: the newest created). Contract: a negative or absent `limit` means all. */
  async listSessions(options: { agent?: string; limit?: number } = {}): Promise<SessionInfo[]> {
    await this.#open();
    const limit = options.limit !== undefined && options.limit >= 0 ? options.limit : null;
    const rows = await this.#query(
      `SELECT id, agent, created_at, updated_at, event_count FROM ${this.#s}.keel_sessions
       WHERE ($1::text IS NULL OR agent = $1) ORDER BY updated_at DESC, n DESC LIMIT $2`,
      [options.agent ?? null, limit],
      "list sessions in",
    );
    return rows.map(toSessionInfo);
  }

  append(event: KeelEvent, options?: AppendOptions): Promise<void> {
    return this.appendMany([event], options);
  }

  /** Append a batch in one transaction. Contract: all or nothing; with `lease`, only while that owner holds every session's lease. */
  async appendMany(events: readonly KeelEvent[], options?: AppendOptions): Promise<void> {
    await this.#open(true);
    if (!events.length) return;
    let current: KeelEvent | undefined;
    await this.#transaction(`append to`, async (c) => {
      if (options?.durable) await c.query("SET LOCAL synchronous_commit = on");
      const bySession = new Map<string, KeelEvent[]>();
      for (const e of events) bySession.set(e.sessionId, [...(bySession.get(e.sessionId) ?? []), e]);
      for (const [sessionId, batch] of bySession) {
        if (options?.lease !== undefined) await this.#assertHolder(c, sessionId, options.lease);
        const maxTs = Math.max(...batch.map((e) => e.ts));
        const touched = await c.query(
          `UPDATE ${this.#s}.keel_sessions SET updated_at = GREATEST(updated_at, $1), event_count = event_count + $2 WHERE id = $3`,
          [maxTs, batch.length, sessionId],
        );
        if (touched.rowCount === 0)
          throw new KeelError(
            "KEEL_SESSION_NOT_FOUND",
            `Cannot append event ${batch[0]!.seq} (${batch[0]!.type}): no session "${sessionId}" in ${this.path}.`,
            { path: this.path },
          );
        for (const event of batch) {
          current = event;
          const { sessionId: _s, seq, ts, turnId, type, ...data } = event;
          try {
            await c.query("SAVEPOINT keel_event");
            await c.query(
              `INSERT INTO ${this.#s}.keel_events (session_id, seq, ts, turn_id, type, data) VALUES ($1, $2, $3, $4, $5, $6)`,
              [sessionId, seq, ts, turnId, type, toJson(redactEvent(data, type))],
            );
            await c.query("RELEASE SAVEPOINT keel_event");
          } catch (err) {
            if ((err as { code?: string }).code !== "23505") throw err;
            throw new KeelError(
              "KEEL_SESSION_BUSY",
              `Session "${sessionId}" already has an event with seq ${seq} in ${this.path}; two writers are appending to the same session (one of them without its lease).`,
              { path: this.path },
              { cause: err },
            );
          }
        }
      }
      for (const [id, change] of turnStateChanges(events))
        await c.query(
          "set" in change
            ? `UPDATE ${this.#s}.keel_sessions SET turn_state = $2 WHERE id = $1`
            : `UPDATE ${this.#s}.keel_sessions SET turn_state = 'answered' WHERE id = $1 AND turn_state = 'paused'`,
          "set" in change ? [id, change.set] : [id],
        );
    }).catch((err: unknown) => {
      throw err instanceof KeelError
        ? err
        : pgError(
            err,
            this.path,
            `append event ${current?.seq} (${current?.type}) to session "${current?.sessionId}" in`,
          );
    });
  }

  /** Sessions whose turn should go on (SessionStore.unfinished), oldest update first. */
  async unfinished(options: { agent?: string; limit?: number } = {}): Promise<TurnToContinue[]> {
    await this.#open();
    const rows = await this.#query(
      `SELECT s.id, s.agent, s.turn_state, s.updated_at, l.owner, l.pid, l.host, l.expires_at
       FROM ${this.#s}.keel_sessions s LEFT JOIN ${this.#s}.keel_leases l ON l.session_id = s.id
       WHERE s.turn_state IN ('running', 'answered') AND ($1::text IS NULL OR s.agent = $1) ORDER BY s.updated_at, s.n LIMIT $2`,
      [options.agent ?? null, options.limit === undefined || options.limit < 0 ? null : options.limit],
      "list the sessions whose turn should go on in",
    );
    return rows.map((r) => ({
      sessionId: r["id"] as string,
      agent: r["agent"] as string,
      state: r["turn_state"] as "running" | "answered",
      updatedAt: Number(r["updated_at"]),
      ...(typeof r["owner"] === "string"
        ? {
            holder: {
              owner: r["owner"] as string,
              pid: Number(r["pid"]),
              host: r["host"] as string,
              expiresAt: Number(r["expires_at"]),
            },
          }
        : {}),
    }));
  }

  async events(sessionId: string, options?: { afterSeq?: number }): Promise<KeelEvent[]> {
    await this.#open();
    const rows = await this.#query(
      `SELECT seq, ts, turn_id, type, data FROM ${this.#s}.keel_events WHERE session_id = $1 AND seq > $2 ORDER BY seq`,
      [sessionId, options?.afterSeq ?? -1],
      `read the events of session "${sessionId}" in`,
    );
    return rows.map((r) => toEvent(r, sessionId));
  }

  async eventsOfType(types: readonly string[]): Promise<KeelEvent[]> {
    await this.#open();
    if (!types.length) return [];
    const rows = await this.#query(
      `SELECT session_id, seq, ts, turn_id, type, data FROM ${this.#s}.keel_events WHERE type = ANY($1::text[]) ORDER BY session_id, seq`,
      [[...types]],
      `read the ${types.join("/")} events in`,
    );
    return rows.map((r) => toEvent(r, r["session_id"] as string));
  }

  /** Take the session's lease and keep it renewed (SessionStore.lease, over the primitives below). */
  lease(sessionId: string, request: LeaseRequest): Promise<HeldLease> {
    return takeLease(this, sessionId, request);
  }

  /** Take the session's lease (LeasePrimitives.acquireLease), decided on the database's clock. */
  async acquireLease(sessionId: string, claim: LeaseClaim): Promise<LeaseOutcome> {
    await this.#open(true);
    return this.#transaction(`take the lease of session "${sessionId}" in`, async (c) => {
      await c.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 4242))", [
        `keel-lease:${this.#schema}:${sessionId}`,
      ]);
      const now = Number((await c.query(`SELECT ${NOW_MS} AS now`)).rows[0].now);
      const row = (
        await c.query(
          `SELECT session_id, owner, pid, host, acquired_at, expires_at FROM ${this.#s}.keel_leases WHERE session_id = $1`,
          [sessionId],
        )
      ).rows[0] as Record<string, unknown> | undefined;
      const held = row ? toLease(row) : undefined;
      if (held && held.owner !== claim.owner && held.expiresAt > now && held.owner !== claim.replaces)
        return { acquired: false, holder: held };
      const acquiredAt = held?.owner === claim.owner ? held.acquiredAt : now;
      const lease: SessionLease = {
        sessionId,
        owner: claim.owner,
        pid: claim.pid,
        host: claim.host,
        acquiredAt,
        expiresAt: now + claim.ttlMs,
      };
      await c.query(
        `INSERT INTO ${this.#s}.keel_leases (session_id, owner, pid, host, acquired_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, pid = EXCLUDED.pid, host = EXCLUDED.host, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at`,
        [sessionId, lease.owner, lease.pid, lease.host, lease.acquiredAt, lease.expiresAt],
      );
      return held && held.owner !== claim.owner ? { acquired: true, lease, previous: held } : { acquired: true, lease };
    });
  }

  async renewLease(sessionId: string, owner: string, ttlMs: number): Promise<boolean> {
    await this.#open(true);
    try {
      const r = await this.#pool.query(
        `UPDATE ${this.#s}.keel_leases SET expires_at = GREATEST(expires_at, ${NOW_MS} + $1) WHERE session_id = $2 AND owner = $3`,
        [ttlMs, sessionId, owner],
      );
      return r.rowCount === 1;
    } catch (err) {
      throw pgError(err, this.path, `renew the lease of session "${sessionId}" in`);
    }
  }

  async releaseLease(sessionId: string, owner: string): Promise<void> {
    await this.#open(true);
    try {
      await this.#pool.query(`DELETE FROM ${this.#s}.keel_leases WHERE session_id = $1 AND owner = $2`, [
        sessionId,
        owner,
      ]);
    } catch (err) {
      throw pgError(err, this.path, `release the lease of session "${sessionId}" in`);
    }
  }

  /** Close the store (and end the pool when this store created it). Contract: idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
  }

  async #open(_write = false): Promise<void> {
    if (this.#closed)
      throw new KeelError("KEEL_STORE_FAILED", `The session store ${this.path} is closed.`, { path: this.path });
    await this.ready();
  }

  async #query(sql: string, params: unknown[], action: string): Promise<Record<string, unknown>[]> {
    try {
      return (await this.#pool.query(sql, params)).rows as Record<string, unknown>[];
    } catch (err) {
      throw pgError(err, this.path, action);
    }
  }

  async #transaction<T>(action: string, body: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      throw pgError(err, this.path, action);
    }
    const lent = checkedOut(client);
    let broken = false;
    try {
      await client.query("BEGIN");
      const out = await body(client);
      await client.query("COMMIT");
      return out;
    } catch (err) {
      try {
        await client.query("ROLLBACK");
      } catch {
        broken = true;
      }
      throw err instanceof KeelError ? err : pgError(err, this.path, action);
    } finally {
      lent.release(broken);
    }
  }

  /** Inside a transaction: throw KEEL_SESSION_BUSY unless `owner` holds the session's lease (the row is locked until commit). */
  async #assertHolder(c: pg.PoolClient, sessionId: string, owner: string): Promise<void> {
    const row = (
      await c.query(
        `SELECT session_id, owner, pid, host, acquired_at, expires_at FROM ${this.#s}.keel_leases WHERE session_id = $1 FOR SHARE`,
        [sessionId],
      )
    ).rows[0] as Record<string, unknown> | undefined;
    const held = row ? toLease(row) : undefined;
    if (held?.owner === owner) return;
    throw new KeelError(
      "KEEL_SESSION_BUSY",
      held
        ? `This process lost the lease of session "${sessionId}" to process ${held.pid} on ${held.host} (it stalled past its lease); nothing more was written.`
        : `This process no longer holds the lease of session "${sessionId}"; nothing more was written.`,
      { path: this.path },
    );
  }
}

function toEvent(row: Record<string, unknown>, sessionId: string): KeelEvent {
  const data = JSON.parse(row["data"] as string) as Record<string, unknown>;
  return {
    type: row["type"],
    ...data,
    sessionId,
    seq: Number(row["seq"]),
    ts: Number(row["ts"]),
    turnId: row["turn_id"] ?? null,
  } as KeelEvent;
}

function toLease(row: Record<string, unknown>): SessionLease {
  return {
    sessionId: row["session_id"] as string,
    owner: row["owner"] as string,
    pid: Number(row["pid"]),
    host: row["host"] as string,
    acquiredAt: Number(row["acquired_at"]),
    expiresAt: Number(row["expires_at"]),
  };
}

function toSessionInfo(row: Record<string, unknown>): SessionInfo {
  return {
    id: row["id"] as string,
    agent: row["agent"] as string,
    createdAt: Number(row["created_at"]),
    updatedAt: Number(row["updated_at"]),
    eventCount: Number(row["event_count"]),
  };
}
