/**
 * The plugin author's reference, kept next to the code it describes: one line per field of
 * every contribution kind and every phase event, and one example per kind. The mapped types
 * make a missing or extra field a compile error; docs/contributions.md is generated from
 * these tables and the zod schemas (scripts/gen-docs.ts), and a test validates each example.
 */
import { z } from "zod";
import type {
  ContributionInputOf,
  ContributionKind,
  PhaseEvents,
  PhaseName,
  TurnEventBase,
} from "../packages/kernel/src/index.ts";
import { CONTRIBUTION_SCHEMAS } from "../packages/kernel/src/index.ts";

type FieldsOf<T> = { [F in Exclude<keyof T, "kind">]-?: string };
/** Every distribution member's keys (a union's fields, e.g. background_job with or without run). */
type AllKeys<T> = T extends unknown ? keyof T : never;

/** One contribution kind's documentation. Contract: `fields` names exactly the schema's fields. */
export interface ContributionDoc<K extends ContributionKind> {
  summary: string;
  fields: FieldsOf<{ [F in AllKeys<ContributionInputOf<K>>]: unknown }>;
  example: ContributionInputOf<K>;
}

/** Every contribution kind, documented. Contract: keys are exactly CONTRIBUTION_SCHEMAS' kinds. */
export const CONTRIBUTION_DOCS: { [K in ContributionKind]: ContributionDoc<K> } = {
  policy: {
    summary:
      "A decision about the turn that later phases and plugins read with `event.policies.get(domain, key)`; on a conflict the lower priority wins, then the earlier plugin.",
    fields: {
      domain: "the policy's namespace, usually your plugin's area (`memory`, `mode`)",
      key: "the setting within the domain",
      value: "any JSON-like value",
      priority: "lower wins a conflict on the same domain and key",
    },
    example: { kind: "policy", domain: "memory", key: "write", value: false, priority: 0 },
  },
  prompt_context: {
    summary:
      "A fact or retrieved text for the model, placed in the context block of the system prompt; merged by priority within the context cap.",
    fields: {
      id: "unique within the turn; a later one with the same id replaces it",
      domain: "what it is about (`memory`, `docs`); shown to the model as its heading",
      priority: "lower comes first and survives the cap longer",
      content: "the text (cut by code point at maxChars)",
      maxChars: "cap for this entry, in code points",
      sourceRefs: "where it came from (ids, paths), kept in the prompt manifest",
    },
    example: {
      kind: "prompt_context",
      id: "memory:release-day",
      domain: "memory",
      content: "The team releases on Thursday.",
      priority: 10,
      sourceRefs: ["memory:42"],
    },
  },
  prompt_section: {
    summary:
      "A section of the system prompt (rules, a skills list). Sections with the same sectionId are merged in priority order under one title.",
    fields: {
      id: "unique within the turn",
      sectionId: "which section: lowercase [a-z0-9_.-], 1-64 chars; contributions to one section are merged",
      title: "the section's heading",
      domain: "what it is about, for the manifest and conflict rules",
      priority: "lower comes first",
      content: "the text",
      maxChars: "cap for this contribution, in code points",
    },
    example: {
      kind: "prompt_section",
      id: "house-rules:french",
      sectionId: "house-rules",
      title: "House rules",
      domain: "style",
      content: "Always answer in French.",
      priority: 0,
    },
  },
  tool_bundle: {
    summary:
      "Tools the model may call this turn. A plugin tool never shadows a built-in one; `hidden` tools run but are not advertised until revealed.",
    fields: {
      bundleId: "unique within the turn",
      domain: "what the tools are for",
      priority: "lower is listed first",
      tools:
        "ToolDefinition objects: name (^[a-zA-Z0-9_-]{1,64}$), description, parameters (JSON Schema) or a zod `input`, category, hidden, timeoutMs, execute",
    },
    example: {
      kind: "tool_bundle",
      bundleId: "clock",
      tools: [{ name: "now", description: "The current time, ISO 8601", execute: () => new Date().toISOString() }],
    },
  },
  tool_visibility: {
    summary:
      "Hide tools from the model for this turn (as if `hidden`): by category and by name, except those in `keep`. A tool output's `reveal` shows them again for the rest of the turn; a hidden tool the model calls by name still runs unless a tool.pre_call decision denies it.",
    fields: {
      hide: '`{ categories?: ("exec" | "mcp" | "info" | "edit")[], names?: string[] }`',
      keep: "names never hidden by this contribution",
      reason: "why, recorded in the log (e.g. `plan mode: information tools only`)",
    },
    example: {
      kind: "tool_visibility",
      hide: { categories: ["exec", "edit"] },
      keep: ["exit_plan_mode"],
      reason: "plan mode: information tools only",
    },
  },
  message_edit: {
    summary:
      "Rewrite the history sent this round (compaction, masking). May not empty it, drop this turn's user message or end on an assistant message; tool pairs are repaired after every edit.",
    fields: {
      reason: "why, recorded in the log",
      edits:
        '`{ op: "replace", start, end, messages }` (indices into event.messages) or `{ op: "mask_tool_result", toolCallId, text }`',
    },
    example: {
      kind: "message_edit",
      reason: "mask an old directory listing",
      edits: [{ op: "mask_tool_result", toolCallId: "call_1", text: "[listing of 240 files, masked]" }],
    },
  },
  request_options: {
    summary: "Options for this round's provider request; merged by priority, a lower one winning each field.",
    fields: {
      priority: "lower wins a conflict",
      options:
        "maxTokens, temperature (0-2), toolChoice (auto, none, required), cache (none, 5m, 1h), metadata (strings), extra (provider-specific), route ({ model, reason }: this round goes to that pool member, round.pre_request only; the kernel records it on the manifest and the provider never sees it)",
    },
    example: { kind: "request_options", options: { cache: "1h", maxTokens: 2048 } },
  },
  tool_decision: {
    summary:
      "Allow, ask about or deny one tool call (tool.pre_call). Deny always wins; ask goes to the host's approval.",
    fields: {
      decision: "allow, ask or deny",
      reason: "shown to the model on a denial, and logged",
      args: "rewritten arguments (JSON) the tool runs with instead; checked against the tool's schema at once (defaults filled), a rewrite that does not fit is refused (`KEEL_TOOL_ARGS_INVALID`, naming the plugin)",
      result:
        "answer the call without running the tool (a cache, a dry run, a replay): { content, isError?, reveal? } (reveal: hidden tools to show, as the tool's output would); used only when the call is allowed or approved, the first plugin's answer wins",
    },
    example: { kind: "tool_decision", decision: "deny", reason: "rm -rf is never allowed here" },
  },
  tool_result_rewrite: {
    summary:
      "Replace a tool's result before it enters history (compress, redact); the kernel's size cap applies after it.",
    fields: {
      content: "the new text, or text and image blocks",
      isError: "mark the result as an error",
      reason: "why, recorded in the log and in the result's rewrittenBy",
    },
    example: {
      kind: "tool_result_rewrite",
      content: "3 failing tests: test_login, test_logout, test_refresh",
      reason: "digest of a 4,000-line test log",
    },
  },
  diagnostic: {
    summary:
      "Something for the operator's log (and the CLI's stderr at warn and error). Under `keel --strict` a warn or error fails the command.",
    fields: {
      level: "info, warn or error",
      code: "a stable code of yours (`ACME_INDEX_STALE`)",
      message: "what happened and what to do",
      data: "structured detail; must be JSON",
    },
    example: {
      kind: "diagnostic",
      level: "warn",
      code: "ACME_INDEX_STALE",
      message: "The docs index is 9 days old; run `acme index` to refresh it.",
    },
  },
  background_job: {
    summary:
      "Work that runs after the turn (extraction, indexing), once per idempotency key per session; a durable one is recorded before it runs and re-run after a crash.",
    fields: {
      idempotencyKey: "one run per key per session: key it by turnId",
      name: "the job's name (a durable job runs the runner registered under it with ctx.registerJob)",
      run: "the work: (signal) => unknown (required unless durable)",
      durable: "must not be lost: pending in the log before it runs, re-run on resume or the next start",
      payload: "a durable job's input, persisted as JSON: references, never content or secrets (4,096 chars)",
      timeoutMs: "deadline of one attempt",
      attempts: "runs in all, 1-5 (default 1; durable 3, counted across restarts)",
      retryDelayMs: "wait before a retry, times the attempt number",
    },
    example: {
      kind: "background_job",
      name: "extract",
      idempotencyKey: "extract:turn_7",
      durable: true,
      payload: { turnId: "turn_7" },
    },
  },
  stop: {
    summary: "End the turn now (verdict `stopped`, reason `plugin_stop`); pending tool calls get skipped results.",
    fields: { reason: "why, shown in the verdict and the log" },
    example: { kind: "stop", reason: "the budget for this user is used up" },
  },
  answer: {
    summary:
      "Answer this round without asking the model: the assistant message holds `text` and `calls` (tool calls run as the model's would: decisions, approvals, results). The first answer of a round wins; recorded as `round.answered`. Calls are ignored (the model is asked) in a final round or chat mode.",
    fields: {
      reason: "why, recorded in `round.answered`",
      text: "the answer's text (ends the turn when there are no calls)",
      calls: "tool calls `{ name, args }`, at most 64; ids are derived from the turn, round and position",
    },
    example: {
      kind: "answer",
      reason: "workflow deploy-service, step 1 of 3",
      calls: [{ name: "deploy", args: { service: "api" } }],
    },
  },
};

