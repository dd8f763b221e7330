/**
 * What one turn works on: its state (Turn), passed explicitly from step to step, and the host
 * it runs in (TurnHost: the session, its log, its queues, its lease and its children), the one
 * seam between the loop and everything durable. The loop never imports the host; the host
 * (agent.ts) implements this interface.
 */
import type { ChildHold } from "./child-types.ts";
import type { Contributed, PhaseResult, PhaseRunner } from "./dispatch.ts";
import type { KeelError } from "./errors.ts";
import type { KeelEventData, LiveEvent, SessionMode, TurnTimings } from "./events.ts";
import type { Limits } from "./limits.ts";
import type { MergeCaps, PolicySet, ResolvedTool } from "./merge.ts";
import type { Message } from "./messages.ts";
import { freezeDeep } from "./messages.ts";
import type { PhaseEvents, PhaseName, ToolCallView, TurnEventBase } from "./phases.ts";
import type { ApprovalAnswer, GuardName, PendingApproval, TurnResult, TurnVerdict } from "./verdict.ts";
import type { ContributionKind, ContributionOf } from "./contributions.ts";
import type { ModelProvider, OutputFormat, RequestOptions } from "./provider.ts";
import type { RequestTokenCount, TokenCounter } from "./token-counter.ts";
import type { ChildOptions, ChildRun, ToolCategory, ToolDefinition, TurnBudget, ZodSchema } from "./tools.ts";
import type { ToolSchema } from "./provider.ts";
import type { Usage } from "./usage.ts";
import type { ActiveRoute, RoutingView } from "./routing.ts";
import type { RequestDigest } from "./manifest.ts";

export type { TurnInput } from "./messages.ts";

/** A structured-output request: the zod schema and the JSON Schema sent to the provider. */
export interface OutputSpec {
  schema: {
    safeParse(
      v: unknown,
    ):
      | { success: true; data: unknown }
      | { success: false; error: { issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }> } };
  };
  format: OutputFormat;
}

/** A turn whose door checks passed: calling it starts the turn; `held` is called once it holds the session. */
export type PreparedTurn<O = unknown> = (signal?: AbortSignal, held?: () => void) => Promise<TurnResult<O>>;

/** Options of one turn. */
export interface RunOptions<O = unknown> {
  signal?: AbortSignal;
  metadata?: Record<string, unknown>;
  /**
   * Structured output: a zod object schema the final answer must match. The provider's native
   * mechanism is used; an invalid answer gets one corrective round, then the turn fails with
   * KEEL_OUTPUT_INVALID. The parsed value is `result.output`.
   */
  output?: ZodSchema<O>;
  /** The name the schema is given to the provider (default `final_answer`). */
  outputName?: string;
  /**
   * Dollars this turn may spend, when smaller than `limits.maxCostUsd` (a goal run passes its
   * budget left): a request whose estimate would pass it is not sent and the turn stops (`budget`).
   */
  maxCostUsd?: number;
  /**
   * @internal With `output`: the format sent to the provider as given, instead of the schema's
   * JSON Schema (a replay passes back the recorded one, byte for byte; `output` still validates).
   */
  outputFormat?: OutputFormat;
}

/** A paused turn, as the session keeps it between run() and resume(). */
export interface PausedTurn {
  turnId: string;
  input: string;
  metadata: Record<string, unknown>;
  rounds: number;
  toolCalls: number;
  /** What the turn used before it paused: a resumed turn's usage (and its budget checks) go on from it. */
  usage?: Usage;
  requests: Map<string, PendingApproval>;
  /** Calls that wait in a child session (PendingApproval.via), with the arguments they run with again. */
  childCalls?: Map<string, unknown>;
  /** Set when a stopped process left the turn unfinished (agent `recovery: "auto"`): it goes on from its log. */
  recovery?: UnfinishedTurn;
}

/**
 * Where a turn a stopped process left stands, as its log says (Session.recover continues it).
 * Contract: `started` holds the calls that may have begun running (a tool.started is in the
 * log); a call not in it never ran; `children` are the child sessions each started call began.
 */
export interface UnfinishedTurn {
  started: Map<string, unknown>;
  children: Map<string, Array<{ name: string; childSessionId: string }>>;
  leaseTakenOver?: { pid: number; host: string; reason: "expired" | "holder_dead" };
  /** Cut calls that are not run again, with their one result's text (set when the recovery begins). */
  interrupted?: Map<string, string>;
}

/** How a turn runs besides its input. */
export interface TurnOptions {
  metadata: Record<string, unknown>;
  /** Continue this paused turn (its approvals answered) instead of starting one. */
  resume?: PausedTurn;
  /** Structured output: the schema the final answer must match. */
  output?: OutputSpec;
  /** Limits of this turn only (a child turn's, clamped to its parent's budget). */
  limits?: Partial<Limits>;
  /** `subagent` for a child session's turn. */
  trigger?: "user" | "subagent";
}

