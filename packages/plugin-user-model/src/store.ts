/**
 * Profiles per namespace in `<KEEL_HOME>/user-model.sqlite` (Wayland's UserModelBackend): a
 * running average of message length, detail and tone, and how often words recur.
 */
import type { DatabaseSync } from "node:sqlite";
import { ReopeningSqlite } from "@keel/store-sqlite";
import type { StyleSignals } from "./style.ts";

/** A learned profile. Contract: `detail`/`tone` in [-1, 1]; `terms` at most 300, counted by turns. */
export interface UserProfile {
  namespace: string;
  turns: number;
  /** Average words per message. */
  words: number;
  detail: number;
  tone: number;
  terms: Record<string, number>;
  updatedAt: number;
}

/** How much a new message moves the averages (exponential moving average). */
const ALPHA = 0.3;
/** An explicit ask for brevity or detail counts for more than a message's length. */
const ASK = 0.6;
const MAX_TERMS = 300;

export class UserModelStore {
  readonly path: string;
  readonly #sql: ReopeningSqlite;

  constructor(path: string) {
    this.path = path;
    this.#sql = new ReopeningSqlite(path, {
      what: "user model database",
      setup: (db) =>
        db.exec(
          "CREATE TABLE IF NOT EXISTS profiles (namespace TEXT PRIMARY KEY, profile TEXT NOT NULL, updated_at INTEGER NOT NULL)",
        ),
    });
  }

  /** The database, opened again if it was closed (the plugin closes it when its last session ends). */
  get #db(): DatabaseSync {
    return this.#sql.db;
  }

  profile(namespace: string): UserProfile {
    const r = this.#db.prepare("SELECT profile FROM profiles WHERE namespace = ?").get(namespace) as
      | { profile: string }
      | undefined;
    return r
      ? { ...(JSON.parse(r.profile) as UserProfile), namespace }
      : { namespace, turns: 0, words: 0, detail: 0, tone: 0, terms: {}, updatedAt: 0 };
  }

  /** Fold one message's signals into the namespace's profile. */
  observe(namespace: string, s: StyleSignals): UserProfile {
    const p = this.profile(namespace);
    const first = p.turns === 0;
    const ema = (old: number, value: number, a: number) => (first ? value : old * (1 - a) + value * a);
    const next: UserProfile = {
      namespace,
      turns: p.turns + 1,
      words: Math.round(ema(p.words, s.words, ALPHA) * 10) / 10,
      // Only a message that says something moves detail and tone.
      detail: s.detail ? clamp(ema(p.detail, s.detail, ASK)) : p.detail,
      tone: s.tone ? clamp(ema(p.tone, s.tone, ALPHA)) : p.tone,
      terms: { ...p.terms },
      updatedAt: Date.now(),
    };
    for (const t of s.terms) next.terms[t] = (next.terms[t] ?? 0) + 1;
    const kept = Object.entries(next.terms)
      .sort((a, b) => b[1] - a[1])
      .slice(0, MAX_TERMS);
    next.terms = Object.fromEntries(kept);
    this.#db
      .prepare(
        "INSERT INTO profiles (namespace, profile, updated_at) VALUES (?, ?, ?) ON CONFLICT(namespace) DO UPDATE SET profile = excluded.profile, updated_at = excluded.updated_at",
      )
      .run(namespace, JSON.stringify(next), next.updatedAt);
    return next;
  }

  /** Forget the namespace's profile. Contract: true when there was one. */
  reset(namespace: string): boolean {
    return Number(this.#db.prepare("DELETE FROM profiles WHERE namespace = ?").run(namespace).changes) > 0;
  }

  close(): void {
    this.#sql.close();
  }
}

function clamp(v: number): number {
  return Math.round(Math.max(-1, Math.min(1, v)) * 1000) / 1000;
}
