/**
 * @keel/kernel — the sequencer: the phase table, the plugin contract and registry, dispatch
 * with its policies, contributions and their merge, the turn loop and tool dispatch, the
 * session's event log, errors, and the interfaces it calls (provider, session store, tools,
 * token counter).
 */
export type { PreparedTurn, RunOptions } from "./turn-state.ts";
export { DEFAULT_LIMITS, limitsSchema, toolTimeoutsSchema } from "./limits.ts";
export type { Limits } from "./limits.ts";
export { defineConfig, definePlugin } from "./plugin.ts";
export { DETACH_DEADLINE_MS, defineObserver } from "./observer.ts";
export type { AgentObserver } from "./observer.ts";
export type {
  ContributionFor,
  Handler,
  HandlerResult,
  HookContext,
  JobContext,
  JobRunner,
  JobTurn,
  KeelPlugin,
  MaybePromise,
  PluginEntry,
  PluginSetupContext,
  Stage,
  SubscribeOptions,
} from "./plugin.ts";
export { PHASES, PHASE_NAMES, isPhaseName } from "./phases.ts";
export type {
  AcceptedKind,
  AwaitPolicy,
  FailurePolicy,
  PhaseEvent,
  PhaseEvents,
  PhaseKind,
  PhaseName,
  PhaseSpec,
  PolicyView,
  PromptContextEntry,
  ToolCallView,
  TurnEventBase,
} from "./phases.ts";
export { CONTRIBUTION_SCHEMAS, ContributionSchema, MessageSchema, validateContribution } from "./contributions.ts";
export type {
  Contribution,
  ContributionInput,
  ContributionInputOf,
  ContributionKind,
  ContributionOf,
  MessageEdit,
  ValidationResult,
} from "./contributions.ts";
export {
  DEFAULT_CAPS,
  PolicySet,
  applyMessageEdits,
  mergeDecisions,
  mergePromptContext,
  mergePromptSections,
  mergeRequestOptions,
  mergeToolBundles,
} from "./merge.ts";
export type { MergeCaps, MergedSection, ResolvedTool, ToolDecision } from "./merge.ts";
export {
  ERROR_CODES,
  KeelError,
  PREVIEW_CHARS,
  errorMessage,
  isKeelError,
  maskCredentials,
  preview,
  setCredentialMask,
} from "./errors.ts";
export type { ErrorCode, ErrorLocation } from "./errors.ts";
export { missingPackageOf, packageInstalled, packageMissing } from "./packages.ts";
export { KERNEL_VERSION, DEFAULT_SETUP_TIMEOUT_MS, DEFAULT_TIMEOUTS, buildRegistry } from "./registry.ts";
export type { RegistryOptions, PluginRegistry, RegisteredPlugin, RegistryHooks, Subscription } from "./registry.ts";
export { PhaseRunner } from "./dispatch.ts";
export { abandonedWork } from "./abandoned.ts";
export type { Contributed, PhaseDiagnostic, PhaseResult, PhaseTracer } from "./dispatch.ts";
export { messageText, textContent, toolCallsOf } from "./messages.ts";
export type {
  AssistantBlock,
  AssistantMessage,
  ContentBlock,
  FileBlock,
  ImageBlock,
  Message,
  TextBlock,
  ThinkingBlock,
  ToolCallBlock,
  ToolResultMessage,
  UserMessage,
} from "./messages.ts";
export { ProviderError, complete } from "./provider.ts";
export type {
  CacheTier,
  Completion,
  ModelEvent,
  ModelProvider,
  ModelPriceView,
  ModelRequest,
  OutputFormat,
  ProviderErrorClass,
  RequestOptions,
  StopReason,
  ToolSchema,
} from "./provider.ts";
export { DEFAULT_TOOL_TIMEOUTS, TOOL_NAME_PATTERN, defineTool } from "./tools.ts";
export type {
  ChildOptions,
  ChildRun,
  JsonSchema,
  ToolCategory,
  ToolContext,
  ToolDefinition,
  ToolOutput,
  ToolSource,
  TurnBudget,
  ZodSchema,
} from "./tools.ts";
export { addUsage, emptyUsage } from "./usage.ts";
export type { Usage } from "./usage.ts";
export type {
  ApprovalAnswer,
  ChildApprovalLink,
  GuardName,
  PendingApproval,
  TurnResult,
  TurnVerdict,
} from "./verdict.ts";
export type { TurnInput } from "./messages.ts";
export type { PromptManifest, RequestDigest } from "./manifest.ts";
export { isTerminalEvent } from "./events.ts";
export type {
  AgentEvent,
  ContributionRecord,
  HandlerSummary,
  KeelEvent,
  KeelEventData,
  KeelEventType,
  LiveEvent,
  SessionMode,
  TurnTimings,
} from "./events.ts";
export { canonicalJson } from "./canonical.ts";
export type { HeldLease, LeaseHolder, LeaseKind, LeaseOptions, LeaseRequest } from "./lease.ts";
export type { RequestTokenCount, TokenCounter } from "./token-counter.ts";
export { repairToolPairs } from "./repair.ts";
export { compileSystemPrompt } from "./prompt.ts";
export { wellFormedProvider } from "./provider.ts";
export { boundResult } from "./tool-exec.ts";
export { DEFAULT_OUTPUT_ESTIMATE, chargedUsage, estimateCost } from "./usage.ts";
export type {
  BudgetView,
  ActiveRoute,
  PoolMember,
  PoolMemberView,
  RouteChoice,
  RouteRecord,
  RoutingView,
} from "./routing.ts";
export type { ApprovalRequest, DigestSeam, LoopOptions, PreflightPlan, RoundSeam, TurnSeams } from "./turn-state.ts";
export type {
  AgentStorage,
  AppendOptions,
  SessionInfo,
  SessionStore,
  StoreDatabase,
  TurnToContinue,
} from "./session-store.ts";
export { DEFAULT_LEASE } from "./lease.ts";
export { hashText } from "./hash.ts";
export { fileTokens } from "./token-counter.ts";
export { currentFaultScope, faultScopesActive, inFaultScope, installFaultScopes } from "./fault-scope.ts";
export type { FaultScope, FaultScopeCarrier } from "./fault-scope.ts";

// What a host builds on (@keel/agent): the turn's entry points and the state it runs on.
export { runTurn, unansweredCalls } from "./turn.ts";
export { TurnFailure } from "./turn-state.ts";
export type { PausedTurn, Turn, TurnAgent, TurnHost, TurnOptions, UnfinishedTurn } from "./turn-state.ts";
export type { ChildHold, ChildResumes } from "./child-types.ts";
export { jobKey } from "./registry.ts";
export { trackAbandoned } from "./abandoned.ts";
export { HISTORY_FACTS_MIN, extendPairState } from "./repair.ts";
export { freezeDeep } from "./messages.ts";
export { errorResult } from "./tool-exec.ts";
export { checkInput, outputSpecOf } from "./run-input.ts";
export {
  codePointLength,
  codePointSlice,
  deltaJoiner,
  droppedMarker,
  extendWellFormed,
  headOf,
  isWellFormed,
  tailOf,
  toWellFormed,
  truncate,
  wellFormedDeep,
  wellFormedOnce,
} from "./text.ts";
export type { TruncateOptions } from "./text.ts";
export { closestName, didYouMean } from "./suggest.ts";
