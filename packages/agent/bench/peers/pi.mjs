// pi-agent-core's agentLoop (pinned in ./package.json) with a scripted stream function.
import { agentLoop } from "@earendil-works/pi-agent-core";
import { createAssistantMessageEventStream, Type } from "@earendil-works/pi-ai";
import { measure, weather, USER, CITIES, FINAL, TOOL } from "./scenario.mjs";
const model = {
  id: "scripted",
  name: "scripted",
  api: "scripted",
  provider: "scripted",
  baseUrl: "",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 200000,
  maxTokens: 4096,
};
const usage = {
  input: 10,
  output: 5,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 15,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};
function streamFn(_model, context) {
  const done = context.messages[context.messages.length - 1].role === "toolResult";
  const message = {
    role: "assistant",
    api: "scripted",
    provider: "scripted",
    model: "scripted",
    usage,
    timestamp: Date.now(),
    stopReason: done ? "stop" : "toolUse",
    content: done
      ? [{ type: "text", text: FINAL }]
      : CITIES.map((city, i) => ({ type: "toolCall", id: `c${i}`, name: TOOL.name, arguments: { city } })),
  };
  const s = createAssistantMessageEventStream();
  s.push({ type: "start", partial: { ...message, content: [] } });
  s.push({ type: "done", reason: message.stopReason, message });
  s.end();
  return s;
}
const tools = [
  {
    name: TOOL.name,
    label: "Weather",
    description: TOOL.description,
    parameters: Type.Object({ city: Type.String({ description: "City name" }) }),
    execute: async (_id, args) => ({ content: [{ type: "text", text: await weather(args) }], details: {} }),
  },
];
const config = { model, convertToLlm: (m) => m, toolExecution: "parallel" };
await measure("pi-agent-core agentLoop", async () => {
  const stream = agentLoop(
    [{ role: "user", content: USER, timestamp: Date.now() }],
    { messages: [], tools },
    config,
    undefined,
    streamFn,
  );
  for await (const _ of stream);
  const messages = await stream.result();
  return messages[messages.length - 1].content
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("");
});
