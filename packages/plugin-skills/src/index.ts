/**
 * @keel/plugin-skills — SKILL.md catalogs for Keel agents, routed by a contextual
 * Thompson-sampling bandit that learns from how turns end, with auto-drafted skills.
 */
export { skills, skills as default, PLUGIN_NAME, PLUGIN_VERSION } from "./plugin.ts";
export type { FeedbackResult, SkillInfo, SkillsApi, SkillsPlugin, TurnRef } from "./plugin.ts";
export { SkillsOptions, RouterTuningSchema } from "./options.ts";
export type { SkillsOptionsInput, SkillsOptionsParsed } from "./options.ts";
export {
  SkillCatalog,
  parseSkillFile,
  readDraftScope,
  visibleIn,
  normalizeSkillName,
  MAX_DESCRIPTION_CHARS,
} from "./catalog.ts";
export { closestSkills, nameSimilarity } from "./closest.ts";
export type { CatalogRoot, DraftScope, Skill, SkillDiagnostic } from "./catalog.ts";
export { readSkill, skillReadTool, MAX_READ_CHARS } from "./skill-read.ts";
export type { ReadResult } from "./skill-read.ts";
export { creditOf, DEFAULT_CREDIT } from "./credit.ts";
export type { Outcome } from "./credit.ts";
export { taskSignature, sanitizeSignature, draftDir } from "./signature.ts";
export { writeDraft, removeDraft, reviewDraft, templateBody } from "./drafter.ts";
export type { DraftManifest, DraftOutcome } from "./drafter.ts";
export { SkillsStore, safeTerm } from "./store.ts";
export { PostgresSkillsStore, SKILLS_MIGRATIONS } from "./postgres-store.ts";
export type { SkillsStorage, StoredPick, Streak } from "./store.ts";
export { createRng, sampleBeta, sampleGamma, sampleNormal } from "./random.ts";
export type { Rng } from "./random.ts";
export { SKILL_TOKENS, terms, tokenize } from "./text.ts";
export { MemoryPosteriorStore, fade } from "./posterior.ts";
export type { Counts, PosteriorReader, PosteriorStore, PosteriorTx, WeightRow, WeightWrite } from "./posterior.ts";
export { ContextualRouter, ThompsonSampler } from "./router.ts";
export type { RoutableSkill, RoutePick, RouterTuning } from "./router.ts";
