/**
 * The zod schema of `agent.config.ts` (the KeelConfig type of @keel/kernel), used to validate
 * a loaded config and to generate `agent.config.schema.json` for editors.
 */
import { z } from "zod";
import { limitsSchema, toolTimeoutsSchema } from "@keel/kernel";

const provider = z.custom<object>((v) => typeof (v as { stream?: unknown } | null)?.stream === "function", {
  message:
    "expected a model spec string (anthropic:<model>, openai:<model>, openai-compatible:<model>) or a ModelProvider object",
});
/** A model spec string (`anthropic:<model>`…), as config `model` entries and `--model` take it. */
export const modelString = z
  .string()
  .regex(
    /^(anthropic|openai|openai-compatible|scripted):\S+$/,
    "expected <provider>:<model>, with provider anthropic, openai, openai-compatible or scripted",
  );
const ms = z.number().min(0);
const modelEntry = z
  .object({
    model: modelString,
    idleTimeoutMs: ms,
    firstByteTimeoutMs: ms,
    maxRetryAfterMs: ms,
    maxRetries: z.number().int().min(0),
    streamRetries: z.number().int().min(0),
  })
  .partial()
  .required({ model: true })
  .strict();
const modelSpec = z.union([modelString, modelEntry, provider], {
  error: (iss) =>
    isPlainEntry(iss.input)
      ? undefined
      : 'expected a model: "anthropic:<model>", "openai:<model>", "openai-compatible:<model>", { model: "anthropic:<model>", idleTimeoutMs, firstByteTimeoutMs, maxRetryAfterMs } or a ModelProvider object',
});
function isPlainEntry(v: unknown): boolean {
  return (
    typeof v === "object" && v !== null && typeof (v as { stream?: unknown }).stream !== "function" && "model" in v
  );
}
const poolEntry = z
  .object({
    model: z.union([modelSpec, z.array(modelSpec).min(1)], {
      error: (iss) =>
        Array.isArray(iss.input) || isPlainEntry(iss.input)
          ? undefined
          : 'expected a model ("anthropic:<model>", "openai:<model>", …, a ModelProvider) or a list of them (the member\'s own fallback chain)',
    }),
    tags: z.array(z.string().min(1).max(64)).max(32),
    price: z.strictObject({ input: z.number().min(0), output: z.number().min(0) }),
    contextWindow: z.number().int().positive(),
  })
  .partial()
  .required({ model: true })
  .strict();
const poolSpec = z.union([modelString, poolEntry], {
  // An object that fails deep inside (price.output missing) is named by its inner path here: the union alone says "Invalid input".
  error: (iss) => {
    if (typeof iss.input !== "object" || iss.input === null)
      return 'expected a pool member: "<provider>:<model>" or { model, tags, price: { input, output }, contextWindow }';
    const inner = poolEntry.safeParse(iss.input).error?.issues[0];
    return inner ? `${inner.path.map(String).join(".")}: ${inner.message}` : undefined;
  },
});
const pluginObject = z.looseObject({
  name: z.string().min(1),
  version: z.string(),
  setup: z.custom<(...a: unknown[]) => unknown>((v) => typeof v === "function", {
    message: "expected a setup(ctx) function",
  }),
});
const pluginSpec = z.union([
  z.literal(false),
  z.literal(0),
  z.literal(""),
  z.null(),
  z.undefined(),
  z.string().min(1).describe("a package name whose default export is a plugin or a plugin factory"),
  z.tuple([z.string().min(1), z.unknown()]).describe("[package name, options]"),
  z.tuple([z.string().min(1)]),
  pluginObject,
]);
const observerSpec = z.union(
  [
    z.literal(false),
    z.literal(0),
    z.literal(""),
    z.null(),
    z.undefined(),
    z.looseObject({
      name: z.string().min(1),
      attach: z.custom<(...a: unknown[]) => unknown>((v) => typeof v === "function", {
        message: "expected an attach(agent) function",
      }),
    }),
  ],
  {
    error: () =>
      "expected an observer (an object with a name and attach(agent), such as otel() from @keel/otel) or a falsy value",
  },
);
const tool = z.looseObject({
  name: z.string(),
  description: z.string(),
  execute: z.custom<(...a: unknown[]) => unknown>((v) => typeof v === "function", {
    message: "expected an execute(args, ctx) function",
  }),
});
const positive = z.number().positive();

