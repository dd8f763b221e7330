/**
 * An agent on a real provider (@keel/providers: Anthropic Messages, OpenAI Responses or OpenAI
 * Chat, on the official SDKs), bundled into workerd by workerd-providers.test.ts: one turn asks
 * for the weather, the model (the wire server, over HTTP) calls the tool, then answers. Nothing
 * here may import a `node:` module.
 */
import { createAgent, MemorySessionStore } from "@keel/agent";
import { defineTool, type ModelProvider } from "@keel/kernel";
import { anthropicProvider, openaiProvider } from "@keel/providers";
import { z } from "zod";

export type WireApi = "anthropic" | "responses" | "chat";

/** What one turn did, in plain JSON. */
export interface ProviderOutcome {
  provider: string;
  verdict: string;
  text: string;
  rounds: number;
  calls: string[];
  events: string[];
}

function providerFor(api: WireApi, env: Record<string, unknown>): ModelProvider {
  const url = (name: string) => {
    const value = env[name];
    if (typeof value !== "string") throw new Error(`The Worker has no ${name} binding.`);
    return value;
  };
  const common = { apiKey: "sk-test", maxRetries: 0 };
  if (api === "anthropic")
    return anthropicProvider({ ...common, model: "claude-sonnet-4-6", baseURL: url("WIRE_ANTHROPIC_URL") });
  return openaiProvider({
    ...common,
    model: api === "chat" ? "gpt-4o" : "gpt-5",
    api,
    baseURL: url("WIRE_OPENAI_URL"),
  });
}

/** One turn with the provider `api` names, its base URLs from the Worker's bindings. */
export async function runWithProvider(api: string | null, env: Record<string, unknown>): Promise<ProviderOutcome> {
  if (api !== "anthropic" && api !== "responses" && api !== "chat") throw new Error(`Unknown api ${String(api)}.`);
  const calls: string[] = [];
  const weather = defineTool({
    name: "get_weather",
    description: "Weather for a city.",
    input: z.object({ city: z.string() }),
    category: "info",
    execute: ({ city }) => {
      calls.push(city);
      return `${city}: 21°C and sunny`;
    },
  });
  const provider = providerFor(api, env);
  const agent = await createAgent({
    name: "runtime-providers",
    provider,
    tools: [weather],
    store: new MemorySessionStore(),
  });
  try {
    const session = await agent.session();
    const result = await session.run("Weather in Paris?");
    const events = (await session.events()).map((e) => e.type);
    await session.close();
    return {
      provider: provider.id,
      verdict: result.verdict.status,
      text: result.text,
      rounds: result.rounds,
      calls,
      events,
    };
  } finally {
    await agent.close();
  }
}
