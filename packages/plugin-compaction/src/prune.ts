/**
 * Intra-turn pruning (y-agent's pruner, MECHANICS "Compaction"): inside the running turn,
 * drop tool-call branches that no longer inform the model — failed calls a later call of the
 * same tool got past, empty results, and calls repeated later (the same arguments, or the
 * same result text: results that are merely similar may hold different evidence) — always a
 * call together with its result; and strip reasoning from every
 * assistant message but the latest (providers require only the latest's, unmodified).
 */
import type { AssistantMessage, Message, ToolCallBlock, ToolResultMessage } from "@keel/kernel";
import { randomUUID } from "node:crypto";
import { canonicalJson } from "@keel/kernel";
import { plainText } from "./messages.ts";

/** Why a branch went. */
export type PruneReason = "failed" | "empty" | "duplicate";

/** What pruneTurn removed. Contract: ids are tool call ids, each in one list. */
export interface PruneReport {
  failed: string[];
  empty: string[];
  duplicate: string[];
  /** Assistant messages whose thinking blocks were stripped. */
  thinkingStripped: number;
}

/** How pruneTurn judges. */
export interface PruneOptions {
  /** Tools whose branches always stay. */
  keep: ReadonlySet<string>;
  /** True when the call was an information tool (an empty result of another tool stays). */
  informational: (callId: string) => boolean;
  /** Prune only when what could go (results, and reasoning to strip) is at least this many tokens. */
  minCandidateTokens: number;
  /** Most tool results removed in one pass (the oldest candidates first). */
  maxMessages: number;
  countText: (text: string) => number;
}

interface Branch {
  /** The assistant message and the call block's index in it; the result message's index. */
  at: number;
  block: number;
  call: ToolCallBlock;
  resultAt: number | undefined;
  /** Further results with the call's id before the next assistant message (a duplicate). */
  extra: number[];
  result: ToolResultMessage | undefined;
  args: string;
}

/**
 * Prune the turn that starts at `turnStart` (its user message). Contract: pure; never touches
 * the latest assistant message or anything before `turnStart` except to strip reasoning; keeps
 * unchanged messages as the same objects; `undefined` when nothing changes. Branches are found
 * by position (a call's result is the first result with its id after it, before the next
 * assistant message), so ids a server reuses across rounds cannot pull in another round.
 */
