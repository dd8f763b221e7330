/**
 * Scorers: what decides whether a case passed. Built-in scorers read their key of the case's
 * `expect`; custom scorers are code (`defineScorer`) given to the run (`defineEval({ scorers })`).
 * A scorer that throws, times out or returns something that is not a verdict fails its case
 * with its name in the reason; the other scorers and cases go on.
 */
import { createContext, Script } from "node:vm";
import { errorMessage } from "@keel/kernel";
import { headOf } from "@keel/text";
import { compileJsonSchema, expectRegex } from "./dataset.ts";
import type { Expectations } from "./dataset.ts";
import { judgeScorer } from "./judge.ts";
import type { EvalCase, ScoreContext, Scorer, ScoreResult } from "./types.ts";

export type { ScoreContext, Scorer, ScorerVerdict } from "./types.ts";

/**
 * Declare a custom scorer, typed. Contract: returns its argument unchanged (an identity function
 * for the types), so it can be written inline in `defineEval({ scorers: [...] })` or exported.
 */
export function defineScorer<S extends Scorer>(scorer: S): S {
  return scorer;
}

/** Built-in scorers named by the `expect` keys of `c`. Contract: one per key present, in the order of EXPECT_KEYS; none without `expect`. */
export function expectScorers(c: EvalCase): Scorer[] {
  const e = (c.expect ?? {}) as Expectations;
  const out: Scorer[] = [];
  if (e.exact !== undefined) out.push(exactScorer(e.exact));
  if (e.contains !== undefined) out.push(containsScorer("contains", e.contains, true));
  if (e.notContains !== undefined) out.push(containsScorer("notContains", e.notContains, false));
  if (e.regex !== undefined) out.push(regexScorer(e.regex));
  if (e.jsonSchema !== undefined) out.push(jsonSchemaScorer(e.jsonSchema));
  if (e.toolCalled !== undefined) out.push(toolCalledScorer(e.toolCalled));
  if (e.limits !== undefined) out.push(limitsScorer(e.limits));
  if (e.judge !== undefined)
    out.push(
      judgeScorer(
        typeof e.judge === "string" ? { rubric: e.judge } : { rubric: e.judge.rubric, threshold: e.judge.threshold },
      ),
    );
  return out;
}

const show = (s: string) => JSON.stringify(headOf(s, 80));

function exactScorer(expected: string): Scorer {
  return {
    name: "exact",
    score: ({ output }) =>
      output.trim() === expected.trim()
        ? true
        : { pass: false, reason: `expected exactly ${show(expected)}, got ${show(output.trim())}` },
  };
}

function containsScorer(name: string, wanted: string | string[], present: boolean): Scorer {
  const list = typeof wanted === "string" ? [wanted] : wanted;
  return {
    name,
    score: ({ output }) => {
      const lower = output.toLowerCase();
      const bad = list.filter((w) => lower.includes(w.toLowerCase()) !== present);
      return bad.length
        ? {
            pass: false,
            score: (list.length - bad.length) / list.length,
            reason: `${present ? "missing" : "present"}: ${bad.map(show).join(", ")}`,
          }
        : true;
    },
  };
}

/** How long one `regex` match may run: a match is synchronous, so a scorer timeout cannot stop it. */
export const REGEX_TIMEOUT_MS = 2_000;
let regexSandbox: { context: object; script: Script } | undefined;

/**
 * `re.test(text)` that gives up after `ms`. Contract: true or false, or "timeout" when the match
 * ran longer (catastrophic backtracking): a V8 watchdog interrupts it, the process goes on.
 */
export function boundedTest(re: RegExp, text: string, ms = REGEX_TIMEOUT_MS): boolean | "timeout" {
  regexSandbox ??= { context: createContext({}), script: new Script("re.test(text)") };
  const ctx = regexSandbox.context as { re?: RegExp; text?: string };
  ctx.re = re;
  ctx.text = text;
  try {
    return Boolean(regexSandbox.script.runInContext(regexSandbox.context, { timeout: ms }));
  } catch (err) {
    if ((err as { code?: unknown })?.code === "ERR_SCRIPT_EXECUTION_TIMEOUT") return "timeout";
    throw err;
  } finally {
    ctx.re = undefined;
    ctx.text = undefined;
  }
}

