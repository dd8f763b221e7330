/**
 * Model calls of the plugin (tool-output digests, structured turn summaries) and their
 * deterministic fallbacks. A model answer that is empty or not smaller is a failure.
 */
import type { Message, ModelProvider } from "@keel/kernel";
import { complete, errorMessage } from "@keel/kernel";
import { codePointLength, headOf, truncate } from "@keel/text";
import { extractIdentifiers, isErrorLine, salientIdentifiers } from "./identifiers.ts";
import {
  closeFences,
  DIGEST_PREFIX,
  firstSentenceOf,
  fullText,
  isFenceLine,
  isSummary,
  MASK_PREFIX,
  plainText,
  SUMMARY_PREFIX,
  withoutFence,
} from "./messages.ts";
import { SHORTENED_TEXT_MARK } from "./mask.ts";
import type { CountTokens } from "./reduce.ts";
import { reduceText } from "./reduce.ts";

/** A produced text and how it was made. */
export interface Produced {
  text: string;
  method: "model" | "deterministic";
  /** Why the model was not used (no model, error, timeout, not smaller). */
  fallback?: string;
}

/** Ask `model` once with a deadline. Contract: resolves to the answer text or rejects with a reason. */
export async function ask(
  model: ModelProvider,
  system: string,
  user: string,
  options: { maxTokens: number; timeoutMs: number; signal?: AbortSignal },
): Promise<string> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  try {
    const r = await complete(
      model,
      {
        system,
        messages: [{ role: "user", content: [{ type: "text", text: user }] }],
        options: { maxTokens: options.maxTokens, temperature: 0 },
      },
      { signal },
    );
    return r.text.trim();
  } catch (err) {
    if (timeout.aborted) throw new Error(`timed out after ${options.timeoutMs} ms`);
    throw new Error(errorMessage(err));
  }
}

const DIGEST_SYSTEM =
  "You compress one tool output for an AI agent that will act on it. Keep verbatim every exact value the agent may need: " +
  "numbers, file paths, line numbers, identifiers, versions, exit codes, error messages and the top of stack traces. " +
  "Keep the output's structure (sections, tables, lists) in shortened form; drop repetition and boilerplate; never invent or guess. " +
  "Reply with the digest only.";

/**
 * A digest of a long tool output near `target` tokens.
 * Contract: never rejects; uses the model when given and it answers in time with a non-empty
 * text smaller than 80% of the raw output, else the deterministic reduction.
 */
export async function digestOutput(input: {
  text: string;
  toolName: string;
  args: unknown;
  target: number;
  model: ModelProvider | undefined;
  timeoutMs: number;
  signal?: AbortSignal;
  count: CountTokens;
}): Promise<Produced> {
  const { text, target, count } = input;
  // A fence left open (by the cut, or by a tool that cut its output inside a block) is closed before the index, as for a model's digest.
  const reduce = (fallback: string): Produced => ({
    text: withIndex(closeFences(reduceText(text, target, count)), text, target, count),
    method: "deterministic",
    fallback,
  });
  if (!input.model) return reduce("no model");
  const rawTokens = count(text);
  const feed = rawTokens > 30_000 ? reduceText(text, 12_000, count) : text;
  // A fence the model left open is closed before the index (it would read as code, and all after it).
  const check = (digest: string) => withIndex(closeFences(digest), text, target, count);
  try {
    const user = `Tool: ${input.toolName}\nArguments: ${headOf(JSON.stringify(input.args ?? {}), 500)}\nAim for about ${target} tokens.\n\nOutput (${rawTokens} tokens):\n${feed}`;
    const digest = await ask(input.model, DIGEST_SYSTEM, user, {
      maxTokens: Math.max(256, target * 2),
      timeoutMs: input.timeoutMs,
      ...(input.signal ? { signal: input.signal } : {}),
    });
    if (!digest) return reduce("the model returned an empty digest");
    const n = count(digest);
    if (n >= rawTokens * 0.8) return reduce(`the model's digest was not smaller (${n} of ${rawTokens} tokens)`);
    return { text: check(n > target * 3 ? reduceText(digest, target * 2, count) : digest), method: "model" };
  } catch (err) {
    return reduce(errorMessage(err));
  }
}

