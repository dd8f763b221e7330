/**
 * The goals database (`<KEEL_HOME>/goals.sqlite`): each session's goal state, and the
 * autonomous runs with the process that drives them, so a run left by a crashed process is
 * found and marked on the next start. Goal text is stored redacted.
 */
import { hostname } from "node:os";
import type { DatabaseSync } from "node:sqlite";
import { ReopeningSqlite } from "@keel/store-sqlite";
import { toWellFormed, truncate } from "@keel/text";
import { redact } from "@keel/secrets";

/** A session's goal. Contract: `goal` is set unless `status` is idle. */
export interface GoalRecord {
  sessionId: string;
  status: "idle" | "active" | "completed";
  goal?: string;
  /** How it completed: the model's completion phrase, the supervisor, or the host. */
  completedBy?: "phrase" | "supervisor" | "host";
  updatedAt: number;
}

/** How an autonomous run ended (or `running`). */
export type RunStatus = "running" | "achieved" | "limit" | "stopped" | "paused" | "stuck" | "failed" | "orphaned";

/** An autonomous run. Contract: `pid`/`host` name the process that drives a `running` run. */
export interface RunRecord {
  id: string;
  sessionId: string;
  goal: string;
  status: RunStatus;
  reason?: string;
  maxTurns: number;
  turns: number;
  supervisorFails: number;
  /** The supervisor's last answer, if it gave one. */
  verdict?: { achieved: boolean; reason: string };
  startedAt: number;
  updatedAt: number;
  pid: number;
  host: string;
}

const MAX_GOAL = 2_000;

export class GoalStore {
  readonly path: string;
  readonly #sql: ReopeningSqlite;

