/**
 * What a replay stands on: content digests in every prompt manifest, a tool_decision that
 * answers a call without running it, and the raw result kept when a plugin rewrote it.
 */
import { describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool, messageText, requestDigest } from "../src/node/index.ts";
import type { KeelPlugin, ModelProvider, ModelRequest, PromptManifest } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { redactEvent } from "../../store-kit/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";

const steps: ScriptStep[] = [{ toolCalls: [{ id: "c1", name: "ping", args: { n: 1 } }] }, { text: "done" }];

function section(text: string): KeelPlugin {
  return definePlugin({
    name: "sections",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("turn.pre_prompt_compile", () => ({
        kind: "prompt_section",
        id: "rules",
        domain: "policy",
        sectionId: "rules",
        content: text,
      }));
    },
  });
}

async function manifests(plugins: KeelPlugin[], runs = { n: 0 }): Promise<PromptManifest[]> {
  const store = new MemorySessionStore();
  const ping = defineTool({ name: "ping", description: "Answers pong.", execute: () => `pong ${++runs.n}` });
  const agent = await createAgent({ provider: scriptedProvider(steps), store, tools: [ping], plugins });
  const session = await agent.session();
  await session.run("hello");
  const events = await store.events(session.id);
  await agent.close();
  return events.flatMap((e) => (e.type === "prompt.compiled" ? [e.manifest] : []));
}

describe("prompt manifest digests", () => {
  it("equal content gives equal digests; a changed section changes its hash, the system and the request only", async () => {
    const a = await manifests([section("Be brief.")]);
    const b = await manifests([section("Be brief.")]);
    const c = await manifests([section("Be thorough.")]);
    expect(a).toHaveLength(2);
    expect(a.map((m) => m.digest)).toEqual(b.map((m) => m.digest));
    expect(a[0]!.sections[0]!.hash).toMatch(/^[0-9a-f]{16}$/);
    expect(c[0]!.sections[0]!.hash).not.toBe(a[0]!.sections[0]!.hash);
    expect(c[0]!.digest!.system).not.toBe(a[0]!.digest!.system);
    expect(c[0]!.digest!.request).not.toBe(a[0]!.digest!.request);
    expect(c[0]!.digest!.tools).toBe(a[0]!.digest!.tools);
    expect(c[0]!.digest!.messages).toBe(a[0]!.digest!.messages);
    // The second request carries the call and its result: its messages differ from the first's.
    expect(a[1]!.digest!.messages).not.toBe(a[0]!.digest!.messages);
  });

  it("an in-memory log never computes a digest nobody reads: the manifest carries it as a getter, evaluated on first read", async () => {
    const [first] = await manifests([section("Be brief.")]);
    const own = Object.getOwnPropertyDescriptor(first!, "digest");
    expect(typeof own?.get).toBe("function");
    expect(own?.enumerable).toBe(true);
    expect(first!.digest!.request).toMatch(/^[0-9a-f]{16}$/);
  });

  it("a different tool result changes the next request's message digest", async () => {
    const runs = { n: 10 };
    const a = await manifests([]);
    const b = await manifests([], runs);
    expect(b[0]!.digest).toEqual(a[0]!.digest);
    expect(b[1]!.digest!.messages).not.toBe(a[1]!.digest!.messages);
  });

  it("a digest read after the turn (it is computed when first read) is of the request as sent: options a provider changed later do not count", async () => {
    const store = new MemorySessionStore();
    const sent: ModelRequest[] = [];
    const inner = scriptedProvider(steps);
    const provider: ModelProvider = {
      id: inner.id,
      stream(request, options) {
        sent.push({ ...request, messages: [...request.messages], tools: [...request.tools] });
        const out = inner.stream(request, options);
        (request.options as Record<string, unknown>).temperature = 2;
        return out;
      },
    };
    const ping = defineTool({ name: "ping", description: "Answers pong.", execute: () => "pong" });
    const agent = await createAgent({ provider, store, tools: [ping], requestOptions: { temperature: 0.5 } });
    const session = await agent.session();
    await session.run("hello");
    const compiled = (await store.events(session.id)).flatMap((e) => (e.type === "prompt.compiled" ? [e] : []));
    await agent.close();
    expect(compiled).toHaveLength(2);
    compiled.forEach((e, i) => {
      const r = sent[i]!;
      const want = requestDigest(r.system, r.tools, r.messages, { temperature: 0.5 });
      expect(e.manifest.options.temperature).toBe(2); // the provider's change reached what the manifest holds
      expect(e.manifest.digest).toEqual(want);
      expect(e.manifest.digest).toBe(e.manifest.digest);
      // As the store writes it: the digest is there, plain.
      expect((redactEvent(e) as { manifest: PromptManifest }).manifest.digest).toEqual(want);
      expect(JSON.parse(JSON.stringify(e)).manifest.digest).toEqual(want);
    });
  });
});

