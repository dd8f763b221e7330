import { codePointLength, droppedMarker, headOf, toWellFormed } from "./text.ts";

/**
 * The one table of Keel's error codes. Every error and diagnostic the kernel raises comes
 * from here, so a code always means the same thing and always says what to do.
 */
export const ERROR_CODES = {
  // Registration: raised by createAgent before the first turn.
  KEEL_PLUGIN_INVALID:
    "The plugin definition is malformed. Give it a non-empty `name`, a `version` and a `setup(ctx)` function (use definePlugin).",
  KEEL_PLUGIN_DUPLICATE:
    "Two plugins share a name. Remove one of them from the plugins list, or give a copy its own name.",
  KEEL_PLUGIN_OPTIONS_INVALID:
    "The plugin's options do not match its options schema. Fix the option at the path shown.",
  KEEL_PLUGIN_SETUP_FAILED: "The plugin's setup(ctx) threw. Fix the plugin or remove it from the plugins list.",
  KEEL_PLUGIN_SETUP_TIMEOUT:
    "The plugin's setup(ctx) did not settle within the setup deadline. Fix the plugin (a setup must not wait on anything unbounded), or raise `setupTimeoutMs`.",
  KEEL_KERNEL_RANGE_UNSUPPORTED:
    "The plugin does not support this kernel version. Upgrade the plugin, or use a kernel inside its `kernel` range.",
  KEEL_DEPENDENCY_MISSING:
    "A plugin depends on a plugin that is not in the plugins list. Add the dependency to the list.",
  KEEL_DEPENDENCY_VERSION:
    "A dependency is present but its version is outside the required range. Install a matching version.",
  KEEL_DEPENDENCY_CYCLE:
    "Plugins or subscriptions depend on each other in a cycle. Remove one of the dependencies or `after`/`before` edges named.",
  KEEL_PHASE_UNKNOWN: "The subscription names a phase that does not exist. Use one of the phases listed in PHASES.",
  KEEL_SUBSCRIPTION_DUPLICATE:
    "A plugin subscribed twice to the same phase with the same id. Give each subscription a distinct `id`.",
  KEEL_SUBSCRIPTION_INVALID: "The subscription's options are invalid. Fix the option named.",
  KEEL_ORDER_UNKNOWN_PLUGIN:
    "`after`/`before` names a plugin that is not registered. Fix the name, or only add the edge when ctx.hasPlugin(name) is true.",
  KEEL_ORDER_AFTER_FINAL:
    "A subscription would run after a `final` one (through `after` or `before`). Final handlers decide on what every other handler passed on, so nothing outside the final stage may follow them: drop the edge, or subscribe at stage `post`.",
  KEEL_FINAL_REWRITE:
    "A handler at stage `final` changed what its phase passes on (tool arguments, messages); final handlers only decide, so the change was not applied. Rewrite at stage `post` instead.",
  KEEL_FALLBACK_EMPTY: "A subscription with failure policy `fallback` must declare at least one fallback contribution.",
  KEEL_REGISTRY_FROZEN: "Subscriptions can only be added during setup(ctx). Move the ctx.on(...) call into setup.",
  KEEL_TOOL_DUPLICATE: "Two tools share a name. Rename one; built-in tools always win over plugin tools.",
  KEEL_TOOL_INVALID:
    "The tool definition is malformed. Give it a name matching ^[a-zA-Z0-9_-]{1,64}$, a description and an execute function.",
  KEEL_AGENT_CLOSED: "The agent or session is closed. Create a new agent (or open the session again) to go on.",
  KEEL_AGENT_OPTIONS_INVALID:
    "createAgent() (or run(), for its per-turn options) was given an invalid option. Fix the option at the path shown.",
  KEEL_CHILD_INVALID:
    "A tool asked for a child session with invalid options (ToolContext.child). Fix the options named; the child agent's options are createAgent's.",
  KEEL_CHILD_BUDGET:
    "The parent turn has no budget left for a child session (rounds, tool calls, tokens, wall time or dollars; what its running children hold counts as spent until they end). Raise the parent's limits, give each child a smaller limits.maxCostUsd or tokenBudget, or run the child after its siblings end.",
  KEEL_MODE_INVALID:
    'A session mode must be "agent" (tools) or "chat" (no tools), and can change only between turns, not while a turn runs or waits for approval. Switch after the turn ends (answer and resume a paused one first).',
  KEEL_OBSERVER_FAILED:
    "An observer (tracing, metrics) threw while attaching, detaching or reading an event; the agent runs on without it. Fix the observer named, or remove it from `observers`.",
  // Turn time: recorded as diagnostics, or the verdict of a failed turn.
  KEEL_HANDLER_THREW:
    "A plugin handler threw. The failure policy decided what happened next; fix the plugin (its name and phase are given).",
  KEEL_HANDLER_TIMEOUT:
    "A plugin handler did not finish before its deadline and was aborted. Make it faster or raise its `timeoutMs`.",
  KEEL_CONTRIBUTION_INVALID:
    "A plugin returned a contribution that fails validation and was rejected. Fix the field at the path shown.",
  KEEL_CONTRIBUTION_NOT_ACCEPTED:
    "A plugin returned a contribution kind this phase does not accept. See the phase's `accepts` list.",
  KEEL_CONTRIBUTION_LATE:
    "A background handler's contribution arrived after its phase closed. Only diagnostics and background jobs are taken late.",
  KEEL_MERGE_CONFLICT:
    "Two contributions conflict at equal priority; the first was kept. Give one of them a higher priority.",
  KEEL_MERGE_CAPPED:
    "Contributions exceeded a cap (entries or characters) and were truncated or omitted. Lower what the plugin contributes or raise its priority.",
  KEEL_PHASE_FAILED:
    "A required or fail-closed subscription failed, so the phase failed and the turn stopped. Fix the plugin named or relax its failure policy.",
  KEEL_TOOL_UNKNOWN: "The model called a tool that is not available this turn.",
  KEEL_TOOL_ARGS_INVALID: "The model called a tool with arguments that fail its input schema.",
  KEEL_TOOL_TIMEOUT:
    "The tool did not finish before its timeout and was aborted. Raise the tool's or its category's timeout if it needs longer.",
  KEEL_TOOL_DENIED: "The tool call was denied by a plugin decision or by the approval callback.",
  KEEL_TOOL_FAILED: "The tool threw an error; the error text was returned to the model.",
  KEEL_TOOL_SKIPPED:
    "The tool call was not run (queued user message, stop request, cancellation or final round); a synthetic result was returned.",
  KEEL_PROVIDER_ERROR:
    "The model provider failed. See the error class: retry later (rate_limited, overloaded, network, timeout: raise the model's idleTimeoutMs/firstByteTimeoutMs if it is just slow), fix credentials (auth) or the request (invalid_request, context_too_long).",
  KEEL_GUARD_TRIPPED:
    "A loop guard (rounds, tool calls, tokens, wall time, context ceiling) ran out; the model got one final round without tools (wall time instead cuts what runs and ends the turn). Raise the limit in `limits` if the task needs it.",
  KEEL_CONTEXT_OVERFLOW:
    "The request, after the guards and any compaction, counts more tokens than the model's context window, so it was not sent; the user's message is stored. Shorten the message or split the input, add the compaction plugin, use a model with a larger window, or start a new session.",
  KEEL_BUDGET_EXCEEDED:
    "A request would pass a spending limit (limits.maxCostUsd for the turn, maxSessionCostUsd or maxSessionTokens for the session), so it was not sent and the turn stopped with reason `budget`. Raise the limit, route to a cheaper model (@keel/plugin-router), or start a new session.",
  KEEL_ROUTE_UNKNOWN:
    "A plugin routed a round to a model that is not in the pool (config `models`, AgentOptions.pool); the default model served it. Use one of the pool's names, or add the model to the pool.",
  KEEL_ROUTE_UNFIT:
    "A plugin routed a round to a pool member whose context window cannot take the request (past its context ceiling), so the route was dropped and the default model served it. Route to a member with a larger window (@keel/plugin-router checks windows), or compact the context.",
  KEEL_TURN_ABORTED: "The turn was cancelled through its AbortSignal.",
  KEEL_TURN_STOPPED:
    "A plugin stopped the turn (a `stop` contribution, with the reason shown); the model was not asked again. Nothing to fix unless the plugin named should not stop turns: then change its options or remove it.",
  KEEL_TURN_INTERRUPTED:
    'The process running the turn stopped before the turn finished, and nothing continued it (recovery is off, or its parent turn ended), so it ended interrupted. Send the message again; with `recovery: "auto"` and a worker such turns are continued.',
  KEEL_INPUT_INVALID:
    "run() takes the user's message as a string or a non-empty array of content blocks (text, image, PDF file). Pass text or blocks; put other structured data in `metadata`.",
  KEEL_APPROVAL_PENDING:
    "The session's last turn is paused, waiting for approval of tool calls. Answer each pending call with session.approve(callId) or session.deny(callId) (list them with session.pendingApprovals()), then call session.resume(); in the CLI, run the session again on a terminal to be asked.",
  KEEL_APPROVAL_UNKNOWN:
    "No pending approval has that call id in this session (it was never asked, or its turn already resumed). List what is pending with session.pendingApprovals().",
  KEEL_APPROVAL_ARGS_REDACTED:
    "An approved call's arguments held a secret, and secrets are never stored, so the call could not run as approved after the session was reloaded; the model was told so and can call again. Keep secrets out of tool arguments (pass a reference the tool resolves), or answer the approval in the process that asked.",
  KEEL_NOT_PAUSED:
    "resume() was called but no turn of this session is paused for approval. Start a new turn with run().",
  KEEL_REPLAY_EMPTY:
    "The session holds no turn to replay. Pick a session that ran at least one turn (keel sessions lists them).",
  KEEL_REPLAY_NO_ANSWER:
    "The replay asked the model more often than the recording did, so there is no recorded answer to serve: today's plugins changed the course of the turn. The report shows the first request that differs.",
  KEEL_ANSWER_IGNORED:
    "A plugin answered a round with tool calls where no tools may be called (a final round after a guard, or chat mode), so the model was asked instead. Answer such rounds with text only, or leave them to the model.",
  KEEL_NOT_UNFINISHED:
    "recover() was called but the session has no turn a stopped process left unfinished (it ended, or another instance finished it). Start a new turn with run().",
  KEEL_TURN_HANDED_BACK:
    "The turn was given back unfinished (its worker was stopping): it stays open in the log, and the next worker or recover() continues it. Nothing to do.",
  KEEL_OUTPUT_INVALID:
    "The model's final answer did not match the requested output schema, also after one corrective retry. Loosen the schema, describe the fields better in the instructions, or use a stronger model.",
  KEEL_OUTPUT_SCHEMA_INVALID:
    "run()'s `output` must be a zod object schema (z.object({...})) that converts to JSON Schema. Wrap an array or a scalar answer in an object field, and avoid transforms the model cannot see.",
  KEEL_STREAM_CONSUMED:
    "A turn stream can be iterated once. Keep the events you need, or start the stream again with a new turn.",
  KEEL_STREAM_POSITION_INVALID:
    "A rejoin position (SSE Last-Event-ID, or `after`) must be an id the session's stream sent: a stored event's seq like `41`, or `41.7` for a live event after it. Send the last id the client received, or none to follow the session's latest turn from its start.",
  KEEL_TURN_BUSY:
    "A turn is already running in this session. Queue the message with steer() or followUp(), or wait for the turn to end.",
  KEEL_SESSION_NOT_FOUND: "No session has that id in this store. List sessions to find the id, or start a new session.",
  KEEL_STORE_FAILED:
    "The session store could not be opened or written. Check that KEEL_HOME is writable and the disk has room, or, on PostgreSQL, that the server in KEEL_DATABASE_URL (or the config's `store`) is up and reachable.",
  KEEL_JOB_RUNNER_MISSING:
    "A durable background job names no job runner of its plugin, so it was not recorded or run. Register the runner in setup with ctx.registerJob(name, runner) under the job's `name`.",
  KEEL_JOB_PAYLOAD_INVALID:
    "A durable background job's payload is not small JSON (at most 4,096 chars), so the job was not recorded or run. Persist references (ids), not content: the runner reads the turn from the session log.",
  KEEL_JOB_FAILED:
    "A durable background job failed on every attempt it was allowed (attempts count across restarts) and will not be run again. See the error attached; fix the plugin named, then redo its work by hand if needed.",
  KEEL_JOB_PENDING:
    "Background work was cut short (the close grace ran out or the process ended) and is recorded as pending in the session log. It re-runs when the session is resumed or at the next agent start; nothing to do.",
  KEEL_OUTPUT_UNREADABLE:
    "A value returned by plugin or tool code could not be read (a getter or Proxy trap threw, a cycle, a bigint or symbol, or far too large). A tool gets an error result; a contribution is rejected. Return plain data from the plugin or tool named.",
  KEEL_PROCESS_FAULT:
    "An uncaught exception or unhandled rejection escaped plugin or tool code (e.g. from a timer) while a turn was open; the fault was recorded and the turn closed with a failed verdict. Fix the plugin named (or catch errors in its timers and callbacks).",
  KEEL_SESSION_BUSY:
    "Another process (or agent) holds this session's lease: it is running a turn in it (or writing an answer) now. Retry once that turn has ended, pass --wait (CLI) or `waitMs` to agent.session() to wait for it, or start a new session; reading the session needs no lease. A crashed holder's lease is freed when its process is gone (same host) or its TTL runs out.",
  KEEL_STORE_READ_ONLY:
    "A database file, its folder or its file system is read-only, so nothing can be written. Sessions can still be viewed (keel sessions list/show); to run, make KEEL_HOME writable or point KEEL_HOME (or `home`) at a writable folder.",
  KEEL_STORE_CORRUPT:
    "A database file is malformed (it fails SQLite's quick check or is not a database), so Keel refuses to write into it. Move the file named aside (or restore it from a backup) and run again; viewing may still work where SQLite can read it.",
  KEEL_SCRIPT_INVALID: "The provider script does not match its schema. Fix the step at the path shown.",
  KEEL_SCRIPT_EXHAUSTED: "The scripted provider has no model turn left for this request. Add a step to the script.",
  KEEL_PROVIDER_KEY_MISSING:
    "No API key for this provider. Set the environment variable named in the message (ANTHROPIC_API_KEY or OPENAI_API_KEY) or pass `apiKey`.",
  KEEL_PROVIDER_SPEC_INVALID:
    "The model spec is not understood. Write `anthropic:<model>`, `openai:<model>` or `openai-compatible:<model>`.",
  KEEL_PROVIDER_BASE_URL_MISSING:
    "An OpenAI-compatible server needs its URL. Pass `baseURL` or set OPENAI_BASE_URL (e.g. http://localhost:11434/v1 for Ollama).",
  KEEL_PROVIDER_OPTIONS_INVALID: "A provider adapter was given an invalid option. Fix the option named.",
  KEEL_PROVIDER_MODEL_UNSUPPORTED:
    'The object given as an AI SDK model is not a language model Keel can call (aiSdkModel takes specification v3 or v4). Pass a language model of a current @ai-sdk/* provider, e.g. openai("gpt-4o"), upgrading an older provider package.',
  KEEL_PROVIDER_SDK_MISSING:
    "The model's SDK is not installed: @keel/providers leaves it to the project (an optional peer dependency), so a project installs only the SDK it uses. Install the package named where the project's package.json is (`npm install @anthropic-ai/sdk` for anthropic:<model>, `npm install openai` for openai: and openai-compatible:), or use an AI SDK model (@keel/ai-sdk).",
  // Providers (@keel/providers). Add codes above this line.
  KEEL_CONFIG_NOT_FOUND:
    "No agent config was found. Create agent.config.ts (or .js/.mjs/.json, or a `keel` field in package.json) here or in a parent folder, or pass --config PATH.",
  KEEL_CONFIG_LOAD_FAILED:
    "The config file could not be loaded (syntax error, failed import, or it threw). Fix the file at the location shown.",
  KEEL_CONFIG_INVALID:
    "The config does not match its schema. Fix the field at the path shown (see agent.config.schema.json).",
  KEEL_PLUGIN_NOT_FOUND:
    "A plugin named by package in the config could not be imported. Install the package, or fix its name.",
  KEEL_MODEL_UNAVAILABLE:
    "The model named in the config cannot be used. Use anthropic:<model>, openai:<model> or openai-compatible:<model>, and set its API key or base URL.",
  KEEL_CLI_USAGE: "The command line is not valid. Run `keel --help` for the commands and their options.",
  KEEL_SERVE_TOKEN_REQUIRED:
    "keel serve was asked to listen beyond this machine without a bearer token, or with a token too short to resist guessing. Pass --token (or set KEEL_SERVE_TOKEN) with at least 16 random characters, or bind 127.0.0.1.",
  KEEL_PACKAGE_MISSING:
    "A feature in use needs a package Keel leaves to the project (an optional peer dependency: @modelcontextprotocol/sdk for MCP servers and clients, @a2a-js/sdk for an A2A endpoint, ai for @keel/ui-stream's useChat handler, @ag-ui/core and @ag-ui/encoder for its AG-UI handler), and it is not installed. Run the install command in the message where the project's package.json is.",
  KEEL_INIT_REFUSED:
    "keel init would overwrite files that exist, or was given a name npm would refuse. Choose an empty folder (or pass --force to overwrite the files listed), or a valid package name (lowercase, no spaces, optionally @scope/name).",
  KEEL_STRICT_FAILED:
    "Strict mode (--strict or KEEL_STRICT=1) counts every warning or error a plugin caused during the command (a rejected contribution, a handler that threw or timed out, a plugin's own warning) as a failure. Fix each problem listed, at the plugin and phase named.",
  KEEL_CONFIG_READ_FAILED:
    "Reading a value of the config threw (a getter, a Proxy, or a property of a plugin or provider object). Fix the code behind the value at the path shown; a config should export plain values.",
  KEEL_CONFIG_LOAD_TIMEOUT:
    "The config file (or a module it imports) did not finish loading in time: a top-level await that never settles, or a file that cannot be read. Fix the file shown, or raise KEEL_CONFIG_TIMEOUT_MS (milliseconds, default 10000).",
  KEEL_HOME_INVALID:
    "The Keel home (KEEL_HOME, --home or the config's `home`) is not a usable folder: it or one of its parents is a file, or it is in /proc, /sys or /dev. Point it at a folder on a disk; it is created if missing.",
  // Config and CLI (@keel/cli). Add codes above this line.
  KEEL_MEMORY_STORE_FAILED:
    "The memory store could not be opened, read or written. Check that the memory `path` (default <KEEL_HOME>/memory.sqlite) is writable and not corrupt, or, on PostgreSQL, that the server in KEEL_DATABASE_URL is reachable.",
  KEEL_MEMORY_INPUT_INVALID:
    "A memory write was rejected: content must be non-empty text and importance/confidence numbers in [0, 1]. Fix the value named.",
  KEEL_MEMORY_SECRET_REDACTED:
    "Secret-like text (a key, token, password or private key) was redacted before the memory was stored. Keep secrets in a secret manager, not in memory.",
  KEEL_MEMORY_SECRET_REJECTED:
    "The memory consisted of a secret and was not stored. Keep secrets in a secret manager, not in memory.",
  KEEL_MEMORY_NOT_FOUND: "No active memory has that id in this namespace. List or search memories to find the id.",
  KEEL_MEMORY_RECALL_FAILED:
    "Memory recall failed, so this turn runs without recalled memories. Check the memory store named in the message.",
  KEEL_MEMORY_MODEL_FALLBACK:
    "The model call for memory (active recall or extraction) failed or timed out; the deterministic path was used instead. Check the side model, or set the option to deterministic.",
  KEEL_MEMORY_EXTRACT_FAILED:
    "Extracting facts from the turn failed; nothing was stored for it and a retry of the job may store them. Check the memory store named in the message.",
  // Memory (@keel/plugin-memory). Add codes above this line.
  KEEL_SKILL_INVALID:
    "A SKILL.md is malformed and was skipped. Fix the file at the line shown: it must start with YAML frontmatter between `---` lines holding `name` and `description`.",
  KEEL_SKILL_DUPLICATE: "Two SKILL.md files declare the same skill name; the first found was kept. Rename one of them.",
  KEEL_SKILL_DIR_UNREADABLE:
    "A skills folder could not be listed and was skipped. Check that it exists and is readable, or remove it from `dirs`.",
  KEEL_SKILL_UNKNOWN:
    "`@@skill=<name>` names no loaded skill, so the router picked instead. Use a name from the skills listing.",
  KEEL_SKILL_STORE_FAILED:
    "The skills database could not be opened or written; learning is kept in memory for now. Check that KEEL_HOME (or the `db` option) is writable, or, on PostgreSQL, that the server in KEEL_DATABASE_URL is reachable.",
  KEEL_SKILL_DRAFT_FAILED:
    "Writing an auto-drafted skill failed; nothing partial was left and a later success on the same signature retries. Check that <KEEL_HOME>/skills/auto is writable.",
  KEEL_SKILL_NAME_NORMALIZED:
    "A SKILL.md `name` is not kebab-case (it has spaces, capitals or other characters); the skill was loaded under the normalised name shown. Set that name in the frontmatter.",
  KEEL_SKILL_DESCRIPTION_CUT:
    "A SKILL.md `description` is longer than 1,024 characters; it was cut to 1,024 (by code points) and the skill loaded. Shorten it and move details into the body.",
  // Skills (@keel/plugin-skills). Add codes above this line.
  KEEL_MCP_SERVER_START_FAILED:
    "An MCP server did not start or did not finish its handshake in time; the agent goes on without it. Check its `command`/`url`, `args` and `env` (the stderr tail is attached), or raise `connectTimeoutMs`.",
  KEEL_MCP_SERVER_CRASHED:
    "An MCP server exited or dropped its connection during a call; that call got an error result and the server is restarted with backoff. See the server's stderr tail.",
  KEEL_MCP_SERVER_UNAVAILABLE:
    "The MCP server is not connected (it failed to start, was still starting when the wait ended, is restarting, or gave up after its restarts). Try again shortly (a server still starting joins the tool list at a later turn), or fix the server and start a new session.",
  KEEL_MCP_CALL_TIMEOUT:
    "The MCP tool call ran past its timeout and was cancelled through MCP (notifications/cancelled). Raise the server's `timeoutMs` if the tool needs longer.",
  KEEL_MCP_CALL_FAILED:
    "The MCP server answered the call with an error of its own (an internal error, not a complaint about the arguments); its message is attached. Retry once if it looks transient, else try another tool or tell the user the tool is failing.",
  KEEL_MCP_CALL_REJECTED:
    "The MCP server refused the call as invalid (arguments that do not fit the tool's input schema, or a tool or method it does not know); its message is attached. Fix the arguments to match the tool's schema; for a tool the server does not know, pick another listed tool or call `tool_search`.",
  KEEL_MCP_UPSTREAM_UNREACHABLE:
    "The MCP server could not reach the service behind the tool (DNS, refused or reset connection, TLS or timeout); the arguments are not the cause. Retry later or use another tool, and tell the user the service is unreachable from the server's network (check its proxy settings: the server's `env` or `inheritEnv`).",
  KEEL_MCP_AUDIT_FAILED:
    "The MCP audit log could not be opened or written; calls go on unaudited and recent use is not ranked. Make the `auditPath` (default <KEEL_HOME>/mcp-audit.sqlite) writable, or, on PostgreSQL, check that the server in KEEL_DATABASE_URL is reachable.",
  // MCP (@keel/plugin-mcp). Add codes above this line.
  KEEL_COMPACTION_MODEL_FAILED:
    "The compaction model call (tool-output digest, turn summary or subgoal extraction) failed or timed out; a deterministic reduction was used instead. Check the plugin's `model` option or the agent's side model.",
  KEEL_COMPACTION_STORE_FAILED:
    "The compaction store (SQLite) could not be opened or written; raw outputs are kept in memory for this process only. Make the `path` option (default <KEEL_HOME>/compaction.sqlite) writable.",
  KEEL_COMPACTION_EXHAUSTED:
    "Compaction can no longer shrink the context (a summary was no smaller than what it replaced, or nothing is left to compact); hard compaction pauses until the context shrinks. Start a new session or use a model with a larger window.",
  KEEL_COMPACTION_NOT_FOUND:
    "context_retrieve got an id that is not in the compaction store. Use the id printed in the compacted output's header line.",
  // Compaction (@keel/plugin-compaction). Add codes above this line.
  KEEL_EVAL_DATASET_INVALID:
    "An eval dataset (JSONL or YAML) or a case in it is malformed; nothing was run. Fix the field at the file and line shown: each case needs an `input` (a string or a list of turns), a unique `id`, and `expect` may only hold known scorers (exact, contains, notContains, regex, jsonSchema, toolCalled, limits, judge) with valid values.",
  KEEL_EVAL_CONFIG_INVALID:
    "An eval file (*.eval.ts) must export default defineEval({ dataset, scorers?, concurrency?, name?, tools? }); it did not load or does not match. Fix the field named.",
  KEEL_EVAL_EXPERIMENT_NOT_FOUND:
    "No experiment has that id or name in this store. `keel eval list` shows them; `--baseline latest` picks the most recent finished one of this agent.",
  KEEL_EVAL_RESUME_MISMATCH:
    "The experiment cannot be resumed with this dataset: its cases changed since the run started (the dataset hash differs), or it already finished. Resume with the dataset it ran, or start a new experiment.",
  KEEL_EVAL_TOOL_NOT_RUN:
    'An eval did not run this tool call: the tool is not declared read-only and the case has no fixture for it (the default, tools: "fixtures"), the case\'s recording holds no result for it (tools: "recorded"), or it already started in an interrupted attempt of the case (a resumed run never repeats a side effect). Add tools: { NAME: { result: … } } to the case, declare a read-only tool `category: "info"` or `repeatable: true`, or run with --tools live.',
  KEEL_EVAL_UNFINISHED:
    "Code run by keel eval (a scorer, the eval file, a plugin or a tool) called process.exit while the cases ran, or the process was ending before every case was scored (nothing left to wait on). Inside the run the call is refused: it throws this error, so a scorer that makes it fails its case under its name. An exit that still happens ends keel eval with exit code 1 and no report, the experiment left running: fix the code named, then continue with the --resume command shown.",
  // Evals (@keel/eval). Add codes above this line.
} as const;