function regexScorer(regex: NonNullable<Expectations["regex"]>): Scorer {
  return {
    name: "regex",
    score: ({ output }) => {
      const re = expectRegex(regex);
      const matched = boundedTest(re, output);
      if (matched === "timeout")
        return {
          pass: false,
          reason: `/${headOf(re.source, 80)}/${re.flags} did not finish within ${REGEX_TIMEOUT_MS} ms on a ${[...output].length}-character answer (catastrophic backtracking?)`,
        };
      return matched ? true : { pass: false, reason: `no match for /${re.source}/${re.flags}` };
    },
  };
}

const space = /\s/;

/**
 * The body of the first fenced block (```` ``` ```` or ```` ```json ````, then a line break; up to a
 * line that starts, after blanks, with ```` ``` ````). Contract: what
 * /```(?:json)?\s*\n([\s\S]*?)\n\s*```/ finds, up to surrounding blanks, in linear time: that
 * regex backtracks cubically on an unclosed fence followed by many line breaks (10,000 took 150 s).
 */
export function fencedBody(text: string): string | undefined {
  for (let open = text.indexOf("```"); open >= 0; open = text.indexOf("```", open + 1)) {
    let i = open + 3;
    if (text.startsWith("json", i)) i += 4;
    let start = -1;
    for (; i < text.length && space.test(text[i]!); i++) if (start < 0 && text[i] === "\n") start = i + 1;
    if (start < 0) continue;
    // The first fence that opens decides: a later one could only close within this one's search.
    for (let nl = text.indexOf("\n", start); nl >= 0; ) {
      let at = nl + 1;
      while (at < text.length && space.test(text[at]!)) at++;
      if (text.startsWith("```", at)) return text.slice(start, nl);
      nl = text.indexOf("\n", at);
    }
    return undefined;
  }
  return undefined;
}

/** The JSON in an answer. Contract: the first fenced ```json (or bare ```) block when there is one, else the whole text, trimmed; never throws. */
export function jsonOf(output: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  const text = (fencedBody(output) ?? output).trim();
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, reason: `the answer is not JSON (${errorMessage(err)})` };
  }
}

function jsonSchemaScorer(schema: Record<string, unknown> | boolean): Scorer {
  return {
    name: "jsonSchema",
    score: ({ output }) => {
      const parsed = jsonOf(output);
      if (!parsed.ok) return { pass: false, reason: parsed.reason };
      const validate = compileJsonSchema(schema);
      if (validate(parsed.value)) return true;
      const errors = (validate.errors ?? []).slice(0, 3).map((e) => `${e.instancePath || "(root)"} ${e.message}`);
      return { pass: false, reason: `does not match the schema: ${errors.join("; ")}` };
    },
  };
}

type ToolExpectation = string | { name: string; args?: Record<string, unknown> | undefined };

/** Contract: true when every field of `want` is in `got` with an equal value (objects compared the same way, arrays element by element and of equal length). */
export function subsetMatch(want: unknown, got: unknown): boolean {
  if (want === got) return true;
  if (Array.isArray(want))
    return Array.isArray(got) && got.length === want.length && want.every((w, i) => subsetMatch(w, got[i]));
  if (want && typeof want === "object") {
    if (!got || typeof got !== "object" || Array.isArray(got)) return false;
    return Object.entries(want).every(([k, v]) => Object.hasOwn(got, k) && subsetMatch(v, (got as never)[k]));
  }
  return false;
}

function toolCalledScorer(expect: ToolExpectation | ToolExpectation[]): Scorer {
  const list = (Array.isArray(expect) ? expect : [expect]).map((e) => (typeof e === "string" ? { name: e } : e));
  return {
    name: "toolCalled",
    score: ({ events }) => {
      const calls = events.flatMap((e) => (e.type === "tool.started" ? [{ name: e.name, args: e.args }] : []));
      const missing = list.filter(
        (w) => !calls.some((c) => c.name === w.name && (!w.args || subsetMatch(w.args, c.args))),
      );
      if (!missing.length) return true;
      const called = [...new Set(calls.map((c) => c.name))];
      return {
        pass: false,
        score: (list.length - missing.length) / list.length,
        reason: `not called: ${missing.map((m) => (m.args ? `${m.name} with ${headOf(JSON.stringify(m.args), 80)}` : m.name)).join(", ")} (called: ${called.length ? called.join(", ") : "no tool"})`,
      };
    },
  };
}

