/**
 * Contributions: the only way a plugin changes a turn. Each is a zod-validated member of
 * one tagged union; the kernel validates, merges (merge.ts) and records every one.
 */
import * as z from "zod/mini";
import { errorMessage } from "./errors.ts";
import { closestName } from "./suggest.ts";
import type { UnreadableValueError } from "./snapshot.ts";
import { snapshot } from "./snapshot.ts";
import type { ToolDefinition } from "./tools.ts";
import { TOOL_NAME_PATTERN } from "./tools.ts";
import { englishMessages } from "./zod.ts";

englishMessages();

const fn = <T>(what: string) =>
  z.custom<T>((v) => typeof v === "function", { message: `expected ${what} to be a function` });

const priority = z._default(z.number(), 0);
const id = z.string().check(z.minLength(1), z.maxLength(200));
const nonEmpty = () => z.string().check(z.minLength(1));
const positiveInt = () => z.number().check(z.int(), z.positive());

const TextBlockSchema = z.object({ type: z.literal("text"), text: z.string() });
const ImageBlockSchema = z.object({ type: z.literal("image"), mediaType: nonEmpty(), data: z.string() });
const FileBlockSchema = z.object({
  type: z.literal("file"),
  mediaType: nonEmpty(),
  data: z.string(),
  name: z.optional(z.string()),
});
const ContentBlockSchema = z.discriminatedUnion("type", [TextBlockSchema, ImageBlockSchema, FileBlockSchema]);

/** Zod schema of a conversation message (see messages.ts). */
export const MessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("user"), content: z.array(ContentBlockSchema) }),
  z.object({
    role: z.literal("assistant"),
    content: z.array(
      z.discriminatedUnion("type", [
        TextBlockSchema,
        z.object({
          type: z.literal("thinking"),
          text: z.string(),
          redacted: z.optional(z.boolean()),
          providerData: z.optional(z.unknown()),
        }),
        z.object({ type: z.literal("tool_call"), id: nonEmpty(), name: nonEmpty(), args: z.unknown() }),
      ]),
    ),
  }),
  z.object({
    role: z.literal("tool"),
    toolCallId: nonEmpty(),
    toolName: z.string(),
    content: z.array(ContentBlockSchema),
    isError: z.boolean(),
    rewrittenBy: z.optional(z.array(z.string())),
  }),
]);

const ToolShape = z.looseObject({
  name: z.string().check(z.regex(TOOL_NAME_PATTERN, "tool names must match ^[a-zA-Z0-9_-]{1,64}$")),
  description: nonEmpty(),
  execute: fn("execute"),
  category: z.optional(z.enum(["exec", "mcp", "info", "edit"])),
  hidden: z.optional(z.boolean()),
  timeoutMs: z.optional(positiveInt()),
  parameters: z.optional(z.record(z.string(), z.unknown())),
  input: z.optional(
    z.custom((v) => v === undefined || typeof (v as { safeParse?: unknown } | null)?.safeParse === "function", {
      message: "expected a zod schema",
    }),
  ),
});

/** A tool inside a bundle: checked structurally, typed as the kernel's ToolDefinition. */
const ToolDefinitionSchema = z.custom<ToolDefinition>().check(
  z.superRefine((value, ctx) => {
    const r = z.safeParse(ToolShape, value);
    if (!r.success)
      for (const issue of r.error.issues) ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
  }),
);

const MessageEditSchema = z.discriminatedUnion("op", [
  z.object({
    op: z.literal("replace"),
    start: z.number().check(z.int(), z.gte(0)),
    end: z.number().check(z.int(), z.gte(0)),
    messages: z.array(MessageSchema),
  }),
  z.object({ op: z.literal("mask_tool_result"), toolCallId: nonEmpty(), text: z.string() }),
]);

