/**
 * The default session store: one SQLite file (WAL mode) through Node's built-in `node:sqlite`.
 * Several processes may open the same file; SQLite's locking serializes their writes.
 */
import { join } from "node:path";
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { KeelError } from "@keel/kernel";
import type {
  AppendOptions,
  HeldLease,
  KeelEvent,
  LeaseRequest,
  SessionInfo,
  SessionStore,
  TurnToContinue,
} from "@keel/kernel";
import { redactEvent, takeLease, toJson, turnStateChanges } from "@keel/store-kit";
import type { LeaseClaim, LeaseOutcome, SessionLease } from "@keel/store-kit";
import { openSqlite, storeError } from "./sqlite-open.ts";

/**
 * Schema migrations: entry `i` moves the schema from version `i` to `i + 1`.
 * Contract: entries are never edited once released; new versions append an entry.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS sessions (
     id TEXT PRIMARY KEY,
     agent TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     event_count INTEGER NOT NULL DEFAULT 0
   );
   CREATE TABLE IF NOT EXISTS events (
     session_id TEXT NOT NULL REFERENCES sessions(id),
     seq INTEGER NOT NULL,
     ts INTEGER NOT NULL,
     turn_id TEXT,
     type TEXT NOT NULL,
     data TEXT NOT NULL,
     PRIMARY KEY (session_id, seq)
   );
   CREATE INDEX IF NOT EXISTS events_session_turn ON events(session_id, turn_id);
   CREATE INDEX IF NOT EXISTS events_type ON events(type);`,
  `CREATE TABLE IF NOT EXISTS leases (
     session_id TEXT PRIMARY KEY,
     owner TEXT NOT NULL,
     pid INTEGER NOT NULL,
     host TEXT NOT NULL,
     acquired_at INTEGER NOT NULL,
     expires_at INTEGER NOT NULL
   );`,
  // v3: every event paid for two indexes no read used at its size. Nothing queries by turn; by
  // type, only job records are looked up (across sessions, at start), so only they are indexed.
  `DROP INDEX IF EXISTS events_session_turn;
   DROP INDEX IF EXISTS events_type;
   CREATE INDEX IF NOT EXISTS events_jobs ON events(type) WHERE type GLOB 'job.*';`,
  // v4: each session's turn state (running, paused, answered or idle), kept with each append, so
  // a worker finds the turns to continue without reading every log. Filled from the logs once (a
  // pause a host answered since is "answered", as the appends would have made it).
  `ALTER TABLE sessions ADD COLUMN turn_state TEXT;
   UPDATE sessions SET turn_state = (
     SELECT CASE e.type WHEN 'turn.started' THEN 'running' WHEN 'turn.resumed' THEN 'running'
       WHEN 'turn.paused' THEN 'paused' ELSE NULL END
     FROM events e WHERE e.session_id = sessions.id
       AND e.type IN ('turn.started', 'turn.resumed', 'turn.paused', 'turn.completed', 'turn.failed', 'turn.interrupted')
     ORDER BY e.seq DESC LIMIT 1);
   UPDATE sessions SET turn_state = 'answered' WHERE turn_state = 'paused' AND EXISTS (
     SELECT 1 FROM events a WHERE a.session_id = sessions.id AND a.type = 'approval.resolved'
       AND a.data LIKE '%"by":"host"%'
       AND a.seq > (SELECT MAX(p.seq) FROM events p WHERE p.session_id = sessions.id AND p.type = 'turn.paused'));
   CREATE INDEX IF NOT EXISTS sessions_to_continue ON sessions(updated_at) WHERE turn_state IN ('running', 'answered');`,
];

/** The schema version this Keel writes (`PRAGMA user_version`). */
export const SQLITE_SCHEMA_VERSION = MIGRATIONS.length;

/** SQLite's extended result code for a PRIMARY KEY violation. */
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;

/** The statements that keep and list each session's turn state (prepared at first use). */
interface TurnStatements {
  set: StatementSync;
  answered: StatementSync;
  list: StatementSync;
}

