/**
 * Contributions: the only way a plugin changes a turn. Each is a zod-validated member of
 * one tagged union; the kernel validates, merges (merge.ts) and records every one.
 */
import * as z from "zod";
import { errorMessage } from "./errors.ts";
import { closestName } from "./suggest.ts";
import type { UnreadableValueError } from "./snapshot.ts";
import { snapshot } from "./snapshot.ts";
import type { ToolDefinition } from "./tools.ts";
import { TOOL_NAME_PATTERN } from "./tools.ts";

const fn = <T>(what: string) =>
  z.custom<T>((v) => typeof v === "function", { message: `expected ${what} to be a function` });

const priority = z.number().finite().default(0);
const id = z.string().min(1).max(200);

const TextBlockSchema = z.object({ type: z.literal("text"), text: z.string() });
const ImageBlockSchema = z.object({ type: z.literal("image"), mediaType: z.string().min(1), data: z.string() });
const FileBlockSchema = z.object({
  type: z.literal("file"),
  mediaType: z.string().min(1),
  data: z.string(),
  name: z.string().optional(),
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
          redacted: z.boolean().optional(),
          providerData: z.unknown().optional(),
        }),
        z.object({ type: z.literal("tool_call"), id: z.string().min(1), name: z.string().min(1), args: z.unknown() }),
      ]),
    ),
  }),
  z.object({
    role: z.literal("tool"),
    toolCallId: z.string().min(1),
    toolName: z.string(),
    content: z.array(ContentBlockSchema),
    isError: z.boolean(),
    rewrittenBy: z.array(z.string()).optional(),
  }),
]);

const ToolShape = z
  .object({
    name: z.string().regex(TOOL_NAME_PATTERN, "tool names must match ^[a-zA-Z0-9_-]{1,64}$"),
    description: z.string().min(1),
    execute: fn("execute"),
    category: z.enum(["exec", "mcp", "info", "edit"]).optional(),
    hidden: z.boolean().optional(),
    timeoutMs: z.number().int().positive().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    input: z
      .custom((v) => v === undefined || typeof (v as { safeParse?: unknown } | null)?.safeParse === "function", {
        message: "expected a zod schema",
      })
      .optional(),
  })
  .loose();

/** A tool inside a bundle: checked structurally, typed as the kernel's ToolDefinition. */
const ToolDefinitionSchema = z.custom<ToolDefinition>().superRefine((value, ctx) => {
  const r = ToolShape.safeParse(value);
  if (!r.success)
    for (const issue of r.error.issues) ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
});

const MessageEditSchema = z.discriminatedUnion("op", [
  z.object({
    op: z.literal("replace"),
    start: z.number().int().min(0),
    end: z.number().int().min(0),
    messages: z.array(MessageSchema),
  }),
  z.object({ op: z.literal("mask_tool_result"), toolCallId: z.string().min(1), text: z.string() }),
]);