/** Zod schema of every contribution kind, keyed by kind. */
export const CONTRIBUTION_SCHEMAS = {
  policy: z.object({
    kind: z.literal("policy"),
    domain: nonEmpty(),
    key: nonEmpty(),
    value: z.unknown(),
    priority,
  }),
  prompt_context: z.object({
    kind: z.literal("prompt_context"),
    id,
    domain: nonEmpty(),
    priority,
    content: z.string(),
    maxChars: z.optional(positiveInt()),
    sourceRefs: z.optional(z.array(z.string())),
  }),
  prompt_section: z.object({
    kind: z.literal("prompt_section"),
    id,
    sectionId: z.string().check(z.regex(/^[a-z0-9_.-]{1,64}$/, "section ids are lowercase [a-z0-9_.-], 1-64 chars")),
    title: z.optional(z.string()),
    domain: nonEmpty(),
    priority,
    content: z.string(),
    maxChars: z.optional(positiveInt()),
  }),
  tool_bundle: z.object({
    kind: z.literal("tool_bundle"),
    bundleId: id,
    domain: z.optional(nonEmpty()),
    priority,
    tools: z.array(ToolDefinitionSchema),
  }),
  tool_visibility: z.object({
    kind: z.literal("tool_visibility"),
    hide: z.strictObject({
      categories: z.optional(z.array(z.enum(["exec", "mcp", "info", "edit"]))),
      names: z.optional(z.array(nonEmpty())),
    }),
    keep: z.optional(z.array(nonEmpty())),
    reason: z.string().check(z.minLength(1), z.maxLength(500)),
  }),
  message_edit: z.object({
    kind: z.literal("message_edit"),
    reason: nonEmpty(),
    edits: z.array(MessageEditSchema).check(z.minLength(1)),
  }),
  request_options: z.object({
    kind: z.literal("request_options"),
    priority,
    options: z.strictObject({
      maxTokens: z.optional(positiveInt()),
      temperature: z.optional(z.number().check(z.gte(0), z.lte(2))),
      toolChoice: z.optional(z.enum(["auto", "none", "required"])),
      cache: z.optional(z.enum(["none", "5m", "1h"])),
      metadata: z.optional(z.record(z.string(), z.string())),
      extra: z.optional(z.record(z.string(), z.unknown())),
      route: z.optional(
        z.strictObject({
          model: z.string().check(z.minLength(1), z.maxLength(200)),
          reason: z.string().check(z.minLength(1), z.maxLength(500)),
        }),
      ),
    }),
  }),
  tool_decision: z.object({
    kind: z.literal("tool_decision"),
    decision: z.enum(["allow", "ask", "deny"]),
    reason: z.optional(z.string()),
    /** Rewritten tool arguments (JSON). */
    args: z.optional(z.json()),
    /**
     * Answer the call without running the tool (a cache, a dry run, a replay): used only when
     * the call is allowed (or approved); the first plugin's answer wins. tool.post_result still runs.
     */
    result: z.optional(
      z.strictObject({
        content: z.union([z.string(), z.array(ContentBlockSchema)]),
        isError: z.optional(z.boolean()),
        /** Hidden tools to show for the rest of the turn, as the tool's own output would (a replay gives back what the recorded call revealed). */
        reveal: z.optional(z.array(nonEmpty()).check(z.maxLength(256))),
      }),
    ),
  }),
  tool_result_rewrite: z.object({
    kind: z.literal("tool_result_rewrite"),
    content: z.union([z.string(), z.array(ContentBlockSchema)]),
    isError: z.optional(z.boolean()),
    reason: nonEmpty(),
  }),
  diagnostic: z.object({
    kind: z.literal("diagnostic"),
    level: z._default(z.enum(["info", "warn", "error"]), "info"),
    code: nonEmpty(),
    message: z.string(),
    /** Structured detail; must be JSON (it is stored in the event log). */
    data: z.optional(z.json()),
  }),
  background_job: z
    .object({
      kind: z.literal("background_job"),
      idempotencyKey: z.string().check(z.minLength(1), z.maxLength(200)),
      name: z.string().check(z.minLength(1), z.maxLength(100)),
      /** The work (required unless `durable`: a durable job runs the runner registered under `name`). */
      run: z.optional(fn<(signal: AbortSignal) => unknown>("run")),
      /**
       * Must not be lost: recorded as pending in the session log before it runs, re-run on the
       * next resume or agent start until it settles; runs the plugin's `registerJob(name)` runner.
       */
      durable: z.optional(z.boolean()),
      /** A durable job's input, persisted as JSON: references (ids), never content or secrets. */
      payload: z.optional(z.json()),
      timeoutMs: z.optional(positiveInt()),
      /** Runs in all (default 1; durable: 3, counted across restarts): a failed or timed-out run is retried after `retryDelayMs` × attempt. */
      attempts: z.optional(z.number().check(z.int(), z.gte(1), z.lte(5))),
      retryDelayMs: z.optional(z.number().check(z.int(), z.nonnegative())),
    })
    .check(
      z.refine((v) => v.durable === true || typeof v.run === "function", {
        message: "expected run to be a function (or durable: true with a registered job runner)",
        path: ["run"],
      }),
    ),
  stop: z.object({ kind: z.literal("stop"), reason: nonEmpty() }),
  /**
   * Answer this round without asking the model (a workflow, a scripted step): the text and the
   * tool calls the assistant message holds. The first answer of a round wins; never in a final
   * round with calls (tools are off there) or in chat mode with calls.
   */
  answer: z
    .strictObject({
      kind: z.literal("answer"),
      reason: z.string().check(z.minLength(1), z.maxLength(500)),
      text: z.optional(z.string()),
      calls: z.optional(
        z
          .array(z.strictObject({ name: z.string().check(z.regex(TOOL_NAME_PATTERN)), args: z.json() }))
          .check(z.maxLength(64)),
      ),
    })
    .check(
      z.refine((v) => (v.text ?? "") !== "" || (v.calls?.length ?? 0) > 0, {
        message: "an answer needs text or at least one call",
      }),
    ),
} as const;

