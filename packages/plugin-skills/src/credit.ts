/** How a turn's verdict credits the picked skill. */
import type { TurnVerdict } from "@keel/kernel";

/** A turn's outcome for the router. */
export type Outcome = "success" | "failure" | "neutral";

/**
 * Default credit, after MECHANICS.md: the model ending on its own (end_turn, or tool_use /
 * stop_sequence, which the kernel reports as end_turn; `other`) is a success; a guard
 * (max rounds, tool calls, tokens, wall time, context), a failure or an abort is a failure;
 * max_tokens, refusal, a plugin's stop and a process exit are neutral.
 */
export const DEFAULT_CREDIT: Readonly<Record<string, Outcome>> = Object.freeze({
  "completed:end_turn": "success",
  "completed:other": "success",
  "completed:max_tokens": "neutral",
  "completed:refusal": "neutral",
  stopped: "failure",
  "stopped:plugin_stop": "neutral",
  failed: "failure",
  "interrupted:aborted": "failure",
  "interrupted:process_exit": "neutral",
});

/**
 * The outcome of a verdict. Contract: `overrides` keyed "status:reason" win over "status",
 * which win over the defaults (same precedence); anything unmapped is neutral.
 */
export function creditOf(verdict: TurnVerdict, overrides: Readonly<Record<string, Outcome>> = {}): Outcome {
  const specific = `${verdict.status}:${verdict.reason}`;
  return (
    overrides[specific] ??
    overrides[verdict.status] ??
    DEFAULT_CREDIT[specific] ??
    DEFAULT_CREDIT[verdict.status] ??
    "neutral"
  );
}
