/**
 * The real providers (@keel/providers on the Anthropic and OpenAI SDKs) drive an agent's tool
 * turn inside workerd (Miniflare, no nodejs_compat): the Worker's SDK calls go over HTTP to the
 * repository's wire server on 127.0.0.1, which answers in each API's streaming wire format.
 */
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWireServer, type WireServer } from "../../packages/wire-server/src/index.ts";
import { bundle, placesInBundle } from "./support/bundle.ts";

/** The entry this test bundles: an agent on a real provider (needs @keel/agent). */
const PROVIDERS_ENTRY = fileURLToPath(new URL("./providers-entry.ts", import.meta.url));
const WORKER = fileURLToPath(new URL("./support/worker.ts", import.meta.url));

let wire: WireServer;
let mf: Miniflare | undefined;
let script = "";

beforeAll(async () => {
  wire = await startWireServer();
  const glue = `import { runWithProvider } from ${JSON.stringify(PROVIDERS_ENTRY)};
import { turnWorker } from ${JSON.stringify(WORKER)};
export default turnWorker((query, env) => runWithProvider(query.get("api"), env));
`;
  script = await bundle(glue, import.meta.dirname, "worker.ts");
  mf = new Miniflare({
    modules: [{ type: "ESModule", path: "worker.js", contents: script }],
    compatibilityDate: "2026-07-01",
    bindings: { WIRE_ANTHROPIC_URL: wire.anthropicBaseURL, WIRE_OPENAI_URL: wire.openaiBaseURL },
  });
  await mf.ready.catch((err: Error) => {
    throw new Error(
      `workerd did not start the Worker: ${err.message}${placesInBundle(script, err.message, "worker.js")}`,
    );
  });
});
afterAll(async () => {
  // After a failed start dispose() throws that failure again; the test has reported it.
  await mf?.dispose().catch(() => undefined);
  await wire?.close();
});

describe.each([
  { api: "anthropic" as const, provider: "anthropic:claude-sonnet-4-6", path: "/v1/messages" },
  { api: "responses" as const, provider: "openai:gpt-5", path: "/v1/responses" },
  { api: "chat" as const, provider: "openai:gpt-4o", path: "/v1/chat/completions" },
])("an agent on $provider in workerd", ({ api, provider, path }) => {
  it("streams a tool call from the wire server, runs the tool, streams the answer", async () => {
    const from = wire.requests.length;
    wire.enqueue(
      { text: "Let me look.", toolCalls: [{ name: "get_weather", args: { city: "Paris" } }], api },
      { text: "Paris is sunny, 21°C.", api },
    );
    const res = await mf!.dispatchFetch(`http://localhost/?api=${api}`);
    const body = (await res.json()) as Record<string, unknown>;
    if ("error" in body)
      throw new Error(
        `The Worker answered ${res.status}: ${body.stack}${placesInBundle(script, String(body.stack), "worker.js")}`,
      );
    expect(body).toMatchObject({
      provider,
      verdict: "completed",
      text: "Paris is sunny, 21°C.",
      rounds: 2,
      calls: ["Paris"],
    });
    expect((body.events as string[]).filter((e) => e === "model.responded")).toHaveLength(2);
    // Both requests came from the Worker over HTTP, in this API's format, the second with the tool's result.
    const sent = wire.requests.slice(from);
    expect(sent.map((r) => [r.api, r.path, r.outcome])).toEqual([
      [api, path, "completed"],
      [api, path, "completed"],
    ]);
    expect(JSON.stringify(sent[1]!.body)).toContain("Paris: 21°C and sunny");
  });
});
