/** The one read boundary for plugin and tool values (snapshot.ts) and the event freeze. */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { freezeEvent, snapshot, UnreadableValueError } from "../../kernel/src/snapshot.ts";

describe("snapshot", () => {
  it("reads getters once into plain data and leaves toJSON, symbols and non-enumerables behind", () => {
    let reads = 0;
    const sym = Symbol("s");
    const src = {
      get a() {
        return ++reads;
      },
      toJSON() {
        throw new Error("no");
      },
      [sym]: 1,
      nested: [{ b: "x" }],
    };
    Object.defineProperty(src, "hidden", { value: 1, enumerable: false });
    const out = snapshot(src) as Record<string, unknown>;
    expect(out).toEqual({ a: 1, nested: [{ b: "x" }] });
    expect(reads).toBe(1);
    expect(JSON.stringify(out)).toBe('{"a":1,"nested":[{"b":"x"}]}');
  });

  it("throws UnreadableValueError with a path for a throwing getter, a cycle, a bigint and a throwing Proxy", () => {
    const cyc: Record<string, unknown> = {};
    cyc.self = cyc;
    const cases: Array<[unknown, string]> = [
      [
        {
          a: {
            get b() {
              throw new Error("boom");
            },
          },
        },
        "boom",
      ],
      [cyc, "cycle"],
      [{ n: 1n }, "bigint"],
      [
        new Proxy(
          {},
          {
            ownKeys() {
              throw new Error("keys");
            },
          },
        ),
        "keys",
      ],
    ];
    for (const [v, says] of cases) {
      expect(() => snapshot(v)).toThrow(UnreadableValueError);
      expect(() => snapshot(v)).toThrow(says);
    }
  });

  it("keeps functions and zod schemas by reference, and gives a tool definition one stable snapshot", () => {
    const input = z.object({ q: z.string() });
    const tool = { name: "t", description: "d", execute: () => "x", input };
    const a = snapshot({ tools: [tool] }) as { tools: Array<typeof tool> };
    const b = snapshot({ tools: [tool] }) as { tools: Array<typeof tool> };
    expect(a.tools[0]).not.toBe(tool);
    expect(a.tools[0]).toBe(b.tools[0]);
    expect(a.tools[0]!.input).toBe(input);
    expect(a.tools[0]!.execute).toBe(tool.execute);
  });

  it("freezeEvent deep-freezes plain data but not class instances", () => {
    class Box {
      v = 1;
    }
    const box = new Box();
    const e = freezeEvent({ list: [{ x: 1 }], box });
    expect(Object.isFrozen(e.list[0])).toBe(true);
    expect(Object.isFrozen(box)).toBe(false);
  });
});

describe("plugin schemas are plugin code too", () => {
  it("a tool whose input schema throws while validating gets an invalid-arguments result; the turn completes", async () => {
    const input = z.object({ q: z.string() }).refine(() => {
      throw new Error("refine exploded");
    });
    const p = definePlugin({
      name: "schemer",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("turn.pre_tool_materialization", () => ({
          kind: "tool_bundle",
          bundleId: "s",
          tools: [{ name: "ask", description: "asks", input, execute: () => "never" }],
        })),
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ id: "a1", name: "ask", args: { q: "x" } }] }, { text: "done" }]),
      store: new MemorySessionStore(),
      plugins: [p],
    });
    const s = await agent.session();
    const r = await s.run("go");
    expect(r.verdict.status).toBe("completed");
    const tool = s.messages.find((m) => m.role === "tool");
    expect(JSON.stringify(tool)).toContain("refine exploded");
    await agent.close();
  });
});

describe("fault scope", () => {
  it("follows a handler's and a tool's timers while a guard listens, so a fault there can name the plugin, phase and tool", async () => {
    const { guardProcess } = await import("../src/node/faults.ts");
    const { currentFaultScope } = await import("../../kernel/src/index.ts");
    const seen: unknown[] = [];
    const later = (tag: string) =>
      new Promise<void>((r) => setTimeout(() => (seen.push([tag, currentFaultScope()]), r()), 1));
    const p = definePlugin({
      name: "scoped",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_policy", () => later("handler"));
        ctx.on("turn.pre_tool_materialization", () => ({
          kind: "tool_bundle",
          bundleId: "b",
          tools: [{ name: "tick", description: "t", execute: () => later("tool").then(() => "ok") }],
        }));
      },
    });
    const run = async () => {
      const agent = await createAgent({
        provider: scriptedProvider([{ toolCalls: [{ name: "tick", args: {} }] }, { text: "done" }]),
        store: new MemorySessionStore(),
        plugins: [p],
      });
      await (await agent.session()).run("go");
      await agent.close();
    };
    const guard = guardProcess(() => undefined);
    try {
      await run();
    } finally {
      guard.uninstall();
    }
    expect(seen).toEqual([
      ["handler", { plugin: "scoped", phase: "turn.pre_policy" }],
      ["tool", { tool: "tick", plugin: "scoped" }],
    ]);
    expect(currentFaultScope()).toBeUndefined();
    // Without a guard no scope is entered (it would only cost time).
    seen.length = 0;
    await run();
    expect(seen).toEqual([
      ["handler", undefined],
      ["tool", undefined],
    ]);
  });
});
