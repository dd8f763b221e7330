/**
 * Test helpers for plugin authors: the scripted provider and the in-memory store, so a
 * plugin's tests can run real turns without a network or a disk.
 */
export { ScriptedProvider, scriptedProvider, parseProviderScript } from "./scripted-provider.ts";
export { MemorySessionStore } from "./memory-store.ts";
export { seededRandom } from "./seeded-random.ts";