/**
 * `digest` plus an index of the identifiers of `raw` it lost (salient first), within
 * `budget` tokens: values and names stay visible even when their lines were dropped.
 */
export function withIndex(digest: string, raw: string, budget: number, count: CountTokens): string {
  const kept = new Set(extractIdentifiers(digest));
  const lost = salientIdentifiers(raw, Infinity).filter((id) => !kept.has(id) && !digest.includes(id));
  if (!lost.length) return digest;
  const out: string[] = [];
  let used = 8;
  for (const id of lost) {
    const c = count(id) + 1;
    if (used + c > budget) break;
    out.push(id);
    used += c;
  }
  return out.length
    ? `${digest}\n[identifiers in the omitted part: ${out.join(", ")}${out.length < lost.length ? `, … ${lost.length - out.length} more` : ""}]`
    : digest;
}

const SUMMARY_SYSTEM =
  "You summarise the earlier part of an AI agent's conversation so it can continue without it. Use exactly these headings, " +
  "each followed by short bullet points: Goal, Decisions, Files touched, Key facts, Open questions, Current state. " +
  "Under Key facts keep exact values verbatim (paths, ids, numbers, exit codes, error messages). Never invent anything.";

/** The header line of a summary message. */
export function summaryHeader(count: number, method: string): string {
  return `${SUMMARY_PREFIX} (${count} messages, ${method})]`;
}

/**
 * A structured summary (goal, decisions, files touched, key facts, open questions, current state) of `messages`,
 * of about `maxTokens` tokens; a model's answer (it may use up to `limit`, default `maxTokens`) is cut to `maxTokens` by `fitSummary`.
 * Contract: never rejects; falls back to `deterministicSummary` on no model, error, timeout or empty answer.
 */
export async function summarizeTurns(input: {
  messages: readonly Message[];
  goal: string;
  subgoals: string[];
  maxTokens: number;
  limit?: number;
  model: ModelProvider | undefined;
  timeoutMs: number;
  signal?: AbortSignal;
  count: CountTokens;
}): Promise<Produced> {
  // The model may answer up to `limit` tokens (so it is not stopped mid-line); its answer is then fitted to `maxTokens`.
  const limit = Math.max(input.maxTokens, input.limit ?? input.maxTokens);
  const fallback = (why: string): Produced => ({
    text: deterministicSummary(input.messages, input.goal, input.subgoals, input.maxTokens, input.count),
    method: "deterministic",
    fallback: why,
  });
  if (!input.model) return fallback("no model");
  const transcript = input.messages
    .map((m) => `${m.role}${m.role === "tool" ? `(${m.toolName})` : ""}: ${reduceText(fullText(m), 600, input.count)}`)
    .join("\n\n");
  const clipped = input.count(transcript) > 40_000 ? reduceText(transcript, 40_000, input.count) : transcript;
  try {
    const user = `Overall goal: ${input.goal}\n${input.subgoals.length ? `Subgoals so far:\n${input.subgoals.map((s) => `- ${s}`).join("\n")}\n` : ""}Stay under ${input.maxTokens} tokens.\n\nConversation to summarise:\n${clipped}`;
    const text = await ask(input.model, SUMMARY_SYSTEM, user, {
      maxTokens: limit,
      timeoutMs: input.timeoutMs,
      ...(input.signal ? { signal: input.signal } : {}),
    });
    if (!text) return fallback("the model returned an empty summary");
    return { text: fitSummary(text, input.maxTokens, input.count), method: "model" };
  } catch (err) {
    return fallback(errorMessage(err));
  }
}