Object.freeze(ERROR_CODES);

/** A code from Keel's error table. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Where an error happened. Contract: every field is optional; present fields are exact. */
export interface ErrorLocation {
  plugin?: string;
  phase?: string;
  subscription?: string;
  tool?: string;
  path?: string;
}

/**
 * What every copy of the kernel marks its KeelError with (a registered symbol, the same in every
 * copy): an application bundled with the kernel inside it loads stores from node_modules, whose
 * errors come from another copy, and must still tell a KEEL_SESSION_BUSY from a crash.
 */
const KEEL_ERROR: unique symbol = Symbol.for("keel.KeelError") as never;

/**
 * An error raised by Keel.
 * Contract: `code` is a key of ERROR_CODES; `message` is the specific problem followed by
 * the code's instruction; `plugin` and `phase` name the culprit when one is known. No
 * connection credential is kept: the problem, the path and a cause's message pass through
 * `maskCredentials` (a driver error or a URL quoted in a message shows `password=***`).
 * `instanceof KeelError` (and isKeelError) holds for a KeelError of any copy of the kernel in
 * the process.
 */
export class KeelError extends Error {
  readonly code: ErrorCode;
  readonly plugin: string | undefined;
  readonly phase: string | undefined;
  readonly location: ErrorLocation;
  readonly details: unknown;
  /** The specific problem, without the code, location and the table's advice. */
  readonly problem: string;

