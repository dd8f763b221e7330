/**
 * What the CLI does when a turn pauses for approval: ask the person at the terminal (allow
 * once, allow always for this session, deny with a reason), or, without one, apply `--ask`.
 * The answers go through the durable API (approve/deny, then resume), so a CLI killed while
 * it asks loses nothing: running the session again asks again.
 */
import { userInfo } from "node:os";
import { createInterface } from "node:readline";
import type { Interface } from "node:readline";
import type { ApprovalAnswer, PendingApproval, Session, TurnResult } from "@keel/agent";
import { KeelError } from "@keel/kernel";
import { truncate } from "@keel/text";

/** What `ask` means: `ask` the person, `deny` or `allow` every pending call. */
export type AskMode = "ask" | "deny" | "allow";

/**
 * The mode from `--ask` or KEEL_ASK; default `ask` on a terminal, else `deny`.
 * Contract: throws KEEL_CLI_USAGE for another value.
 */
export function askMode(flag: string | undefined, env: NodeJS.ProcessEnv, tty: boolean): AskMode {
  const given = flag ?? (env.KEEL_ASK || undefined);
  if (given === undefined) return tty ? "ask" : "deny";
  if (given === "ask" || given === "deny" || given === "allow") return given;
  throw new KeelError(
    "KEEL_CLI_USAGE",
    `${flag !== undefined ? "--ask" : "KEEL_ASK"} is "${given}"; use ask, deny or allow.`,
  );
}

/** Answers one pending call. */
export type Answerer = (pending: PendingApproval) => Promise<ApprovalAnswer>;

/** Who answers at this terminal, as approval.resolved records it: `cli:<OS user>`. */
export function cliUser(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return "cli";
  }
}

/** `deny` / `allow` without asking, saying why in the denial; recorded as answered by the policy. */
export function policyAnswerer(mode: "deny" | "allow", source: string): Answerer {
  const answerer = `${cliUser()} (${source} ${mode})`;
  return async () =>
    mode === "allow"
      ? { approved: true, answerer }
      : { approved: false, reason: `nobody was asked: no terminal, and ${source} says deny`, answerer };
}

/** The question for one call, on the lines before the prompt. */
export function approvalQuestion(p: PendingApproval): string {
  let args: string;
  try {
    args = JSON.stringify(p.args) ?? "";
  } catch {
    args = String(p.args);
  }
  const why = p.plugin ? ` — ${p.plugin}${p.reason ? `: ${p.reason}` : ""}` : p.reason ? ` — ${p.reason}` : "";
  const where = p.via ? ` (subagent ${p.via.child}, session ${p.via.sessionId})` : "";
  return `  ? ${p.name}${where} ${truncate(args, 300)}${why}\n    [y] allow once  [a] allow always in this session  [n <reason>] deny  (Enter denies)\n`;
}

/** Read an answer typed at the prompt. Contract: anything not understood is undefined (ask again). */
export function parseAnswer(line: string): ApprovalAnswer | undefined {
  const t = line.trim();
  const [word = "", ...rest] = t.split(/\s+/);
  const reason = rest.join(" ").trim();
  const w = word.toLowerCase();
  if (w === "y" || w === "yes") return { approved: true };
  if (w === "a" || w === "always") return { approved: true, always: true };
  if (t === "" || w === "n" || w === "no") return { approved: false, ...(reason ? { reason } : {}) };
  return undefined;
}

/**
 * Ask the person: the question on stderr, answers from `read` (a line, or undefined when the
 * input closed or Ctrl-C was pressed); up to three tries per call, then deny.
 * Contract: no answer (undefined) throws KEEL_APPROVAL_PENDING: the turn stays paused, durable.
 */
export function terminalAnswerer(read: () => Promise<string | undefined>, err: (s: string) => void): Answerer {
  return async (p) => {
    err(approvalQuestion(p));
    for (let i = 0; i < 3; i++) {
      const line = await read();
      if (line === undefined)
        throw new KeelError("KEEL_APPROVAL_PENDING", `No answer was given for ${p.name} (${p.callId}).`);
      const a = parseAnswer(line);
      if (a) return { ...a, answerer: cliUser() };
      err("    answer y, a, or n followed by a reason\n");
    }
    return { approved: false, reason: "no understandable answer after three tries", answerer: cliUser() };
  };
}

/** A readline on the person's input for asking, its prompt on stderr. */
export function askInterface(stdin: NodeJS.ReadableStream, tty: boolean): Interface {
  return createInterface({ input: stdin, output: process.stderr, terminal: tty });
}

/**
 * Answer what the session waits for (a turn paused now or by an earlier process) and resume,
 * until the turn ends without pausing. Contract: the pause is durable before a question is
 * asked, and every answer is durable before resume().
 */
export async function settle(
  session: Session,
  result: TurnResult | undefined,
  answer: Answerer,
  note: (s: string) => void,
): Promise<TurnResult | undefined> {
  for (;;) {
    const pending = session.pendingApprovals().filter((p) => !p.answer);
    if (!pending.length && !session.pendingApprovals().length) return result;
    // The pause is on disk before the question is shown: whoever reads the question and stops
    // keel (Ctrl-C, a kill) leaves a paused turn a later process or a worker can answer.
    await session.flush?.();
    for (const p of pending) {
      const a = await answer(p);
      const who = a.answerer ? { answerer: a.answerer } : {};
      if (a.approved) await session.approve(p.callId, { ...(a.always ? { always: true } : {}), ...who });
      else await session.deny(p.callId, { ...(a.reason ? { reason: a.reason } : {}), ...who });
      note(
        `  ${a.approved ? "✓" : "✗"} ${p.name} ${a.approved ? (a.always ? "allowed always in this session" : "allowed once") : `denied${a.reason ? `: ${a.reason}` : ""}`}\n`,
      );
    }
    result = await session.resume();
  }
}
