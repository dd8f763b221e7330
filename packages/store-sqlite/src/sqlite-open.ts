/**
 * The one way Keel opens a SQLite file (the session store and every plugin database): busy
 * timeout before anything, WAL switch and schema setup retried on SQLITE_BUSY, a quick check
 * before any write, read-only opens for viewing, and coded errors naming the file.
 */
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { errorMessage, KeelError } from "@keel/kernel";
import { headOf } from "@keel/text";
import { makeDirs } from "@keel/safe-path";

/** Options of openSqlite. */
export interface OpenSqliteOptions {
  /**
   * Open for viewing only: nothing is created or written; a database whose folder cannot be
   * written (no WAL index can be made) is opened as immutable. Default false.
   */
  readOnly?: boolean;
  /** How long a statement waits for another connection's lock. Default 5000 ms. */
  busyTimeoutMs?: number;
  /** Switch a writable file to WAL. Default true. */
  wal?: boolean;
  /** Run `PRAGMA quick_check` on an existing file before any write. Default true. */
  check?: boolean;
  /** Creates or migrates the schema; retried (from scratch) while another process holds the lock. */
  setup?: (db: DatabaseSync) => void;
  /** What the file is, for messages ("session database", "memory database"). */
  what?: string;
}

/** SQLite primary result codes (the low byte of an extended code). */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
const SQLITE_READONLY = 8;
const SQLITE_CORRUPT = 11;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

/** The primary SQLite result code of a node:sqlite error, or undefined. */
export function sqlitePrimaryCode(err: unknown): number | undefined {
  const code = (err as { errcode?: unknown } | null)?.errcode;
  return typeof code === "number" ? code & 0xff : undefined;
}

/** True for a lock conflict another connection will release (worth a retry). */
export function isSqliteBusy(err: unknown): boolean {
  const code = sqlitePrimaryCode(err);
  return (
    code === SQLITE_BUSY ||
    code === SQLITE_LOCKED ||
    /database is locked|database table is locked/i.test(errorMessage(err))
  );
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Block this thread for `ms` (the stores are synchronous; used only while opening). */
function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/**
 * Run `fn`, retrying on SQLITE_BUSY with jittered exponential backoff until `budgetMs` passed.
 * Contract: SQLite skips the busy handler for some lock upgrades (the WAL switch, a schema
 * change racing another first open), so those are retried here instead.
 */
export function retryBusy<T>(fn: () => T, budgetMs = 5_000): T {
  const deadline = Date.now() + budgetMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isSqliteBusy(err) || Date.now() >= deadline) throw err;
      sleepSync(
        Math.min(Math.max(1, deadline - Date.now()), Math.round((5 << Math.min(attempt, 6)) * (0.5 + Math.random()))),
      );
    }
  }
}

/**
 * Open (and for writing create) a SQLite file.
 * Contract: throws KEEL_STORE_READ_ONLY when a write open meets a read-only file, folder or
 * file system; KEEL_STORE_CORRUPT when the file is not a database or fails `PRAGMA
 * quick_check` (nothing is written then); KEEL_STORE_FAILED for anything else; each names
 * the file. A read-only open never creates or changes a file.
 */
export function openSqlite(path: string, options: OpenSqliteOptions = {}): DatabaseSync {
  const what = options.what ?? "database";
  const timeout = options.busyTimeoutMs ?? 5_000;
  const memory = path === ":memory:" || path === "";
  let db: DatabaseSync | undefined;
  try {
    if (!memory) assertRegularFile(path, what);
    if (options.readOnly) {
      if (memory)
        throw new KeelError("KEEL_STORE_FAILED", `A read-only ${what} needs a file, not ":memory:".`, { path });
      if (!existsSync(path)) throw new KeelError("KEEL_STORE_FAILED", `The ${what} ${path} does not exist.`, { path });
      db = openForViewing(path, timeout);
      return db;
    }
    if (!memory) assertWritable(path, what);
    db = new DatabaseSync(path, { timeout });
    if (!memory && options.check !== false && existsSync(path) && statSync(path).size > 0)
      retryBusy(() => quickCheck(db!, path, what), timeout);
    if (!memory && options.wal !== false) retryBusy(() => db!.exec("PRAGMA journal_mode=WAL"), timeout);
    if (options.setup) {
      const setup = options.setup;
      retryBusy(() => {
        try {
          setup(db!);
        } catch (err) {
          if (db!.isTransaction) db!.exec("ROLLBACK");
          throw err;
        }
      }, timeout);
    }
    return db;
  } catch (err) {
    try {
      db?.close();
    } catch {
      // Already failing; the open error is the one to report.
    }
    throw storeError(err, path, what, `open the ${what}`);
  }
}

/** A read-only connection; immutable when SQLite cannot make the WAL index beside the file. */
function openForViewing(path: string, timeout: number): DatabaseSync {
  const db = new DatabaseSync(path, { readOnly: true, timeout });
  try {
    db.prepare("SELECT count(*) FROM sqlite_schema").get();
    return db;
  } catch (err) {
    db.close();
    const code = sqlitePrimaryCode(err);
    if (code !== SQLITE_CANTOPEN && code !== SQLITE_READONLY) throw err;
  }
  // No WAL index could be opened or made beside the file (a WAL writer always keeps one, so
  // none has it open) and the folder is not writable: read the file as it is on disk.
  const url = pathToFileURL(resolve(path));
  url.searchParams.set("immutable", "1");
  const ro = new DatabaseSync(url, { readOnly: true, timeout });
  ro.prepare("SELECT count(*) FROM sqlite_schema").get();
  return ro;
}

