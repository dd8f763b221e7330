/**
 * Context pressure: one compaction step over a history. Soft threshold: mask (or, for
 * `truncate`, drop) old tool outputs outside the protected tail, no model call. Hard
 * threshold: replace old turns with one structured summary, keeping pinned messages and
 * the active subgoal's blocks. Blocks (a call with its results) are never split; orphaned
 * results are stripped after every stage.
 */
import type { Message } from "@keel/kernel";
import { repairToolPairs } from "@keel/kernel";
import { salientIdentifiers } from "./identifiers.ts";
import { argsTokens, indexWithin, maskArgs, maskStub, messageIdentifiers, textTokens, visibility } from "./mask.ts";
import type { Block } from "./messages.ts";
import { blocksOf, fullText, isCompacted, isSummary, messageKeys, withoutReadBack } from "./messages.ts";
import type { Strategy } from "./options.ts";
import { scoreBlocks } from "./scoring.ts";
import { summarizeTurns, summaryHeader } from "./summarize.ts";

export type { CompactInput, CompactOptions, CompactState } from "./compact-types.ts";
import type { CompactInput } from "./compact-types.ts";

/** What a step did (recorded as a diagnostic's `data`). */
export interface CompactReport {
  strategy: Strategy;
  forced: boolean;
  window: number;
  calibration: number;
  /** Calibrated tokens of the whole request before and after. */
  tokensBefore: number;
  tokensAfter: number;
  stages: Array<"mask" | "truncate" | "summary" | "repair">;
  masked: Array<{ toolCallId: string; tool: string; tokens: number; id: string; score: number }>;
  truncated: number;
  summary?: {
    messages: number;
    tokensReplaced: number;
    summaryTokens: number;
    method: string;
    fallback?: string;
    lifted: number;
  };
  orphansDropped: string[];
  resultsSynthesized: string[];
  /** Why the hard stage did not run although the hard threshold was reached. */
  hardSkipped?: "cooldown" | "exhausted" | "nothing_to_summarise" | "not_smaller";
}

/** The outcome: the new history (same objects where unchanged) and the report; undefined when nothing changed. */
export interface CompactResult {
  messages: Message[];
  report: CompactReport;
}

/**
 * First index of the protected tail, on a block boundary: the newest block (when
 * `minMessages` > 0), older blocks while within `maxTokens`, and the last `minMessages`
 * messages as long as the tail stays within `cap` (a small window is not pinned by them).
 */
export function tailStart(
  messages: readonly Message[],
  blocks: readonly Block[],
  maxTokens: number,
  minMessages: number,
  countMessage: (m: Message) => number,
  cap = Infinity,
): number {
  let start = messages.length;
  let tokens = 0;
  for (let b = blocks.length - 1; b >= 0; b--) {
    const block = blocks[b]!;
    let t = 0;
    for (let i = block.start; i < block.end; i++) t += countMessage(messages[i]!);
    if (
      (minMessages > 0 && b === blocks.length - 1) ||
      (messages.length - block.end < minMessages && tokens + t <= cap) ||
      tokens + t <= maxTokens
    ) {
      start = block.start;
      tokens += t;
    } else break;
  }
  return start;
}