/** Zod schema of every contribution kind, keyed by kind. */
export const CONTRIBUTION_SCHEMAS = {
  policy: z.object({
    kind: z.literal("policy"),
    domain: z.string().min(1),
    key: z.string().min(1),
    value: z.unknown(),
    priority,
  }),
  prompt_context: z.object({
    kind: z.literal("prompt_context"),
    id,
    domain: z.string().min(1),
    priority,
    content: z.string(),
    maxChars: z.number().int().positive().optional(),
    sourceRefs: z.array(z.string()).optional(),
  }),
  prompt_section: z.object({
    kind: z.literal("prompt_section"),
    id,
    sectionId: z.string().regex(/^[a-z0-9_.-]{1,64}$/, "section ids are lowercase [a-z0-9_.-], 1-64 chars"),
    title: z.string().optional(),
    domain: z.string().min(1),
    priority,
    content: z.string(),
    maxChars: z.number().int().positive().optional(),
  }),
  tool_bundle: z.object({
    kind: z.literal("tool_bundle"),
    bundleId: id,
    domain: z.string().min(1).optional(),
    priority,
    tools: z.array(ToolDefinitionSchema),
  }),
  tool_visibility: z.object({
    kind: z.literal("tool_visibility"),
    hide: z
      .object({
        categories: z.array(z.enum(["exec", "mcp", "info", "edit"])).optional(),
        names: z.array(z.string().min(1)).optional(),
      })
      .strict(),
    keep: z.array(z.string().min(1)).optional(),
    reason: z.string().min(1).max(500),
  }),
  message_edit: z.object({
    kind: z.literal("message_edit"),
    reason: z.string().min(1),
    edits: z.array(MessageEditSchema).min(1),
  }),
  request_options: z.object({
    kind: z.literal("request_options"),
    priority,
    options: z
      .object({
        maxTokens: z.number().int().positive().optional(),
        temperature: z.number().min(0).max(2).optional(),
        toolChoice: z.enum(["auto", "none", "required"]).optional(),
        cache: z.enum(["none", "5m", "1h"]).optional(),
        metadata: z.record(z.string(), z.string()).optional(),
        extra: z.record(z.string(), z.unknown()).optional(),
        route: z.strictObject({ model: z.string().min(1).max(200), reason: z.string().min(1).max(500) }).optional(),
      })
      .strict(),
  }),
  tool_decision: z.object({
    kind: z.literal("tool_decision"),
    decision: z.enum(["allow", "ask", "deny"]),
    reason: z.string().optional(),
    /** Rewritten tool arguments (JSON). */
    args: z.json().optional(),
    /**
     * Answer the call without running the tool (a cache, a dry run, a replay): used only when
     * the call is allowed (or approved); the first plugin's answer wins. tool.post_result still runs.
     */
    result: z
      .strictObject({
        content: z.union([z.string(), z.array(ContentBlockSchema)]),
        isError: z.boolean().optional(),
        /** Hidden tools to show for the rest of the turn, as the tool's own output would (a replay gives back what the recorded call revealed). */
        reveal: z.array(z.string().min(1)).max(256).optional(),
      })
      .optional(),
  }),
  tool_result_rewrite: z.object({
    kind: z.literal("tool_result_rewrite"),
    content: z.union([z.string(), z.array(ContentBlockSchema)]),
    isError: z.boolean().optional(),
    reason: z.string().min(1),
  }),
  diagnostic: z.object({
    kind: z.literal("diagnostic"),
    level: z.enum(["info", "warn", "error"]).default("info"),
    code: z.string().min(1),
    message: z.string(),
    /** Structured detail; must be JSON (it is stored in the event log). */
    data: z.json().optional(),
  }),
  background_job: z
    .object({
      kind: z.literal("background_job"),
      idempotencyKey: z.string().min(1).max(200),
      name: z.string().min(1).max(100),
      /** The work (required unless `durable`: a durable job runs the runner registered under `name`). */
      run: fn<(signal: AbortSignal) => unknown>("run").optional(),
      /**
       * Must not be lost: recorded as pending in the session log before it runs, re-run on the
       * next resume or agent start until it settles; runs the plugin's `registerJob(name)` runner.
       */
      durable: z.boolean().optional(),
      /** A durable job's input, persisted as JSON: references (ids), never content or secrets. */
      payload: z.json().optional(),
      timeoutMs: z.number().int().positive().optional(),
      /** Runs in all (default 1; durable: 3, counted across restarts): a failed or timed-out run is retried after `retryDelayMs` × attempt. */
      attempts: z.number().int().min(1).max(5).optional(),
      retryDelayMs: z.number().int().nonnegative().optional(),
    })
    .refine((v) => v.durable === true || typeof v.run === "function", {
      message: "expected run to be a function (or durable: true with a registered job runner)",
      path: ["run"],
    }),
  stop: z.object({ kind: z.literal("stop"), reason: z.string().min(1) }),
  /**
   * Answer this round without asking the model (a workflow, a scripted step): the text and the
   * tool calls the assistant message holds. The first answer of a round wins; never in a final
   * round with calls (tools are off there) or in chat mode with calls.
   */
  answer: z
    .strictObject({
      kind: z.literal("answer"),
      reason: z.string().min(1).max(500),
      text: z.string().optional(),
      calls: z
        .array(z.strictObject({ name: z.string().regex(TOOL_NAME_PATTERN), args: z.json() }))
        .max(64)
        .optional(),
    })
    .refine((v) => (v.text ?? "") !== "" || (v.calls?.length ?? 0) > 0, {
      message: "an answer needs text or at least one call",
    }),
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
      ? (CONTRIBUTION_SCHEMAS as Record<string, z.ZodType>)[kind]
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
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data as Contribution };
  // Every issue at once, so a plugin author fixes them in one go.
  const issues = parsed.error.issues;
  const at = (i: (typeof issues)[number]) => i.path.map(String).join(".") || "(root)";
  // The first issue's path leads; the others follow with their own paths.
  const message = [issues[0]!.message, ...issues.slice(1).map((i) => `and at ${at(i)}: ${i.message}`)].join("; ");
  return { ok: false, kind: kind as string, path: at(issues[0]!), message };
}
