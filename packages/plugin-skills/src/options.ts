/** Options of the skills plugin. */
import { z } from "zod";
import type { ModelProvider } from "@keel/kernel";

const outcome = z.enum(["success", "failure", "neutral"]);

/** Zod schema of the router's tuning (see RouterTuning). */
export const RouterTuningSchema = z.strictObject({
  gate: z.number().int().min(1).max(1000).optional(),
  temperature: z.number().min(0).max(10).optional(),
  bias: z.number().finite().optional(),
  relevanceWeight: z.number().finite().optional(),
  priorPrecision: z.number().positive().optional(),
  idfScale: z.number().positive().optional(),
  bigramWeight: z.number().min(0).optional(),
  rivalWeight: z.number().min(0).optional(),
  discount: z.number().gt(0).max(1).optional(),
  rewardNoise: z.number().min(0).max(0.49).optional(),
});

/**
 * Options of `skills()`.
 * Contract: every field optional; unknown fields are rejected (KEEL_PLUGIN_OPTIONS_INVALID).
 */
export const SkillsOptions = z.strictObject({
  /** Folders holding skill folders (one or two levels deep); relative paths resolve against the working directory. */
  dirs: z.array(z.string().min(1)).default([]),
  /** Namespace of turns whose metadata does not name one (see `namespaceKey`); drafts are scoped to it until reviewed. Default "default". */
  namespace: z.string().min(1).max(200).default("default"),
  /** The metadata field naming the user; its value is the turn's namespace (as in the memory plugin). Default "userId". */
  namespaceKey: z.string().min(1).default("userId"),
  /** Keel home; default KEEL_HOME or ~/.keel. Skills are also loaded from `<home>/skills`. */
  home: z.string().min(1).optional(),
  /** Load `<home>/skills` (and its `auto/` drafts). Default true. */
  includeHomeSkills: z.boolean().default(true),
  /**
   * SQLite file of posteriors, picks and streaks; default: the shared PostgreSQL database when
   * KEEL_DATABASE_URL names one, else `<home>/skills.sqlite`; ":memory:" keeps nothing.
   */
  db: z.string().min(1).optional(),
  /**
   * Seed of the router's draws (deterministic picks for a given history). Without one, each
   * turn's draw is seeded by its turn id: varied across sessions, the same in a replay.
   */
  seed: z.union([z.number(), z.string()]).optional(),
  /** Router tuning; the defaults are the benchmarked ones. `discount` (e.g. 0.99) lets old evidence fade. */
  router: RouterTuningSchema.prefault({}),
  /** Add the advisory line naming the picked skill. Default true. */
  suggest: z.boolean().default(true),
  /** Cap of the skills prompt section (the kernel caps a section at 8,000). Default 6,000. */
  maxPromptChars: z.number().int().min(200).max(8000).default(6000),
  /** Cap of one description in the listing. Default 300. */
  maxDescriptionChars: z.number().int().min(20).default(300),
  /** Verdict → outcome overrides, keyed "status" or "status:reason" (e.g. { "completed:max_tokens": "failure" }). */
  credit: z.record(z.string(), outcome).default({}),
  /** Auto-drafting of skills for task signatures that keep succeeding. */
  autoDraft: z
    .strictObject({ enabled: z.boolean().default(true), threshold: z.number().int().min(1).max(100).default(3) })
    .prefault({}),
  /** Model that writes draft bodies; default the hook's model (the agent's sideModel, else its provider). */
  model: z
    .custom<ModelProvider>(
      (v) => typeof v === "object" && v !== null && typeof (v as { stream?: unknown }).stream === "function",
      { message: "expected a ModelProvider (an object with stream())" },
    )
    .optional(),
});

/** Options as the user writes them. */
export type SkillsOptionsInput = z.input<typeof SkillsOptions>;
/** Options after parsing (defaults applied). */
export type SkillsOptionsParsed = z.output<typeof SkillsOptions>;
