/**
 * Fixture-driven ordering tests: each JSON file in fixtures/order/ describes plugins and
 * their subscriptions, a scripted model, and the exact sequence of labels the handlers (and
 * the tools) record as they are called. The turn runs on the real kernel.
 *
 * Label format (what `expected` lists):
 *   "<phase> <sub>[ <callId>| r<round>][ start| end][ saw=<observed>]"
 *   - <sub> is the plugin name, or "<plugin>#<id>" for a subscription with an id;
 *   - tool-scoped phases add the tool call id, round-scoped phases add "r<round>";
 *   - "markEnd" subscriptions record "start" when called and "end" when they finish;
 *   - "observe" adds what the handler saw (tool args, result text, or tool messages).
 *   Tools record "exec <tool> <callId> args=<json>" when called and "done <tool> <callId>".
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type {
  HookContext,
  KeelEvent,
  KeelPlugin,
  Message,
  PhaseName,
  SubscribeOptions,
  ToolDefinition,
} from "../src/index.ts";
import { createAgent, definePlugin, isPhaseName, messageText, PHASES } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

const FIXTURE_DIR = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "order");

const PhaseNameSchema = z.string().refine(isPhaseName, { message: "not a phase name" });

const SubscriptionSpec = z.strictObject({
  phase: PhaseNameSchema,
  id: z.string().optional(),
  stage: z.enum(["pre", "normal", "post"]).optional(),
  priority: z.number().optional(),
  after: z.array(z.string()).optional(),
  before: z.array(z.string()).optional(),
  /** Absent: a synchronous handler; 0: async, one microtask; n: async, waits n ms. */
  delayMs: z.number().int().nonnegative().optional(),
  markEnd: z.boolean().optional(),
  observe: z.enum(["args", "result", "toolMessages"]).optional(),
  /** tool.pre_call: allow with args = { ...event.call.args, ...rewriteArgs }. */
  rewriteArgs: z.record(z.string(), z.unknown()).optional(),
  /** tool.post_result: rewrite the result to its current text + this suffix. */
  rewriteResult: z.string().optional(),
  /** round.pre_request: mask this tool result once it is in the history. */
  maskToolResult: z.strictObject({ toolCallId: z.string(), text: z.string() }).optional(),
  /** Phases accepting prompt_context: contribute this content. */
  context: z.string().optional(),
});
type SubscriptionSpec = z.infer<typeof SubscriptionSpec>;

const FixtureSchema = z.strictObject({
  description: z.string(),
  plugins: z.array(z.strictObject({ name: z.string(), subscriptions: z.array(SubscriptionSpec) })),
  steps: z.array(z.unknown()).min(2),
  expected: z.array(z.string()).min(1),
  expectedToolResults: z.record(z.string(), z.string()),
  expectedSystemIncludes: z.array(z.string()).optional(),
  expectedRewrittenBy: z.record(z.string(), z.array(z.string())).optional(),
});
type Fixture = z.infer<typeof FixtureSchema>;

const TOOL_PHASES = new Set<PhaseName>(["tool.pre_call", "tool.post_result"]);
const ROUND_PHASES = new Set<PhaseName>(["round.pre_request", "round.post_response"]);

