/**
 * What tracing costs a turn: the same turn (3 tool calls, 2 plugins that contribute), in-memory
 * session store, scripted provider, run untraced, traced with no SDK registered (the API's
 * no-op), and traced into the SDK with an in-memory exporter. The three agents take turns, in
 * this one process, so the ratios are measured in one run. Run with `pnpm bench otel`.
 */
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { createAgent, definePlugin } from "@keel/agent";
import { MemorySessionStore, ScriptedProvider } from "@keel/testkit";
import type { Agent, Session, ToolDefinition } from "@keel/agent";
import { traceAgent } from "../src/index.ts";

const TURNS = Number(process.env.BENCH_TURNS ?? 1500);
const WARMUP = 200;
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
const tools: ToolDefinition[] = [0, 1, 2].map((i) => ({
  name: `t${i}`,
  description: `tool ${i}`,
  parameters: { type: "object", properties: { q: { type: "string" } } },
  category: "info",
  execute: () => "ok",
}));
const plugins = [0, 1].map((i) =>
  definePlugin({
    name: `p${i}`,
    version: "1.0.0",
    setup(ctx) {
      ctx.on("turn.pre_prompt_compile", () => ({
        kind: "prompt_section",
        id: `s${i}`,
        sectionId: `s${i}`,
        domain: "bench",
        content: "be brief",
      }));
      ctx.on("turn.pre_prompt_context", () => ({
        kind: "prompt_context",
        id: `c${i}`,
        domain: "bench",
        content: "context",
      }));
    },
  }),
);

async function make(): Promise<{ agent: Agent; session: Session }> {
  const agent = await createAgent({
    provider: new ScriptedProvider({ steps: Array.from({ length: 2 * (TURNS + WARMUP) }, (_, i) => step[i % 2]!) }),
    sideModel: false,
    store: new MemorySessionStore(),
    tools,
    plugins,
  });
  return { agent, session: await agent.session() };
}
/** A fresh session every few turns, so a growing history does not dominate the turn. */
const PER_SESSION = 10;

const exporter = new InMemorySpanExporter();
const sdk = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const variants = [
  { name: "untraced", ...(await make()) },
  { name: "otel, no SDK (no-op)", ...(await make()) },
  { name: "otel, SDK + in-memory exporter", ...(await make()) },
];
traceAgent(variants[1]!.agent);
traceAgent(variants[2]!.agent, { tracerProvider: sdk });

const times = variants.map(() => [] as number[]);
for (let i = 0; i < TURNS + WARMUP; i++) {
  for (const [v, variant] of variants.entries()) {
    if (i > 0 && i % PER_SESSION === 0) {
      await variant.session.close();
      variant.session = await variant.agent.session();
    }
    const t0 = performance.now();
    await variant.session.run("look things up");
    if (i >= WARMUP) times[v]!.push(performance.now() - t0);
  }
  if (i % 100 === 0) exporter.reset();
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;
const base = median(times[0]!);
console.log(
  `${TURNS} turns each (3 tool calls, 2 contributing plugins, ${PER_SESSION} turns a session), interleaved; median and p99 ms per turn:`,
);
for (const [v, { name }] of variants.entries())
  console.log(
    `  ${name.padEnd(32)} p50 ${median(times[v]!).toFixed(3)}  p99 ${p99(times[v]!).toFixed(3)}  ratio ${(median(times[v]!) / base).toFixed(2)}x`,
  );
for (const { agent } of variants) await agent.close();