/** A heading of a summary ("Goal:", "## Key facts", "**Decisions**") or a fence line: kept by `fitSummary`. */
const STRUCTURE = /^(?:#{1,6} .*|\*\*[^*]+\*\*:?|[A-Z][A-Za-z ]{0,40}:|\s{0,3}(?:`{3,}[^`]*|~{3,}.*))$/;

/**
 * `answer` (a fence it leaves open closed) within `budget` tokens: whole when it fits; else its headings and fence lines
 * (so a fence stays closed) and as many whole other lines as fit, the first items of every
 * section before the later ones; when not one item per section fits whole, the first items cut to
 * an equal number of code points; when not even the headings fit, its first code points.
 * Contract: `count(result) <= budget` (for a counter that grows with the text); never splits a surrogate pair.
 */
export function fitSummary(answer: string, budget: number, count: CountTokens): string {
  // A text whose head is already over the budget is not counted whole (the exact counter costs
  // ~1-2 µs a character on new text; a hostile model can answer 1 MB).
  const probe = budget * 16 + 256;
  const within = (s: string) => (s.length <= probe || count(headOf(s, probe)) <= budget) && count(s) <= budget;
  // The largest n in [0, hi] that fits (fits holds up to some n, then fails), probed upward
  // from 1 so that what is counted grows with the answer, not with the text.
  const longest = (hi: number, fits: (n: number) => boolean) => {
    let lo = 0;
    let over = hi + 1;
    for (let n = 1; n <= hi; n *= 2) {
      if (!fits(n)) {
        over = n;
        break;
      }
      lo = n;
    }
    while (over - lo > 1) {
      const mid = lo + Math.floor((over - lo) / 2);
      if (fits(mid)) lo = mid;
      else over = mid;
    }
    return lo;
  };
  const text = closeFences(answer);
  if (within(text)) return text;
  const lines = text.split("\n");
  // Rank of a line within its section: -1 for a heading or fence line, 0 for the first item under a heading, 1 for the next, …
  let rank = 0;
  const ranks = lines.map((l) => (STRUCTURE.test(l.trimEnd()) || isFenceLine(l) ? ((rank = 0), -1) : rank++));
  const keep = (n: number) => lines.filter((_, i) => ranks[i]! < n).join("\n");
  if (within(keep(0))) {
    const n = longest(
      ranks.reduce((a, b) => Math.max(a, b), 0),
      (k) => within(keep(k)),
    );
    if (n > 0) return keep(n);
    // Not one whole item per section fits: the first item of each, cut to the same number of code points.
    // A cut line can become a fence opener ("```js `x`" is none, its head "```js" is one): closed, within the count.
    const firsts = (len: number) =>
      closeFences(
        lines.flatMap((l, i) => (ranks[i]! < 0 ? [l] : ranks[i] === 0 && len > 0 ? [headOf(l, len)] : [])).join("\n"),
      );
    return firsts(
      longest(
        lines.reduce((m, l, i) => (ranks[i] === 0 ? Math.max(m, codePointLength(l)) : m), 0),
        (len) => within(firsts(len)),
      ),
    );
  }
  // Not even the headings fit: the longest head by code points (headOf never splits a pair), a fence it opens closed.
  const head = (n: number) => closeFences(headOf(text, n));
  return head(longest(codePointLength(text), (n) => within(head(n))));
}

/** The stub `maskArgs` appends to a shortened assistant text (the text cannot contain the mark: such a text is never shortened). */
const SHORTENED_STUB = new RegExp(` ?\\${SHORTENED_TEXT_MARK}[^]*?\\](?=\\n|$)`, "g");

function firstSentence(text: string): string {
  return truncate(firstSentenceOf(text), 201);
}

/**
 * A deterministic structured summary: goal, decisions (assistant intents), files touched,
 * key facts (salient identifiers and error lines of tool outputs), open questions.
 * Contract: deterministic; at most about `maxTokens` tokens.
 */
export function deterministicSummary(
  messages: readonly Message[],
  goal: string,
  subgoals: readonly string[],
  maxTokens: number,
  count: CountTokens,
): string {
  const decisions: string[] = [];
  const questions: string[] = [];
  const files = new Set<string>();
  const facts = new Set<string>();
  const errors: string[] = [];
  for (const m of messages) {
    if (isSummary(m)) {
      // Merge an earlier summary's items (not nested: it would repeat itself every time).
      let section = "";
      for (const line of plainText(m).split("\n").slice(1)) {
        const heading = /^([A-Z][a-z ]+):$/.exec(line);
        if (heading) section = heading[1]!;
        else if (line.startsWith("- ") && line !== "- (none)") {
          const item = line.slice(2);
          if (section === "Decisions") decisions.push(item);
          else if (section === "Files touched") files.add(item);
          else if (section === "Open questions") questions.push(item);
          else if (section === "Key facts")
            item.startsWith("error: ") ? errors.length < 6 && errors.push(item.slice(7)) : facts.add(item);
        }
      }
      continue;
    }
    const text = factText(m);
    for (const id of extractIdentifiers(text)) if (id.includes("/") || /\.\w{1,5}$/.test(id)) files.add(id);
    if (m.role === "assistant") {
      // A shortened text keeps its first sentence; its stub (size, read-back id) is no decision.
      const said = plainText(m).replace(SHORTENED_STUB, "");
      const s = firstSentence(said);
      if (s) decisions.push(s);
      for (const q of said.split(/(?<=[.!?])\s+|\n/)) if (q.trim().endsWith("?")) questions.push(headOf(q.trim(), 200));
    } else if (m.role === "tool") {
      for (const id of salientIdentifiers(text, 8)) {
        // Most recent last: a repeated fact moves to the end, so trimming keeps it.
        facts.delete(id);
        facts.add(id);
      }
      for (const line of text.split("\n"))
        if (isErrorLine(line) && errors.length < 6) errors.push(headOf(line.trim(), 200));
    }
  }
  // Items are single lines that open no code fence (an earlier model summary's items included).
  const list = (xs: Iterable<string>, n: number) =>
    [...xs]
      .slice(-n)
      .map((x) => `- ${withoutFence(x)}`)
      .join("\n") || "- (none)";
  // Fit the budget by keeping fewer (the newest) items of each list, so the headings stay; a
  // line-level reduction is the last resort.
  const render = (k: number) =>
    [
      `Goal:\n- ${firstSentence(goal) || "(not stated)"}`,
      ...(subgoals.length
        ? [
            `Subgoals:\n${subgoals
              .slice(-Math.max(2, Math.ceil(6 * k)))
              .map((s) => `- ${withoutFence(s)}`)
              .join("\n")}`,
          ]
        : []),
      `Decisions:\n${list(decisions, Math.ceil(10 * k))}`,
      `Files touched:\n${list(files, Math.ceil(20 * k))}`,
      `Key facts:\n${list(facts, Math.ceil(30 * k))}${
        errors.length
          ? `\n${errors
              .slice(-Math.ceil(6 * k))
              .map((e) => `- error: ${withoutFence(e)}`)
              .join("\n")}`
          : ""
      }`,
      `Open questions:\n${list(questions, Math.ceil(3 * k))}`,
    ].join("\n");
  let k = 1;
  let text = render(k);
  while (count(text) > maxTokens && k > 0.05) text = render((k /= 1.5));
  return reduceText(text, maxTokens, count);
}

/**
 * The text a summary takes facts from: a masked output's identifier index (not its
 * read-back instructions), a digest without its header line, else the whole text.
 */
function factText(m: Message): string {
  const text = fullText(m);
  if (m.role !== "tool") return text;
  if (text.startsWith(MASK_PREFIX)) return /\. Identifiers: (.*)\]$/s.exec(text)?.[1] ?? "";
  if (text.startsWith(DIGEST_PREFIX)) return text.slice(text.indexOf("\n") + 1);
  return text;
}
