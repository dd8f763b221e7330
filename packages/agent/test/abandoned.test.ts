/** abandonedWork(): what the kernel stopped waiting for but is still running (what may keep a process alive). */
import { describe, expect, it } from "vitest";
import { abandonedWork, createAgent, defineTool, definePlugin } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

describe("abandonedWork", () => {
  it("lists a tool that ignored its signal past its timeout until it settles, then forgets it", async () => {
    let release!: (v: string) => void;
    const stubborn = defineTool({
      name: "stubborn",
      description: "Ignores its signal.",
      timeoutMs: 20,
      execute: () => new Promise<string>((r) => (release = r)),
    });
    const provider = scriptedProvider([{ toolCalls: [{ name: "stubborn", args: {} }] }, { text: "done" }]);
    const agent = await createAgent({ provider, store: new MemorySessionStore(), tools: [stubborn] });
    const session = await agent.session();
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    expect(abandonedWork()).toContain("tool stubborn (call call_0_0)");
    release("late");
    await new Promise((r) => setTimeout(r, 0));
    expect(abandonedWork()).not.toContain("tool stubborn (call call_0_0)");
    await agent.close();
  });

  it("lists a background handler that ignored the session's close, naming its subscription", async () => {
    const lingerer = definePlugin({
      name: "lingerer",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.post_turn", () => new Promise<void>(() => {}), { await: "background" });
      },
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "hi" }]),
      store: new MemorySessionStore(),
      plugins: [lingerer],
    });
    const session = await agent.session();
    await session.run("go");
    const t0 = performance.now();
    await agent.close({ graceMs: 20 });
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(abandonedWork()).toContain("handler lingerer:turn.post_turn");
  });
});
