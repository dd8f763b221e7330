/**
 * Where workflows and their evidence live: one SQLite file in the agent's home
 * (`workflows.sqlite`), per namespace. Everything written is redacted first.
 */
import type { DatabaseSync } from "node:sqlite";
import { openSqlite } from "@keel/store-sqlite";
import { redact } from "@keel/secrets";
import type { Example, Workflow } from "./learn.ts";

/** A stored workflow. Contract: a draft until reviewed; a draft is offered only in the namespace that produced it. */
export interface StoredWorkflow {
  namespace: string;
  key: string;
  workflow: Workflow;
  reviewed: boolean;
  createdAt: string;
}

/** Examples kept per namespace and tool sequence (the newest). */
export const EXAMPLES_KEPT = 8;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS wf_examples (namespace TEXT NOT NULL, key TEXT NOT NULL, ts INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS wf_examples_key ON wf_examples (namespace, key, ts);
CREATE TABLE IF NOT EXISTS wf_workflows (namespace TEXT NOT NULL, key TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, reviewed INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, PRIMARY KEY (namespace, key));
CREATE TABLE IF NOT EXISTS wf_revoked (namespace TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (namespace, key));
`;

/** The workflows store. Contract: every text it writes passes @keel/secrets' redaction. */
export class WorkflowStore {
  readonly db: DatabaseSync;

  constructor(path: string) {
    this.db = openSqlite(path, { what: "workflows database" });
    this.db.exec(SCHEMA);
  }

  /** Record a successful turn; returns the newest examples of its tool sequence (at most EXAMPLES_KEPT). */
  addExample(namespace: string, key: string, example: Example): Example[] {
    const data = redact(JSON.stringify(example));
    this.db
      .prepare("INSERT INTO wf_examples (namespace, key, ts, data) VALUES (?, ?, ?, ?)")
      .run(namespace, key, Date.now(), data);
    const rows = this.db
      .prepare("SELECT rowid, data FROM wf_examples WHERE namespace = ? AND key = ? ORDER BY ts DESC, rowid DESC")
      .all(namespace, key) as Array<{ rowid: number; data: string }>;
    for (const r of rows.slice(EXAMPLES_KEPT)) this.db.prepare("DELETE FROM wf_examples WHERE rowid = ?").run(r.rowid);
    return rows
      .slice(0, EXAMPLES_KEPT)
      .reverse()
      .map((r) => JSON.parse(r.data) as Example);
  }

  /** True when a person revoked this tool sequence's workflow in `namespace` (it is never learned again there). */
  isRevoked(namespace: string, key: string): boolean {
    return !!this.db.prepare("SELECT 1 FROM wf_revoked WHERE namespace = ? AND key = ?").get(namespace, key);
  }

  /** Keep a (re)learned workflow as a draft; a reviewed one keeps its review only while its steps stay the same. */
  save(namespace: string, key: string, workflow: Workflow): void {
    if (this.isRevoked(namespace, key)) return;
    const old = this.db
      .prepare("SELECT id, reviewed FROM wf_workflows WHERE namespace = ? AND key = ?")
      .get(namespace, key) as { id: string; reviewed: number } | undefined;
    const reviewed = old && old.id === workflow.id ? old.reviewed : 0;
    this.db
      .prepare(
        "INSERT OR REPLACE INTO wf_workflows (namespace, key, id, data, reviewed, created_at) VALUES (?, ?, ?, ?, ?, ?)",
      )
      .run(namespace, key, workflow.id, redact(JSON.stringify(workflow)), reviewed, new Date().toISOString());
  }

  /** The workflows an input in `namespace` may be offered: its own drafts and every reviewed one. */
  visible(namespace: string): StoredWorkflow[] {
    const rows = this.db
      .prepare("SELECT * FROM wf_workflows WHERE namespace = ? OR reviewed = 1 ORDER BY created_at")
      .all(namespace) as Array<Record<string, string | number>>;
    return rows.map(rowOf);
  }

  /** Every workflow, for listing. */
  all(): StoredWorkflow[] {
    return (
      this.db.prepare("SELECT * FROM wf_workflows ORDER BY namespace, created_at").all() as Array<
        Record<string, string | number>
      >
    ).map(rowOf);
  }

  /** Mark a workflow reviewed (offered in every namespace from then on). False when no workflow has that id. */
  review(id: string): boolean {
    return Number(this.db.prepare("UPDATE wf_workflows SET reviewed = 1 WHERE id = ?").run(id).changes) > 0;
  }

  /** Delete a workflow and never learn its tool sequence again in its namespace. False when no workflow has that id. */
  revoke(id: string): boolean {
    const rows = this.db.prepare("SELECT namespace, key FROM wf_workflows WHERE id = ?").all(id) as Array<{
      namespace: string;
      key: string;
    }>;
    for (const r of rows) {
      this.db.prepare("INSERT OR IGNORE INTO wf_revoked (namespace, key) VALUES (?, ?)").run(r.namespace, r.key);
      this.db.prepare("DELETE FROM wf_workflows WHERE namespace = ? AND key = ?").run(r.namespace, r.key);
    }
    return rows.length > 0;
  }

  close(): void {
    this.db.close();
  }
}

function rowOf(r: Record<string, string | number>): StoredWorkflow {
  return {
    namespace: String(r.namespace),
    key: String(r.key),
    workflow: JSON.parse(String(r.data)) as Workflow,
    reviewed: Number(r.reviewed) === 1,
    createdAt: String(r.created_at),
  };
}