interface LeaseStatements {
  get: StatementSync;
  put: StatementSync;
  renew: StatementSync;
  release: StatementSync;
}

/** Options of the SQLite store. */
export interface SqliteSessionStoreOptions {
  /** The database file (parent directories are created), or `":memory:"`. */
  path: string;
  /** Sync level of ordinary commits; durable appends always commit with FULL. Default NORMAL. */
  synchronous?: "NORMAL" | "FULL";
  /** Open for viewing: list, get and read events only; every write throws KEEL_STORE_READ_ONLY. Default false. */
  readOnly?: boolean;
  /** How long a write waits for another process's lock. Default 5000 ms. */
  busyTimeoutMs?: number;
}

/** The default session database. Contract: `<home>/sessions.sqlite`. */
export function defaultSessionDbPath(home: string): string {
  return join(home, "sessions.sqlite");
}

/**
 * A SessionStore in one SQLite file.
 * Contract: every append is one transaction that also bumps the session's `updatedAt`
 * (to the latest event `ts`) and `eventCount`; with `durable: true` that commit is fsynced
 * before `append` returns. A duplicate `(sessionId, seq)` throws KEEL_SESSION_BUSY (two
 * writers on one session); an unknown session throws KEEL_SESSION_NOT_FOUND; `events` of an
 * unknown session is empty. After `close()` every other method throws KEEL_STORE_FAILED.
 * Every string an event holds is redacted by @keel/secrets before it is written (thinking
 * blocks, provider data, image data and ids are kept as they are), so a resumed session sees
 * `[REDACTED:<kind>]` where an earlier turn had a secret.
 * Opening for writing refuses a read-only file (KEEL_STORE_READ_ONLY) or one that fails
 * SQLite's quick check (KEEL_STORE_CORRUPT) before writing anything. Leases live in the
 * same file (table `leases`), so every process on one host or one shared file sees them.
 */
export class SqliteSessionStore implements SessionStore {
  /** The database file this store opened. */
  readonly path: string;
  readonly database = { kind: "sqlite" } as const;
  readonly #db: DatabaseSync;
  readonly #syncDefault: string;
  readonly #begin: StatementSync;
  readonly #commit: StatementSync;
  readonly #rollback: StatementSync;
  readonly #insertSession: StatementSync;
  readonly #getSession: StatementSync;
  readonly #listSessions: StatementSync;
  readonly #touchSession: StatementSync;
  readonly #insertEvent: StatementSync;
  readonly #selectEvents: StatementSync;
  readonly #durableIsDefault: boolean;
  readonly #readOnly: boolean;
  #leaseStmts: LeaseStatements | undefined;
  #closed = false;

