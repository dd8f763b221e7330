/**
 * Kernel overhead per turn: one turn with 3 tool calls, 5 plugins subscribed to every phase
 * with no-op handlers, scripted provider — through the kernel versus the same handlers,
 * provider and tools driven by a hand-written loop. Both run in this process, interleaved,
 * so the ratio is measured in one run. Run with `pnpm bench`.
 */
import { createAgent, definePlugin, PHASE_NAMES, toolCallsOf } from "../src/index.ts";
import { MemorySessionStore, ScriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";
import { buildRegistry, PhaseRunner } from "../src/index.ts";
import { TokenCounter } from "../../tokens/src/index.ts";
import type {
  KeelEvent,
  Message,
  ModelProvider,
  ModelRequest,
  PhaseName,
  ToolDefinition,
  ToolResultMessage,
} from "../src/index.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const TURNS = Number(process.env.BENCH_TURNS ?? 3000);
const WARMUP = 300;
const PLUGINS = 5;

const step = [
  {
    toolCalls: [
      { name: "t0", args: { q: "a" } },
      { name: "t1", args: { q: "b" } },
      { name: "t2", args: { q: "c" } },
    ],
  },
  { text: "All three lookups are done." },
];
const provider = () =>
  new ScriptedProvider({ steps: Array.from({ length: 2 * (TURNS + WARMUP) }, (_, i) => step[i % 2]!) });
const tools: ToolDefinition[] = [0, 1, 2].map((i) => ({
  name: `t${i}`,
  description: `tool ${i}`,
  parameters: { type: "object", properties: { q: { type: "string" } } },
  category: "info",
  execute: () => "ok",
}));
const noop = () => undefined;
const plugins = Array.from({ length: PLUGINS }, (_, i) =>
  definePlugin({
    name: `noop-${i}`,
    version: "1.0.0",
    kernel: "^1",
    setup(ctx) {
      for (const p of PHASE_NAMES) ctx.on(p, noop);
    },
  }),
);

/** What a hand loop that also keeps the kernel's log and token counts would do (baseline b). */
interface Bookkeeping {
  store: MemorySessionStore;
  tokens: TokenCounter;
  sessionId: string;
  seq: number;
}

/**
 * The same handlers, provider and tools, driven by hand. With `book`, it also logs the same
 * events as the kernel (18 a turn) and counts tokens per request, so the difference to the
 * kernel is phase dispatch, validation and merge alone.
 */
async function handLoop(p: ModelProvider, signal: AbortSignal, book?: Bookkeeping): Promise<void> {
  const log = (type: string, data: object) => {
    if (book)
      book.store.append({
        type,
        ...data,
        sessionId: book.sessionId,
        seq: ++book.seq,
        ts: Date.now(),
        turnId: "t",
      } as KeelEvent);
  };
  const call = async (phase: PhaseName, event: object) => {
    for (let i = 0; i < PLUGINS; i++) {
      const r: unknown = (noop as (e: object) => unknown)({ ...event, phase });
      if (r && typeof (r as Promise<unknown>).then === "function") await r;
    }
  };
  const messages: Message[] = [{ role: "user", content: [{ type: "text", text: "look things up" }] }];
  log("turn.started", { input: "look things up" });
  log("message.appended", { message: messages[0] });
  const schemas = tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters! }));
  for (const phase of [
    "turn.pre_policy",
    "turn.pre_prompt_context",
    "turn.pre_tool_materialization",
    "turn.post_preflight_prompt_context",
    "turn.pre_prompt_compile",
    "turn.post_prompt_compile",
  ] as const)
    await call(phase, { messages });
  for (let round = 1; ; round++) {
    await call("round.pre_request", { messages, round });
    const request: ModelRequest = { system: "You are a bench.", messages, tools: schemas, options: {} };
    if (book)
      log("prompt.compiled", {
        manifest: { round, tokenEstimate: book.tokens.countRequest(request, { exactAbove: 100_000 }) },
      });
    let message: Message | undefined;
    for await (const e of p.stream(request, { signal })) if (e.type === "response") message = e.message;
    messages.push(message!);
    log("model.responded", { round });
    log("message.appended", { message });
    await call("round.post_response", { message });
    const calls = toolCallsOf(message!);
    if (!calls.length) break;
    for (const c of calls) {
      await call("tool.pre_call", { call: c });
      log("tool.started", { callId: c.id });
    }
    const outs = await Promise.all(
      calls.map(async (c) => ({
        c,
        out: await tools
          .find((t) => t.name === c.name)!
          .execute(c.args, {
            signal,
            callId: c.id,
            toolName: c.name,
            sessionId: "s",
            turnId: "t",
            progress: () => {},
            budget: { rounds: 1, toolCalls: 1, tokens: 1, wallMs: 1 },
            depth: 0,
            rerun: false,
            child: () => Promise.reject(new Error("no child sessions in the hand loop")),
          }),
      })),
    );
    for (const { c, out } of outs) {
      const result: ToolResultMessage = {
        role: "tool",
        toolCallId: c.id,
        toolName: c.name,
        content: [{ type: "text", text: String(out) }],
        isError: false,
      };
      await call("tool.post_result", { result });
      log("tool.completed", { callId: c.id });
      log("message.appended", { message: result });
      messages.push(result);
    }
  }
  await call("turn.post_turn", { messages });
  log("turn.completed", {});
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const kp = provider();
  const agent = await createAgent({ name: "bench", provider: kp, tools, plugins, store: new MemorySessionStore() });
  const hp = provider();
  const bp = provider();
  const signal = new AbortController().signal;
  const kernel: number[] = [];
  const hand: number[] = [];
  const booked: number[] = [];
  const bookStore = new MemorySessionStore();
  const tokens = new TokenCounter();
  for (let i = 0; i < TURNS + WARMUP; i++) {
    const session = await agent.session();
    const t0 = performance.now();
    const r = await session.run("look things up");
    const t1 = performance.now();
    await handLoop(hp, signal);
    const t2 = performance.now();
    const book = { store: bookStore, tokens, sessionId: `s${i}`, seq: 0 };
    bookStore.createSession({ id: book.sessionId, agent: "bench", createdAt: Date.now() });
    const t3 = performance.now();
    await handLoop(bp, signal, book);
    const t4 = performance.now();
    if (r.verdict.status !== "completed" || r.toolCalls !== 3)
      throw new Error(`unexpected verdict ${JSON.stringify(r.verdict)}`);
    if (i >= WARMUP) {
      kernel.push(t1 - t0);
      hand.push(t2 - t1);
      booked.push(t4 - t3);
    }
    await session.close();
  }
  await agent.close();

  // One phase run with the 5 no-op handlers, dispatch alone (tapable, policies, validation).
  const runner = new PhaseRunner(await buildRegistry(plugins), { phaseStarted() {}, backgroundSettled() {} });
  const phaseEvent = Object.freeze({ phase: "turn.pre_policy" });
  const runs: number[] = [];
  for (let i = 0; i < 20_000; i++) {
    const t = performance.now();
    for (let j = 0; j < 10; j++) await runner.run("turn.pre_policy", phaseEvent, { signal });
    if (i >= 2_000) runs.push((performance.now() - t) / 10);
  }

  // The same turn with the durable SQLite store, for scale (not part of the ratio).
  const dir = mkdtempSync(join(tmpdir(), "keel-bench-"));
  const durable: number[] = [];
  const durableTurns = process.env.BENCH_SQLITE === "0" ? 60 : 400;
  const sp = new ScriptedProvider({ steps: Array.from({ length: 2 * durableTurns }, (_, i) => step[i % 2]!) });
  const sqliteAgent = await createAgent({
    name: "bench",
    provider: sp,
    tools,
    plugins,
    store: new SqliteSessionStore({ path: join(dir, "sessions.sqlite") }),
  });
  for (let i = 0; i < durableTurns; i++) {
    const session = await sqliteAgent.session();
    const t0 = performance.now();
    await session.run("look things up");
    if (i >= 50) durable.push(performance.now() - t0);
  }
  await sqliteAgent.close();
  rmSync(dir, { recursive: true, force: true });

  const k = median(kernel) * 1000;
  const h = median(hand) * 1000;
  const b = median(booked) * 1000;
  const rows = [
    ["kernel turn (5 plugins x 13 phases, 3 tool calls, memory store)", `${k.toFixed(1)} µs`],
    ["(a) hand-written loop, same handlers/provider/tools", `${h.toFixed(1)} µs`],
    ["(b) hand loop + the same event log and token counts", `${b.toFixed(1)} µs`],
    ["ratio kernel / (a) (target <= 1.5)", (k / h).toFixed(2)],
    ["ratio kernel / (b): phase dispatch, validation, merge", (k / b).toFixed(2)],
    ["kernel overhead per turn vs (a) (target < 100 µs)", `${(k - h).toFixed(1)} µs`],
    ["dispatch cost per handler call vs (b) (90 calls a turn)", `${((k - b) / 90).toFixed(2)} µs`],
    ["one phase run, 5 no-op handlers (dispatch alone)", `${(median(runs) * 1000).toFixed(2)} µs`],
    ["kernel turn with the SQLite store (durable user message)", `${(median(durable) * 1000).toFixed(1)} µs`],
  ];
  console.log(`kernel overhead — ${TURNS} turns each, interleaved in one run, medians (node ${process.version})`);
  for (const [name, value] of rows) console.log(`  ${name!.padEnd(66)} ${value}`);
}

await main();
