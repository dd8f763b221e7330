/**
 * The phase table: declared once, as data. Hook instances, handler types, `keel inspect`
 * and docs are all derived from it.
 */
import type { RequestTokenCount } from "./token-counter.ts";
import type { ContributionKind, ContributionOf } from "./contributions.ts";
import type { PromptManifest } from "./manifest.ts";
import type { AssistantMessage, ContentBlock, Message, ToolResultMessage } from "./messages.ts";
import type { RequestOptions, StopReason } from "./provider.ts";
import type { RoutingView } from "./routing.ts";
import type { ToolCategory, ToolSource } from "./tools.ts";
import type { Usage } from "./usage.ts";
import type { TurnVerdict } from "./verdict.ts";

/** What a failing handler does to its phase. */
export type FailurePolicy = "best_effort" | "required" | "fallback" | "fail_closed";

/** Whether the turn waits for a handler. */
export type AwaitPolicy = "blocking" | "deadline" | "background";

/**
 * How handlers of a phase combine. `collect`: handlers run in order (independent ones
 * concurrently) and their contributions are merged after all finish. `waterfall`: handlers
 * run one after another and each sees what the previous ones contributed.
 */
export type PhaseKind = "collect" | "waterfall";

/** One row of the phase table. */
export interface PhaseSpec {
  readonly scope: "session" | "turn" | "round" | "tool";
  readonly kind: PhaseKind;
  readonly accepts: readonly ContributionKind[];
  readonly failure: FailurePolicy;
  readonly runs: string;
}

/**
 * The phase table, in lifecycle order.
 * Contract: the only phases that exist (registration rejects any other name); frozen.
 */
export const PHASES = {
  "session.start": {
    scope: "session",
    kind: "collect",
    accepts: ["diagnostic", "background_job"],
    failure: "best_effort",
    runs: "once, when a session is opened or resumed",
  },
  "turn.pre_policy": {
    scope: "turn",
    kind: "collect",
    accepts: ["policy", "diagnostic"],
    failure: "best_effort",
    runs: "input accepted and persisted, before anything else",
  },
  "turn.pre_prompt_context": {
    scope: "turn",
    kind: "collect",
    accepts: ["prompt_context", "diagnostic"],
    failure: "best_effort",
    runs: "after policy",
  },
  "turn.pre_tool_materialization": {
    scope: "turn",
    kind: "collect",
    accepts: ["tool_bundle", "tool_visibility", "policy", "diagnostic"],
    failure: "best_effort",
    runs: "before tools are listed for the model",
  },
  "turn.post_preflight_prompt_context": {
    scope: "turn",
    kind: "collect",
    accepts: ["prompt_context", "diagnostic"],
    failure: "best_effort",
    runs: "after the optional preflight plan",
  },
  "turn.pre_prompt_compile": {
    scope: "turn",
    kind: "collect",
    accepts: ["prompt_section", "diagnostic"],
    failure: "best_effort",
    runs: "before the system prompt is assembled",
  },
  "turn.post_prompt_compile": {
    scope: "turn",
    kind: "collect",
    accepts: ["diagnostic"],
    failure: "best_effort",
    runs: "after the system prompt is assembled, with its manifest",
  },
  "round.pre_request": {
    scope: "round",
    kind: "waterfall",
    accepts: ["message_edit", "request_options", "diagnostic", "stop", "answer"],
    failure: "best_effort",
    runs: "before every provider call",
  },
  "round.post_response": {
    scope: "round",
    kind: "collect",
    accepts: ["diagnostic", "stop"],
    failure: "best_effort",
    runs: "after every provider response",
  },
  "tool.pre_call": {
    scope: "tool",
    kind: "waterfall",
    accepts: ["tool_decision", "diagnostic"],
    failure: "fail_closed",
    runs: "before every tool call",
  },
  "tool.post_result": {
    scope: "tool",
    kind: "waterfall",
    accepts: ["tool_result_rewrite", "diagnostic"],
    failure: "best_effort",
    runs: "after every tool call, also one refused for invalid arguments",
  },
  "turn.post_turn": {
    scope: "turn",
    kind: "collect",
    accepts: ["background_job", "diagnostic"],
    failure: "best_effort",
    runs: "turn ended (success or failure), with the verdict",
  },
  "session.end": {
    scope: "session",
    kind: "collect",
    accepts: ["diagnostic", "background_job"],
    failure: "best_effort",
    runs: "once, when a session is closed",
  },
} as const satisfies Record<string, PhaseSpec>;

for (const spec of Object.values(PHASES)) Object.freeze(Object.freeze(spec).accepts);
Object.freeze(PHASES);