  constructor(options: SqliteSessionStoreOptions) {
    const path = options.path;
    const synchronous = options.synchronous === "FULL" ? "FULL" : "NORMAL";
    this.path = path;
    this.#durableIsDefault = synchronous === "FULL";
    this.#readOnly = options.readOnly === true;
    const what = "session database";
    const db = openSqlite(path, {
      what,
      readOnly: this.#readOnly,
      busyTimeoutMs: options.busyTimeoutMs ?? 5_000,
      setup: (d) => {
        d.exec(`PRAGMA synchronous=${synchronous}`);
        d.exec("PRAGMA foreign_keys=ON");
        migrate(d, path);
      },
    });
    try {
      if (this.#readOnly && userVersion(db) > SQLITE_SCHEMA_VERSION) {
        throw new KeelError(
          "KEEL_STORE_FAILED",
          `The session database ${path} has schema version ${userVersion(db)} but this Keel only knows up to ${SQLITE_SCHEMA_VERSION}; upgrade Keel to open it.`,
          { path },
        );
      }
      this.#syncDefault = `PRAGMA synchronous=${synchronous}`;
      this.#begin = db.prepare("BEGIN IMMEDIATE");
      this.#commit = db.prepare("COMMIT");
      this.#rollback = db.prepare("ROLLBACK");
      this.#insertSession = db.prepare(
        "INSERT INTO sessions (id, agent, created_at, updated_at, event_count) VALUES (?, ?, ?, ?, 0)",
      );
      this.#getSession = db.prepare("SELECT id, agent, created_at, updated_at, event_count FROM sessions WHERE id = ?");
      this.#listSessions = db.prepare(
        `SELECT id, agent, created_at, updated_at, event_count FROM sessions
         WHERE (:agent IS NULL OR agent = :agent) ORDER BY updated_at DESC, rowid DESC LIMIT :limit`,
      );
      this.#touchSession = db.prepare(
        "UPDATE sessions SET updated_at = MAX(updated_at, ?), event_count = event_count + ? WHERE id = ?",
      );
      this.#insertEvent = db.prepare(
        "INSERT INTO events (session_id, seq, ts, turn_id, type, data) VALUES (?, ?, ?, ?, ?, ?)",
      );
      this.#selectEvents = db.prepare(
        "SELECT seq, ts, turn_id, type, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
      );
      this.#db = db;
    } catch (err) {
      try {
        db.close();
      } catch {
        // Already failing; the open error is the one to report.
      }
      throw storeError(err, path, what, `open the ${what}`);
    }
  }

  /** Create an empty session. Contract: an existing id throws KEEL_STORE_FAILED. */
  createSession(info: { id: string; agent: string; createdAt: number }): void {
    this.#assertWritable();
    try {
      this.#insertSession.run(info.id, info.agent, info.createdAt, info.createdAt);
    } catch (err) {
      if (sqliteErrcode(err) === SQLITE_CONSTRAINT_PRIMARYKEY) {
        throw new KeelError(
          "KEEL_STORE_FAILED",
          `Session "${info.id}" already exists in ${this.path}.`,
          { path: this.path },
          { cause: err },
        );
      }
      throw this.#failed(`create session "${info.id}"`, err);
    }
  }

  /** The session, or undefined when the id is unknown. */
  getSession(id: string): SessionInfo | undefined {
    this.#assertOpen();
    let row: Record<string, unknown> | undefined;
    try {
      row = this.#getSession.get(id);
    } catch (err) {
      throw this.#failed(`read session "${id}"`, err);
    }
    return row === undefined ? undefined : toSessionInfo(row);
  }

  /** Sessions, most recently updated first. Contract: a negative or absent `limit` means all. */
  listSessions(options: { agent?: string; limit?: number } = {}): SessionInfo[] {
    this.#assertOpen();
    try {
      const rows = this.#listSessions.all({ agent: options.agent ?? null, limit: options.limit ?? -1 });
      return rows.map(toSessionInfo);
    } catch (err) {
      throw this.#failed("list sessions", err);
    }
  }

  /** Append one event (see the class contract). */
  append(event: KeelEvent, options?: AppendOptions): void {
    this.appendMany([event], options);
  }

  /**
   * Append a batch of events in one transaction (see the class contract).
   * Contract: all or nothing; one session bump per session in the batch; with `lease`, nothing
   * is written unless that owner holds the lease of every session in the batch.
   */
  appendMany(events: readonly KeelEvent[], options?: AppendOptions): void {
    this.#assertWritable();
    if (events.length === 0) return;
    const switchSync = options?.durable === true && !this.#durableIsDefault;
    let inTransaction = false;
    let current: KeelEvent | undefined;
    try {
      // SQLite refuses to change the sync level inside a transaction, so switch around it.
      // exec, not a cached statement: SQLite applies this pragma when it is compiled, so
      // re-running a prepared copy does not reliably apply it again.
      if (switchSync) this.#db.exec("PRAGMA synchronous=FULL");
      this.#begin.run();
      inTransaction = true;
      let fenced: string | undefined;
      // One bump per session in the batch (count and latest ts), done at its first event.
      const bumps = new Map<string, { ts: number; n: number }>();
      for (const e of events) {
        const b = bumps.get(e.sessionId);
        if (b) b.n++, (b.ts = Math.max(b.ts, e.ts));
        else bumps.set(e.sessionId, { ts: e.ts, n: 1 });
      }
      for (const event of events) {
        current = event;
        const { sessionId, seq, ts, turnId, type, ...data } = event;
        if (options?.lease !== undefined && fenced !== sessionId) {
          this.#assertHolder(sessionId, options.lease);
          fenced = sessionId;
        }
        const bump = bumps.get(sessionId);
        if (bump) bumps.delete(sessionId);
        if (bump && this.#touchSession.run(bump.ts, bump.n, sessionId).changes === 0) {
          throw new KeelError(
            "KEEL_SESSION_NOT_FOUND",
            `Cannot append event ${seq} (${type}): no session "${sessionId}" in ${this.path}.`,
            {
              path: this.path,
            },
          );
        }
        try {
          this.#insertEvent.run(sessionId, seq, ts, turnId, type, toJson(redactEvent(data, type)));
        } catch (err) {
          if (sqliteErrcode(err) !== SQLITE_CONSTRAINT_PRIMARYKEY) throw err;
          throw new KeelError(
            "KEEL_SESSION_BUSY",
            `Session "${sessionId}" already has an event with seq ${seq} in ${this.path}; two writers are appending to the same session (one of them without its lease).`,
            { path: this.path },
            { cause: err },
          );
        }
      }
      this.#keepTurnStates(events);
      this.#commit.run();
      inTransaction = false;
    } catch (err) {
      if (inTransaction) this.#rollbackQuietly();
      throw err instanceof KeelError
        ? err
        : this.#failed(`append event ${current?.seq} (${current?.type}) to session "${current?.sessionId}"`, err);
    } finally {
      if (switchSync) this.#restoreSync();
    }
  }

  /** The session's events in `seq` order, those after `afterSeq` when given. */
  events(sessionId: string, options?: { afterSeq?: number }): KeelEvent[] {
    this.#assertOpen();
    try {
      const rows = this.#selectEvents.all(sessionId, options?.afterSeq ?? -1);
      const out: KeelEvent[] = new Array(rows.length);
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i] as Record<string, unknown>;
        const data = JSON.parse(row["data"] as string) as Record<string, unknown>;
        out[i] = {
          type: row["type"],
          ...data,
          sessionId,
          seq: row["seq"],
          ts: row["ts"],
          turnId: row["turn_id"],
        } as KeelEvent;
      }
      return out;
    } catch (err) {
      throw this.#failed(`read the events of session "${sessionId}"`, err);
    }
  }

  #turnState: TurnStatements | undefined;

  /** Each session's turn state after the batch (in its transaction). */
  #keepTurnStates(events: readonly KeelEvent[]): void {
    const changes = turnStateChanges(events);
    if (!changes.size) return;
    const st = this.#turnStatements();
    for (const [id, c] of changes)
      if ("set" in c) st.set.run(c.set, id);
      else st.answered.run(id);
  }

  #turnStatements(): TurnStatements {
    this.#turnState ??= {
      set: this.#db.prepare("UPDATE sessions SET turn_state = ? WHERE id = ?"),
      answered: this.#db.prepare("UPDATE sessions SET turn_state = 'answered' WHERE id = ? AND turn_state = 'paused'"),
      list: this.#db.prepare(
        `SELECT s.id, s.agent, s.turn_state, s.updated_at, l.owner, l.pid, l.host, l.expires_at
         FROM sessions s LEFT JOIN leases l ON l.session_id = s.id WHERE s.turn_state IN ('running', 'answered')
         AND (:agent IS NULL OR s.agent = :agent) ORDER BY s.updated_at, s.rowid LIMIT :limit`,
      ),
    };
    return this.#turnState;
  }

  /** Sessions whose turn should go on (SessionStore.unfinished), oldest update first. */
  unfinished(options: { agent?: string; limit?: number } = {}): TurnToContinue[] {
    this.#assertOpen();
    try {
      const rows = this.#turnStatements().list.all({ agent: options.agent ?? null, limit: options.limit ?? -1 });
      return rows.map((r) => ({
        sessionId: r["id"] as string,
        agent: r["agent"] as string,
        state: r["turn_state"] as "running" | "answered",
        updatedAt: Number(r["updated_at"]),
        ...(typeof r["owner"] === "string" ? { holder: holderOf(r) } : {}),
      }));
    } catch (err) {
      throw this.#failed("list the sessions whose turn should go on", err);
    }
  }

  /** Every session's events of `types` (indexed by type), by session then seq. */
  eventsOfType(types: readonly string[]): KeelEvent[] {
    this.#assertOpen();
    if (!types.length) return [];
    try {
      // Job records are found through their partial index (the query must repeat its condition); other types scan.
      const jobs = types.every((t) => t.startsWith("job.")) ? " AND type GLOB 'job.*'" : "";
      const rows = this.#db
        .prepare(
          `SELECT session_id, seq, ts, turn_id, type, data FROM events WHERE type IN (${types.map(() => "?").join(", ")})${jobs} ORDER BY session_id, seq`,
        )
        .all(...types);
      return rows.map((r) => {
        const row = r as Record<string, unknown>;
        const data = JSON.parse(row["data"] as string) as Record<string, unknown>;
        return {
          type: row["type"],
          ...data,
          sessionId: row["session_id"],
          seq: row["seq"],
          ts: row["ts"],
          turnId: row["turn_id"],
        } as KeelEvent;
      });
    } catch (err) {
      throw this.#failed(`read the ${types.join("/")} events`, err);
    }
  }

  /** Take the session's lease and keep it renewed (SessionStore.lease, over the primitives below). */
  lease(sessionId: string, request: LeaseRequest): Promise<HeldLease> {
    return takeLease(this, sessionId, request);
  }

  /** Take the session's lease (LeasePrimitives.acquireLease): one IMMEDIATE transaction. */
  acquireLease(sessionId: string, claim: LeaseClaim): LeaseOutcome {
    this.#assertWritable();
    const st = this.#leases();
    let inTransaction = false;
    try {
      this.#begin.run();
      inTransaction = true;
      const row = st.get.get(sessionId);
      const held = row === undefined ? undefined : toLease(row);
      const now = Date.now();
      if (held && held.owner !== claim.owner && held.expiresAt > now && held.owner !== claim.replaces) {
        this.#commit.run();
        inTransaction = false;
        return { acquired: false, holder: held };
      }
      const acquiredAt = held?.owner === claim.owner ? held.acquiredAt : now;
      st.put.run(sessionId, claim.owner, claim.pid, claim.host, acquiredAt, now + claim.ttlMs);
      this.#commit.run();
      inTransaction = false;
      const lease: SessionLease = {
        sessionId,
        owner: claim.owner,
        pid: claim.pid,
        host: claim.host,
        acquiredAt,
        expiresAt: now + claim.ttlMs,
      };
      return held && held.owner !== claim.owner ? { acquired: true, lease, previous: held } : { acquired: true, lease };
    } catch (err) {
      if (inTransaction) this.#rollbackQuietly();
      throw this.#failed(`take the lease of session "${sessionId}"`, err);
    }
  }

  /** Extend `owner`'s lease to now + `ttlMs`; false when it no longer holds it. */
  renewLease(sessionId: string, owner: string, ttlMs: number): boolean {
    this.#assertWritable();
    try {
      return this.#leases().renew.run(Date.now() + ttlMs, sessionId, owner).changes === 1;
    } catch (err) {
      throw this.#failed(`renew the lease of session "${sessionId}"`, err);
    }
  }

  /** Drop `owner`'s lease (idempotent). */
  releaseLease(sessionId: string, owner: string): void {
    this.#assertWritable();
    try {
      this.#leases().release.run(sessionId, owner);
    } catch (err) {
      throw this.#failed(`release the lease of session "${sessionId}"`, err);
    }
  }

  /** Close the database. Contract: idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#db.close();
    } catch (err) {
      throw this.#failed("close the database", err);
    }
  }

  #assertOpen(): void {
    if (this.#closed)
      throw new KeelError("KEEL_STORE_FAILED", `The session store ${this.path} is closed.`, { path: this.path });
  }

  #assertWritable(): void {
    this.#assertOpen();
    if (this.#readOnly)
      throw new KeelError(
        "KEEL_STORE_READ_ONLY",
        `The session database ${this.path} was opened read-only (for viewing).`,
        { path: this.path },
      );
  }

  #leases(): LeaseStatements {
    return (this.#leaseStmts ??= {
      get: this.#db.prepare(
        "SELECT session_id, owner, pid, host, acquired_at, expires_at FROM leases WHERE session_id = ?",
      ),
      put: this.#db.prepare(
        "INSERT OR REPLACE INTO leases (session_id, owner, pid, host, acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
      ),
      renew: this.#db.prepare("UPDATE leases SET expires_at = MAX(expires_at, ?) WHERE session_id = ? AND owner = ?"),
      release: this.#db.prepare("DELETE FROM leases WHERE session_id = ? AND owner = ?"),
    });
  }

  /** Inside a write transaction: throw KEEL_SESSION_BUSY unless `owner` holds the session's lease. */
  #assertHolder(sessionId: string, owner: string): void {
    const row = this.#leases().get.get(sessionId);
    const held = row === undefined ? undefined : toLease(row);
    if (held?.owner === owner) return;
    throw new KeelError(
      "KEEL_SESSION_BUSY",
      held
        ? `This process lost the lease of session "${sessionId}" to process ${held.pid} on ${held.host} (it stalled past its lease); nothing more was written.`
        : `This process no longer holds the lease of session "${sessionId}"; nothing more was written.`,
      { path: this.path },
    );
  }

  #rollbackQuietly(): void {
    try {
      this.#rollback.run();
    } catch {
      // SQLite may already have rolled back (e.g. on SQLITE_FULL); the original error matters.
    }
  }

  #restoreSync(): void {
    try {
      this.#db.exec(this.#syncDefault);
    } catch {
      // Only fails when the connection is broken; the next write reports that.
    }
  }

  #failed(what: string, err: unknown): KeelError {
    return storeError(err, this.path, "session database", `${what} in`);
  }
}

