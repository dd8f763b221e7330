/**
 * @keel/kernel — the phase table, plugin registry, contributions and their merge, the agent
 * loop, tool dispatch, the provider interface, the durable session log and token counting.
 */
export { createAgent, Agent, Session, DEFAULT_LIMITS } from "./agent.ts";
export type { AgentOptions, ApprovalRequest, Limits, PhaseMapRow, RunOptions } from "./agent.ts";
export { definePlugin } from "./plugin.ts";
export { defineConfig } from "./config.ts";
export type { KeelConfig, ModelSpec, PluginSpec } from "./config.ts";
export type { ContributionFor, Handler, HandlerResult, HookContext, JobContext, JobRunner, JobTurn, KeelPlugin, MaybePromise, PluginEntry, PluginSetupContext, Stage, SubscribeOptions } from "./plugin.ts";
export { PHASES, PHASE_NAMES, isPhaseName } from "./phases.ts";
export type { AcceptedKind, AwaitPolicy, FailurePolicy, PhaseEvent, PhaseEvents, PhaseKind, PhaseName, PhaseSpec, PolicyView, PromptContextEntry, ToolCallView, TurnEventBase } from "./phases.ts";
export { CONTRIBUTION_SCHEMAS, ContributionSchema, MessageSchema, validateContribution } from "./contributions.ts";
export type { Contribution, ContributionInput, ContributionInputOf, ContributionKind, ContributionOf, MessageEdit, ValidationResult } from "./contributions.ts";
export { DEFAULT_CAPS, PolicySet, applyMessageEdits, mergeDecisions, mergePromptContext, mergePromptSections, mergeRequestOptions, mergeToolBundles } from "./merge.ts";
export type { MergeCaps, MergedSection, ResolvedTool, ToolDecision } from "./merge.ts";
export { ERROR_CODES, KeelError, PREVIEW_CHARS, errorMessage, isKeelError, preview } from "./errors.ts";
export type { ErrorCode, ErrorLocation } from "./errors.ts";
export { KERNEL_VERSION, DEFAULT_TIMEOUTS, buildRegistry } from "./registry.ts";
export type { PluginRegistry, RegisteredPlugin, RegistryHooks, Subscription } from "./registry.ts";
export { DEFAULT_DURABLE_ATTEMPTS, MAX_JOB_PAYLOAD_CHARS } from "./jobs.ts";
export type { UnfinishedJob } from "./jobs.ts";
export { PhaseRunner } from "./dispatch.ts";
export type { Contributed, PhaseDiagnostic, PhaseResult, PhaseTracer } from "./dispatch.ts";
export { messageText, textContent, toolCallsOf } from "./messages.ts";
export type { AssistantBlock, AssistantMessage, ContentBlock, ImageBlock, Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultMessage, UserMessage } from "./messages.ts";
export { ProviderError, complete } from "./provider.ts";
export type { CacheTier, Completion, ModelEvent, ModelProvider, ModelRequest, ProviderErrorClass, RequestOptions, StopReason } from "./provider.ts";
export { DEFAULT_TOOL_TIMEOUTS, TOOL_NAME_PATTERN, defineTool } from "./tools.ts";
export type { JsonSchema, ToolCategory, ToolContext, ToolDefinition, ToolOutput, ToolSchema, ToolSource } from "./tools.ts";
export { addUsage, emptyUsage } from "./usage.ts";
export type { Usage } from "./usage.ts";
export type { GuardName, TurnResult, TurnVerdict } from "./verdict.ts";
export type { PromptManifest } from "./manifest.ts";
export { isTerminalEvent } from "./events.ts";
export type { AgentEvent, ContributionRecord, HandlerSummary, KeelEvent, KeelEventData, KeelEventType, LiveEvent, TurnTimings } from "./events.ts";
export type { SessionInfo, SessionStore } from "./session-store.ts";
export { SqliteSessionStore, defaultKeelHome, defaultSessionDbPath } from "./sqlite-store.ts";
export { MemorySessionStore } from "./memory-store.ts";
export { TokenCounter, defaultTokenCounter, estimateTokens } from "./tokens.ts";
export type { RequestTokenCount } from "./tokens.ts";
export { ScriptedProvider, scriptedProvider, parseProviderScript, ProviderScriptSchema } from "./scripted-provider.ts";
export type { ProviderScript, ProviderScriptInput, ScriptStep } from "./scripted-provider.ts";
export { repairToolPairs } from "./repair.ts";
export { runPreflight } from "./preflight.ts";
export type { PreflightOptions, PreflightOutcome } from "./preflight.ts";
export { satisfies } from "./semver.ts";
export { compileSystemPrompt } from "./prompt.ts";
