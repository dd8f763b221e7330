/**
 * Every tool.pre_call handler decides on the arguments the tool will run with: the kernel reads
 * them with the tool's schema first (zod defaults and coercions, plain JSON Schema's top-level
 * defaults), a rewrite is read again at once, and the tool runs with exactly what was decided
 * on, also after a pause answered later.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";

describe("arguments are read by the tool's schema before tool.pre_call", () => {
  async function setup(
    steps: ScriptStep[],
    rewrite?: (args: Record<string, unknown>) => Record<string, string | number>,
  ) {
    const seen: unknown[] = [];
    const ran: unknown[] = [];
    const deploy = defineTool({
      name: "deploy",
      description: "Deploys.",
      category: "exec",
      input: z.object({ service: z.string(), env: z.string().default("production"), replicas: z.coerce.number() }),
      execute: (args) => {
        ran.push(args);
        return "ok";
      },
    });
    const plain = {
      name: "plain",
      description: "Plain JSON Schema.",
      category: "info" as const,
      parameters: {
        type: "object",
        properties: { q: { type: "string" }, limit: { type: "number", default: 10 }, tags: { default: ["a"] } },
      },
      execute: (args: unknown) => {
        ran.push(args);
        return "ok";
      },
    };
    const watcher = definePlugin({
      name: "watcher",
      version: "1.0.0",
      setup(ctx) {
        ctx.on(
          "tool.pre_call",
          (e) =>
            rewrite && e.call.name === "deploy"
              ? { kind: "tool_decision", decision: "allow", args: rewrite(e.call.args as Record<string, unknown>) }
              : undefined,
          { stage: "post", id: "rewrite" },
        );
        ctx.on(
          "tool.pre_call",
          (e) => {
            seen.push(e.call.args);
            return e.call.name === "deploy" ? { kind: "tool_decision", decision: "ask", reason: "deploys" } : undefined;
          },
          { stage: "final", id: "decide" },
        );
      },
    });
    const agent = await createAgent({
      provider: scriptedProvider(steps),
      store: new MemorySessionStore(),
      tools: [deploy, plain],
      plugins: [watcher],
    });
    return { session: await agent.session(), seen, ran };
  }

  it("handlers and the approval see defaults and coercions; approved later, the tool runs with exactly that", async () => {
    const { session, seen, ran } = await setup([
      {
        toolCalls: [
          { id: "p1", name: "plain", args: { q: "x" } },
          { id: "d1", name: "deploy", args: { service: "api", replicas: "3", extra: "decoy" } },
        ],
      },
      { text: "done" },
    ]);
    const r = await session.run("go");
    expect(r.verdict).toMatchObject({ status: "paused", pending: ["d1"] });
    expect(seen).toEqual([
      { q: "x", limit: 10, tags: ["a"] },
      { service: "api", env: "production", replicas: 3 },
    ]);
    // The handler's view is frozen; the tool's own copy is not.
    expect(Object.isFrozen(seen[1])).toBe(true);
    expect((await session.pendingApprovals()).map((p) => p.args)).toEqual([
      { service: "api", env: "production", replicas: 3 },
    ]);
    await session.approve("d1");
    expect((await session.resume()).verdict.status).toBe("completed");
    expect(ran).toEqual([
      { q: "x", limit: 10, tags: ["a"] },
      { service: "api", env: "production", replicas: 3 },
    ]);
    expect(Object.isFrozen(ran[1])).toBe(false);
  });

  it("a rewrite is read by the schema before the next handler; one that breaks it is refused naming the rewriter", async () => {
    const dropEnv = await setup(
      [
        { toolCalls: [{ id: "d1", name: "deploy", args: { service: "api", env: "staging", replicas: 1 } }] },
        { text: "ok" },
      ],
      (a) => ({ service: String(a.service), replicas: "2" }),
    );
    expect((await dropEnv.session.run("go")).verdict.status).toBe("paused");
    expect(dropEnv.seen).toEqual([{ service: "api", env: "production", replicas: 2 }]);

    const broken = await setup(
      [{ toolCalls: [{ id: "d1", name: "deploy", args: { service: "api", replicas: 1 } }] }, { text: "ok" }],
      () => ({ replicas: "many" }),
    );
    const r = await broken.session.run("go");
    expect(r.verdict.status).toBe("completed");
    expect(broken.ran).toEqual([]);
    const result = broken.session.messages.find((m) => m.role === "tool");
    const text = JSON.stringify(result);
    expect(text).toContain("KEEL_TOOL_ARGS_INVALID");
    expect(text).toContain("rewritten by watcher at tool.pre_call");
  });
});
