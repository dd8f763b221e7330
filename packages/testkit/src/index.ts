/**
 * @keel/testkit: what a test (or an offline demo) needs to run real turns with no network and no
 * disk: the scripted provider (a queue of canned model turns, read from code or a JSON file;
 * the CLI's offline model), the in-memory session store, and a seeded random.
 */
export {
  ScriptedProvider,
  scriptedProvider,
  parseProviderScript,
  ProviderScriptSchema,
  ScriptStepSchema,
} from "./scripted-provider.ts";
export type { ProviderScript, ProviderScriptInput, ScriptStep, ScriptedProviderOptions } from "./scripted-provider.ts";
export { MemorySessionStore } from "@keel/agent";
export { seededRandom } from "./seeded-random.ts";
