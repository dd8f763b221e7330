/**
 * @keel/kernel — the sequencer: the phase table, the plugin contract and registry, dispatch
 * with its policies, contributions and their merge, the turn loop and tool dispatch, the
 * session's event log, errors, and the interfaces it calls (provider, session store, tools,
 * token counter).
 */
export { createAgent, Agent, Session } from "./agent.ts";
export type { PhaseMapRow, SessionOpenOptions } from "./agent.ts";
export type { PreparedTurn, RunOptions } from "./turn-state.ts";
export type { AgentOptions, ApprovalRequest } from "./agent-options.ts";
export { DEFAULT_LIMITS, limitsSchema, toolTimeoutsSchema } from "./limits.ts";
export type { Limits } from "./limits.ts";
export { DEFAULT_OUTPUT_ESTIMATE, estimateCost, hasImages } from "./route.ts";
export type { BudgetView, PoolMember, PoolMemberView, RouteChoice, RouteRecord, RoutingView } from "./route.ts";
export { definePlugin } from "./plugin.ts";
export { DETACH_DEADLINE_MS, defineObserver } from "./observer.ts";
export type { AgentObserver } from "./observer.ts";
export { defineConfig } from "./config.ts";
export type {
  KeelConfig,
  KnownModelName,
  ModelEntry,
  PoolModelEntry,
  ModelName,
  ModelSpec,
  OfflineScript,
  PluginSpec,
} from "./config.ts";
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
export { ERROR_CODES, KeelError, PREVIEW_CHARS, errorMessage, isKeelError, preview } from "./errors.ts";
export { maskCredentials } from "@keel/secrets";
export type { ErrorCode, ErrorLocation } from "./errors.ts";
export { KERNEL_VERSION, DEFAULT_SETUP_TIMEOUT_MS, DEFAULT_TIMEOUTS, buildRegistry } from "./registry.ts";
export type { RegistryOptions, PluginRegistry, RegisteredPlugin, RegistryHooks, Subscription } from "./registry.ts";
export { DEFAULT_DURABLE_ATTEMPTS, MAX_JOB_PAYLOAD_CHARS, sessionsWithPendingJobs } from "./jobs.ts";
export type { UnfinishedJob } from "./host-types.ts";
export { PhaseRunner } from "./dispatch.ts";
export { abandonedWork } from "./abandoned.ts";
export { guardProcess } from "./faults.ts";
export type { GuardOptions, ProcessFault, ProcessGuard } from "./faults.ts";
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
export { digestOf, requestDigest } from "./digest.ts";
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
export type { AppendOptions, SessionInfo, SessionStore, StoreDatabase, TurnToContinue } from "./session-store.ts";
export { canonicalJson } from "./canonical.ts";
export { DEFAULT_LEASE, PROCESS_INSTANCE, thisHost } from "./lease.ts";
export type { HeldLease, LeaseHolder, LeaseKind, LeaseOptions, LeaseRequest } from "./lease.ts";
export { defaultKeelHome, resolveStorage } from "./storage.ts";
export type { AgentStorage, ResolvedStorage } from "./storage.ts";
export type { RequestTokenCount, TokenCounter } from "./token-counter.ts";
export { repairToolPairs } from "./repair.ts";
export { runPreflight } from "./preflight.ts";
export type { PreflightOptions, PreflightOutcome } from "./preflight.ts";
export { compileSystemPrompt } from "./prompt.ts";
export { wellFormedProvider } from "./provider.ts";
export { boundResult } from "./tool-exec.ts";