function loadFixtures(): Array<{ file: string; fixture: Fixture }> {
  return readdirSync(FIXTURE_DIR)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((file) => ({ file, fixture: FixtureSchema.parse(JSON.parse(readFileSync(join(FIXTURE_DIR, file), "utf8"))) }));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function textOf(m: Message): string {
  return messageText(m);
}

/** "<plugin>" or "<plugin>#<id>" from a kernel subscription id "<plugin>:<phase>[#<id>]". */
function subLabelOf(subscriptionId: string, phase: string): string {
  return subscriptionId.replace(`:${phase}`, "");
}

interface Recorder {
  log: string[];
  problems: string[];
}

function observed(spec: SubscriptionSpec, event: any): string {
  switch (spec.observe) {
    case "args":
      return JSON.stringify(event.call.args);
    case "result":
      return textOf(event.result);
    case "toolMessages":
      return JSON.stringify((event.messages as Message[]).filter((m) => m.role === "tool").map(textOf));
    default:
      return "";
  }
}

function contributions(spec: SubscriptionSpec, plugin: string, event: any): unknown[] {
  const out: unknown[] = [];
  if (spec.rewriteArgs)
    out.push({
      kind: "tool_decision",
      decision: "allow",
      args: { ...(event.call.args as object), ...spec.rewriteArgs },
    });
  if (spec.rewriteResult !== undefined)
    out.push({
      kind: "tool_result_rewrite",
      content: textOf(event.result) + spec.rewriteResult,
      reason: `fixture rewrite by ${plugin}`,
    });
  if (spec.maskToolResult) {
    const { toolCallId, text } = spec.maskToolResult;
    const present = (event.messages as Message[]).some((m) => m.role === "tool" && m.toolCallId === toolCallId);
    if (present)
      out.push({ kind: "message_edit", reason: "fixture mask", edits: [{ op: "mask_tool_result", toolCallId, text }] });
  }
  if (spec.context !== undefined)
    out.push({
      kind: "prompt_context",
      id: `${plugin}${spec.id ? `-${spec.id}` : ""}`,
      domain: "fixture",
      content: spec.context,
    });
  return out;
}

function buildPlugin(name: string, subs: readonly SubscriptionSpec[], rec: Recorder): KeelPlugin {
  return definePlugin({
    name,
    version: "1.0.0",
    kernel: "^1",
    setup(ctx) {
      for (const spec of subs) {
        const phase = spec.phase as PhaseName;
        const subLabel = spec.id ? `${name}#${spec.id}` : name;
        const expectedId = spec.id ? `${name}:${phase}#${spec.id}` : `${name}:${phase}`;
        const handler = (event: any, hctx: HookContext): unknown => {
          if (
            hctx.subscription !== expectedId ||
            hctx.phase !== phase ||
            event.phase !== phase ||
            hctx.plugin !== name
          ) {
            rec.problems.push(
              `${expectedId} called with ctx ${hctx.plugin}/${hctx.phase}/${hctx.subscription}, event ${String(event.phase)}`,
            );
          }
          const parts = [phase, subLabel];
          if (TOOL_PHASES.has(phase)) parts.push(event.call.id as string);
          if (ROUND_PHASES.has(phase)) parts.push(`r${event.round as number}`);
          const base = parts.join(" ");
          let start = spec.markEnd ? `${base} start` : base;
          if (spec.observe) start += ` saw=${observed(spec, event)}`;
          rec.log.push(start);
          const result = contributions(spec, name, event);
          const value = result.length === 0 ? undefined : result;
          if (spec.delayMs === undefined) {
            if (spec.markEnd) rec.log.push(`${base} end`);
            return value;
          }
          const delay = spec.delayMs;
          return (async () => {
            if (delay === 0) await Promise.resolve();
            else await sleep(delay);
            if (spec.markEnd) rec.log.push(`${base} end`);
            return value;
          })();
        };
        const opts: SubscribeOptions<PhaseName> = {};
        if (spec.id !== undefined) opts.id = spec.id;
        if (spec.stage !== undefined) opts.stage = spec.stage;
        if (spec.priority !== undefined) opts.priority = spec.priority;
        if (spec.after !== undefined) opts.after = spec.after;
        if (spec.before !== undefined) opts.before = spec.before;
        ctx.on(phase, handler as never, opts);
      }
    },
  });
}

function buildTools(rec: Recorder): ToolDefinition[] {
  const read: ToolDefinition = {
    name: "read",
    description: "Read a file (parallel-safe).",
    category: "info",
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, delayMs: { type: "number" } },
      required: ["path"],
    },
    async execute(args: { path: string; delayMs?: number }, tctx) {
      rec.log.push(`exec read ${tctx.callId} args=${JSON.stringify(args)}`);
      if (args.delayMs) await sleep(args.delayMs);
      rec.log.push(`done read ${tctx.callId}`);
      return `contents of ${args.path}`;
    },
  };
  const note: ToolDefinition = {
    name: "note",
    description: "Write a note (an edit tool: runs alone).",
    category: "edit",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    execute(args: { text: string }, tctx) {
      rec.log.push(`exec note ${tctx.callId} args=${JSON.stringify(args)}`);
      rec.log.push(`done note ${tctx.callId}`);
      return `noted ${args.text}`;
    },
  };
  return [read, note];
}

/** Phase instances in order of first appearance, with the subscriptions seen in each. */
function instancesOf(labels: readonly string[]): Array<{ phase: PhaseName; subs: string[] }> {
  const byKey = new Map<string, { phase: PhaseName; subs: string[] }>();
  for (const label of labels) {
    const parts = label.split(" ");
    const phase = parts[0]!;
    if (!isPhaseName(phase)) continue;
    const sub = parts[1]!;
    const key = TOOL_PHASES.has(phase) || ROUND_PHASES.has(phase) ? `${phase} ${parts[2]}` : phase;
    let inst = byKey.get(key);
    if (!inst) byKey.set(key, (inst = { phase, subs: [] }));
    if (!inst.subs.includes(sub)) inst.subs.push(sub);
  }
  return [...byKey.values()];
}

async function runFixture(fixture: Fixture) {
  const rec: Recorder = { log: [], problems: [] };
  const provider = scriptedProvider(fixture.steps as never);
  const agent = await createAgent({
    provider,
    store: new MemorySessionStore(),
    instructions: "You are an ordering test agent.",
    trace: "full",
    tools: buildTools(rec),
    plugins: fixture.plugins.map((p) => buildPlugin(p.name, p.subscriptions, rec)),
  });
  const resolved = new Map(
    agent.inspect().map((row) => [row.phase as string, row.subscriptions.map((s) => subLabelOf(s.id, row.phase))]),
  );
  const session = await agent.session();
  const result = await session.run("please use the tools");
  await session.close();
  const events = await session.events();
  await agent.close();
  return { rec, provider, result, events, session, resolved };
}

