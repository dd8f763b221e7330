/**
 * Deterministic reduction of a long text toward a token budget: head and tail lines, plus
 * the middle lines that report errors or carry identifiers the kept lines do not.
 */
import { extractIdentifiers, isErrorLine } from "./identifiers.ts";
import { codePointLength, headOf, toWellFormed, truncate } from "@keel/text";
import { closeFences } from "./messages.ts";

/** Counts tokens of a text (the kernel's TokenCounter.countText, or an estimate). */
export type CountTokens = (text: string) => number;

const MAX_LINE_CHARS = 400;

function clip(line: string): string {
  if (line.length <= MAX_LINE_CHARS) return toWellFormed(line);
  const n = codePointLength(line);
  return n <= MAX_LINE_CHARS ? toWellFormed(line) : `${headOf(line, MAX_LINE_CHARS)}… [+${n - MAX_LINE_CHARS} chars]`;
}

/**
 * Reduce `text` to about `target` tokens.
 * Contract: deterministic; returns `text` unchanged (lone surrogates repaired) when it fits; otherwise keeps the first
 * and last lines, then middle lines ranked by (error line, new identifiers), in original
 * order with their 1-based line numbers, and says which line ranges were omitted; a code fence
 * the text closes is never left open by the cut (a closing line is added).
 */
export function reduceText(text: string, target: number, count: CountTokens): string {
  if (count(text) <= target) return toWellFormed(text);
  // A cut line can become a fence opener ("```js `x`" is none, its head "```js" is one).
  const closed = (reduced: string) => (closeFences(text) === text ? closeFences(reduced) : reduced);
  if (!text.includes("\n")) {
    const keep = target * 2;
    return closed(truncate(text, keep * 2 + 40, { tail: keep, marker: (n) => `\n[… ${n} chars omitted …]\n` }));
  }
  const lines = text.split("\n").map(clip);
  const cost = lines.map((l) => count(l) + 1);
  const n = lines.length;
  const headBudget = Math.floor(target * 0.3);
  const tailBudget = Math.floor(target * 0.25);
  let used = 0;
  let head = 0;
  while (head < n && used + cost[head]! <= headBudget) used += cost[head++]!;
  let tail = n;
  let tailUsed = 0;
  while (tail > head && tailUsed + cost[tail - 1]! <= tailBudget) tailUsed += cost[--tail]!;
  used += tailUsed;
  const seen = new Set<string>();
  for (let i = 0; i < head; i++) for (const id of extractIdentifiers(lines[i]!)) seen.add(id);
  for (let i = tail; i < n; i++) for (const id of extractIdentifiers(lines[i]!)) seen.add(id);
  const candidates: Array<{ i: number; score: number; ids: string[] }> = [];
  for (let i = head; i < tail; i++) {
    const line = lines[i]!;
    if (!line.trim()) continue;
    const ids = extractIdentifiers(line);
    const err = isErrorLine(line);
    if (!err && ids.length === 0) continue;
    candidates.push({ i, score: (err ? 100 : 0) + ids.length, ids });
  }
  candidates.sort((a, b) => b.score - a.score || a.i - b.i);
  const picked: number[] = [];
  const markerCost = 12;
  for (const c of candidates) {
    const fresh = c.ids.filter((id) => !seen.has(id));
    if (!isErrorLine(lines[c.i]!) && fresh.length === 0) continue;
    const price = cost[c.i]! + 4 + markerCost;
    if (used + price > target) continue;
    used += price;
    picked.push(c.i);
    for (const id of fresh) seen.add(id);
  }
  picked.sort((a, b) => a - b);
  const out = lines.slice(0, head);
  let prev = head;
  for (const i of picked) {
    if (i > prev) out.push(`[… lines ${prev + 1}–${i} omitted …]`);
    out.push(`L${i + 1}: ${lines[i]}`);
    prev = i + 1;
  }
  if (tail > prev) out.push(`[… lines ${prev + 1}–${tail} omitted …]`);
  out.push(...lines.slice(tail));
  return closed(out.join("\n"));
}
