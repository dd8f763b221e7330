/**
 * The subgoal registry: subgoals with the messages they span (by stable message key, so
 * spans survive masking, summaries and re-indexing), extraction, and eviction scores.
 */
import type { Message } from "@keel/kernel";
import { fullText, messageKeys } from "./messages.ts";
import { headOf } from "@keel/text";

/** One subgoal. Contract: at most one is `active` at a time. */
export interface Subgoal {
  id: number;
  description: string;
  state: "active" | "completed";
  /** Keys (see messageKeys) of the messages it spans. */
  keys: Set<string>;
  result?: string;
}

/** Tier scores of MECHANICS: active 1.0, completed 0.3, outside any subgoal 0.1. */
export const TIER = { active: 1.0, completed: 0.3, none: 0.1 } as const;

/** What an extraction decided. */
export interface Extraction {
  completed?: string;
  next?: string;
}

/** Subgoals of one session. */
export class SubgoalRegistry {
  readonly subgoals: Subgoal[] = [];
  readonly #owner = new Map<string, Subgoal>();

  get active(): Subgoal | undefined {
    return this.subgoals.find((s) => s.state === "active");
  }

  /** Assign messages no subgoal owns yet to the active one. */
  observe(messages: readonly Message[]): void {
    const active = this.active;
    if (!active) return;
    for (const key of messageKeys(messages)) if (!this.#owner.has(key)) this.#claim(active, key);
  }

  #claim(s: Subgoal, key: string): void {
    this.#owner.get(key)?.keys.delete(key);
    this.#owner.set(key, s);
    s.keys.add(key);
  }

  /**
   * Apply an extraction. `COMPLETED` closes the active subgoal; a new subgoal closes the
   * old one and claims `claim` (the messages it was extracted from that no completed subgoal owns).
   */
  apply(x: Extraction, claim: readonly string[] = []): { opened?: Subgoal; closed?: Subgoal } {
    const out: { opened?: Subgoal; closed?: Subgoal } = {};
    const active = this.active;
    if (active && (x.completed !== undefined || x.next !== undefined)) {
      active.state = "completed";
      if (x.completed) active.result = x.completed;
      out.closed = active;
    }
    if (x.next) {
      const s: Subgoal = { id: this.subgoals.length + 1, description: x.next, state: "active", keys: new Set() };
      this.subgoals.push(s);
      for (const key of claim) {
        const owner = this.#owner.get(key);
        if (!owner || owner === out.closed) this.#claim(s, key);
      }
      out.opened = s;
    }
    return out;
  }

  /**
   * Keep the active subgoal's span under `maxTokens`: its older messages beyond that move to
   * a completed subgoal ("earlier part"), so an ever-growing subgoal cannot pin the window.
   * Returns the split-off subgoal, if any.
   */
  capActive(
    messages: readonly Message[],
    countMessage: (m: Message) => number,
    maxTokens: number,
  ): Subgoal | undefined {
    const active = this.active;
    if (!active) return undefined;
    const keys = messageKeys(messages);
    let total = 0;
    const older: string[] = [];
    for (let i = messages.length - 1; i >= 0; i--) {
      if (!active.keys.has(keys[i]!)) continue;
      total += countMessage(messages[i]!);
      if (total > maxTokens) older.push(keys[i]!);
    }
    if (!older.length) return undefined;
    const part: Subgoal = {
      id: this.subgoals.length + 1,
      description: `${active.description} (earlier part)`,
      state: "completed",
      keys: new Set(),
    };
    this.subgoals.push(part);
    for (const k of older) this.#claim(part, k);
    return part;
  }

  /** The subgoal owning a message key. */
  ownerOf(key: string): Subgoal | undefined {
    return this.#owner.get(key);
  }

  /** Tier of a message key. */
  tier(key: string): number {
    const s = this.#owner.get(key);
    return !s ? TIER.none : s.state === "active" ? TIER.active : TIER.completed;
  }

