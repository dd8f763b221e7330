/**
 * The smallest Keel agent as a browser or Worker would ship it: createAgent with the in-memory
 * store, one plugin that adds a prompt section, one zod tool, and an inline scripted model that
 * calls the tool once and then answers. `bench/bundle.ts` bundles this file and reports its size.
 * Written against the kernel split: the host (createAgent, MemorySessionStore) is `@keel/agent`,
 * the contracts (definePlugin, defineTool, the provider types) stay in `@keel/kernel`.
 */
import { createAgent, MemorySessionStore } from "@keel/agent";
import { definePlugin, defineTool } from "@keel/kernel";
import type { ModelEvent, ModelProvider, ModelRequest } from "@keel/kernel";
// zod/mini, as the kernel's own schemas: classic "zod" works as well, but its methods bring every
// schema type's whole API into the bundle. A namespace import: `import { z } from "zod/mini"` is
// zod's whole namespace object, all its locales included, as esbuild cannot drop what an object holds.
import * as z from "zod/mini";

const weather = defineTool({
  name: "get_weather",
  description: "The current weather of a city.",
  input: z.object({ city: z.string() }),
  category: "info",
  execute: ({ city }) => `${city}: 18°C, light rain`,
});

const houseRules = definePlugin({
  name: "house-rules",
  version: "1.0.0",
  kernel: "^1",
  setup(ctx) {
    ctx.on("turn.pre_prompt_compile", () => ({
      kind: "prompt_section",
      id: "house-rules:rule",
      sectionId: "house-rules",
      domain: "style",
      title: "House rules",
      content: "Answer in one sentence.",
    }));
  },
});

/** Stateless: calls the tool when the last message is the user's, answers once it is a tool result. */
const model: ModelProvider = {
  id: "bench:scripted",
  async *stream(request: ModelRequest): AsyncGenerator<ModelEvent> {
    const usage = { inputTokens: 10, outputTokens: 5 };
    if (request.messages.at(-1)?.role !== "tool") {
      const call = { type: "tool_call" as const, id: "call_1", name: "get_weather", args: { city: "Paris" } };
      yield { type: "response", message: { role: "assistant", content: [call] }, stopReason: "tool_use", usage };
    } else {
      const text = { type: "text" as const, text: "Paris: 18°C and light rain." };
      yield { type: "response", message: { role: "assistant", content: [text] }, stopReason: "end_turn", usage };
    }
  },
};

export default {
  async fetch(): Promise<Response> {
    const agent = await createAgent({
      name: "bundle",
      provider: model,
      tools: [weather],
      plugins: [houseRules],
      store: new MemorySessionStore(),
    });
    const session = await agent.session();
    const result = await session.run("What is the weather in Paris?");
    await session.close();
    await agent.close();
    return new Response(result.text);
  },
};
