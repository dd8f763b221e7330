/**
 * A2A tasks kept in SQLite (beside the session owners, in `<home>/serve.sqlite`), each under
 * the principal that created it, so `tasks/get` answers after a restart and never across callers.
 */
import { randomUUID } from "node:crypto";
import { DatabaseSync } from "node:sqlite";
import { Role, Task, TaskState } from "@a2a-js/sdk";
import type { ListTasksRequest, ListTasksResponse, Message } from "@a2a-js/sdk";
import type { ServerCallContext, TaskStore } from "@a2a-js/sdk/server";
import { KeelError } from "@keel/kernel";
import { headOf } from "@keel/text";

/** The principal a call runs as. Contract: the context user's name, "local" without one. */
export function principalOf(context: ServerCallContext | undefined): string {
  return context?.user?.userName || "local";
}

/** An agent message of one text part. Contract: a fresh messageId each call. */
export function agentText(text: string, taskId: string, contextId: string): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** A stored task, or undefined when its row does not read back (a damaged or hand-edited file). */
function readTask(json: string): Task | undefined {
  try {
    return Task.fromJSON(JSON.parse(json));
  } catch {
    return undefined;
  }
}

const UNFINISHED = [TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING];

/**
 * A TaskStore on a SQLite file (or in memory).
 * Contract: `load` and `list` see only the calling principal's tasks; a save never overwrites
 * another principal's task; tasks left submitted or working by a previous process are failed
 * when the store opens (their turn is gone with it); a damaged row never stops the store
 * opening: `list` leaves it out and `load` throws KEEL_STORE_CORRUPT naming the task.
 */
export class SqliteTaskStore implements TaskStore {
  private readonly db: DatabaseSync;

  constructor(path = ":memory:") {
    this.db = new DatabaseSync(path);
    this.db.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;");
    this.db.exec(
      "CREATE TABLE IF NOT EXISTS a2a_tasks (id TEXT PRIMARY KEY, owner TEXT NOT NULL, context_id TEXT NOT NULL, state INTEGER NOT NULL, task TEXT NOT NULL, updated_at INTEGER NOT NULL)",
    );
    this.failUnfinished();
  }

  async save(task: Task, context: ServerCallContext): Promise<void> {
    this.write(task, principalOf(context));
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    if (!this.db.isOpen) return undefined;
    const row = this.db
      .prepare("SELECT task FROM a2a_tasks WHERE id = ? AND owner = ?")
      .get(taskId, principalOf(context)) as { task: string } | undefined;
    if (!row) return undefined;
    const task = readTask(row.task);
    if (!task)
      throw new KeelError(
        "KEEL_STORE_CORRUPT",
        `Task ${headOf(taskId, 80)} is damaged in the task store and cannot be read: send the message again as a new task (its contextId still continues the conversation).`,
      );
    return task;
  }

  async list(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    const size = Math.min(Math.max(params.pageSize ?? 50, 1), 100);
    const offset = Number.parseInt(params.pageToken || "0", 10) || 0;
    const where = ["owner = ?"];
    const args: (string | number)[] = [principalOf(context)];
    if (params.contextId) where.push("context_id = ?"), args.push(params.contextId);
    if (params.status) where.push("state = ?"), args.push(params.status);
    const sql = `FROM a2a_tasks WHERE ${where.join(" AND ")}`;
    const total = (this.db.prepare(`SELECT count(*) AS n ${sql}`).get(...args) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT task ${sql} ORDER BY updated_at DESC, id LIMIT ? OFFSET ?`)
      .all(...args, size, offset) as { task: string }[];
    // A damaged row is left out rather than failing the whole list.
    const tasks = rows.flatMap((r) => readTask(r.task) ?? []);
    const next = offset + tasks.length < total ? String(offset + tasks.length) : "";
    return { tasks, nextPageToken: next, pageSize: size, totalSize: total };
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }

  private write(task: Task, owner: string): void {
    // After close (the server stopped with a turn still running) nothing is written: the next start fails that task.
    if (!this.db.isOpen) return;
    this.db
      .prepare(
        `INSERT INTO a2a_tasks (id, owner, context_id, state, task, updated_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET state = excluded.state, task = excluded.task, updated_at = excluded.updated_at
         WHERE a2a_tasks.owner = excluded.owner`,
      )
      .run(task.id, owner, task.contextId, task.status?.state ?? 0, JSON.stringify(Task.toJSON(task)), Date.now());
  }

  private failUnfinished(): void {
    const rows = this.db
      .prepare(`SELECT id, owner, task FROM a2a_tasks WHERE state IN (${UNFINISHED.join(",")})`)
      .all() as { id: string; owner: string; task: string }[];
    for (const row of rows) {
      const task = readTask(row.task);
      if (!task) {
        this.db.prepare("UPDATE a2a_tasks SET state = ? WHERE id = ?").run(TaskState.TASK_STATE_FAILED, row.id);
        continue;
      }
      const text = "The server stopped while this task ran; send the message again.";
      task.status = {
        state: TaskState.TASK_STATE_FAILED,
        message: agentText(text, task.id, task.contextId),
        timestamp: new Date().toISOString(),
      };
      this.write(task, row.owner);
    }
  }
}