/** One compaction step. Contract: see the module comment; never splits a call from its results. */
export async function compactHistory(input: CompactInput): Promise<CompactResult | undefined> {
  const { options: o, window, countMessage } = input;
  const cal = input.calibration > 0 ? input.calibration : 1;
  const measure = (ms: readonly Message[]) => {
    let t = input.overhead;
    for (const m of ms) t += countMessage(m);
    return Math.round(t * cal);
  };
  const before = measure(input.messages);
  const force = input.force === true;
  if (
    before < o.soft * window ||
    (input.state.exhausted && input.state.exhaustedAt !== undefined && before >= input.state.exhaustedAt + 0.1 * window)
  )
    input.state.exhausted = false;
  const report: CompactReport = {
    strategy: o.strategy,
    forced: force,
    window,
    calibration: Number(cal.toFixed(3)),
    tokensBefore: before,
    tokensAfter: before,
    stages: [],
    masked: [],
    truncated: 0,
    orphansDropped: [],
    resultsSynthesized: [],
  };

  let msgs: Message[] = [...input.messages];
  let pinned = new Set(input.pinned);
  const repair = () => {
    const r = repairToolPairs(msgs);
    if (r.messages === msgs) return;
    // Keep pinned indices pointing at the same objects.
    const keep = [...pinned].map((i) => msgs[i]).filter((m): m is Message => !!m);
    msgs = [...r.messages];
    pinned = new Set(keep.map((m) => msgs.indexOf(m)).filter((i) => i >= 0));
    report.orphansDropped.push(...r.dropped);
    report.resultsSynthesized.push(...r.synthesized);
    if (!report.stages.includes("repair")) report.stages.push("repair");
  };
  repair();
  let tokens = measure(msgs);
  if (!force && tokens < o.soft * window) return finish();

  const tailTokens = force ? 0 : Math.min(o.protectedTail.tokens, Math.floor(o.protectedTail.share * window));
  const tailMessages = force ? Math.min(2, o.protectedTail.messages) : o.protectedTail.messages;
  const tailCap = force ? 0 : Math.floor(o.protectedTail.share * window);
  const computeTail = () => tailStart(msgs, blocksOf(msgs), tailTokens, tailMessages, countMessage, tailCap);
  const subgoal = o.strategy === "subgoal" || o.strategy === "subgoal_mig";
  const keys = () => messageKeys(msgs);
  const activeKeys = subgoal && input.registry?.active ? input.registry.active.keys : new Set<string>();
  const goal = force ? 0 : o.target * window;

  // Soft stage.
  let tail = computeTail();
  if (o.strategy === "truncate") {
    let dropped = 0;
    for (const b of blocksOf(msgs)) {
      if (tokens <= goal || b.start >= tail) break;
      let blocked = false;
      for (let i = b.start; i < b.end; i++) if (pinned.has(i)) blocked = true;
      if (blocked) continue;
      for (let i = b.start; i < b.end; i++) {
        tokens -= Math.round(countMessage(msgs[i]!) * cal);
        (msgs as Array<Message | undefined>)[i] = undefined;
        dropped++;
      }
    }
    if (dropped) {
      const keep = [...pinned].map((i) => msgs[i]!);
      msgs = msgs.filter((m): m is Message => m !== undefined);
      pinned = new Set(keep.map((m) => msgs.indexOf(m)));
      report.truncated = dropped;
      report.stages.push("truncate");
      repair();
      tokens = measure(msgs);
    }
  } else {
    const k = keys();
    const candidates: number[] = [];
    const pool: number[] = [];
    for (let i = 0; i < msgs.length; i++) {
      const m = msgs[i]!;
      const eligible = i < tail && !activeKeys.has(k[i]!) && !pinned.has(i);
      if (m.role === "tool") {
        pool.push(i);
        if (
          !eligible ||
          isCompacted(m) ||
          m.content.some((b) => b.type !== "text") ||
          countMessage(m) < o.minMaskTokens
        )
          continue;
        candidates.push(i);
      } else if (
        m.role === "assistant" &&
        eligible &&
        ((o.maskArguments && argsTokens(m, input.countText) >= o.minMaskTokens) ||
          (o.maskText && textTokens(m, input.countText) >= o.minMaskTokens))
      )
        candidates.push(i);
    }
    const tierOf = (i: number) => (subgoal && input.registry ? input.registry.tier(k[i]!) : 0.1);
    const order =
      o.strategy === "mask"
        ? candidates.map((i) => ({ index: i, score: i / msgs.length }))
        : scoreBlocks(msgs, candidates, tierOf, { mig: o.strategy === "subgoal_mig", pool });
    const visible = o.stubIdentifiers > 0 ? visibility(msgs) : new Map<string, number>();
    for (const c of order) {
      if (tokens <= goal) break;
      const m = msgs[c.index]!;
      const t = countMessage(m);
      // Index the identifiers that would otherwise leave the context with this content.
      const own = messageIdentifiers(m);
      const unique = own.filter((x) => visible.get(x) === 1);
      let next: Message;
      let id: string;
      if (m.role === "tool") {
        id = input.stash(m, "mask");
        next = {
          role: "tool",
          toolCallId: m.toolCallId,
          toolName: m.toolName,
          content: [
            {
              type: "text",
              text: maskStub(
                m,
                t,
                id,
                o.retrieveTool,
                indexWithin(unique.slice(0, o.stubIdentifiers), t * (o.stubIndexShare ?? 1), input.countText),
              ),
            },
          ],
          isError: m.isError,
          ...(m.rewrittenBy ? { rewrittenBy: m.rewrittenBy } : {}),
        };
      } else {
        const masked = maskArgs(m, input, o, unique, k[c.index]);
        if (!masked) continue;
        next = masked.message;
        id = masked.id;
      }
      const saved = t - countMessage(next);
      if (saved <= 0) continue;
      msgs[c.index] = next;
      for (const x of own) visible.set(x, (visible.get(x) ?? 1) - 1);
      for (const x of messageIdentifiers(next)) visible.set(x, (visible.get(x) ?? 0) + 1);
      tokens -= Math.round(saved * cal);
      const called = m.content.find((b) => b.type === "tool_call");
      const name = m.role === "tool" ? m.toolName : called ? `${called.name} (arguments)` : "assistant (text)";
      const callId = m.role === "tool" ? m.toolCallId : (k[c.index] ?? "").slice(2);
      report.masked.push({ toolCallId: callId, tool: name, tokens: t, id, score: Number(c.score.toFixed(4)) });
    }
    if (report.masked.length) {
      report.stages.push("mask");
      repair();
      tokens = measure(msgs);
    }
  }

  // Hard stage.
  if ((force || tokens >= o.hard * window) && o.strategy !== "truncate") {
    const cooling =
      !force && input.state.lastHard !== undefined && input.state.round - input.state.lastHard <= o.cooldownRounds;
    if (cooling) report.hardSkipped = "cooldown";
    else if (input.state.exhausted && !force) report.hardSkipped = "exhausted";
    else await summarise();
  }
  return finish();

  async function summarise(): Promise<void> {
    tail = computeTail();
    const k = keys();
    const removed: number[] = [];
    let lifted = 0;
    for (const b of blocksOf(msgs)) {
      if (b.start >= tail) break;
      let keep = false;
      for (let i = b.start; i < b.end; i++) if (pinned.has(i) || activeKeys.has(k[i]!)) keep = true;
      if (keep) {
        if (![...Array(b.end - b.start).keys()].some((x) => pinned.has(b.start + x))) lifted += b.end - b.start;
        continue;
      }
      for (let i = b.start; i < b.end; i++) removed.push(i);
    }
    if (!removed.length || (removed.length === 1 && isSummary(msgs[removed[0]!]!))) {
      report.hardSkipped = "nothing_to_summarise";
      input.state.exhausted = true;
      input.state.exhaustedAt = tokens;
      return;
    }
    const gone = removed.map((i) => msgs[i]!);
    let replaced = 0;
    for (const m of gone) replaced += countMessage(m);
    const subgoals = input.registry
      ? input.registry.subgoals.map(
          (s) => `${s.state === "active" ? "[active]" : "[done]"} ${s.description}${s.result ? ` → ${s.result}` : ""}`,
        )
      : [];
    // The summary's size follows what it replaces: a fixed 1,200 tokens would outweigh a short history.
    const budget = Math.min(o.summaryTokens, Math.max(150, Math.round(replaced * (o.summaryShare ?? 1))));
    const produced = await summarizeTurns({
      messages: gone,
      goal: input.goal,
      subgoals,
      maxTokens: budget,
      limit: o.summaryTokens,
      model: input.model,
      timeoutMs: o.summaryTimeoutMs,
      count: input.countText,
      ...(input.signal ? { signal: input.signal } : {}),
    });
    // Identifiers visible only in what is summarised away, unless the summary already has them.
    let index: string[] = [];
    if (o.stubIdentifiers > 0) {
      const all = visibility(msgs);
      const leaving = visibility(gone);
      const said = new Set(salientIdentifiers(produced.text, Infinity));
      // Most recent first: when the index is full, the oldest identifiers are the ones left out.
      const recent = new Set<string>();
      // Not a stub's read-back id, size or tool name: those leave with the stub and mean nothing without it.
      for (let i = gone.length - 1; i >= 0; i--)
        for (const x of salientIdentifiers(withoutReadBack(fullText(gone[i]!)), Infinity)) recent.add(x);
      index = [...recent].filter((x) => all.get(x) === leaving.get(x) && !said.has(x)).slice(0, o.stubIdentifiers);
      // The index shares the budget: what the summary text left of it, and at least half.
      index = indexWithin(index, Math.max(budget - input.countText(produced.text), budget / 2), input.countText);
    }
    const summary: Message = {
      role: "user",
      content: [
        {
          type: "text",
          text: `${summaryHeader(gone.length, produced.method)}\n${produced.text}${index.length ? `\nOther identifiers: ${index.join(", ")}` : ""}`,
        },
      ],
    };
    const summaryTokens = countMessage(summary);
    if (summaryTokens >= replaced) {
      report.hardSkipped = "not_smaller";
      input.state.exhausted = true;
      input.state.exhaustedAt = tokens;
      return;
    }
    const drop = new Set(removed);
    const keepPinned = [...pinned].map((i) => msgs[i]!);
    const next: Message[] = [];
    msgs.forEach((m, i) => {
      if (i === removed[0]) next.push(summary);
      if (!drop.has(i)) next.push(m);
    });
    msgs = next;
    pinned = new Set(keepPinned.map((m) => msgs.indexOf(m)));
    input.state.lastHard = input.state.round;
    report.stages.push("summary");
    report.summary = {
      messages: gone.length,
      tokensReplaced: replaced,
      summaryTokens,
      method: produced.method,
      ...(produced.fallback ? { fallback: produced.fallback } : {}),
      lifted,
    };
    repair();
    tokens = measure(msgs);
  }

  function finish(): CompactResult | undefined {
    report.tokensAfter = measure(msgs);
    if (msgs.length === input.messages.length && msgs.every((m, i) => m === input.messages[i]))
      return report.hardSkipped ? { messages: msgs, report } : undefined;
    return { messages: msgs, report };
  }
}
