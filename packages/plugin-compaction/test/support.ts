/** Helpers for the compaction tests: temp homes, agents with a scripted provider, big outputs. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KeelEvent, KeelPlugin, Message, ProviderScriptInput, ToolDefinition } from "@keel/kernel";
import { createAgent, defineTool, messageText } from "@keel/kernel";
import { MemorySessionStore, scriptedProvider } from "@keel/kernel/testing";
import { expect } from "vitest";
import type { CompactionInput } from "../src/index.ts";
import { compaction } from "../src/index.ts";

const dirs: string[] = [];

/** A fresh temporary directory (removed by cleanupDirs). */
export function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-compaction-"));
  dirs.push(d);
  return d;
}

export function cleanupDirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** A multi-line output of about `lines` × 12 tokens, with paths, numbers and an error line. */
export function bigOutput(tag: string, lines: number): string {
  const out: string[] = [];
  for (let i = 1; i <= lines; i++) {
    if (i === Math.floor(lines / 2)) out.push(`Traceback: ValueError in /srv/${tag}/core_${i}.py line ${1000 + i}: bad value ${tag}_${i}`);
    else out.push(`${tag} row ${i}: ok ${i * 7} items processed in worker pool shard ${i % 5} of the cluster node`);
  }
  return out.join("\n");
}

/** A `bash` tool answering with `outputs[n]` on its n-th call. */
export function scriptedTool(name: string, outputs: string[], extra: Partial<ToolDefinition> = {}): ToolDefinition {
  let n = 0;
  return defineTool({ name, description: `Runs ${name}.`, category: "exec", ...extra, execute: () => outputs[n++] ?? "done" });
}

/** Build an agent with the plugin, a scripted main provider and a scripted side model. */
export async function setup(opts: { steps: ProviderScriptInput; side?: ProviderScriptInput; window?: number; tools?: ToolDefinition[]; plugin?: CompactionInput; extraPlugins?: KeelPlugin[]; approve?: () => boolean }) {
  const home = tempDir();
  const provider = scriptedProvider(opts.steps, { contextWindow: opts.window ?? 200_000 });
  const side = scriptedProvider(opts.side ?? [], { model: "side" });
  const agent = await createAgent({
    provider,
    sideModel: side,
    home,
    store: new MemorySessionStore(),
    tools: opts.tools ?? [],
    plugins: [compaction({ path: join(home, "compaction.sqlite"), ...opts.plugin }), ...(opts.extraPlugins ?? [])],
    ...(opts.approve ? { approve: opts.approve } : {}),
  });
  const session = await agent.session();
  return { agent, session, provider, side, home };
}

/** Events of one type. */
export function ofType<T extends KeelEvent["type"]>(events: readonly KeelEvent[], type: T): Extract<KeelEvent, { type: T }>[] {
  return events.filter((e): e is Extract<KeelEvent, { type: T }> => e.type === type);
}

/** Diagnostics with a code. */
export function diagnostics(events: readonly KeelEvent[], code: string): Array<{ message: string; data?: unknown; level: string }> {
  return ofType(events, "diagnostic").filter((d) => d.code === code) as never;
}

/** Every call has exactly one result right after its assistant message; no result lacks its call. */
export function expectPairs(messages: readonly Message[]): void {
  let open: string[] = [];
  for (const m of messages) {
    if (m.role === "assistant") {
      expect(open, "a call was left without its result").toEqual([]);
      open = m.content.flatMap((b) => (b.type === "tool_call" ? [b.id] : []));
    } else if (m.role === "tool") {
      const at = open.indexOf(m.toolCallId);
      expect(at >= 0, `orphaned result ${m.toolCallId}`).toBe(true);
      open.splice(at, 1);
    } else expect(open, "a user message splits a call from its result").toEqual([]);
  }
  expect(open).toEqual([]);
}

/** Text of a message. */
export const textOf = (m: Message): string => messageText(m);
