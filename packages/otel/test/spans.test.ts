/**
 * The span tree of real turns: the Anthropic SDK against the local wire server (a tool round
 * trip, a stream cut and retried), the real compaction plugin masking old tool outputs, a plugin
 * whose contribution is rejected, all inside a host's request span; asserted with the
 * OpenTelemetry SDK's in-memory exporter.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  AlwaysOffSampler,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { Agent } from "@keel/agent";
import { anthropicProvider } from "@keel/providers";
import compaction from "@keel/plugin-compaction";
import { startWireServer, type WireServer } from "@keel/wire-server";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { otel, traceAgent } from "../src/index.ts";

let server: WireServer;
let exporter: InMemorySpanExporter;
let provider: TracerProvider;
const dirs: string[] = [];
const agents: Agent[] = [];

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  server = await startWireServer();
});
afterAll(async () => {
  await server.close();
  context.disable();
});
beforeEach(() => {
  exporter = new InMemorySpanExporter();
  provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
});
afterEach(async () => {
  for (const a of agents.splice(0)) await a.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A tool output big enough that eight of them push a 9,000-token window past compaction's soft threshold. */
function bigOutput(tag: string): string {
  return Array.from(
    { length: 60 },
    (_, i) => `${tag} row ${i + 1}: ok ${i * 7} items processed in worker pool shard ${i % 5} of the cluster node`,
  ).join("\n");
}

/** A plugin that adds a prompt section, and one contribution the kernel rejects (wrong kind for the phase). */
const probe = definePlugin({
  name: "probe",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("turn.pre_prompt_compile", () => ({
      kind: "prompt_section",
      id: "probe.rules",
      sectionId: "rules",
      title: "Rules",
      domain: "rules",
      content: "Answer briefly.",
    }));
    ctx.on(
      "turn.pre_prompt_context",
      () => ({ kind: "prompt_section", id: "misplaced", sectionId: "x", domain: "x", content: "wrong phase" }) as never,
    );
  },
});

async function tracedAgent(opts: { captureContent?: boolean; rounds: number }) {
  const home = mkdtempSync(join(tmpdir(), "keel-otel-"));
  dirs.push(home);
  let n = 0;
  const bash = defineTool({
    name: "bash",
    description: "Runs a command.",
    category: "exec",
    execute: () => bigOutput(`t${n++}`),
  });
  const agent = await createAgent({
    name: "ops",
    provider: anthropicProvider({
      model: "claude-sonnet-4-6",
      apiKey: "k",
      baseURL: server.anthropicBaseURL,
      contextWindow: 9_000,
      maxRetries: 0,
      streamRetries: 2,
      streamBackoffMs: 5,
    }),
    sideModel: false,
    store: new MemorySessionStore(),
    tools: [bash],
    plugins: [
      compaction({
        path: join(home, "compaction.sqlite"),
        taco: { enabled: false },
        hard: 0.99,
        subgoals: { extractor: "heuristic" },
      }),
      probe,
    ],
  });
  agents.push(agent);
  traceAgent(agent, {
    tracerProvider: provider,
    ...(opts.captureContent !== undefined ? { captureContent: opts.captureContent } : {}),
  });
  for (let i = 0; i < opts.rounds; i++)
    server.enqueue({
      text: `Step ${i + 1}: next check.`,
      toolCalls: [{ id: `c${i + 1}`, name: "bash", args: { command: `check ${i + 1}` } }],
      usage: { input: 900 + i, output: 20 },
      model: "claude-sonnet-4-6-20260901",
    });
  return agent;
}

const byName = (spans: ReadableSpan[], prefix: string) => spans.filter((s) => s.name.startsWith(prefix));
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const ms = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6;

