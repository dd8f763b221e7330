/** Helpers for the memory plugin's tests: temp homes, an agent with memory, event filters. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { Agent, KeelEvent } from "@keel/agent";
import type { ScriptedProvider, ScriptStep } from "@keel/testkit";
import { memory } from "../../src/index.ts";
import type { MemoryOptions, MemoryPlugin } from "../../src/index.ts";

const dirs: string[] = [];
const closers: Array<() => unknown> = [];

/** A fresh temporary folder, removed by cleanup(). */
export function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-memory-"));
  dirs.push(d);
  return d;
}

/** Close every agent and store opened by the helpers and delete their folders. */
export async function cleanup(): Promise<void> {
  for (const c of closers.splice(0).reverse()) await c();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** An agent with the memory plugin and a scripted provider. */
export async function memoryAgent(
  steps: ScriptStep[],
  options: MemoryOptions = {},
): Promise<{ agent: Agent; provider: ScriptedProvider; plugin: MemoryPlugin }> {
  const provider = scriptedProvider(steps);
  const plugin = memory({ extraction: "deterministic", ...options });
  const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [plugin] });
  closers.push(
    () => plugin.memory.close(),
    () => agent.close(),
  );
  return { agent, provider, plugin };
}

/** Diagnostics recorded in a session's events. */
export function diagnostics(
  events: readonly KeelEvent[],
): Array<{ code: string; plugin: string; phase: string; message: string }> {
  return events.filter((e) => e.type === "diagnostic") as unknown as Array<{
    code: string;
    plugin: string;
    phase: string;
    message: string;
  }>;
}

/** job.completed events. */
export function jobs(
  events: readonly KeelEvent[],
): Array<{ name: string; status: string; idempotencyKey: string; error?: string }> {
  return events.filter((e) => e.type === "job.completed") as unknown as Array<{
    name: string;
    status: string;
    idempotencyKey: string;
    error?: string;
  }>;
}
