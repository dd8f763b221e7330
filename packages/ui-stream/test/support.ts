/** Test support: a real agent on a scripted model, with a `deploy` tool a plugin sends for approval. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import type { Agent, ModelProvider, SessionStore } from "@keel/agent";
import type { ProviderScriptInput } from "../../testkit/src/index.ts";
import { ScriptedProvider } from "../../testkit/src/index.ts";

/** An agent whose model follows `script`; `deploy` waits for approval and returns "<version> is live". */
export async function scriptedAgent(
  script: ProviderScriptInput | ModelProvider,
  where: { home?: string; store?: SessionStore } = {},
): Promise<{ agent: Agent; provider: ModelProvider }> {
  const provider =
    !Array.isArray(script) && "stream" in script
      ? (script as ModelProvider)
      : new ScriptedProvider(script as ProviderScriptInput);
  const deploy = defineTool({
    name: "deploy",
    description: "Deploy a version.",
    input: z.object({ version: z.string() }),
    category: "exec",
    execute: async ({ version }, ctx) => {
      ctx.progress(`deploying ${version}`, 0.5);
      return `${version} is live`;
    },
  });
  const review = definePlugin({
    name: "review",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("tool.pre_call", (e) =>
        e.call.name === "deploy"
          ? { kind: "tool_decision", decision: "ask", reason: "deploys reach production" }
          : undefined,
      );
    },
  });
  const agent = await createAgent({
    provider,
    tools: [deploy],
    plugins: [review],
    home: where.home ?? mkdtempSync(join(tmpdir(), "keel-ui-stream-")),
    ...(where.store ? { store: where.store } : {}),
  });
  return { agent, provider };
}

/** The deploy script: reasoning, text and a call that pauses; after approval, the answer. */
export const DEPLOY_SCRIPT: ProviderScriptInput = [
  {
    thinking: "Ship it.",
    text: "Deploying v2.",
    toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }],
    chunkSize: 64,
  },
  { text: "Done: v2 is live.", chunkSize: 64 },
];

/** Everything a ReadableStream yields. */
export async function drain<T>(stream: ReadableStream<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of stream as unknown as AsyncIterable<T>) out.push(x);
  return out;
}