  constructor(
    code: ErrorCode,
    problem: string,
    location: ErrorLocation = {},
    options: { cause?: unknown; details?: unknown } = {},
  ) {
    problem = maskCredentials(problem);
    if (location.path) location = { ...location, path: maskCredentials(location.path) };
    super(
      formatMessage(code, problem, location),
      options.cause === undefined ? undefined : { cause: maskedCause(options.cause) },
    );
    this.name = "KeelError";
    this.code = code;
    this.plugin = location.plugin;
    this.phase = location.phase;
    this.location = location;
    this.details = options.details;
    this.problem = problem;
  }
}

Object.defineProperty(KeelError.prototype, KEEL_ERROR, { value: true });
// Defined outside the class body: a static member naming the class makes bundlers rename it (`_KeelError`).
Object.defineProperty(KeelError, Symbol.hasInstance, {
  value(this: unknown, value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    if (this !== KeelError || typeof value !== "object" || value === null) return false;
    // Another copy's: marked by the same registered symbol. A Proxy whose `has` trap throws is no KeelError.
    try {
      return KEEL_ERROR in value;
    } catch {
      return false;
    }
  },
});

/** `cause` as it may be kept: an Error whose message holds a credential becomes a copy with it masked (name and code kept). */
function maskedCause(cause: unknown): unknown {
  try {
    if (typeof cause === "string") return maskCredentials(cause);
    if (!(cause instanceof Error) || cause instanceof KeelError) return cause;
    const message = maskCredentials(String(cause.message));
    if (message === cause.message) return cause;
    const copy = new Error(message);
    copy.name = cause.name;
    const code = (cause as { code?: unknown }).code;
    if (code !== undefined) Object.assign(copy, { code });
    return copy;
  } catch {
    return cause;
  }
}

