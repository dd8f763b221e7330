/**
 * What a host embedding Keel relies on, through the official SDKs against the wire server, on
 * all three wire formats: a turn stream whose early `break` cancels the provider request,
 * back-pressure from a slow consumer, and rich (image, PDF) input reaching the provider's body.
 */
import { startWireServer, type WireServer } from "@keel/wire-server";
import { createAgent, defineTool } from "@keel/agent";
import { streamTurn, type TurnStreamEvent } from "@keel/stream";
import { MemorySessionStore } from "@keel/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { resolveModel } from "../src/index.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const specs = [
  { spec: "anthropic:claude-sonnet-4-6", api: "anthropic" as const },
  { spec: "openai:gpt-5", api: "responses" as const },
  { spec: "openai:gpt-4o", api: "chat" as const },
];
const providerFor = (spec: string, api: string) =>
  resolveModel(spec, {
    env: {},
    apiKey: "sk-test",
    baseURL: spec.startsWith("anthropic") ? server.anthropicBaseURL : server.openaiBaseURL,
    ...(api === "chat" ? { api: "chat" as const } : {}),
    maxRetries: 0,
  });

// A 1×1 transparent PNG.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
/** A minimal one-page PDF. */
const PDF = Buffer.from(
  "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj 3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n",
).toString("base64");

