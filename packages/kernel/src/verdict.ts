import type { ProviderErrorClass } from "./provider.ts";
import type { Usage } from "./usage.ts";

/** Which guard stopped a turn. */
export type GuardName = "max_rounds" | "max_tool_calls" | "token_budget" | "wall_time" | "context_ceiling";

/**
 * How a turn ended.
 * Contract: `completed` — the model ended on its own; `stopped` — a guard ended it (after one
 * final round without tools; `wall_time` cuts what runs and makes none) or a plugin's stop did (at once); `failed` — a provider or phase error,
 * or a request known to exceed the context window (`context_overflow`, never sent);
 * `interrupted` — cancelled or the process died mid-turn.
 */
export type TurnVerdict =
  | { status: "completed"; reason: "end_turn" | "max_tokens" | "refusal" | "other" }
  | { status: "stopped"; reason: GuardName | "plugin_stop"; detail?: string }
  | { status: "failed"; reason: "provider_error" | "phase_failed" | "final_round_tool_use" | "context_overflow" | "process_fault"; errorClass?: ProviderErrorClass; code: string; message: string; plugin?: string; phase?: string }
  | { status: "interrupted"; reason: "aborted" | "process_exit" };

/** What `session.run` resolves to. Contract: `text` is the final assistant text ("" if none). */
export interface TurnResult {
  sessionId: string;
  turnId: string;
  verdict: TurnVerdict;
  text: string;
  usage: Usage;
  rounds: number;
  toolCalls: number;
}