/** Fields every turn event carries. Contract: exactly TurnEventBase's fields. */
export const TURN_EVENT_FIELDS: { [F in keyof TurnEventBase]-?: string } = {
  sessionId: "the session's id",
  turnId: "this turn's id (key background jobs by it)",
  input: "the user's text for this turn (the text parts, when run() was given content blocks)",
  content: "the input's content blocks (text and images) when run() was given blocks; absent for a string",
  trigger:
    "user, follow_up (a queued follow-up), resume (a paused turn continues after approval) or subagent (a child session's turn, started by a tool through ToolContext.child)",
  mode: "agent (tools are materialised and sent) or chat (no tools: the session is a direct conversation; session.setMode switches it between turns)",
  history: "the messages before this turn (frozen)",
  policies: "policies merged so far: get(domain, key)",
  metadata: "what the host passed to run(input, { metadata }), e.g. a user id for namespacing",
};

type OwnFields<P extends PhaseName> = Exclude<keyof PhaseEvents[P], keyof TurnEventBase>;

/** Each phase's own event fields (beyond TURN_EVENT_FIELDS). Contract: exactly PhaseEvents' fields. */
export const PHASE_EVENT_FIELDS: { [P in PhaseName]: { [F in OwnFields<P>]-?: string } } = {
  "session.start": { agent: "the agent's name", resumed: "true when an existing session was opened" },
  "turn.pre_policy": {},
  "turn.pre_prompt_context": {},
  "turn.pre_tool_materialization": { tools: "names of the tools offered so far (built-in and earlier bundles)" },
  "turn.post_preflight_prompt_context": {
    context: "the prompt context merged so far, with its plugins",
    preflight: "when the preflight ran: status, its plan, and the hidden tools it revealed",
  },
  "turn.pre_prompt_compile": {
    context: "the merged prompt context",
    tools: "names the model will see",
    hiddenTools: "callable but not advertised (yet)",
  },
  "turn.post_prompt_compile": {
    system: "the compiled system prompt",
    manifest: "who contributed each part (sections, context, tools)",
  },
  "round.pre_request": {
    round: "the round's number, from 1",
    messages: "the history this request would send",
    tokenEstimate: "its token count (exact near the window's ceiling, chars/4 far below it)",
    tokenCount: "the same by part: system, tools, messages; exact: false for estimates",
    contextWindow: "the provider's window in tokens, when known",
    options: "the request options merged so far",
    retry: '{ reason: "context_too_long" } when the provider refused the previous attempt',
    routing:
      "with a pool only: its members (name, id, tags, price, window), the default model, the request's shape (tokens, tools, images, mode) and the budget left; route with request_options.options.route",
    final: "set in the final round a guard gave: no tools, so an answer may hold text only",
  },
  "round.post_response": {
    round: "the round's number",
    response: "the assistant message",
    stopReason: "why the model stopped",
    usage: "tokens of this response",
  },
  "tool.pre_call": {
    round: "the round's number",
    call: "the call: id, name, args (as the tool's schema reads them: defaults filled, coercions done; a rewrite is read the same way at once), category, source",
  },
  "tool.post_result": {
    round: "the round's number",
    call: "the call",
    result: "the tool message about to enter history",
    durationMs: "how long the tool ran",
    approvedByUser: "true when a person approved it (ask)",
  },
  "turn.post_turn": {
    verdict: "how the turn ended: status and reason",
    usage: "the turn's token usage",
    messages: "the turn's new messages",
    finalText: "the answer's text",
  },
  "session.end": { agent: "the agent's name" },
};

/** A contribution kind's input as JSON Schema, for docs and editors. Contract: functions and custom checks show as `{}`. */
export function contributionJsonSchema(kind: ContributionKind): Record<string, unknown> {
  return z.toJSONSchema(CONTRIBUTION_SCHEMAS[kind], { unrepresentable: "any", io: "input" }) as Record<string, unknown>;
}
