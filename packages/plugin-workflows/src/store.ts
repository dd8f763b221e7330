/**
 * Where workflows and their evidence live: one SQLite file in the agent's home
 * (`workflows.sqlite`), per namespace. Everything written is redacted first.
 */
import type { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import { openSqlite } from "@keel/store-sqlite";
import { redactData } from "@keel/secrets";
import type { Example, Workflow } from "./learn.ts";
import { SourceSchema } from "./steps.ts";

/** A slot's shape must compile: it is a regular expression the gate runs over inputs. */
const Shape = z.string().refine((s) => {
  try {
    new RegExp(s);
    return true;
  } catch {
    return false;
  }
});

/** A stored example as read back: one that does not fit is skipped. */
const ExampleSchema = z.object({
  input: z.string(),
  calls: z.array(z.object({ name: z.string(), args: z.record(z.string(), z.json()) })),
  results: z.array(z.string()),
  answer: z.string(),
  lead: z.string().optional(),
});

/** A stored workflow as read back: a row that does not fit (a hand-edited or foreign file) is skipped. */
const WorkflowSchema = z.object({
  id: z.string().min(1),
  name: z.string(),
  steps: z.array(z.object({ tool: z.string().min(1), args: z.record(z.string(), SourceSchema) })).min(1),
  slots: z.array(z.object({ name: z.string(), shape: Shape, order: z.number().int().min(0) })),
  modelParams: z.array(z.string()),
  cue: z.array(z.string()),
  leadCue: z.array(z.string()).optional(),
  answer: z.string().optional(),
  expect: z
    .array(z.object({ step: z.number(), path: z.array(z.union([z.string(), z.number()])), value: z.json() }))
    .optional(),
  examples: z.number(),
});

/** A stored workflow. Contract: a draft until reviewed; a draft is offered only in the namespace that produced it. */
export interface StoredWorkflow {
  namespace: string;
  key: string;
  workflow: Workflow;
  reviewed: boolean;
  createdAt: string;
  /** Offers run to the end, and offers declined or cut short by a failed step. */
  accepted: number;
  declined: number;
}

/** Examples kept per namespace and tool sequence (the newest). */
export const EXAMPLES_KEPT = 8;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS wf_examples (namespace TEXT NOT NULL, key TEXT NOT NULL, ts INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS wf_examples_key ON wf_examples (namespace, key, ts);
CREATE TABLE IF NOT EXISTS wf_workflows (namespace TEXT NOT NULL, key TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, reviewed INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, PRIMARY KEY (namespace, key));
CREATE TABLE IF NOT EXISTS wf_offer_outcomes (namespace TEXT NOT NULL, id TEXT NOT NULL, accepted INTEGER NOT NULL DEFAULT 0, declined INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (namespace, id));
CREATE TABLE IF NOT EXISTS wf_revoked (namespace TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (namespace, key));
`;

/** The workflows store. Contract: every string it writes passes @keel/secrets' redaction (value by value, so the JSON stays JSON); an unreadable row is skipped. */
export class WorkflowStore {
  readonly db: DatabaseSync;

  constructor(path: string) {
    this.db = openSqlite(path, { what: "workflows database" });
    this.db.exec(SCHEMA);
  }

  /** Record a successful turn; returns the newest examples of its tool sequence (at most EXAMPLES_KEPT). */
  addExample(namespace: string, key: string, example: Example): Example[] {
    const data = JSON.stringify(redactData(example));
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
      .flatMap((r) => {
        const read = ExampleSchema.safeParse(parsed<unknown>(r.data));
        return read.success ? [read.data as Example] : [];
      });
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
      .run(namespace, key, workflow.id, JSON.stringify(redactData(workflow)), reviewed, new Date().toISOString());
  }

  /** The workflows an input in `namespace` may be offered: its own drafts and every reviewed one, with how their offers ended in `namespace`. */
  visible(namespace: string): StoredWorkflow[] {
    const rows = this.db
      .prepare(
        "SELECT w.*, o.accepted, o.declined FROM wf_workflows w LEFT JOIN wf_offer_outcomes o ON o.id = w.id AND o.namespace = ? WHERE w.namespace = ? OR w.reviewed = 1 ORDER BY w.created_at",
      )
      .all(namespace, namespace) as Array<Record<string, string | number | null>>;
    return rows.flatMap(rowOf);
  }

  /** Every workflow, for listing. */
  all(): StoredWorkflow[] {
    return (
      this.db
        .prepare(
          "SELECT w.*, o.accepted, o.declined FROM wf_workflows w LEFT JOIN wf_offer_outcomes o ON o.id = w.id AND o.namespace = w.namespace ORDER BY w.namespace, w.created_at",
        )
        .all() as Array<Record<string, string | number | null>>
    ).flatMap(rowOf);
  }

  /**
   * Count how an offer of workflow `id` in `namespace` ended: run to the end, or declined (a
   * failed step counts as declined). Contract: per namespace, so one namespace's declines never
   * silence a workflow another is offered.
   */
  outcome(namespace: string, id: string, accepted: boolean): void {
    this.db
      .prepare(
        `INSERT INTO wf_offer_outcomes (namespace, id, accepted, declined) VALUES (?, ?, ?, ?) ON CONFLICT (namespace, id) DO UPDATE SET ${accepted ? "accepted = accepted + 1" : "declined = declined + 1"}`,
      )
      .run(namespace, id, accepted ? 1 : 0, accepted ? 0 : 1);
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

/** A stored row, or nothing when it no longer reads as a workflow (a hand-edited file): it is skipped, not fatal. */
function rowOf(r: Record<string, string | number | null>): StoredWorkflow[] {
  const read = WorkflowSchema.safeParse(parsed<unknown>(String(r.data)));
  if (!read.success) return [];
  const workflow = read.data as Workflow;
  return [
    {
      namespace: String(r.namespace),
      key: String(r.key),
      workflow,
      reviewed: Number(r.reviewed) === 1,
      createdAt: String(r.created_at),
      accepted: Number(r.accepted ?? 0),
      declined: Number(r.declined ?? 0),
    },
  ];
}

function parsed<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}