describe("spans of a turn", () => {
  it("a turn with tools, a retried stream and a compaction, inside the host's request span", async () => {
    const agent = await tracedAgent({ rounds: 8 });
    // Round 9 is cut mid-stream, then retried: one chat span with a retry event.
    server.enqueue(
      { text: "All eight checks passed and nothing else is left.", fault: { type: "cut", afterEvents: 2 } },
      {
        text: "All eight checks passed.",
        usage: { input: 1200, output: 7, cacheRead: 300 },
        model: "claude-sonnet-4-6-20260901",
      },
    );
    const session = await agent.session();
    const host = provider.getTracer("host");
    const result = await host.startActiveSpan("POST /chat", { kind: SpanKind.SERVER }, async (span) => {
      try {
        return await session.run("check the cluster, token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH");
      } finally {
        span.end();
      }
    });
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    const spans = exporter.getFinishedSpans();

    const [root] = byName(spans, "POST /chat");
    const turns = byName(spans, "invoke_agent");
    expect(turns.map((s) => s.name)).toEqual(["invoke_agent ops"]);
    const turn = turns[0]!;
    expect(parentOf(turn)).toBe(root!.spanContext().spanId);
    expect(turn.spanContext().traceId).toBe(root!.spanContext().traceId);
    expect(turn.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "ops",
      "gen_ai.conversation.id": session.id,
      "keel.turn.id": result.turnId,
      "keel.turn.status": "completed",
      "keel.turn.reason": "end_turn",
      "keel.turn.rounds": 9,
      "keel.turn.tool_calls": 8,
    });
    expect(turn.attributes["gen_ai.usage.output_tokens"]).toBe(result.usage.outputTokens);
    expect(typeof turn.attributes["keel.plugin_ms.@keel/plugin-compaction"]).toBe("number");

    const chats = byName(spans, "chat ");
    expect(chats).toHaveLength(9);
    for (const c of chats) {
      expect(c.kind).toBe(SpanKind.CLIENT);
      expect(parentOf(c)).toBe(turn.spanContext().spanId);
      expect(c.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.response.model": "claude-sonnet-4-6-20260901",
      });
      expect(c.attributes["keel.prompt.sections"]).toContain("rules: probe");
      expect(c.attributes["keel.prompt.tools"]).toContain("bash");
    }
    expect(chats[0]!.name).toBe("chat claude-sonnet-4-6");
    expect(chats[0]!.attributes).toMatchObject({
      "keel.round": 1,
      "gen_ai.response.finish_reasons": ["tool_use"],
      "gen_ai.usage.input_tokens": 900,
      "gen_ai.usage.output_tokens": 20,
    });
    const last = chats[8]!;
    expect(last.attributes).toMatchObject({
      "keel.round": 9,
      "gen_ai.response.finish_reasons": ["end_turn"],
      "gen_ai.usage.input_tokens": 1500,
      "gen_ai.usage.cache_read.input_tokens": 300,
      "gen_ai.usage.output_tokens": 7,
    });
    expect(last.events.map((e) => e.name)).toContain("keel.model.retry");
    expect(chats.slice(0, 8).every((c) => !c.events.some((e) => e.name === "keel.model.retry"))).toBe(true);

    const tools = byName(spans, "execute_tool");
    expect(tools.map((t) => t.attributes["gen_ai.tool.call.id"])).toEqual([
      "c1",
      "c2",
      "c3",
      "c4",
      "c5",
      "c6",
      "c7",
      "c8",
    ]);
    for (const t of tools) {
      expect(t.name).toBe("execute_tool bash");
      expect(parentOf(t)).toBe(turn.spanContext().spanId);
      expect(t.attributes).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "bash",
        "keel.tool.status": "ok",
      });
      expect(t.attributes["keel.tool.result_chars"]).toBeGreaterThan(4_000);
      expect(ms(t.startTime)).toBeGreaterThanOrEqual(ms(turn.startTime));
      expect(ms(t.endTime)).toBeLessThanOrEqual(ms(turn.endTime));
    }

    // Compaction: an event on the turn with before/after counts, and its phase runs as spans naming the plugin.
    const compactions = turn.events.filter((e) => e.name === "keel.compaction");
    expect(compactions.length).toBeGreaterThan(0);
    expect(compactions[0]!.attributes).toMatchObject({ "keel.plugin": "@keel/plugin-compaction" });
    expect(compactions[0]!.attributes!["keel.compaction.reason"]).toMatch(
      /^compaction subgoal: \d+ → \d+ tokens; masked \d+ tool outputs/,
    );
    expect(typeof compactions[0]!.attributes!["keel.compaction.messages_before"]).toBe("number");
    const phases = byName(spans, "keel.phase ");
    expect(
      phases.some(
        (p) =>
          p.name === "keel.phase round.pre_request" &&
          (p.attributes["keel.plugins"] as string[]).includes("@keel/plugin-compaction"),
      ),
    ).toBe(true);
    const compile = phases.find((p) => p.name === "keel.phase turn.pre_prompt_compile")!;
    expect(compile.attributes["keel.plugins"]).toEqual(["probe"]);
    expect(compile.events.find((e) => e.name === "keel.handler")!.attributes).toMatchObject({
      "keel.plugin": "probe",
      "keel.handler.status": "ok",
      "keel.handler.contributions": 1,
    });
    // The misplaced contribution is visible where it happened, with its plugin.
    const context = phases.find((p) => p.name === "keel.phase turn.pre_prompt_context")!;
    const rejected = context.events.find((e) => e.name === "keel.contribution.rejected")!;
    expect(rejected.attributes).toMatchObject({ "keel.plugin": "probe", "keel.contribution.kind": "prompt_section" });
    expect(context.attributes["keel.contributions.not_applied"]).toBe(1);
    for (const p of phases) expect([turn.spanContext().spanId]).toContain(parentOf(p));

    // Content is off by default: no prompt, answer or tool text leaves the process.
    for (const s of spans)
      for (const key of Object.keys(s.attributes))
        expect(key).not.toMatch(/^gen_ai\.(input|output)\.messages$|^gen_ai\.tool\.call\.(arguments|result)$/);
    expect(JSON.stringify(spans.map((s) => [s.attributes, s.events]))).not.toContain("check the cluster");
  });

  it("content is exported only when asked, with secrets redacted", async () => {
    const agent = await tracedAgent({ captureContent: true, rounds: 1 });
    server.enqueue({ text: "Done: one check." });
    const session = await agent.session();
    await session.run("check it with token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH 🎉");
    const spans = exporter.getFinishedSpans();
    const turn = byName(spans, "invoke_agent")[0]!;
    const input = JSON.parse(turn.attributes["gen_ai.input.messages"] as string);
    expect(input[0].role).toBe("user");
    expect(input[0].parts[0].content).toMatch(/^check it with token \[REDACTED:[a-z_]+\] 🎉$/);
    const [first, second] = byName(spans, "chat ");
    expect(JSON.parse(first!.attributes["gen_ai.output.messages"] as string)[0].parts).toEqual([
      { type: "text", content: "Step 1: next check." },
      { type: "tool_call", id: "c1", name: "bash", arguments: { command: "check 1" } },
    ]);
    expect(JSON.parse(second!.attributes["gen_ai.output.messages"] as string)[0].parts[0].content).toBe(
      "Done: one check.",
    );
    const tool = byName(spans, "execute_tool")[0]!;
    expect(JSON.parse(tool.attributes["gen_ai.tool.call.arguments"] as string)).toEqual({ command: "check 1" });
    expect(tool.attributes["gen_ai.tool.call.result"]).toMatch(/^t0 row 1: ok 0 items/);
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain("abcdefghijklmnopqrstuvwxyz0123456789");
  });

  it("a provider failure ends the chat span in error and the turn span with the verdict's code", async () => {
    const agent = await tracedAgent({ rounds: 0 });
    server.enqueue({ error: "auth" });
    const session = await agent.session();
    const r = await session.run("hello");
    expect(r.verdict.status).toBe("failed");
    const spans = exporter.getFinishedSpans();
    const chat = byName(spans, "chat ")[0]!;
    expect(chat.status.code).toBe(SpanStatusCode.ERROR);
    expect(chat.attributes["error.type"]).toBe("auth");
    expect(chat.attributes["http.response.status_code"]).toBe(401);
    const turn = byName(spans, "invoke_agent")[0]!;
    expect(turn.status.code).toBe(SpanStatusCode.ERROR);
    expect(turn.attributes["error.type"]).toBe((r.verdict as { code: string }).code);
  });

  it("a turn sampled out is not traced at all (its tools and rounds make no spans either)", async () => {
    const sampledOut = new TracerProvider({
      sampler: new AlwaysOffSampler(),
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ id: "k1", name: "clock", args: {} }] }, { text: "noon" }]),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [defineTool({ name: "clock", description: "Tells the time.", execute: () => "12:00" })],
    });
    agents.push(agent);
    traceAgent(agent, { tracerProvider: sampledOut });
    const r = await (await agent.session()).run("time?");
    expect(r.text).toBe("noon");
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it("a turn a stopped process left, finished by another agent, is traced as recovered with the calls that were cut", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-otel-recovered-"));
    dirs.push(home);
    const db = join(home, "sessions.sqlite");
    let started!: () => void;
    let release!: () => void;
    const inTool = new Promise<void>((r) => (started = r));
    const hang = defineTool({
      name: "look",
      description: "Looks.",
      category: "info",
      execute: () => (started(), new Promise<string>((r) => (release = () => r("late")))),
    });
    const storeA = new SqliteSessionStore({ path: db });
    const a = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ id: "c1", name: "look", args: {} }] }]),
      sideModel: false,
      store: storeA,
      tools: [hang],
    });
    const s = await a.session();
    const running = s.run("look").catch(() => undefined);
    await inTool;
    storeA.close(); // the process is gone: nothing it does reaches the log any more
    release();
    await running;
    const look = defineTool({ name: "look", description: "Looks.", category: "info", execute: () => "seen" });
    const storeB = new SqliteSessionStore({ path: db });
    const b = await createAgent({
      provider: scriptedProvider([{ text: "done" }]),
      sideModel: false,
      store: storeB,
      tools: [look],
      recovery: "auto",
      observers: [otel({ tracer: provider.getTracer("test") })],
    });
    await (await b.session(s.id)).recover();
    await b.close();
    storeB.close();
    const turn = exporter.getFinishedSpans().find((x) => x.name.startsWith("invoke_agent"))!;
    expect(turn.attributes).toMatchObject({
      "keel.turn.resumed": true,
      "keel.turn.recovered": true,
      "keel.turn.recovered.cut": ["c1"],
      "keel.turn.recovered.lease_taken_over": "holder_dead",
    });
  });

  it("a tracer that throws never changes a turn: tracing stops and the failure is one located diagnostic", async () => {
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "fine" }]),
      sideModel: false,
      store: new MemorySessionStore(),
      observers: [
        otel({
          tracer: {
            startSpan: () => {
              throw new Error("exporter exploded");
            },
            startActiveSpan: () => {
              throw new Error("no");
            },
          } as never,
        }),
      ],
    });
    agents.push(agent);
    const session = await agent.session();
    const r = await session.run("hi");
    expect(r.verdict.status).toBe("completed");
    expect(r.text).toBe("fine");
    const diags = (await session.events()).filter((e) => e.type === "diagnostic" && e.code === "KEEL_OBSERVER_FAILED");
    expect(diags).toHaveLength(1);
    expect((diags[0] as { message: string }).message).toMatch(
      /Observer "otel" failed on a turn\.started event and stopped tracing: exporter exploded/,
    );
  });

  it("an observer whose attach throws is reported and the agent runs; a falsy entry is ignored", async () => {
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "still here" }]),
      sideModel: false,
      store: new MemorySessionStore(),
      observers: [
        false,
        {
          name: "broken",
          attach: () => {
            throw new Error("boom");
          },
        },
      ],
    });
    agents.push(agent);
    const session = await agent.session();
    const r = await session.run("hi");
    expect(r.text).toBe("still here");
    const diag = (await session.events()).find((e) => e.type === "diagnostic" && e.code === "KEEL_OBSERVER_FAILED") as
      | { message: string }
      | undefined;
    expect(diag?.message).toMatch(/Observer "broken" threw in attach\(\): boom/);
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it("a turn keel eval ran carries its experiment and case ids; another turn carries none", async () => {
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "scored" }, { text: "plain" }]),
      sideModel: false,
      store: new MemorySessionStore(),
    });
    agents.push(agent);
    traceAgent(agent, { tracerProvider: provider });
    const session = await agent.session();
    await session.run("case input", { metadata: { experiment: "exp_0123456789abcdef", case: "refund-1" } });
    await session.run("not an eval");
    const turns = exporter.getFinishedSpans().filter((s) => s.name.startsWith("invoke_agent"));
    expect(turns).toHaveLength(2);
    expect(turns[0]!.attributes).toMatchObject({
      "keel.eval.experiment.id": "exp_0123456789abcdef",
      "keel.eval.case.id": "refund-1",
    });
    expect(turns[1]!.attributes["keel.eval.case.id"]).toBeUndefined();
  });

  it("a routed request's chat span names the routed model and carries the route", async () => {
    const cheap = scriptedProvider([{ text: "routed answer" }], { model: "gpt-4.1-mini" });
    const routed = {
      id: "openai:gpt-4.1-mini",
      stream: (req: Parameters<typeof cheap.stream>[0], o: { signal: AbortSignal }) => cheap.stream(req, o),
    };
    const agent = await createAgent({
      provider: scriptedProvider([], { model: "claude-sonnet-4-6" }),
      pool: { fast: { provider: routed, tags: ["cheap"] } },
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [
        definePlugin({
          name: "pick-fast",
          version: "1.0.0",
          setup: (ctx) =>
            void ctx.on("round.pre_request", () => [
              { kind: "request_options", options: { route: { model: "fast", reason: "cheap is enough" } } },
            ]),
        }),
      ],
      observers: [otel({ tracer: provider.getTracer("test") })],
    });
    agents.push(agent);
    const r = await (await agent.session()).run("hi");
    expect(r.text).toBe("routed answer");
    await agent.close();
    const chat = byName(exporter.getFinishedSpans(), "chat ")[0]!;
    expect(chat.name).toBe("chat gpt-4.1-mini");
    expect(chat.attributes).toMatchObject({
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4.1-mini",
      "keel.route.model": "fast",
      "keel.route.provider": "openai:gpt-4.1-mini",
      "keel.route.reason": "cheap is enough",
      "keel.route.plugin": "pick-fast",
    });
  });
});
