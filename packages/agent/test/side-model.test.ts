import { describe, expect, it } from "vitest";
import { complete, createAgent, definePlugin, ProviderError } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ModelProvider } from "../src/index.ts";

describe("side model for plugins", () => {
  it("complete() returns the whole answer of one request", async () => {
    const provider = scriptedProvider([{ text: "forty-two", usage: { inputTokens: 5, outputTokens: 2 } }]);
    const answer = await complete(provider, { messages: [{ role: "user", content: [{ type: "text", text: "q" }] }] });
    expect(answer.text).toBe("forty-two");
    expect(answer.stopReason).toBe("end_turn");
    expect(provider.requests[0]!.tools).toEqual([]);
  });

  it("complete() turns a stream without a response event into a network error", async () => {
    const broken: ModelProvider = {
      id: "x:y",
      async *stream() {
        yield { type: "text_delta", text: "half" };
      },
    };
    await expect(complete(broken, { messages: [] })).rejects.toSatisfy(
      (e: unknown) => e instanceof ProviderError && e.errorClass === "network",
    );
  });

  it("handlers see the agent's sideModel, else its provider, as ctx.model", async () => {
    const seen: Array<string | undefined> = [];
    const spy = definePlugin({
      name: "spy",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_policy", (_e, hook) => {
          seen.push(hook.model?.id);
        });
      },
    });
    const main = scriptedProvider([{ text: "a" }, { text: "b" }, { text: "c" }], { model: "main" });
    const side = scriptedProvider([], { model: "side" });
    const a = await createAgent({ provider: main, store: new MemorySessionStore(), plugins: [spy] });
    await (await a.session()).run("hi");
    const b = await createAgent({ provider: main, sideModel: side, store: new MemorySessionStore(), plugins: [spy] });
    await (await b.session()).run("hi");
    const c = await createAgent({ provider: main, sideModel: false, store: new MemorySessionStore(), plugins: [spy] });
    await (await c.session()).run("hi");
    expect(seen).toEqual(["scripted:main", "scripted:side", undefined]);
  });
});