  /** [first, last] message index of each subgoal present in `messages`. */
  spans(
    messages: readonly Message[],
  ): Array<{ id: number; description: string; state: Subgoal["state"]; span: [number, number] | null }> {
    const keys = messageKeys(messages);
    return this.subgoals.map((s) => {
      let first = -1;
      let last = -1;
      keys.forEach((k, i) => {
        if (s.keys.has(k)) {
          if (first < 0) first = i;
          last = i;
        }
      });
      return { id: s.id, description: s.description, state: s.state, span: first < 0 ? null : [first, last] };
    });
  }

  /** JSON view for diagnostics. */
  toJSON(): Array<{ id: number; description: string; state: string; messages: number }> {
    return this.subgoals.map((s) => ({ id: s.id, description: s.description, state: s.state, messages: s.keys.size }));
  }
}

/** Parse a model's extraction reply (`COMPLETED: …`, `NEXT: …`, `SAME`). */
export function parseExtraction(reply: string, hasActive: boolean): Extraction {
  const out: Extraction = {};
  for (const raw of reply.split("\n")) {
    const line = raw.trim().replace(/^[-*]\s*/, "");
    if (!line) continue;
    const done = /^COMPLETED:\s*(.*)$/i.exec(line);
    if (done) {
      out.completed = done[1]!.trim() || "done";
      continue;
    }
    const next = /^(?:NEXT|SUBGOAL|NEW):\s*(.+)$/i.exec(line);
    if (next) {
      out.next = headOf(next[1]!.trim(), 200);
      continue;
    }
    if (/^(SAME|NONE|UNCHANGED)\b/i.test(line)) continue;
    if (!hasActive && !out.next) out.next = headOf(line, 200);
  }
  return out;
}

const DONE =
  /\b(?:fixed|resolved|works now|now works|is done|completed?|passe[sd]|succeeded|successfully|confirmed|verified|has been (?:updated|changed|applied))\b/i;
const INTENT = /\b(?:let's|let me|i'll|i will|next|now|we need to|need to|first|i should|we should|going to)\b/i;
const WORD = /[a-z][a-z0-9_]{2,}/g;

function sentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) => s.trim())
    .filter((s) => s.length > 8);
}

function wordSet(text: string): Set<string> {
  return new Set(text.toLowerCase().match(WORD) ?? []);
}

/**
 * Deterministic extraction from the latest assistant text: completion cues close the
 * active subgoal; an intent sentence opens a new one when none is active, after a close,
 * or when it shares under 20% of its words with the active one after 4+ messages.
 */
export function heuristicExtraction(recent: readonly Message[], active: Subgoal | undefined): Extraction {
  const last = [...recent]
    .reverse()
    .find((m) => m.role === "assistant" && m.content.some((b) => b.type === "text" && b.text.trim()));
  if (!last) return {};
  const text = last.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n");
  const ss = sentences(text);
  const out: Extraction = {};
  const done = ss.find((s) => DONE.test(s) && !/\?$/.test(s));
  if (active && done) out.completed = headOf(done, 200);
  const intent = ss.find((s) => INTENT.test(s)) ?? (active ? undefined : ss[0]);
  if (intent && (!active || out.completed !== undefined)) out.next = headOf(intent, 200);
  else if (intent && active && active.keys.size >= 4) {
    const a = wordSet(active.description);
    const b = wordSet(intent);
    const shared = [...b].filter((w) => a.has(w)).length;
    if (shared / Math.max(1, Math.min(a.size, b.size)) < 0.2) out.next = headOf(intent, 200);
  }
  return out;
}

/** The extraction prompt for a model. */
export function extractionPrompt(
  recent: readonly Message[],
  active: Subgoal | undefined,
): { system: string; user: string } {
  const lines = recent.map((m) => `${m.role}: ${headOf(fullText(m), 600)}`);
  return {
    system:
      "You track which subgoal an agent is working on. Reply with one or two lines and nothing else: " +
      "`COMPLETED: <what was achieved>` when the current subgoal is done; `NEXT: <new subgoal, one short sentence>` " +
      "when the agent has started a different subgoal; `SAME` when it is still on the current one.",
    user: `Current subgoal: ${active ? active.description : "(none)"}\n\nLast messages:\n${lines.join("\n")}`,
  };
}