/** The name of a phase. */
export type PhaseName = keyof typeof PHASES;

/** Phase names in lifecycle order. */
export const PHASE_NAMES = Object.keys(PHASES) as PhaseName[];

/** True when `name` is a phase of the table. */
export function isPhaseName(name: string): name is PhaseName {
  return Object.hasOwn(PHASES, name);
}

/** Contribution kinds phase P accepts. */
export type AcceptedKind<P extends PhaseName> = (typeof PHASES)[P]["accepts"][number];

/** Read-only view of the merged policies of a turn. Contract: keyed by (domain, key). */
export interface PolicyView {
  get(domain: string, key: string): unknown;
  has(domain: string, key: string): boolean;
  entries(): Array<{ domain: string; key: string; value: unknown; plugin: string }>;
}

/** What every turn-scoped event carries. Contract: read-only; `messages` is the history before this turn's input. */
export interface TurnEventBase {
  sessionId: string;
  turnId: string;
  /** The user's words: the text parts of the input, joined by blank lines. */
  input: string;
  /** The input's content blocks when run() was given blocks (text and images), else absent. */
  content?: readonly ContentBlock[];
  trigger: "user" | "follow_up" | "resume" | "subagent";
  /** The session's mode for this turn: in `chat` no tools are materialised or sent. */
  mode: "agent" | "chat";
  history: readonly Message[];
  policies: PolicyView;
  /** Free-form per-turn metadata given by the host (`run(input, { metadata })`), e.g. a user id. */
  metadata: Readonly<Record<string, unknown>>;
}

/** A tool call as hooks see it. */
export interface ToolCallView {
  id: string;
  name: string;
  /** As the tool's schema reads them (defaults filled, coercions done): what the tool will run with. Raw only when they do not fit (the call is then refused). */
  args: unknown;
  category: ToolCategory;
  source: ToolSource;
}

/** Merged prompt context as hooks see it. */
export interface PromptContextEntry
  extends Pick<ContributionOf<"prompt_context">, "id" | "domain" | "priority" | "content"> {
  plugin: string;
}

/** The event payload each phase's handlers receive. */
export interface PhaseEvents {
  "session.start": { sessionId: string; agent: string; resumed: boolean };
  "turn.pre_policy": TurnEventBase;
  "turn.pre_prompt_context": TurnEventBase;
  "turn.pre_tool_materialization": TurnEventBase & { tools: readonly string[] };
  "turn.post_preflight_prompt_context": TurnEventBase & {
    context: readonly PromptContextEntry[];
    /** Set when the preflight ran: its plan and the hidden tools it revealed. */
    preflight?: { status: "ok" | "timeout" | "failed" | "invalid"; plan?: string; revealed: readonly string[] };
  };
  /** `tools`: names the model will see; `hiddenTools`: callable but not advertised (yet). */
  "turn.pre_prompt_compile": TurnEventBase & {
    context: readonly PromptContextEntry[];
    tools: readonly string[];
    hiddenTools: readonly string[];
  };
  "turn.post_prompt_compile": TurnEventBase & { system: string; manifest: PromptManifest };
  "round.pre_request": TurnEventBase & {
    round: number;
    messages: readonly Message[];
    tokenEstimate: number;
    /** The same count by part (system, tools, messages); `exact: false` means chars/4 estimates. */
    tokenCount: Readonly<RequestTokenCount>;
    contextWindow: number | undefined;
    options: Readonly<RequestOptions>;
    /** Set when the previous attempt of this round was rejected as too long. */
    retry?: { reason: "context_too_long" };
    /** The pool, the request's shape and the budget left: set only when the agent has a pool (AgentOptions.pool). */
    routing?: RoutingView;
    /** Set in the final round a guard gave (no tools): an `answer` here may hold text only. */
    final?: true;
  };
  "round.post_response": TurnEventBase & {
    round: number;
    response: AssistantMessage;
    stopReason: StopReason;
    usage: Partial<Usage>;
  };
  "tool.pre_call": TurnEventBase & { round: number; call: ToolCallView };
  "tool.post_result": TurnEventBase & {
    round: number;
    call: ToolCallView;
    result: ToolResultMessage;
    durationMs: number;
    approvedByUser: boolean;
  };
  "turn.post_turn": TurnEventBase & {
    verdict: TurnVerdict;
    usage: Usage;
    messages: readonly Message[];
    finalText: string;
  };
  "session.end": { sessionId: string; agent: string };
}

/** The event of phase P, tagged with its phase name (one discriminated union over all phases). */
export type PhaseEvent<P extends PhaseName = PhaseName> = P extends PhaseName
  ? PhaseEvents[P] & { readonly phase: P }
  : never;