export function pruneTurn(
  messages: readonly Message[],
  turnStart: number,
  options: PruneOptions,
): { messages: Message[]; report: PruneReport } | undefined {
  const latest = messages.findLastIndex((m) => m.role === "assistant");
  if (latest < 0) return undefined;
  const from = Math.max(0, turnStart);
  const branches: Branch[] = [];
  const claimed = new Set<number>();
  for (let i = from; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role !== "assistant") continue;
    m.content.forEach((b, block) => {
      if (b.type !== "tool_call") return;
      let resultAt: number | undefined;
      const extra: number[] = [];
      for (let j = i + 1; j < messages.length && messages[j]!.role !== "assistant"; j++) {
        const r = messages[j]!;
        if (r.role !== "tool" || r.toolCallId !== b.id || claimed.has(j)) continue;
        claimed.add(j);
        // A stray second result of the same call goes with the branch too.
        if (resultAt === undefined) resultAt = j;
        else extra.push(j);
      }
      branches.push({
        at: i,
        block,
        call: b,
        resultAt,
        extra,
        result: resultAt === undefined ? undefined : (messages[resultAt] as ToolResultMessage),
        args: canonicalOf(b),
      });
    });
  }
  const report: PruneReport = { failed: [], empty: [], duplicate: [], thinkingStripped: 0 };
  const candidates: Array<{ branch: Branch; why: PruneReason; tokens: number }> = [];
  // One pass from the end: what later calls of each tool did (arguments that succeeded or ran
  // at all, texts that succeeded), so each branch is judged against everything after it.
  const later = new Map<string, { okArgs: Set<string>; anyArgs: Set<string>; okTexts: Set<string> }>();
  for (let k = branches.length - 1; k >= 0; k--) {
    const b = branches[k]!;
    if (!b.result) continue;
    let seen = later.get(b.call.name);
    if (!seen) later.set(b.call.name, (seen = { okArgs: new Set(), anyArgs: new Set(), okTexts: new Set() }));
    const text = plainText(b.result);
    const failed = b.result.isError === true;
    if (b.at < latest && !options.keep.has(b.call.name)) {
      let why: PruneReason | undefined;
      // A repeat: the same call again that did at least as well (a later failure never replaces an
      // earlier success), or another successful call whose result is the same text.
      if (
        (failed ? seen.anyArgs : seen.okArgs).has(b.args) ||
        (!failed && text.trim() !== "" && seen.okTexts.has(text))
      )
        why = "duplicate";
      else if (failed && seen.okArgs.size > 0) why = "failed";
      // An empty result of a tool that may change state is the only record of an action: kept.
      else if (
        !failed &&
        !text.trim() &&
        b.result.content.every((c) => c.type === "text") &&
        options.informational(b.call.id)
      )
        why = "empty";
      if (why) candidates.push({ branch: b, why, tokens: options.countText(text) + options.countText(b.args) });
    }
    seen.anyArgs.add(b.args);
    if (!failed) {
      seen.okArgs.add(b.args);
      seen.okTexts.add(text);
    }
  }
  candidates.reverse();
  const thinking = messages
    .slice(0, Math.max(0, latest))
    .flatMap((m) =>
      m.role === "assistant" && m.content.some((b) => b.type !== "thinking")
        ? m.content.flatMap((b) => (b.type === "thinking" ? [b.text] : []))
        : [],
    );
  const total = candidates.reduce((n, c) => n + c.tokens, 0) + thinking.reduce((n, t) => n + options.countText(t), 0);
  if (total < options.minCandidateTokens) return undefined;
  const dropResults = new Set<number>();
  const dropBlocks = new Map<number, Set<number>>();
  for (const c of candidates.slice(0, options.maxMessages)) {
    dropResults.add(c.branch.resultAt!);
    for (const j of c.branch.extra) dropResults.add(j);
    if (!dropBlocks.has(c.branch.at)) dropBlocks.set(c.branch.at, new Set());
    dropBlocks.get(c.branch.at)!.add(c.branch.block);
    report[c.why].push(c.branch.call.id);
  }
  let changed = false;
  const out: Message[] = [];
  for (const [i, m] of messages.entries()) {
    if (dropResults.has(i)) continue;
    if (m.role !== "assistant") {
      out.push(m);
      continue;
    }
    const strip =
      i < latest && m.content.some((b) => b.type === "thinking") && m.content.some((b) => b.type !== "thinking");
    const gone = dropBlocks.get(i);
    const content = m.content.filter((b, block) => !gone?.has(block) && !(strip && b.type === "thinking"));
    if (strip) report.thinkingStripped++;
    if (content.length === m.content.length) {
      out.push(m);
      continue;
    }
    changed = true;
    // An assistant message left with nothing to say (its only calls went) goes too.
    if (content.some((b) => b.type !== "thinking")) out.push({ ...m, content } as AssistantMessage);
  }
  return changed ? { messages: out, report } : undefined;
}

/** Calls are frozen and seen again every round: their canonical arguments are worked out once. */
const canonicalCache = new WeakMap<ToolCallBlock, string>();
function canonicalOf(call: ToolCallBlock): string {
  let c = canonicalCache.get(call);
  if (c === undefined) {
    try {
      c = canonicalJson(call.args);
    } catch {
      // Unreadable arguments are never the same call as another.
      c = `[unreadable ${randomUUID()}]`;
    }
    canonicalCache.set(call, c);
  }
  return c;
}