/** Bring the schema to SQLITE_SCHEMA_VERSION; safe when several processes open a new file at once. */
function migrate(db: DatabaseSync, path: string): void {
  if (userVersion(db) === SQLITE_SCHEMA_VERSION) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    const version = userVersion(db);
    if (version > SQLITE_SCHEMA_VERSION) {
      throw new KeelError(
        "KEEL_STORE_FAILED",
        `The session database ${path} has schema version ${version} but this Keel only knows up to ${SQLITE_SCHEMA_VERSION}; upgrade Keel to open it.`,
        { path },
      );
    }
    for (let v = version; v < SQLITE_SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v] as string);
    db.exec(`PRAGMA user_version=${SQLITE_SCHEMA_VERSION}`);
    db.exec("COMMIT");
  } catch (err) {
    db.exec("ROLLBACK");
    throw err;
  }
}

function userVersion(db: DatabaseSync): number {
  return (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
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
    createdAt: row["created_at"] as number,
    updatedAt: row["updated_at"] as number,
    eventCount: row["event_count"] as number,
  };
}

function sqliteErrcode(err: unknown): number | undefined {
  const code = (err as { errcode?: unknown } | null)?.errcode;
  return typeof code === "number" ? code : undefined;
}

/** A lease row's holder, as TurnToContinue.holder. */
function holderOf(r: Record<string, unknown>): NonNullable<TurnToContinue["holder"]> {
  return {
    owner: r["owner"] as string,
    pid: Number(r["pid"]),
    host: r["host"] as string,
    expiresAt: Number(r["expires_at"]),
  };
}
