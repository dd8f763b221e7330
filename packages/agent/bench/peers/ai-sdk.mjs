// The Vercel AI SDK's generateText (pinned in ./package.json) with its own mock model.
import { generateText, tool, isStepCount } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { measure, weather, USER, CITIES, FINAL, TOOL } from "./scenario.mjs";
const usage = () => ({
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
});
const model = new MockLanguageModelV4({
  doGenerate: (o) =>
    o.prompt[o.prompt.length - 1].role === "tool"
      ? {
          content: [{ type: "text", text: FINAL }],
          finishReason: { unified: "stop", raw: "stop" },
          usage: usage(),
          warnings: [],
        }
      : {
          content: CITIES.map((city, i) => ({
            type: "tool-call",
            toolCallId: `c${i}`,
            toolName: TOOL.name,
            input: JSON.stringify({ city }),
          })),
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage: usage(),
          warnings: [],
        },
});
const tools = {
  [TOOL.name]: tool({
    description: TOOL.description,
    inputSchema: z.object({ city: z.string().describe("City name") }),
    execute: weather,
  }),
};
await measure("ai-sdk generateText", async () => {
  const r = await generateText({ model, tools, prompt: USER, stopWhen: isStepCount(5) });
  model.doGenerateCalls.length = 0; // the mock keeps every call's options
  return r.text;
});
