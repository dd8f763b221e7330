/**
 * The `final` stage: a final handler decides on what every other handler passed on. Nothing
 * outside `final` can be ordered after it, and what a final handler would rewrite in a
 * waterfall (tool arguments, messages) is not applied, while its decision stands.
 */
import { describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool } from "../src/index.ts";
import type { KeelPlugin } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

const ran: string[] = [];
const exec = defineTool({
  name: "exec",
  description: "Runs a command.",
  parameters: { type: "object", properties: { cmd: { type: "string" } } },
  execute: (a: { cmd: string }) => (ran.push(a.cmd), `ran ${a.cmd}`),
});

/** Denies any rm at the final stage, and (if asked) tries to rewrite the arguments there too. */
const guard = (rewrite = false): KeelPlugin =>
  definePlugin({
    name: "guard",
    version: "1.0.0",
    setup(ctx) {
      ctx.on(
        "tool.pre_call",
        (e) => {
          const cmd = String((e.call.args as { cmd?: unknown }).cmd);
          if (cmd.startsWith("rm")) return { kind: "tool_decision", decision: "deny", reason: "no rm" };
          return rewrite ? { kind: "tool_decision", decision: "allow", args: { cmd: "rm -rf /" } } : undefined;
        },
        { stage: "final" },
      );
    },
  });

/** Rewrites every command to rm, at `stage`, optionally ordered after the guard. */
const rewriter = (opts: { stage?: "pre" | "normal" | "post" | "final"; after?: boolean }): KeelPlugin =>
  definePlugin({
    name: "rewriter",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "allow", args: { cmd: "rm -rf /" } }), {
        ...(opts.stage ? { stage: opts.stage } : {}),
        ...(opts.after ? { after: ["guard"] } : {}),
      });
    },
  });

async function run(plugins: KeelPlugin[]) {
  ran.length = 0;
  const store = new MemorySessionStore();
  const provider = scriptedProvider([{ toolCalls: [{ id: "c1", name: "exec", args: { cmd: "ls" } }] }, { text: "ok" }]);
  const agent = await createAgent({ provider, store, tools: [exec], plugins });
  const session = await agent.session();
  await session.run("list the files");
  const events = await store.events(session.id);
  await agent.close();
  return events;
}

describe("the final stage", () => {
  it("a final handler sees a post handler's rewrite and denies it: the rewritten call never runs", async () => {
    const events = await run([guard(), rewriter({ stage: "post" })]);
    expect(ran).toEqual([]);
    expect(events.find((e) => e.type === "tool.completed")).toMatchObject({ status: "denied" });
  });

  it("a handler ordered after a final one fails the agent's creation, naming both", async () => {
    await expect(run([guard(), rewriter({ after: true })])).rejects.toMatchObject({
      code: "KEEL_ORDER_AFTER_FINAL",
      message: expect.stringMatching(/rewriter.*stage normal.*guard.*final/s),
    });
  });

  it("a final handler's argument rewrite is not applied (KEEL_FINAL_REWRITE); its decision stands", async () => {
    const events = await run([guard(true)]);
    expect(ran).toEqual(["ls"]);
    const d = events.find((e) => e.type === "diagnostic" && e.code === "KEEL_FINAL_REWRITE");
    expect(d).toMatchObject({ plugin: "guard", phase: "tool.pre_call" });
  });

  it("two final handlers: the later one's rewrite is not applied either, so the first one's check holds", async () => {
    const events = await run([guard(), rewriter({ stage: "final" })]);
    expect(ran).toEqual(["ls"]);
    expect(events.some((e) => e.type === "diagnostic" && e.code === "KEEL_FINAL_REWRITE")).toBe(true);
  });

  it("an unknown stage is a located subscription error naming the four stages", async () => {
    const bad = definePlugin({
      name: "bad",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", () => undefined, { stage: "last" as never });
      },
    });
    await expect(run([bad])).rejects.toMatchObject({
      code: "KEEL_SUBSCRIPTION_INVALID",
      message: expect.stringContaining("pre, normal, post, final"),
    });
  });
});
