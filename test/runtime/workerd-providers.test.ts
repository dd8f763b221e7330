/**
 * The real providers (@keel/providers on the Anthropic and OpenAI SDKs) drive an agent's tool
 * turn inside workerd (Miniflare, no nodejs_compat): the Worker's SDK calls go over HTTP to the
 * repository's wire server on 127.0.0.1, which answers in each API's streaming wire format.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWireServer, type WireServer } from "../../packages/wire-server/src/index.ts";
import { startTurnWorker, TURN_WORKER, type TurnWorker } from "./support/workerd.ts";

/** The entry this test bundles: an agent on a real provider (needs @keel/agent). */
const PROVIDERS_ENTRY = fileURLToPath(new URL("./providers-entry.ts", import.meta.url));

let wire: WireServer;
// Started once; a failure to bundle or start is thrown by each test (vitest would call them skipped).
let worker: Promise<TurnWorker>;
beforeAll(async () => {
  wire = await startWireServer();
  worker = startTurnWorker(
    `import { runWithProvider } from ${JSON.stringify(PROVIDERS_ENTRY)};
import { turnWorker } from ${JSON.stringify(TURN_WORKER)};
export default turnWorker((query, env) => runWithProvider(query.get("api"), env));
`,
    { WIRE_ANTHROPIC_URL: wire.anthropicBaseURL, WIRE_OPENAI_URL: wire.openaiBaseURL },
  );
  await worker.catch(() => undefined);
});
afterAll(async () => {
  await (await worker?.catch(() => undefined))?.dispose();
  await wire?.close();
});

describe.each([
  { api: "anthropic" as const, provider: "anthropic:claude-sonnet-4-6", path: "/v1/messages" },
  { api: "responses" as const, provider: "openai:gpt-5", path: "/v1/responses" },
  { api: "chat" as const, provider: "openai:gpt-4o", path: "/v1/chat/completions" },
])("an agent on $provider in workerd", ({ api, provider, path }) => {
  it("streams a tool call from the wire server, runs the tool, streams the answer", async () => {
    const w = await worker;
    const from = wire.requests.length;
    wire.enqueue(
      { text: "Let me look.", toolCalls: [{ name: "get_weather", args: { city: "Paris" } }], api },
      { text: "Paris is sunny, 21°C.", api },
    );
    const outcome = await w.run(`/?api=${api}`);
    expect(outcome).toMatchObject({
      provider,
      verdict: "completed",
      text: "Paris is sunny, 21°C.",
      rounds: 2,
      calls: ["Paris"],
    });
    expect((outcome.events as string[]).filter((e) => e === "model.responded")).toHaveLength(2);
    // Both requests came from the Worker over HTTP, in this API's format, the second with the tool's result.
    const sent = wire.requests.slice(from);
    expect(sent.map((r) => [r.api, r.path, r.outcome])).toEqual([
      [api, path, "completed"],
      [api, path, "completed"],
    ]);
    expect(JSON.stringify(sent[1]!.body)).toContain("Paris: 21°C and sunny");
  });
});
