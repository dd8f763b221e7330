/** @keel/plugin-workflows: the workflow gate. */
export {
  exampleOf,
  learnFrom,
  offerOutcome,
  planOf,
  trusted,
  PLUGIN_NAME,
  PLUGIN_VERSION,
  workflows,
  WorkflowsOptions,
} from "./plugin.ts";
export type { WorkflowsOptionsInput } from "./plugin.ts";
export { sequenceKey, shapeOf, synthesise, words } from "./learn.ts";
export type { ArgSource, Example, Json, Slot, Workflow } from "./learn.ts";
export { decide, fill, offerable } from "./match.ts";
export type { GateDecision, Match, MatchOptions } from "./match.ts";
export { nextRound, OFFER_TOOL, PlanSchema } from "./steps.ts";
export type { Next, Plan } from "./steps.ts";
export { EXAMPLES_KEPT, WorkflowStore } from "./store.ts";
export type { StoredWorkflow } from "./store.ts";
/** The plugin factory, also as the default export (`["@keel/plugin-workflows", options]` in a config). */
export { workflows as default } from "./plugin.ts";