describe.each(specs)("embedding on $spec", ({ spec, api }) => {
  it("a turn stream yields text deltas, and an early break cancels the provider request", async () => {
    const agent = await createAgent({ provider: providerFor(spec, api), store: new MemorySessionStore() });
    const session = await agent.session();
    const at = server.requests.length;
    server.enqueue({ text: "one two three four five six seven eight nine ten", chunks: 10, delayMs: 40, api });
    const seen: TurnStreamEvent[] = [];
    const stream = streamTurn(session, "count");
    for await (const e of stream) {
      seen.push(e);
      if (e.type === "text") break;
    }
    const exchange = await server.settled(at);
    expect(exchange.outcome).toBe("client_closed");
    const result = await stream.result;
    expect(result.verdict).toEqual({ status: "interrupted", reason: "aborted" });
    expect(seen.filter((e) => e.type === "text")).toHaveLength(1);
    // The session is free again and goes on.
    server.enqueue({ text: "again", api });
    expect((await session.run("go on")).text).toBe("again");
    await agent.close();
  });

  it("a slow consumer holds the provider's stream back (back-pressure), and nothing is lost", async () => {
    const agent = await createAgent({ provider: providerFor(spec, api), store: new MemorySessionStore() });
    const session = await agent.session();
    const text = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ");
    server.enqueue({ text, chunks: 40, api });
    const stream = streamTurn(session, "go", { highWaterMark: 4 });
    let joined = "";
    let maxBehind = 0;
    let received = 0;
    const counter = agent.subscribe((e) => {
      if (e.type === "model.delta") received++;
    });
    let read = 0;
    for await (const e of stream) {
      if (e.type === "text") {
        read++;
        joined += e.delta;
        maxBehind = Math.max(maxBehind, received - read);
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    counter();
    expect(joined).toBe(text);
    // Without back-pressure all 40 deltas would be received before the consumer read the second.
    expect(maxBehind).toBeLessThanOrEqual(8);
    expect((await stream.result).verdict.status).toBe("completed");
    await agent.close();
  });

  it("run() takes content blocks: the image reaches the provider in its own shape, plugins read the text", async () => {
    const seenInput: string[] = [];
    const agent = await createAgent({
      provider: providerFor(spec, api),
      store: new MemorySessionStore(),
      plugins: [
        {
          name: "reader",
          version: "1.0.0",
          setup: (ctx) => ctx.on("turn.pre_prompt_context", (e) => void seenInput.push(e.input)),
        },
      ],
    });
    const session = await agent.session();
    const at = server.requests.length;
    server.enqueue({ text: "A transparent pixel.", api });
    const result = await session.run([
      { type: "text", text: "What is in this image?" },
      { type: "image", mediaType: "image/png", data: PNG },
    ]);
    expect(result.text).toBe("A transparent pixel.");
    expect(seenInput).toEqual(["What is in this image?"]);
    const body = server.requests[at]!.body;
    const json = JSON.stringify(body);
    if (api === "anthropic")
      expect(body.messages[0].content).toMatchObject([
        { type: "text", text: "What is in this image?" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
      ]);
    else if (api === "chat")
      expect(body.messages.find((m: { role: string }) => m.role === "user").content[1]).toEqual({
        type: "image_url",
        image_url: { url: `data:image/png;base64,${PNG}` },
      });
    else
      expect(body.input[0].content[1]).toMatchObject({
        type: "input_image",
        image_url: `data:image/png;base64,${PNG}`,
      });
    expect(json).toContain(PNG);
    // The stored turn keeps the blocks, so a resumed session sends the image again.
    const started = (await session.events()).find((e) => e.type === "turn.started");
    expect(started).toMatchObject({
      input: "What is in this image?",
      content: [{ type: "text" }, { type: "image", mediaType: "image/png" }],
    });
    await agent.close();
  });

  it("a PDF file block reaches the provider as its document input", async () => {
    const agent = await createAgent({ provider: providerFor(spec, api), store: new MemorySessionStore() });
    const session = await agent.session();
    const at = server.requests.length;
    server.enqueue({ text: "A one-page spec.", api });
    const result = await session.run([
      { type: "text", text: "Summarise the attachment." },
      { type: "file", mediaType: "application/pdf", data: PDF, name: "spec.pdf" },
    ]);
    expect(result.text).toBe("A one-page spec.");
    const body = server.requests[at]!.body;
    if (api === "anthropic")
      expect(body.messages[0].content[1]).toMatchObject({
        type: "document",
        source: { type: "base64", media_type: "application/pdf", data: PDF },
        title: "spec.pdf",
      });
    else if (api === "chat")
      expect(body.messages.find((m: { role: string }) => m.role === "user").content[1]).toEqual({
        type: "file",
        file: { filename: "spec.pdf", file_data: `data:application/pdf;base64,${PDF}` },
      });
    else
      expect(body.input[0].content[1]).toEqual({
        type: "input_file",
        filename: "spec.pdf",
        file_data: `data:application/pdf;base64,${PDF}`,
      });
    await agent.close();
  });

  it("tool progress reaches the stream", async () => {
    const slow = defineTool({
      name: "index_repo",
      description: "Indexes.",
      execute: async (_a, ctx) => {
        for (let i = 1; i <= 3; i++) {
          await new Promise((r) => setTimeout(r, 5));
          ctx.progress(`indexed ${i * 100} files`, i / 3);
        }
        return "indexed 300 files";
      },
    });
    const agent = await createAgent({
      provider: providerFor(spec, api),
      store: new MemorySessionStore(),
      tools: [slow],
    });
    const session = await agent.session();
    server.enqueue({ toolCalls: [{ name: "index_repo", args: {} }], api }, { text: "Indexed.", api });
    const events: TurnStreamEvent[] = [];
    for await (const e of streamTurn(session, "index it")) events.push(e);
    const progress = events.filter((e) => e.type === "tool.progress");
    expect(progress.map((e) => (e.type === "tool.progress" ? [e.message, e.fraction] : []))).toEqual([
      ["indexed 100 files", 1 / 3],
      ["indexed 200 files", 2 / 3],
      ["indexed 300 files", 1],
    ]);
    const order = events.map((e) => e.type).filter((t) => t.startsWith("tool."));
    expect(order).toEqual(["tool.started", "tool.progress", "tool.progress", "tool.progress", "tool.finished"]);
    await agent.close();
  });
});

const Weather = z.object({ city: z.string(), celsius: z.number(), sunny: z.boolean() });

describe.each(specs)("structured output on $spec", ({ spec, api }) => {
  /** The model's answer, as that provider's native mechanism carries it. */
  const answer = (value: unknown) =>
    api === "anthropic"
      ? { toolCalls: [{ name: "final_answer", args: value }], api }
      : { text: JSON.stringify(value), api };
  const lookup = defineTool({
    name: "get_weather",
    description: "Weather.",
    parameters: { type: "object", properties: { city: { type: "string" } } },
    execute: () => "Paris: 21°C, sunny",
  });
  async function turn(...answers: object[]) {
    const agent = await createAgent({
      provider: providerFor(spec, api),
      store: new MemorySessionStore(),
      tools: [lookup],
    });
    const session = await agent.session();
    const at = server.requests.length;
    server.enqueue(...answers);
    const result = await session.run("Weather in Paris, as data?", { output: Weather });
    const bodies = server.requests.slice(at).map((r) => r.body);
    await agent.close();
    return { result, bodies };
  }

  it("a valid answer comes back typed and validated, after a tool call, through the native mechanism", async () => {
    const { result, bodies } = await turn(
      { toolCalls: [{ name: "get_weather", args: { city: "Paris" } }], api },
      answer({ city: "Paris", celsius: 21, sunny: true }),
    );
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(result.output).toEqual({ city: "Paris", celsius: 21, sunny: true });
    const typed: { city: string; celsius: number; sunny: boolean } | undefined = result.output;
    expect(typed?.celsius).toBe(21);
    for (const body of bodies) {
      if (api === "anthropic") {
        expect(body.tools.map((t: { name: string }) => t.name)).toEqual(["get_weather", "final_answer"]);
        expect(body.tool_choice).toEqual({ type: "any" });
        expect(body.tools[1].input_schema).toMatchObject({ type: "object", required: ["city", "celsius", "sunny"] });
      } else if (api === "chat")
        expect(body.response_format).toMatchObject({
          type: "json_schema",
          json_schema: { name: "final_answer", schema: { type: "object" } },
        });
      else
        expect(body.text.format).toMatchObject({
          type: "json_schema",
          name: "final_answer",
          schema: { type: "object" },
        });
    }
  });

  it("an invalid answer gets one corrective round, then the valid one is returned", async () => {
    const { result, bodies } = await turn(
      answer({ city: "Paris", celsius: "warm" }),
      answer({ city: "Paris", celsius: 21, sunny: true }),
    );
    expect(result.verdict.status).toBe("completed");
    expect(result.output).toEqual({ city: "Paris", celsius: 21, sunny: true });
    expect(bodies).toHaveLength(2);
    expect(JSON.stringify(bodies[1])).toContain("did not match the required output schema: celsius");
  });

  it("invalid twice fails the turn with KEEL_OUTPUT_INVALID naming the fields", async () => {
    const { result } = await turn(answer({ city: "Paris" }), answer({ city: 3 }));
    expect(result.verdict).toMatchObject({ status: "failed", reason: "output_invalid", code: "KEEL_OUTPUT_INVALID" });
    expect(result.verdict.status === "failed" && result.verdict.message).toContain("city");
    expect(result.output).toBeUndefined();
  });
});