/** Every contribution kind. */
export type ContributionKind = keyof typeof CONTRIBUTION_SCHEMAS;

/** A validated contribution of kind K (defaults applied). */
export type ContributionOf<K extends ContributionKind> = z.output<(typeof CONTRIBUTION_SCHEMAS)[K]>;

/** What a handler may return for kind K (defaults optional). */
export type ContributionInputOf<K extends ContributionKind> = z.input<(typeof CONTRIBUTION_SCHEMAS)[K]>;

/** A validated contribution. Contract: `kind` discriminates; every field passed its schema. */
export type Contribution = { [K in ContributionKind]: ContributionOf<K> }[ContributionKind];

/** The contribution union as handlers write it. */
export type ContributionInput = { [K in ContributionKind]: ContributionInputOf<K> }[ContributionKind];

/** The tagged union schema of all contributions. */
export const ContributionSchema = z.discriminatedUnion(
  "kind",
  Object.values(CONTRIBUTION_SCHEMAS) as unknown as [
    (typeof CONTRIBUTION_SCHEMAS)["policy"],
    ...(typeof CONTRIBUTION_SCHEMAS)[ContributionKind][],
  ],
);

/** One message edit of a `message_edit` contribution. */
export type MessageEdit = z.output<typeof MessageEditSchema>;

/** The outcome of validating one raw contribution. */
export type ValidationResult =
  | { ok: true; value: Contribution }
  | { ok: false; kind: string | undefined; path: string; message: string; unreadable?: true };

/** `invalid at <path>: <message>`, every issue of a rejected contribution in one line. Contract: names each path. */
export function describeInvalid(v: Extract<ValidationResult, { ok: false }>): string {
  return v.unreadable ? v.message : `invalid at ${v.path}: ${v.message}`;
}

/**
 * Validate one raw value as a contribution.
 * Contract: never throws; the value is read once, into plain data (snapshot.ts), before it
 * is validated, so getters, Proxies and toJSON cannot change or break it later.
 */
export function validateContribution(raw: unknown): ValidationResult {
  let plain: unknown;
  try {
    plain = snapshot(raw);
  } catch (err) {
    const e = err as UnreadableValueError;
    return {
      ok: false,
      kind: undefined,
      path: e.path ?? "(root)",
      message: `unreadable: ${errorMessage(err)}`,
      unreadable: true,
    };
  }
  try {
    return validateUnsafe(plain);
  } catch (err) {
    return {
      ok: false,
      kind: undefined,
      path: "(root)",
      message: `validating the contribution threw: ${errorMessage(err)}`,
    };
  }
}

function validateUnsafe(raw: unknown): ValidationResult {
  const kind = typeof raw === "object" && raw !== null ? (raw as { kind?: unknown }).kind : undefined;
  const schema =
    typeof kind === "string" && Object.hasOwn(CONTRIBUTION_SCHEMAS, kind)
      ? (CONTRIBUTION_SCHEMAS as Record<string, z.ZodMiniType>)[kind]
      : undefined;
  if (!schema) {
    const near = typeof kind === "string" ? closestName(kind, Object.keys(CONTRIBUTION_SCHEMAS)) : undefined;
    return {
      ok: false,
      kind: typeof kind === "string" ? kind : undefined,
      path: "kind",
      message: `unknown contribution kind ${JSON.stringify(kind)};${near ? ` did you mean "${near}"?` : ""} expected one of ${Object.keys(CONTRIBUTION_SCHEMAS).join(", ")}`,
    };
  }
  const parsed = z.safeParse(schema, raw);
  if (parsed.success) return { ok: true, value: parsed.data as Contribution };
  // Every issue at once, so a plugin author fixes them in one go.
  const issues = parsed.error.issues;
  const at = (i: (typeof issues)[number]) => i.path.map(String).join(".") || "(root)";
  // The first issue's path leads; the others follow with their own paths.
  const message = [issues[0]!.message, ...issues.slice(1).map((i) => `and at ${at(i)}: ${i.message}`)].join("; ");
  return { ok: false, kind: kind as string, path: at(issues[0]!), message };
}