/**
 * A tool call waiting for a decision, as AgentOptions.approve is asked.
 * Contract: `signal` aborts when the turn is cancelled; `reason` and `plugin` say who asked and why.
 */
export interface ApprovalRequest {
  sessionId: string;
  turnId: string;
  call: ToolCallView;
  signal: AbortSignal;
  /** Why a plugin asked (its `ask` decision's reason). */
  reason?: string;
  /** The plugin whose decision asked. */
  plugin?: string;
}

/**
 * What the loop reads of the agent's options (the host's AgentOptions is a superset).
 * Contract: read, never written, by the loop.
 */
export interface LoopOptions {
  /** The model every round is sent to unless a round is routed elsewhere (TurnSeams.round). */
  readonly provider: ModelProvider;
  readonly instructions?: string;
  readonly tools?: readonly ToolDefinition[];
  /** Request options every round starts from (a round.pre_request contribution merges over them). */
  readonly requestOptions?: RequestOptions;
  readonly approve?: (request: ApprovalRequest) => boolean | ApprovalAnswer | Promise<boolean | ApprovalAnswer>;
  readonly ask?: "pause" | "deny";
}

/**
 * Routing and budgets, around each request: the host's (the turn calls no routing or budget code by name).
 * Contract: `take` sets `t.route` (or clears it) and returns the options without `route`; `check`
 * throws a TurnFailure when the request would pass a budget; `leftUsd` is what a child may spend.
 */
export interface RoundSeam {
  view(
    t: Turn,
    tokens: number,
    tools: number,
    messages: readonly Message[],
    options: RequestOptions,
  ): RoutingView | undefined;
  take(
    t: Turn,
    options: RequestOptions,
    items: readonly Contributed<ContributionOf<"request_options">>[],
  ): RequestOptions;
  fit(t: Turn, estimate: RequestTokenCount, exact: () => RequestTokenCount): RequestTokenCount;
  check(t: Turn, tokens: number, options: RequestOptions): void;
  leftUsd(t: Turn): number | undefined;
}

/** The preflight plan a host ran before the prompt is compiled (turn.post_preflight_prompt_context reads it). */
export interface PreflightPlan {
  status: "ok" | "timeout" | "failed" | "invalid";
  revealed: readonly string[];
  plan?: string;
}

/**
 * Content digests for the prompt manifest, as the host's log stores content (secrets redacted).
 * Contract: pure; the same stored content gives the same digest in every process.
 */
export interface DigestSeam {
  text(text: string): string;
  /** The request's digests, computed when the returned function is first called (most in-memory logs never read them). */
  request(
    system: string,
    tools: readonly object[],
    messages: readonly Message[],
    options: Record<string, unknown>,
  ): () => RequestDigest;
}

/**
 * What a host adds to the turn, each optional: routing and budgets per round, a preflight plan
 * (it may reveal hidden tools: add their names to `t.visible`), and request digests.
 * Contract: absent seams cost nothing; a seam reads the host's own options, never the kernel's internals beyond Turn.
 */
export interface TurnSeams {
  readonly round?: RoundSeam;
  readonly preflight?: (t: Turn) => Promise<PreflightPlan | undefined>;
  readonly digest?: DigestSeam;
}

/** What the loop reads of the agent. */
export interface TurnAgent {
  readonly runner: PhaseRunner;
  readonly options: LoopOptions;
  readonly seams: TurnSeams;
  readonly limits: Limits;
  readonly caps: MergeCaps;
  readonly tokens: TokenCounter;
  readonly toolTimeouts: Record<ToolCategory, number>;
  readonly depth: number;
  readonly hasListeners: boolean;
}

/**
 * The session a turn runs in, as the loop sees it.
 * Contract: `emit` numbers and batches events (durable ones are on disk when it resolves);
 * `messages` is a frozen array replaced on every change; `confirmLease` throws
 * KEEL_SESSION_BUSY when another writer took the session over, and KEEL_STORE_FAILED when what
 * the turn emitted cannot be stored (no model call is made then); `runChild`/`abandonChild` are the
 * children point (ToolContext.child).
 */
