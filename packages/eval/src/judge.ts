/**
 * The LLM judge: asks a model (the agent's side model by default) whether an answer meets a
 * rubric, for a structured verdict `{"pass": …, "score": …, "reason": …}`, parsed defensively:
 * the first JSON object in the answer, in or out of a code fence; a verdict it cannot read fails
 * the case naming the judge (never the run).
 */
import { complete } from "@keel/kernel";
import type { ModelProvider } from "@keel/kernel";
import { codePointSlice, headOf, truncate } from "@keel/text";
import { z } from "zod";
import type { Scorer, ScoreContext } from "./types.ts";

/** Options of `llmJudge`. Contract: only `rubric` is required. */
export interface JudgeOptions {
  /** What a good answer does, in plain words. */
  rubric: string;
  /** The score at or over which the case passes when the judge gives no `pass` (default 0.5). */
  threshold?: number | undefined;
  /** The model to ask (default: the agent's side model, else its main model). */
  model?: ModelProvider;
  /** The scorer's name (default `judge`). */
  name?: string;
  /** How long the judge may take (default 60,000 ms). */
  timeoutMs?: number;
}

const JUDGE_SYSTEM = `You grade an AI assistant's answer against a rubric. Read the rubric, the user's input, the reference answer when one is given, and the assistant's answer. Reply with one JSON object and nothing else:
{"pass": true or false, "score": a number from 0 to 1, "reason": "one sentence"}`;

/** The verdict's JSON Schema, asked of providers that support structured output. */
const VERDICT_SCHEMA = {
  type: "object",
  properties: {
    pass: { type: "boolean" },
    score: { type: "number", minimum: 0, maximum: 1 },
    reason: { type: "string" },
  },
  required: ["pass", "score", "reason"],
  additionalProperties: false,
};

const Verdict = z.object({
  pass: z.boolean().optional(),
  score: z.coerce.number().min(0).max(1).optional(),
  reason: z.string().optional(),
});

/** The text the judge is asked. Contract: each part cut to 20,000 code points. */
export function judgePrompt(ctx: Pick<ScoreContext, "case" | "output">, rubric: string): string {
  const cut = (s: string) => truncate(s, 20_000);
  const input = Array.isArray(ctx.case.input)
    ? ctx.case.input.map((t, i) => `[turn ${i + 1}] ${t}`).join("\n")
    : ctx.case.input;
  return [
    `<rubric>\n${cut(rubric)}\n</rubric>`,
    `<input>\n${cut(input)}\n</input>`,
    ...(ctx.case.reference !== undefined ? [`<reference>\n${cut(ctx.case.reference)}\n</reference>`] : []),
    `<answer>\n${cut(ctx.output)}\n</answer>`,
  ].join("\n\n");
}

/** How much of a judge's answer parseVerdict reads: ten times what its 400 tokens can hold. */
export const VERDICT_SCAN_CHARS = 16_000;

/**
 * Read a judge's answer. Contract: the first balanced `{…}` that parses as JSON and has `pass`
 * or `score` (a score as a numeric string is taken; one outside [0, 1] is not), within the first
 * VERDICT_SCAN_CHARS; else undefined.
 */
export function parseVerdict(text: string): { pass?: boolean; score?: number; reason?: string } | undefined {
  // The scan is quadratic in the braces that never close ("{" × 40,000 took 1.8 s, 400,000 would
  // take minutes, synchronously, so no scorer timeout fires); a judge answers in 400 tokens.
  text = codePointSlice(text, 0, VERDICT_SCAN_CHARS);
  for (let start = text.indexOf("{"); start >= 0; start = text.indexOf("{", start + 1)) {
    let depth = 0;
    let inString = false;
    for (let i = start; i < text.length; i++) {
      const ch = text[i];
      if (inString) {
        if (ch === "\\") i++;
        else if (ch === '"') inString = false;
      } else if (ch === '"') inString = true;
      else if (ch === "{") depth++;
      else if (ch === "}" && --depth === 0) {
        try {
          const r = Verdict.safeParse(JSON.parse(text.slice(start, i + 1)));
          if (r.success && (r.data.pass !== undefined || r.data.score !== undefined))
            return Object.fromEntries(Object.entries(r.data).filter(([, v]) => v !== undefined));
        } catch {
          // not JSON: try the next brace
        }
        break;
      }
    }
  }
  return undefined;
}

/**
 * A scorer asking a model whether the answer meets `rubric`. Contract: passes when the judge says
 * `pass: true` (or, with no `pass`, a score ≥ threshold); an answer with no readable verdict, or
 * no model to ask, throws (the case fails naming the judge).
 */
export function llmJudge(options: JudgeOptions): Scorer {
  return {
    name: options.name ?? "judge",
    ...(options.threshold !== undefined ? { threshold: options.threshold } : {}),
    timeoutMs: options.timeoutMs ?? 60_000,
    async score(ctx) {
      const model = options.model ?? ctx.model;
      if (!model) throw new Error("has no model to ask: the agent has no side model or main model");
      const answer = await complete(
        model,
        {
          system: JUDGE_SYSTEM,
          messages: [{ role: "user", content: [{ type: "text", text: judgePrompt(ctx, options.rubric) }] }],
          // The provider's native structured output (an OpenAI json_schema, an Anthropic forced tool);
          // a server that ignores it still answers in text, which parseVerdict reads the same way.
          options: { maxTokens: 400, temperature: 0, output: { name: "verdict", schema: VERDICT_SCHEMA } },
        },
        { signal: ctx.signal },
      );
      const verdict = parseVerdict(answer.text);
      if (!verdict) throw new Error(`answered no verdict: ${JSON.stringify(headOf(answer.text, 120))}`);
      return verdict;
    },
  };
}

/** The built-in `judge` expectation's scorer. */
export function judgeScorer(o: { rubric: string; threshold?: number | undefined }): Scorer {
  return llmJudge(o);
}
