/**
 * Adapter overhead per streamed response (1,000 text deltas + 3 tool calls): the adapter versus
 * the same SDK stream consumed directly (text and arguments concatenated), same client, same
 * request body, same wire server, interleaved in one run. Target: ratio <= 1.1.
 * Run with `pnpm bench providers` (BENCH_ITERS to change the sample count).
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startWireServer, type WireReply } from "@keel/wire-server";
import type { ModelProvider, ModelRequest } from "@keel/kernel";
import { anthropicProvider, openaiProvider } from "../src/index.ts";
import { anthropicBody } from "../src/anthropic-request.ts";
import { chatBody, responsesBody } from "../src/openai-request.ts";

const ITERS = Number(process.env.BENCH_ITERS ?? 150);
const WARMUP = 15;
const reply: WireReply = {
  text: "token ".repeat(1000),
  chunks: 1000,
  toolCalls: [0, 1, 2].map((i) => ({
    id: `call_${i}`,
    name: "lookup",
    args: { query: `question number ${i}`, limit: 10 },
    chunks: 8,
  })),
};
const server = await startWireServer({ onEmpty: reply });
const request: ModelRequest = {
  system: "You are a benchmark.",
  messages: [{ role: "user", content: [{ type: "text", text: "Say a thousand tokens and call three tools." }] }],
  tools: [
    {
      name: "lookup",
      description: "Look something up.",
      parameters: { type: "object", properties: { query: { type: "string" }, limit: { type: "number" } } },
    },
  ],
  options: {},
};
const signal = new AbortController().signal;
const anthropic = new Anthropic({ apiKey: "k", baseURL: server.anthropicBaseURL, maxRetries: 0 });
const openai = new OpenAI({ apiKey: "k", baseURL: server.openaiBaseURL, maxRetries: 0 });

interface Case {
  name: string;
  adapter: ModelProvider;
  direct(): Promise<number>;
}

/** What a caller consuming the SDK stream directly would keep: text and tool arguments. */
const cases: Case[] = [
  {
    name: "anthropic messages",
    adapter: anthropicProvider({ model: "claude-sonnet-4-6", client: anthropic }),
    async direct() {
      const body = anthropicBody(request, "claude-sonnet-4-6", 8192, "none");
      const stream = await anthropic.messages.create({ ...(body as any), stream: true }, { signal });
      let text = "";
      const args: string[] = [];
      for await (const ev of stream as unknown as AsyncIterable<any>) {
        if (ev.type === "content_block_delta") {
          if (ev.delta.type === "text_delta") text += ev.delta.text;
          else if (ev.delta.type === "input_json_delta")
            args[ev.index] = (args[ev.index] ?? "") + ev.delta.partial_json;
        }
      }
      return text.length + args.filter(Boolean).map((a) => JSON.parse(a)).length;
    },
  },
  {
    name: "openai chat",
    adapter: openaiProvider({ model: "gpt-4o", api: "chat", client: openai }),
    async direct() {
      const stream = await openai.chat.completions.create(
        chatBody(request, "gpt-4o", { compatible: false, includeUsage: true }, undefined) as any,
        { signal },
      );
      let text = "";
      const args: string[] = [];
      for await (const chunk of stream as unknown as AsyncIterable<any>) {
        const d = chunk.choices?.[0]?.delta;
        if (d?.content) text += d.content;
        for (const tc of d?.tool_calls ?? []) args[tc.index] = (args[tc.index] ?? "") + (tc.function?.arguments ?? "");
      }
      return text.length + args.map((a) => JSON.parse(a)).length;
    },
  },
  {
    name: "openai responses",
    adapter: openaiProvider({ model: "gpt-4o", api: "responses", client: openai }),
    async direct() {
      const stream = await openai.responses.create(
        responsesBody(request, "gpt-4o", { store: false, encryptedReasoning: false }, undefined) as any,
        { signal },
      );
      let text = "";
      const args: string[] = [];
      for await (const ev of stream as unknown as AsyncIterable<any>) {
        if (ev.type === "response.output_text.delta") text += ev.delta;
        else if (ev.type === "response.function_call_arguments.delta")
          args[ev.output_index] = (args[ev.output_index] ?? "") + ev.delta;
      }
      return text.length + args.filter(Boolean).map((a) => JSON.parse(a)).length;
    },
  },
];

async function viaAdapter(p: ModelProvider): Promise<number> {
  let deltas = 0;
  for await (const e of p.stream(request, { signal })) {
    if (e.type === "text_delta") deltas++;
    if (e.type === "response" && e.message.content.filter((b) => b.type === "tool_call").length !== 3)
      throw new Error("expected 3 tool calls");
  }
  if (deltas !== 1000) throw new Error(`expected 1000 text deltas, got ${deltas}`);
  return deltas;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows: string[] = [];
for (const c of cases) {
  const a: number[] = [];
  const d: number[] = [];
  for (let i = 0; i < ITERS + WARMUP; i++) {
    // Alternate the order so neither side always runs on a warmer connection.
    const first = i % 2 === 0;
    const t0 = performance.now();
    await (first ? viaAdapter(c.adapter) : c.direct());
    const t1 = performance.now();
    await (first ? c.direct() : viaAdapter(c.adapter));
    const t2 = performance.now();
    if (i < WARMUP) continue;
    a.push(first ? t1 - t0 : t2 - t1);
    d.push(first ? t2 - t1 : t1 - t0);
  }
  const ratio = median(a) / median(d);
  rows.push(
    `| ${c.name} | ${median(d).toFixed(2)} | ${median(a).toFixed(2)} | ${ratio.toFixed(3)} | ${ratio <= 1.1 ? "yes" : "NO"} |`,
  );
}
await server.close();
console.log(
  `adapter overhead per streamed response (1,000 text deltas + 3 tool calls), median of ${ITERS} runs each, interleaved`,
);
console.log("| wire format | SDK direct (ms) | adapter (ms) | ratio | <= 1.1 |");
console.log("|---|---|---|---|---|");
for (const r of rows) console.log(r);