export interface TurnHost {
  readonly id: string;
  readonly agent: TurnAgent;
  messages: readonly Message[];
  turnCount: number;
  paused: PausedTurn | undefined;
  backpressure: Promise<void> | undefined;
  readonly mode: SessionMode;
  readonly lifetime: AbortSignal;
  readonly steering: Array<{ queueId: string; text: string }>;
  readonly followUps: Array<{ queueId: string; text: string }>;
  readonly alwaysAllowed: Set<string>;
  /** What this session's own provider calls cost so far, as its log's `model.responded` events add up. */
  readonly spend: Usage;
  appendMessage(message: Message): void;
  emit(data: KeelEventData, turnId: string | null, durable?: boolean): Promise<void> | void;
  live(event: LiveEvent): void;
  flush(): Promise<void>;
  record(res: PhaseResult, turnId: string | null): void;
  startJobs(contributions: readonly Contributed[], turnId: string | null): void;
  takeTimings(): TurnTimings;
  confirmLease(): Promise<void>;
  runChild<O>(
    turnId: string,
    callId: string,
    signal: AbortSignal,
    options: ChildOptions<O>,
    budget: TurnBudget,
    addToParent: (usage: Usage) => void,
    hold: ChildHold,
  ): Promise<ChildRun<O>>;
  abandonChild(sessionId: string): Promise<void>;
}

/** The tools a plugin hid this turn (tool_visibility), and which plugin hid what (a reveal by its own tool lifts it). */
export interface Visibility {
  names: Set<string>;
  byPlugin: Map<string, Set<string>>;
}

/** One turn's state. Contract: created by openTurn, read and written only by the loop's steps. */
export interface Turn {
  readonly session: TurnHost;
  readonly agent: TurnAgent;
  readonly runner: PhaseRunner;
  readonly turnId: string;
  readonly input: string;
  readonly metadata: Record<string, unknown>;
  readonly limits: Limits;
  readonly mode: SessionMode;
  readonly resume: PausedTurn | undefined;
  readonly outputSpec: OutputSpec | undefined;
  readonly owner: { session: TurnHost; turnId: string };
  /** Aborts on cancellation and when the wall time runs out. */
  readonly signal: AbortSignal;
  readonly t0: number;
  /** True when the wall time (not a cancellation) cut the turn. */
  wallCut(): boolean;
  wallTripped: boolean;
  startClock(): void;
  stopClock(): void;
  readonly usage: Usage;
  rounds: number;
  toolCalls: number;
  finalText: string;
  startCount: number;
  inputMessage: Message;
  readonly policies: PolicySet;
  base: TurnEventBase;
  tools: Map<string, ResolvedTool>;
  hiddenByPlugins: Visibility;
  readonly visible: Set<string>;
  revealedSince: boolean;
  /** The context entries and system prompt the rounds send, and the manifest rows they share. */
  prompt:
    | {
        system: string;
        manifest: Omit<
          import("./manifest.ts").PromptManifest,
          "round" | "messageCount" | "systemChars" | "tokenEstimate" | "options" | "finalRound"
        >;
      }
    | undefined;
  /** The system prompt this turn last recorded on prompt.compiled (it is recorded again only when it changes). */
  lastSystem?: string;
  shown: {
    schemas: ToolSchema[];
    manifest: Array<{ name: string; source: string }>;
    hidden: Array<{ name: string; source: string }>;
  };
  finalGuard: GuardName | undefined;
  /** The pool member this round was routed to (round.pre_request); undefined: the agent's provider. */
  route: ActiveRoute | undefined;
  /** Set when a group of calls waits for the host's approval: the turn pauses. */
  pauseFor: PendingApproval[] | undefined;
  /** The host's answers to the paused calls (resume only), taken once each. */
  readonly answers: Map<string, PendingApproval>;
  /** Calls of this turn paused on a child's approval, with their arguments (kept in PausedTurn). */
  readonly childCalls: Map<string, unknown>;
  outputRetried: boolean;
  output: unknown;
  verdict: TurnVerdict | undefined;
  /** The event of phase `name` for this turn. */
  event<P extends PhaseName>(phase: P, extra?: Omit<PhaseEvents[P], keyof TurnEventBase> | object): object;
  /** The contributions of one kind a phase result holds. */
  of<K extends ContributionKind>(res: PhaseResult | undefined, kind: K): Contributed<ContributionOf<K>>[];
}

/** A turn that ends with this verdict (thrown from a step, caught by the loop). */
export class TurnFailure extends Error {
  readonly verdict: TurnVerdict;
  constructor(verdict: TurnVerdict) {
    super("turn failed");
    this.verdict = verdict;
  }
}

/** A failed required (or fail-closed) phase as the turn's verdict. */
export function phaseFailed(err: KeelError): TurnFailure {
  return new TurnFailure({
    status: "failed",
    reason: "phase_failed",
    code: err.code,
    message: err.message,
    ...(err.plugin ? { plugin: err.plugin } : {}),
    ...(err.phase ? { phase: err.phase } : {}),
  });
}

/** Append a message to the conversation and the log. */
export function append(session: TurnHost, turnId: string, message: Message, durable = false): Promise<void> | void {
  freezeDeep(message);
  session.appendMessage(message);
  return session.emit({ type: "message.appended", message }, turnId, durable);
}
