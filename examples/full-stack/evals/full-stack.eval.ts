/**
 * The full-stack agent's eval: the cases in cases.jsonl (each with its `expect`) plus one
 * scorer in code. Offline (no API key) the agent answers from ../script.json, so this runs in
 * the test suite: `keel eval evals/full-stack.eval.ts` from examples/full-stack.
 */
import { defineEval, defineScorer } from "@keel/eval";

/** Answers stay short: the instructions ask for brief, concrete answers. */
const brief = defineScorer({
  name: "brief",
  score: ({ output }) => output.length <= 300 || { pass: false, reason: `${output.length} characters, more than 300` },
});

/** No case may take more than one tool call per round on average (a sign of a flailing agent). */
const focused = defineScorer({
  name: "focused",
  score: ({ metrics }) => (metrics.rounds === 0 ? 1 : Math.min(1, metrics.rounds / Math.max(1, metrics.toolCalls))),
  threshold: 0.5,
});

export default defineEval({
  dataset: "./cases.jsonl",
  scorers: [brief, focused],
  concurrency: 2,
  // Its tools read the project's files (MCP) and keep memories in the eval's own home: they run.
  // By default an eval runs only tools declared read-only and refuses the rest (see @keel/eval).
  tools: "live",
});