function answering(result: { content: string; isError?: boolean }, decision: "allow" | "ask" | "deny" = "allow") {
  return definePlugin({
    name: "cache",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision, result }));
    },
  });
}

const shout = definePlugin({
  name: "shout",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.post_result", (e) => ({
      kind: "tool_result_rewrite",
      content: messageText(e.result).toUpperCase(),
      reason: "louder",
    }));
  },
});

async function runWith(plugins: KeelPlugin[], approve?: () => boolean) {
  const store = new MemorySessionStore();
  const runs = { n: 0 };
  const ping = defineTool({ name: "ping", description: "Answers pong.", execute: () => `pong ${++runs.n}` });
  const agent = await createAgent({
    provider: scriptedProvider(steps),
    store,
    tools: [ping],
    plugins,
    ...(approve ? { approve } : {}),
  });
  const session = await agent.session();
  const result = await session.run("hello");
  const events = await store.events(session.id);
  await agent.close();
  const toolResult = events.find((e) => e.type === "message.appended" && e.message.role === "tool");
  const completed = events.find((e) => e.type === "tool.completed");
  return {
    result,
    runs,
    events,
    toolText: messageText((toolResult as unknown as { message: never }).message),
    completed,
  };
}

describe("a tool_decision that answers the call", () => {
  it("the tool does not run; the answer is the result, tool.post_result still rewrites it", async () => {
    const r = await runWith([answering({ content: "recorded pong" }), shout]);
    expect(r.result.verdict.status).toBe("completed");
    expect(r.runs.n).toBe(0);
    expect(r.toolText).toBe("RECORDED PONG");
    expect(r.completed!).toMatchObject({ status: "ok", answeredBy: "cache", rewrittenBy: ["shout"] });
  });

  it("an answer marked as an error is an error result", async () => {
    const r = await runWith([answering({ content: "it failed", isError: true })]);
    expect(r.runs.n).toBe(0);
    expect(r.completed!).toMatchObject({ status: "error", answeredBy: "cache" });
  });

  it("a deny beats the answer: the call is denied and nothing runs", async () => {
    const deny = definePlugin({
      name: "guard",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "deny", reason: "no" }));
      },
    });
    const r = await runWith([answering({ content: "recorded" }), deny]);
    expect(r.runs.n).toBe(0);
    expect(r.completed!).toMatchObject({ status: "denied" });
    expect(r.toolText).toContain("denied");
  });

  it("an asked call that is approved takes the answer; one that is refused is denied", async () => {
    const yes = await runWith([answering({ content: "recorded" }, "ask")], () => true);
    expect(yes.runs.n).toBe(0);
    expect(yes.toolText).toBe("recorded");
    const no = await runWith([answering({ content: "recorded" }, "ask")], () => false);
    expect(no.completed!).toMatchObject({ status: "denied" });
  });

  it("an invalid answer fails tool.pre_call closed: the call is denied naming the plugin, nothing runs", async () => {
    const bad = definePlugin({
      name: "bad",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "allow", result: { content: 42 } }) as never);
      },
    });
    const r = await runWith([bad]);
    expect(r.runs.n).toBe(0);
    expect(r.completed!).toMatchObject({ status: "denied" });
    expect(r.toolText).toContain("bad");
  });
});

describe("the raw result of a rewritten call", () => {
  it("is kept on tool.completed only when a plugin rewrote it", async () => {
    const rewritten = await runWith([shout]);
    expect(rewritten.toolText).toBe("PONG 1");
    expect((rewritten.completed! as { raw?: unknown }).raw).toEqual({
      content: [{ type: "text", text: "pong 1" }],
      isError: false,
    });
    const plain = await runWith([]);
    expect((plain.completed! as { raw?: unknown }).raw).toBeUndefined();
  });

  it("is redacted before it is stored, like the result itself", () => {
    const key = `sk-ant-api03-${"a".repeat(90)}`;
    const event = {
      type: "tool.completed",
      round: 1,
      callId: "toolu_01ABCDEFGHIJKLMNOPQRSTUVWX",
      name: "ping",
      status: "ok",
      durationMs: 1,
      rewrittenBy: ["shout"],
      raw: { content: [{ type: "text", text: `the key is ${key}` }], isError: false },
    } as const;
    const stored = JSON.stringify(redactEvent(event));
    expect(stored).not.toContain(key);
    expect(stored).toContain("toolu_01ABCDEFGHIJKLMNOPQRSTUVWX");
  });
});