/** Throw KEEL_STORE_READ_ONLY when the file or (for a new file) its folder cannot be written. */
function assertWritable(path: string, what: string): void {
  const dir = dirname(path);
  try {
    // One level at a time: Node's recursive mkdir spins forever under /proc.
    makeDirs(dir);
  } catch (err) {
    if (!READ_ONLY_ERRNOS.has((err as NodeJS.ErrnoException).code ?? "")) throw err;
    throw readOnlyError(path, what, `its folder ${dir} cannot be created (${errorMessage(err)})`, err);
  }
  if (existsSync(path)) {
    try {
      accessSync(path, constants.W_OK);
    } catch (err) {
      if (!READ_ONLY_ERRNOS.has((err as NodeJS.ErrnoException).code ?? "")) throw err;
      throw readOnlyError(path, what, "the file is not writable", err);
    }
  }
  // SQLite writes its -wal and -shm files (and a new database) beside the file.
  try {
    accessSync(dir, constants.W_OK);
  } catch (err) {
    if (!READ_ONLY_ERRNOS.has((err as NodeJS.ErrnoException).code ?? "")) throw err;
    throw readOnlyError(path, what, `its folder ${dir} is not writable`, err);
  }
}

/**
 * Throw KEEL_STORE_CORRUPT when something other than a regular file (a folder, a FIFO, a
 * socket) sits where the database or its -wal, -shm or -journal file should be: SQLite would
 * report "unable to open database file" or "disk I/O error", which points at permissions or
 * disk space instead, and a read-only open of a FIFO blocks forever.
 */
function assertRegularFile(path: string, what: string): void {
  for (const suffix of ["", "-wal", "-shm", "-journal"]) {
    const file = path + suffix;
    let kind: string | undefined;
    try {
      const st = statSync(file);
      if (st.isFile()) continue;
      kind = st.isDirectory() ? "a folder" : st.isFIFO() ? "a FIFO" : st.isSocket() ? "a socket" : "not a regular file";
    } catch {
      continue; // Absent (a new database, no WAL yet) or unreadable: the open reports it.
    }
    const message = suffix
      ? `The ${what}'s ${suffix.slice(1)} file ${file} is ${kind}, not a regular file; Keel did not write to it.`
      : `The ${what} ${file} is ${kind}, not a database file; Keel did not write to it.`;
    throw new KeelError("KEEL_STORE_CORRUPT", message, { path: file });
  }
}

/** errno codes that mean "not allowed to write here" (anything else is a plain failure). */
const READ_ONLY_ERRNOS = new Set(["EACCES", "EPERM", "EROFS"]);

function readOnlyError(path: string, what: string, why: string, cause: unknown): KeelError {
  return new KeelError("KEEL_STORE_READ_ONLY", `The ${what} ${path} cannot be written: ${why}.`, { path }, { cause });
}

function quickCheck(db: DatabaseSync, path: string, what: string): void {
  const rows = db.prepare("PRAGMA quick_check(5)").all() as Array<Record<string, unknown>>;
  const problems = rows.map((r) => String(Object.values(r)[0])).filter((r) => r !== "ok");
  if (problems.length) {
    throw new KeelError(
      "KEEL_STORE_CORRUPT",
      `The ${what} ${path} fails SQLite's quick check (${headOf(problems.join("; "), 300)}); Keel did not write to it.`,
      { path },
    );
  }
}

/**
 * A coded error for a failed SQLite operation on `path`.
 * Contract: KeelErrors pass through; read-only and corruption results get their own codes;
 * anything else is KEEL_STORE_FAILED "Could not <action> <path>: <cause>".
 */
export function storeError(err: unknown, path: string, what: string, action: string): KeelError {
  if (err instanceof KeelError) return err;
  const code = sqlitePrimaryCode(err);
  if (code === SQLITE_READONLY) return readOnlyError(path, what, errorMessage(err), err);
  if (code === SQLITE_CORRUPT || code === SQLITE_NOTADB) {
    return new KeelError(
      "KEEL_STORE_CORRUPT",
      `The ${what} ${path} is malformed (${errorMessage(err)}); Keel did not write to it.`,
      { path },
      { cause: err },
    );
  }
  const why = isSqliteBusy(err)
    ? `${errorMessage(err)} (another process held its write lock past the busy timeout: is a keel process stopped or hung?)`
    : errorMessage(err);
  return new KeelError("KEEL_STORE_FAILED", `Could not ${action} ${path}: ${why}.`, { path }, { cause: err });
}

/**
 * A database a plugin may close when its last session ends and use again when another opens.
 * Contract: `db` opens the file (openSqlite with the same options) on first use after a close;
 * `close()` is idempotent.
 */
export class ReopeningSqlite {
  readonly path: string;
  readonly #options: OpenSqliteOptions;
  #db: DatabaseSync | undefined;

  constructor(path: string, options: OpenSqliteOptions = {}) {
    this.path = path;
    this.#options = options;
    this.#db = openSqlite(path, options);
  }

  get db(): DatabaseSync {
    return (this.#db ??= openSqlite(this.path, this.#options));
  }

  close(): void {
    const db = this.#db;
    this.#db = undefined;
    try {
      db?.close();
    } catch {
      // already closed
    }
  }
}
