/** Helpers for the compaction tests: temp homes, agents with a scripted provider, big outputs. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KeelEvent, KeelPlugin, Message, ToolDefinition, ToolResultMessage } from "@keel/kernel";
import type { ProviderScriptInput } from "@keel/testkit";
import { createAgent, defineTool, messageText } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
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
    if (i === Math.floor(lines / 2))
      out.push(`Traceback: ValueError in /srv/${tag}/core_${i}.py line ${1000 + i}: bad value ${tag}_${i}`);
    else out.push(`${tag} row ${i}: ok ${i * 7} items processed in worker pool shard ${i % 5} of the cluster node`);
  }
  return out.join("\n");
}

/** A `bash` tool answering with `outputs[n]` on its n-th call. */
export function scriptedTool(name: string, outputs: string[], extra: Partial<ToolDefinition> = {}): ToolDefinition {
  let n = 0;
  return defineTool({
    name,
    description: `Runs ${name}.`,
    category: "exec",
    ...extra,
    execute: () => outputs[n++] ?? "done",
  });
}

/**
 * A `bash` tool whose first call waits until `release()` (so a test can steer while it runs);
 * `began` resolves when that first call started. Call n (from 1) answers `output(n)`.
 */
export function gatedBash(output: (n: number) => string): {
  bash: ToolDefinition;
  began: Promise<void>;
  release: () => void;
} {
  let release!: () => void;
  let started!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const began = new Promise<void>((r) => (started = r));
  let n = 0;
  const bash = defineTool({
    name: "bash",
    description: "Runs a command.",
    category: "exec",
    execute: async () => {
      if (n++ === 0) {
        started();
        await gate;
      }
      return output(n);
    },
  });
  return { bash, began, release };
}

/** Build an agent with the plugin, a scripted main provider and a scripted side model. */
export async function setup(opts: {
  steps: ProviderScriptInput;
  side?: ProviderScriptInput;
  window?: number;
  tools?: ToolDefinition[];
  plugin?: CompactionInput;
  extraPlugins?: KeelPlugin[];
  approve?: () => boolean;
}) {
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
export function ofType<T extends KeelEvent["type"]>(
  events: readonly KeelEvent[],
  type: T,
): Extract<KeelEvent, { type: T }>[] {
  return events.filter((e): e is Extract<KeelEvent, { type: T }> => e.type === type);
}

/** Diagnostics with a code. */
export function diagnostics(
  events: readonly KeelEvent[],
  code: string,
): Array<{ message: string; data?: unknown; level: string }> {
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

const WORDS = "alpha beta gamma /srv/app/main.py ValueError exit 137 retry_count fooBar 0x1f build ok failed".split(
  " ",
);

/** A history with orphans, missing results, duplicates, results after user messages and stray summaries. */
export function adversarialHistory(rnd: () => number): Message[] {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
  const text = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(" ");
  const out: Message[] = [{ role: "user", content: [{ type: "text", text: `task ${text(5)}` }] }];
  let callNo = 0;
  const n = 3 + Math.floor(rnd() * 50);
  let pending: Array<{ id: string; name: string }> = [];
  for (let k = 0; k < n; k++) {
    const r = rnd();
    if (r < 0.12) out.push({ role: "user", content: [{ type: "text", text: text(1 + Math.floor(rnd() * 30)) }] });
    else if (r < 0.45) {
      const calls = Array.from({ length: Math.floor(rnd() * 4) }, () => ({
        id: rnd() < 0.05 && callNo > 0 ? `c${callNo - 1}` : `c${callNo++}`,
        name: pick(["bash", "read", "grep"]),
      }));
      out.push({
        role: "assistant",
        content: [
          { type: "text", text: text(3 + Math.floor(rnd() * 40)) },
          ...calls.map((c) => ({ type: "tool_call" as const, id: c.id, name: c.name, args: { q: text(2) } })),
        ],
      });
      pending = calls;
      const order = [...pending].sort(() => rnd() - 0.5);
      for (const c of order) {
        if (rnd() < 0.15) continue; // missing result
        if (rnd() < 0.1) out.push({ role: "user", content: [{ type: "text", text: "interjection" }] }); // splits the pair
        out.push(result(c.id, c.name, text(5 + Math.floor(rnd() * 400))));
        if (rnd() < 0.05) out.push(result(c.id, c.name, "duplicate"));
      }
    } else if (r < 0.55)
      out.push(result(`ghost${k}`, "bash", text(10))); // orphan
    else if (r < 0.6)
      out.push({
        role: "user",
        content: [{ type: "text", text: `[summary of earlier conversation (3 messages, deterministic)]\n${text(20)}` }],
      });
    else out.push({ role: "assistant", content: [{ type: "text", text: text(5 + Math.floor(rnd() * 60)) }] });
  }
  if (out.at(-1)!.role === "assistant") out.push({ role: "user", content: [{ type: "text", text: "go on" }] });
  return out;
}

export function result(id: string, name: string, text: string): ToolResultMessage {
  return { role: "tool", toolCallId: id, toolName: name, content: [{ type: "text", text }], isError: false };
}

/**
 * True when `text` leaves a code fence open, per CommonMark: a line ending is \n, \r\n or \r; a
 * fence line has at most 3 spaces of indent, then 3+ backticks (info without a backtick) or 3+
 * tildes (any info); a bare run of the opener's character, at least as long, closes it.
 */
export function leavesFenceOpen(text: string): boolean {
  let open = "";
  for (const line of text.split(/\r\n|\r|\n/)) {
    const m = /^ {0,3}(`{3,}|~{3,})([\s\S]*)$/.exec(line);
    if (!m || (m[1]![0] === "`" && m[2]!.includes("`"))) continue;
    if (!open) open = m[1]!;
    else if (m[1]![0] === open[0] && m[1]!.length >= open.length && !m[2]!.trim()) open = "";
  }
  return open !== "";
}