/** Contract: strict at every level the kernel owns, so a typo is an error with its path. */
export const ConfigSchema = z
  .object({
    $schema: z.string().optional(),
    name: z.string().min(1).optional(),
    description: z.string().trim().min(1, "expected a non-empty description").optional(),
    model: z
      .union([modelSpec, z.array(modelSpec).min(1)], {
        error: (iss) =>
          Array.isArray(iss.input)
            ? undefined
            : 'expected a model ("anthropic:<model>", "openai:<model>", "openai-compatible:<model>", a ModelProvider) or a list of them (a fallback chain)',
      })
      .optional(),
    models: z
      .record(
        z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "expected a pool name of letters, digits, _ . - (at most 64)"),
        poolSpec,
      )
      .optional(),
    sideModel: modelSpec.optional(),
    baseURL: z
      .url({ protocol: /^https?$/, error: "expected an http(s) URL such as http://localhost:11434/v1" })
      .optional(),
    instructions: z.string().optional(),
    plugins: z.array(pluginSpec).optional(),
    tools: z.array(tool).optional(),
    // The kernel's schemas are zod/mini ones (no methods): wrapped with the function.
    limits: z.optional(limitsSchema),
    toolTimeouts: z.optional(toolTimeoutsSchema),
    requestOptions: z
      .object({
        maxTokens: z.number().int().positive(),
        temperature: z.number().min(0).max(2),
        toolChoice: z.enum(["auto", "none", "required"]),
        cache: z.enum(["none", "5m", "1h"]),
        metadata: z.record(z.string(), z.string()),
        extra: z.record(z.string(), z.unknown()),
      })
      .partial()
      .strict()
      .optional(),
    caps: z
      .object({
        contextEntries: z.number().int().positive(),
        contextChars: positive,
        sections: z.number().int().positive(),
        sectionChars: positive,
        sectionsTotalChars: positive,
      })
      .partial()
      .strict()
      .optional(),
    preflight: z
      .union(
        [
          z.boolean(),
          z
            .object({
              timeoutMs: positive,
              maxTokens: z.number().int().positive(),
              maxReveal: z.number().int().positive(),
            })
            .partial()
            .strict(),
        ],
        {
          error: (iss) =>
            typeof iss.input === "object" && iss.input !== null
              ? undefined
              : "expected true, false or { timeoutMs, maxTokens, maxReveal }",
        },
      )
      .optional(),
    trace: z.enum(["notable", "full"]).optional(),
    setupTimeoutMs: positive.optional(),
    lease: z
      .object({ ttlMs: z.number().int().min(100), waitMs: z.number().min(0) })
      .partial()
      .strict()
      .optional(),
    home: z.string().min(1).optional(),
    store: z
      .string()
      .regex(
        /^(sqlite|postgres(ql)?:\/\/\S+)$/i,
        'expected "sqlite" or a PostgreSQL URL such as "postgres://user:password@host:5432/db" (or process.env.KEEL_DATABASE_URL)',
      )
      .optional(),
    approve: z
      .custom<(...a: unknown[]) => unknown>((v) => typeof v === "function", { message: "expected a function" })
      .optional(),
    observers: z.array(observerSpec).optional(),
    mode: z.enum(["agent", "chat"], { error: 'expected "agent" (tools) or "chat" (no tools)' }).optional(),
    recovery: z
      .enum(["auto", "manual"], { error: 'expected "auto" (a crashed turn goes on by itself) or "manual"' })
      .optional(),
    offline: z
      .object({
        script: z
          .union([z.string().min(1), z.array(z.unknown()), z.looseObject({ steps: z.array(z.unknown()) })])
          .optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** The JSON Schema of the config (functions and provider objects are not representable). */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(ConfigSchema, {
    io: "input",
    unrepresentable: "any",
    target: "draft-2020-12",
  }) as Record<string, unknown>;
  return { ...schema, $id: "https://keel.dev/agent.config.schema.json", title: "Keel agent config" };
}