function limitsScorer(limits: NonNullable<Expectations["limits"]>): Scorer {
  return {
    name: "limits",
    score: ({ metrics: m }) => {
      const over: string[] = [];
      const check = (what: string, value: number, max: number | undefined) => {
        if (max !== undefined && value > max) over.push(`${what} ${round(value)} > ${max}`);
      };
      check("rounds", m.rounds, limits.maxRounds);
      check("tool calls", m.toolCalls, limits.maxToolCalls);
      check("tokens", m.inputTokens + m.outputTokens, limits.maxTokens);
      check("cost $", m.costUsd, limits.maxCostUsd);
      check("ms", m.durationMs, limits.maxDurationMs);
      return over.length ? { pass: false, reason: `over the limits: ${over.join(", ")}` } : true;
    },
  };
}

const round = (n: number) => Math.round(n * 10_000) / 10_000;

/**
 * Run one scorer on one case, never throwing. Contract: a throw, a timeout or a verdict that is
 * not one of ScorerVerdict's forms (or a score outside [0, 1]) gives `pass: false`, `score: 0`
 * and `error` naming the scorer; reasons are cut to 2,000 code points.
 */
export async function runScorer(
  scorer: Scorer,
  ctx: Omit<ScoreContext, "signal">,
  signal?: AbortSignal,
): Promise<ScoreResult> {
  const name = typeof scorer.name === "string" && scorer.name ? scorer.name : "(unnamed scorer)";
  const failed = (error: string): ScoreResult => ({
    scorer: name,
    pass: false,
    score: 0,
    reason: headOf(`scorer "${name}" ${error}`, 2_000),
    error: headOf(error, 2_000),
  });
  const ms = scorer.timeoutMs ?? 60_000;
  const ctrl = new AbortController();
  const onAbort = () => ctrl.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      // Past setTimeout's range (2^31 - 1 ms, Infinity included) Node fires after 1 ms, which
      // failed every case at once: such a timeout is no timeout.
      if (!(ms <= 2 ** 31 - 1)) return;
      timer = setTimeout(() => {
        ctrl.abort();
        reject(new Error(`did not finish within ${ms} ms`));
      }, ms);
    });
    const verdict: unknown = await Promise.race([
      Promise.resolve().then(() => scorer.score({ ...ctx, signal: ctrl.signal })),
      timeout,
    ]);
    return normalize(name, verdict, scorer.threshold ?? 0.5) ?? failed(`returned no verdict (${describe(verdict)})`);
  } catch (err) {
    return failed(`threw: ${safeMessage(err)}`);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

function normalize(name: string, v: unknown, threshold: number): ScoreResult | undefined {
  const valid = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n) && n >= 0 && n <= 1;
  if (typeof v === "boolean") return { scorer: name, pass: v, score: v ? 1 : 0 };
  if (valid(v)) return { scorer: name, pass: v >= threshold, score: v };
  if (!v || typeof v !== "object" || Array.isArray(v)) return undefined;
  let pass: unknown;
  let score: unknown;
  let reason: unknown;
  try {
    ({ pass, score, reason } = v as Record<string, unknown>);
  } catch {
    return undefined;
  }
  if (pass !== undefined && typeof pass !== "boolean") return undefined;
  if (score !== undefined && !valid(score)) return undefined;
  if (pass === undefined && score === undefined) return undefined;
  const s = (score as number | undefined) ?? (pass ? 1 : 0);
  return {
    scorer: name,
    pass: (pass as boolean | undefined) ?? s >= threshold,
    score: s,
    ...(typeof reason === "string" && reason ? { reason: headOf(reason, 2_000) } : {}),
  };
}

function describe(v: unknown): string {
  if (v === undefined) return "undefined";
  if (typeof v === "number") return `the number ${v}, not in [0, 1]`;
  try {
    return headOf(JSON.stringify(v) ?? String(v), 80);
  } catch {
    return typeof v;
  }
}

function safeMessage(err: unknown): string {
  try {
    return errorMessage(err);
  } catch {
    return "an unreadable error";
  }
}