function formatMessage(code: ErrorCode, problem: string, loc: ErrorLocation): string {
  const where: string[] = [];
  if (loc.plugin) where.push(`plugin "${loc.plugin}"`);
  if (loc.phase) where.push(`phase "${loc.phase}"`);
  if (loc.tool) where.push(`tool "${loc.tool}"`);
  if (loc.path) where.push(`at ${loc.path}`);
  const prefix = where.length ? ` (${where.join(", ")})` : "";
  return `${code}${prefix}: ${oneStop(problem)} ${ERROR_CODES[code]}`;
}

/**
 * `text` with every full stop doubled at a word's end made one: a reason or an error message
 * that ends with its own period, interpolated before the problem's (`denied: ${reason}.`), reads
 * "Not now." rather than "Not now..". An ellipsis (`...`) and `..` in a path (`../x`, `cd ..`)
 * are left as they are. Contract: never throws.
 */
export function oneStop(text: string): string {
  return text.replace(/(?<=[^.\s/\\])\.\.(?=[\s)"'\]]|$)/g, ".");
}

/** True when `err` is a KeelError, optionally with the given code. Contract: never throws (a thrown Proxy is not one). */
export function isKeelError(err: unknown, code?: ErrorCode): err is KeelError {
  try {
    return err instanceof KeelError && (code === undefined || err.code === code);
  } catch {
    return false;
  }
}

/**
 * A connection credential in text: a URL's password (`user:secret@`) or a secret query or
 * keyword parameter (`password=…`). The kernel's own masker is this small rule; a host installs
 * the full one (`@keel/secrets`' maskCredentials: createAgent does) with setCredentialMask.
 */
const BASIC_CREDENTIAL =
  /(?<=:\/\/[^\s:/@]*:)[^\s@/]+(?=@)|(?<=\b(?:password|passwd|pwd|sslpassword|secret|token|api[_-]?key)\s*[=:]\s*)[^\s&;'"]+/gi;

let mask = (text: string): string => text.replace(BASIC_CREDENTIAL, "***");

/** Contract: error messages and diagnostics are masked by `fn` from now on, in this process. */
export function setCredentialMask(fn: (text: string) => string): void {
  mask = fn;
}

/** Contract: `text` with every connection credential the installed masker finds replaced by `***`. */
export function maskCredentials(text: string): string {
  return typeof text === "string" ? mask(text) : String(text);
}

const nodeTypes = (
  (globalThis as { process?: { getBuiltinModule?(n: string): unknown } }).process?.getBuiltinModule?.("node:util") as
    | { types: { isProxy(v: unknown): boolean } }
    | undefined
)?.types;

/**
 * A value thrown by plugin, tool or provider code, safe to inspect: a Proxy, or an object whose
 * prototype chain cannot be walked (`instanceof` would throw), becomes a plain Error carrying
 * what could be read of its message. Contract: never throws; any other value is returned as is.
 */
export function plainThrown(err: unknown): unknown {
  if (err === null || (typeof err !== "object" && typeof err !== "function")) return err;
  try {
    if (!nodeTypes?.isProxy(err)) {
      void (err instanceof Error);
      return err;
    }
  } catch {
    // falls through: the prototype chain holds a throwing Proxy
  }
  return new Error(errorMessage(err));
}

/**
 * The message of any thrown value, for diagnostics: an error's message (its name when it has
 * none, its `cause` then), an AggregateError's and a list's errors each by their message, an
 * object's `message` (enumerable or not), else its JSON with the errors inside it read the same
 * way — never `{}` or `[{}]` for an error JSON cannot see. Contract: never throws; a
 * connection credential in it (a driver echoing its URL, `password=…`) is masked (maskCredentials).
 */
export function errorMessage(err: unknown): string {
  // Thrown values often come from plugin or tool code: a getter, toJSON or Proxy may throw too.
  try {
    return maskCredentials(describeThrown(err, 0));
  } catch {
    try {
      return Object.prototype.toString.call(err);
    } catch {
      return "(an unreadable value)";
    }
  }
}

/** Errors of a list or an AggregateError that are read; the rest are counted. */
const LISTED_ERRORS = 5;

/** An Error of this realm or another (a worker's, a vm's), or a DOMException. */
function isErrorLike(v: unknown): v is Error {
  return v instanceof Error || Object.prototype.toString.call(v) === "[object Error]";
}

function describeThrown(v: unknown, depth: number): string {
  if (typeof v === "string") return v;
  if (typeof v === "function") return `a function${v.name ? ` (${v.name})` : ""}`;
  if (v === null || typeof v !== "object") return String(v);
  if (depth > 3) return "(nested too deep)";
  const list = (items: readonly unknown[]) =>
    items
      .slice(0, LISTED_ERRORS)
      .map((x) => describeThrown(x, depth + 1))
      .join("; ") + (items.length > LISTED_ERRORS ? `; and ${items.length - LISTED_ERRORS} more` : "");
  if (Array.isArray(v)) return v.length ? list(v) : "[]";
  const o = v as { message?: unknown; name?: unknown; errors?: unknown; cause?: unknown };
  const message = typeof o.message === "string" ? o.message : "";
  if (isErrorLike(v)) {
    const inner = Array.isArray(o.errors) && o.errors.length ? list(o.errors) : "";
    const own = message || (inner ? "" : typeof o.name === "string" && o.name ? o.name : "Error");
    const cause = !message && !inner && o.cause !== undefined ? describeThrown(o.cause, depth + 1) : "";
    return [own, inner, cause].filter(Boolean).join(": ");
  }
  if (message) return message;
  const json = JSON.stringify(v, (_k, x: unknown) => (x !== v && isErrorLike(x) ? describeThrown(x, depth + 1) : x));
  return json !== undefined && json !== "{}" ? json : Object.prototype.toString.call(v);
}

/** Longest text a log record keeps of a plugin's error or diagnostic message. */
export const PREVIEW_CHARS = 512;

/**
 * `text` cut to its first `max` code points (default PREVIEW_CHARS), then a marker saying how
 * many were cut. Contract: well-formed; never splits a surrogate pair (see truncate).
 */
export function preview(text: string, max = PREVIEW_CHARS): string {
  const n = codePointLength(text);
  return n <= max ? toWellFormed(text) : headOf(text, max) + droppedMarker(n - max);
}