const fixtures = loadFixtures();

describe("phase order fixtures", () => {
  it("finds the fixtures and each has a tool round with 2-3 calls then a final answer", () => {
    expect(fixtures.map((f) => f.file)).toEqual(
      expect.arrayContaining([
        "after-before.json",
        "collect-after-async.json",
        "lifecycle.json",
        "priority-and-list-order.json",
        "stages.json",
        "waterfall-rewrites.json",
      ]),
    );
    for (const { file, fixture } of fixtures) {
      const steps = fixture.steps as Array<{ toolCalls?: unknown[]; text?: string }>;
      const calls = steps[0]?.toolCalls?.length ?? 0;
      expect(calls, file).toBeGreaterThanOrEqual(2);
      expect(calls, file).toBeLessThanOrEqual(3);
      expect(steps[steps.length - 1]!.toolCalls ?? [], file).toEqual([]);
    }
  });

  describe.each(fixtures)("$file", ({ fixture }) => {
    it("records exactly the expected sequence, and the event log agrees", async () => {
      const { rec, provider, result, events, session, resolved } = await runFixture(fixture);

      expect(rec.problems).toEqual([]);
      expect(rec.log).toEqual(fixture.expected);

      expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
      expect(provider.remaining).toBe(0);
      expect(provider.requests).toHaveLength(fixture.steps.length);

      // What the model received after the tool round.
      const last = provider.requests[provider.requests.length - 1]!;
      const toolResults = Object.fromEntries(
        last.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, textOf(m)]),
      );
      expect(toolResults).toEqual(fixture.expectedToolResults);
      for (const s of fixture.expectedSystemIncludes ?? []) expect(provider.requests[0]!.system).toContain(s);
      expect(textOf(session.messages[0]!)).toBe("please use the tools");

      // The stored log has one phase.completed per phase run, in the same order as the handlers ran.
      const completed = events.filter(
        (e): e is Extract<KeelEvent, { type: "phase.completed" }> =>
          e.type === "phase.completed" && isPhaseName(e.phase),
      );
      const instances = instancesOf(rec.log);
      expect(completed.map((e) => e.phase)).toEqual(instances.map((i) => i.phase));
      completed.forEach((e, i) => {
        const where = `phase.completed #${i} (${e.phase})`;
        const summarized = e.handlers.map((h) => subLabelOf(h.subscription, e.phase));
        // Every subscription ran, summarized in resolved order (the order inspect() shows) ...
        expect(summarized, where).toEqual(resolved.get(e.phase));
        expect([...summarized].sort(), where).toEqual([...instances[i]!.subs].sort());
        // ... which for a waterfall is exactly the order the handlers were called in.
        if (PHASES[e.phase as PhaseName].kind === "waterfall") expect(instances[i]!.subs, where).toEqual(summarized);
        expect(
          e.handlers.every((h) => h.status === "ok"),
          `${where} handler statuses`,
        ).toBe(true);
      });
      expect(events.filter((e) => e.type === "diagnostic")).toEqual([]);

      if (fixture.expectedRewrittenBy) {
        const rewritten = Object.fromEntries(
          events.flatMap((e) => (e.type === "tool.completed" ? [[e.callId, e.rewrittenBy ?? []] as const] : [])),
        );
        expect(rewritten).toEqual(fixture.expectedRewrittenBy);
      }
    });
  });

  it("the lifecycle fixture covers every phase of the table, in table order", () => {
    const lifecycle = fixtures.find((f) => f.file === "lifecycle.json")!.fixture;
    const firstSeen: string[] = [];
    for (const label of lifecycle.expected) {
      const phase = label.split(" ")[0]!;
      if (isPhaseName(phase) && !firstSeen.includes(phase)) firstSeen.push(phase);
    }
    expect(firstSeen).toEqual(Object.keys(PHASES));
  });

  it("the resolved order shown by inspect() matches the order handlers ran in", async () => {
    const fixture = fixtures.find((f) => f.file === "after-before.json")!.fixture;
    const rec: Recorder = { log: [], problems: [] };
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "unused" }]),
      store: new MemorySessionStore(),
      plugins: fixture.plugins.map((p) => buildPlugin(p.name, p.subscriptions, rec)),
    });
    const row = agent.inspect().find((r) => r.phase === "tool.post_result")!;
    const ran = fixture.expected
      .filter((l) => l.startsWith("tool.post_result ") && l.endsWith(" c1"))
      .map((l) => l.split(" ")[1]);
    expect(ran).toEqual(["plain", "first", "early", "late", "poststage", "prestage"]);
    expect(row.subscriptions.map((s) => subLabelOf(s.id, row.phase))).toEqual(ran);
    await agent.close();
  });
});
