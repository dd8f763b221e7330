/**
 * Datasets from real sessions (`keel eval add`): each session becomes one case, its user turns
 * the input and its answers the reference, redacted again (stored events already are), with
 * `metadata.session` linking back.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { KeelError, messageText } from "@keel/kernel";
import type { SessionStore } from "@keel/kernel";
import { redact } from "@keel/secrets";
import { loadDataset } from "./dataset.ts";

/** A case as written to a JSONL dataset by `keel eval add`. Contract: `id` is `session-<session id>`. */
export interface DatasetLine {
  id: string;
  input: string | string[];
  reference?: string;
  metadata: { session: string; agent: string; answers?: string[] };
}

/**
 * The case a stored session makes. Contract: user turns only (follow-ups, resumes and subagent
 * turns are not inputs); `reference` is the last turn's final answer; every text passes through
 * `redact`; a session that does not exist throws KEEL_SESSION_NOT_FOUND naming it; one with no
 * user turn gives undefined.
 */
export async function caseFromSession(store: SessionStore, sessionId: string): Promise<DatasetLine | undefined> {
  const info = await store.getSession(sessionId);
  if (!info)
    throw new KeelError("KEEL_SESSION_NOT_FOUND", `No session "${sessionId}" in this store; nothing was added for it.`);
  const events = await store.events(sessionId);
  const inputs: string[] = [];
  const answers: string[] = [];
  const userTurns = new Set<string>();
  const answerOf = new Map<string, string>();
  for (const e of events) {
    if (e.type === "turn.started" && e.trigger === "user" && e.turnId) {
      userTurns.add(e.turnId);
      inputs.push(redact(e.input));
    } else if (e.type === "message.appended" && e.message.role === "assistant" && e.turnId && userTurns.has(e.turnId)) {
      const text = messageText(e.message);
      if (text.trim()) answerOf.set(e.turnId, redact(text));
    }
  }
  if (!inputs.length) return undefined;
  for (const t of userTurns) answers.push(answerOf.get(t) ?? "");
  return {
    id: `session-${sessionId}`,
    input: inputs.length === 1 ? inputs[0]! : inputs,
    ...(answers.at(-1) ? { reference: answers.at(-1)! } : {}),
    metadata: { session: sessionId, agent: info.agent, ...(answers.length > 1 ? { answers } : {}) },
  };
}

/**
 * Append the cases of `sessionIds` to the JSONL dataset `file` (created when missing).
 * Contract: every session is read before anything is written; a session that does not exist is
 * skipped and listed in `missing` (the others are appended); a case whose id the file already
 * holds is skipped; an existing file must be a valid dataset (KEEL_EVAL_DATASET_INVALID otherwise).
 */
export async function addSessionsToDataset(
  store: SessionStore,
  sessionIds: readonly string[],
  file: string,
): Promise<{ added: string[]; skipped: Array<{ session: string; why: string }>; missing: string[] }> {
  const lines: DatasetLine[] = [];
  const skipped: Array<{ session: string; why: string }> = [];
  const missing: string[] = [];
  for (const id of sessionIds) {
    if (!(await store.getSession(id))) {
      missing.push(id);
      continue;
    }
    const c = await caseFromSession(store, id);
    if (c) lines.push(c);
    else skipped.push({ session: id, why: "it has no user turn" });
  }
  const existing =
    existsSync(file) && readFileSync(file, "utf8").trim() ? loadDataset(file).cases.map((c) => c.id) : [];
  const ids = new Set(existing);
  const fresh = lines.filter((l) => {
    if (!ids.has(l.id)) return (ids.add(l.id), true);
    skipped.push({ session: l.metadata.session, why: `the dataset already holds ${l.id}` });
    return false;
  });
  if (fresh.length) {
    const before = existsSync(file) ? readFileSync(file, "utf8") : "";
    const sep = before && !before.endsWith("\n") ? "\n" : "";
    appendFileSync(file, sep + fresh.map((l) => `${JSON.stringify(l)}\n`).join(""));
  }
  return { added: fresh.map((l) => l.id), skipped, missing };
}