  constructor(path: string) {
    this.path = path;
    this.#sql = new ReopeningSqlite(path, {
      what: "goals database",
      setup: (db) => {
        db.exec(`CREATE TABLE IF NOT EXISTS goals (session_id TEXT PRIMARY KEY, status TEXT NOT NULL, goal TEXT, completed_by TEXT, updated_at INTEGER NOT NULL);
          CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, goal TEXT NOT NULL, status TEXT NOT NULL, reason TEXT, max_turns INTEGER NOT NULL, turns INTEGER NOT NULL, supervisor_fails INTEGER NOT NULL, verdict TEXT, started_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL);
          CREATE INDEX IF NOT EXISTS runs_status ON runs(status);`);
      },
    });
  }

  /** The database, opened again if it was closed (a plugin closes it when its last session ends). */
  get #db(): DatabaseSync {
    return this.#sql.db;
  }

  goal(sessionId: string): GoalRecord {
    const r = this.#db.prepare("SELECT * FROM goals WHERE session_id = ?").get(sessionId) as
      | Record<string, unknown>
      | undefined;
    if (!r) return { sessionId, status: "idle", updatedAt: 0 };
    return {
      sessionId,
      status: r.status as GoalRecord["status"],
      ...(r.goal != null ? { goal: String(r.goal) } : {}),
      ...(r.completed_by != null ? { completedBy: r.completed_by as GoalRecord["completedBy"] } : {}),
      updatedAt: Number(r.updated_at),
    };
  }

  setGoal(rec: Omit<GoalRecord, "updatedAt">): GoalRecord {
    const goal = rec.goal === undefined ? null : clean(rec.goal);
    const now = Date.now();
    this.#db
      .prepare(
        "INSERT INTO goals (session_id, status, goal, completed_by, updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET status = excluded.status, goal = excluded.goal, completed_by = excluded.completed_by, updated_at = excluded.updated_at",
      )
      .run(rec.sessionId, rec.status, goal, rec.completedBy ?? null, now);
    return this.goal(rec.sessionId);
  }

  startRun(r: { id: string; sessionId: string; goal: string; maxTurns: number }): RunRecord {
    const now = Date.now();
    this.#db
      .prepare(
        "INSERT INTO runs (id, session_id, goal, status, max_turns, turns, supervisor_fails, started_at, updated_at, pid, host) VALUES (?, ?, ?, 'running', ?, 0, 0, ?, ?, ?, ?)",
      )
      .run(r.id, r.sessionId, clean(r.goal), r.maxTurns, now, now, process.pid, hostname());
    return this.run(r.id)!;
  }

  updateRun(
    id: string,
    patch: Partial<Pick<RunRecord, "status" | "reason" | "turns" | "supervisorFails" | "verdict">>,
  ): RunRecord {
    const cur = this.run(id);
    if (!cur) throw new Error(`no goal run ${id}`);
    const next = { ...cur, ...patch };
    this.#db
      .prepare(
        "UPDATE runs SET status = ?, reason = ?, turns = ?, supervisor_fails = ?, verdict = ?, updated_at = ? WHERE id = ?",
      )
      .run(
        next.status,
        next.reason === undefined ? null : clean(next.reason),
        next.turns,
        next.supervisorFails,
        next.verdict ? JSON.stringify({ achieved: next.verdict.achieved, reason: clean(next.verdict.reason) }) : null,
        Date.now(),
        id,
      );
    return this.run(id)!;
  }

  run(id: string): RunRecord | undefined {
    const r = this.#db.prepare("SELECT * FROM runs WHERE id = ?").get(id) as Record<string, unknown> | undefined;
    return r ? toRun(r) : undefined;
  }

  runs(options: { sessionId?: string; limit?: number } = {}): RunRecord[] {
    const rows = options.sessionId
      ? this.#db
          .prepare("SELECT * FROM runs WHERE session_id = ? ORDER BY started_at DESC LIMIT ?")
          .all(options.sessionId, options.limit ?? 50)
      : this.#db.prepare("SELECT * FROM runs ORDER BY started_at DESC LIMIT ?").all(options.limit ?? 50);
    return (rows as Array<Record<string, unknown>>).map(toRun);
  }

  /**
   * Mark runs whose driving process is gone as `orphaned`. Contract: a run of this host whose
   * pid is not alive, or of another host not updated for `staleMs`, is orphaned; returns them.
   */
  markOrphans(staleMs = 10 * 60_000): RunRecord[] {
    const here = hostname();
    const orphans = (
      this.#db.prepare("SELECT * FROM runs WHERE status = 'running'").all() as Array<Record<string, unknown>>
    )
      .map(toRun)
      .filter((r) => (r.host === here ? r.pid !== process.pid && !alive(r.pid) : Date.now() - r.updatedAt > staleMs));
    for (const r of orphans)
      this.updateRun(r.id, {
        status: "orphaned",
        reason: `its process (pid ${r.pid} on ${r.host}) stopped after ${r.turns} turn(s)`,
      });
    return orphans.map((r) => this.run(r.id)!);
  }

  /**
   * Take up to `limit` orphaned runs (their driving process is gone) for this process to go on
   * with: each is `running` again under this pid. Contract: atomic per run, so of two workers
   * sharing the database one takes it; returns what this process took.
   */
  claimOrphans(limit: number): RunRecord[] {
    this.markOrphans();
    const candidates = (
      this.#db
        .prepare("SELECT id FROM runs WHERE status = 'orphaned' ORDER BY updated_at LIMIT ?")
        .all(limit) as Array<{ id: string }>
    ).map((r) => r.id);
    const take = this.#db.prepare(
      "UPDATE runs SET status = 'running', reason = NULL, pid = ?, host = ?, updated_at = ? WHERE id = ? AND status = 'orphaned'",
    );
    return candidates
      .filter((id) => take.run(process.pid, hostname(), Date.now(), id).changes === 1)
      .map((id) => this.run(id)!);
  }

  close(): void {
    this.#sql.close();
  }
}

function toRun(r: Record<string, unknown>): RunRecord {
  return {
    id: String(r.id),
    sessionId: String(r.session_id),
    goal: String(r.goal),
    status: r.status as RunStatus,
    ...(r.reason != null ? { reason: String(r.reason) } : {}),
    maxTurns: Number(r.max_turns),
    turns: Number(r.turns),
    supervisorFails: Number(r.supervisor_fails),
    ...(r.verdict != null ? { verdict: JSON.parse(String(r.verdict)) as RunRecord["verdict"] } : {}),
    startedAt: Number(r.started_at),
    updatedAt: Number(r.updated_at),
    pid: Number(r.pid),
    host: String(r.host),
  };
}

/** Redacted, well-formed and bounded: what the store keeps of any text. */
function clean(text: string): string {
  return truncate(redact(toWellFormed(text)), MAX_GOAL);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
