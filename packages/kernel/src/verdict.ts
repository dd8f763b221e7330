import type { ProviderErrorClass } from "./provider.ts";
import type { Usage } from "./usage.ts";

/** Which guard stopped a turn. */
export type GuardName =
  | "max_rounds"
  | "max_tool_calls"
  | "token_budget"
  | "wall_time"
  | "context_ceiling"
  /** A request over limits.maxCostUsd, maxSessionCostUsd or maxSessionTokens: never sent; the turn stops at once. */
  | "budget";

/**
 * How a turn ended.
 * Contract: `completed` — the model ended on its own; `stopped` — a guard ended it (after one
 * final round without tools; `wall_time` cuts what runs and makes none) or a plugin's stop did (at once); `failed` — a provider or phase error,
 * or a request known to exceed the context window (`context_overflow`, never sent);
 * `interrupted` — cancelled or the process died mid-turn; `paused` — tool calls wait for the
 * host's approval (`pending` lists their call ids): answer them and call `session.resume()`.
 */
export type TurnVerdict =
  | { status: "completed"; reason: "end_turn" | "max_tokens" | "refusal" | "other" }
  | { status: "stopped"; reason: GuardName | "plugin_stop"; detail?: string }
  | {
      status: "failed";
      reason:
        | "provider_error"
        | "phase_failed"
        | "final_round_tool_use"
        | "context_overflow"
        | "process_fault"
        | "output_invalid";
      errorClass?: ProviderErrorClass;
      code: string;
      message: string;
      plugin?: string;
      phase?: string;
    }
  | { status: "paused"; reason: "approval"; pending: string[] }
  | { status: "interrupted"; reason: "aborted" | "process_exit" | "handed_back" };

/** What `session.run` resolves to. Contract: `text` is the final assistant text ("" if none). */
export interface TurnResult<O = unknown> {
  sessionId: string;
  turnId: string;
  verdict: TurnVerdict;
  text: string;
  usage: Usage;
  rounds: number;
  toolCalls: number;
  /** The calls a paused turn waits for (verdict `paused`). */
  pending?: PendingApproval[];
  /**
   * The validated structured answer when `run()` was given `output` and the turn completed.
   * Contract: set exactly when the verdict is `completed` and an `output` schema was given.
   */
  output?: O;
}

/** What a host answers for one pending tool call. */
export interface ApprovalAnswer {
  approved: boolean;
  /** Approve every later `ask` for this tool in this session without asking (approved only). */
  always?: boolean;
  /** Why; a denial's reason reaches the model in the call's error result. */
  reason?: string;
  /**
   * Who answered, as the host names them (`cli:<user>`, `chat:<caller>`, `studio:<user>`): recorded
   * on approval.resolved for the audit trail. Contract: cut to 200 code points where it is stored.
   */
  answerer?: string;
}

/**
 * A tool call a paused turn waits for. Contract: `args` are the arguments the call will run
 * with (after any plugin rewrite); `answer` is set once the host answered it.
 */
export interface PendingApproval {
  callId: string;
  turnId: string;
  name: string;
  args: unknown;
  round: number;
  /** The plugin whose `ask` decision paused the call, and its reason. */
  plugin?: string;
  reason?: string;
  requestedAt: number;
  answer?: ApprovalAnswer;
  /**
   * Set when the call waits in a child session (ToolContext.child): `callId` is then
   * `<this turn's call>/<the child's call>` (`<call>~<n>/<child call>` for the call's n-th
   * child), and name, args and reason are the child's call's.
   * Answered here like any other; the child goes on when this turn resumes.
   */
  via?: ChildApprovalLink;
}

/** Where a child's pending call sits. Contract: `callId` is the parent call that ran the child. */
export interface ChildApprovalLink {
  callId: string;
  /** The child session, its name (ChildOptions.name) and the call's id there. */
  sessionId: string;
  child: string;
  childCallId: string;
  /** Which of the call's child() calls started it (1 for the first). */
  ordinal: number;
}
