import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type {
  AwaitPolicy,
  ErrorCode,
  FailurePolicy,
  KeelPlugin,
  PhaseName,
  PluginEntry,
  PluginSetupContext,
  Stage,
} from "../src/index.ts";
import {
  buildRegistry,
  createAgent,
  definePlugin,
  ERROR_CODES,
  isKeelError,
  KeelError,
  KERNEL_VERSION,
  PHASE_NAMES,
  PHASES,
} from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

const noop = () => undefined;

function agentWith(plugins: readonly PluginEntry[]) {
  return createAgent({ provider: scriptedProvider([]), store: new MemorySessionStore(), plugins });
}

/** Build an agent that must fail registration; return the KeelError after checking its code and message. */
async function registrationError(plugins: readonly PluginEntry[], code: ErrorCode): Promise<KeelError> {
  let caught: unknown;
  try {
    const agent = await agentWith(plugins);
    await agent.close();
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected ${code}`).toBeInstanceOf(KeelError);
  const err = caught as KeelError;
  expect(err.code, err.message).toBe(code);
  expect(isKeelError(err, code)).toBe(true);
  // Every registration message starts with the code and ends with what to do about it.
  expect(err.message.startsWith(code)).toBe(true);
  expect(err.message.endsWith(ERROR_CODES[code])).toBe(true);
  return err;
}

/** A plugin with a recording setup. */
function plugin(name: string, extra: Partial<KeelPlugin> = {}, log?: string[]): KeelPlugin {
  return {
    name,
    version: "1.0.0",
    setup(ctx) {
      log?.push(name);
      ctx.on("turn.pre_policy", noop);
    },
    ...extra,
  };
}

function subscriber(
  name: string,
  subscribe: (ctx: PluginSetupContext<unknown>) => void,
  extra: Partial<KeelPlugin> = {},
): KeelPlugin {
  return { name, version: "1.0.0", setup: (ctx) => subscribe(ctx as PluginSetupContext<unknown>), ...extra };
}

describe("registration errors", () => {
  it("KEEL_PLUGIN_INVALID: an entry that is not an object", async () => {
    for (const entry of [42, "plugin", true, () => ({})]) {
      const err = await registrationError([plugin("ok"), entry as unknown as PluginEntry], "KEEL_PLUGIN_INVALID");
      expect(err.location.path).toBe("plugins[1]");
      expect(err.message).toContain("at plugins[1]");
      expect(err.message).toContain("not a plugin with a name");
    }
  });

  it("KEEL_PLUGIN_INVALID: an object without a name (or a blank one)", async () => {
    for (const entry of [
      {},
      { version: "1.0.0", setup: noop },
      { name: "   ", version: "1.0.0", setup: noop },
      { name: 7, version: "1.0.0", setup: noop },
      [],
    ]) {
      const err = await registrationError([entry as unknown as PluginEntry], "KEEL_PLUGIN_INVALID");
      expect(err.location.path).toBe("plugins[0]");
      expect(err.message).toContain("non-empty `name`");
    }
  });

  it("KEEL_PLUGIN_INVALID: no setup, or no version, names the plugin and the missing field", async () => {
    const noSetup = await registrationError(
      [{ name: "nosetup", version: "1.0.0" } as unknown as PluginEntry],
      "KEEL_PLUGIN_INVALID",
    );
    expect(noSetup.plugin).toBe("nosetup");
    expect(noSetup.location.path).toBe("plugins[0]");
    expect(noSetup.message).toContain("Missing `setup`");
    const notFn = await registrationError(
      [plugin("a"), { name: "b", version: "1.0.0", setup: "yes" } as unknown as PluginEntry],
      "KEEL_PLUGIN_INVALID",
    );
    expect(notFn.plugin).toBe("b");
    expect(notFn.location.path).toBe("plugins[1]");
    const noVersion = await registrationError(
      [{ name: "nover", setup: noop } as unknown as PluginEntry],
      "KEEL_PLUGIN_INVALID",
    );
    expect(noVersion.plugin).toBe("nover");
    expect(noVersion.message).toContain("Missing `version`");
  });

  it("KEEL_PLUGIN_DUPLICATE names both positions", async () => {
    const err = await registrationError([plugin("memory"), plugin("other"), plugin("memory")], "KEEL_PLUGIN_DUPLICATE");
    expect(err.plugin).toBe("memory");
    expect(err.location.path).toBe("plugins[2]");
    expect(err.message).toContain("plugins[0]");
    expect(err.message).toContain("plugins[2]");
    expect(err.message).toContain("Remove one of them");
  });

  it("KEEL_KERNEL_RANGE_UNSUPPORTED: a range the kernel does not satisfy", async () => {
    expect(KERNEL_VERSION).toBe("1.0.0");
    const err = await registrationError([plugin("future", { kernel: "^2" })], "KEEL_KERNEL_RANGE_UNSUPPORTED");
    expect(err.plugin).toBe("future");
    expect(err.message).toContain('"^2"');
    expect(err.message).toContain("1.0.0");
    expect(err.message).toContain("Upgrade the plugin");
  });

  it("KEEL_KERNEL_RANGE_UNSUPPORTED: a malformed range (including one with a valid alternative)", async () => {
    for (const kernel of ["banana", "^1 || nope", ">=1.0.0 <two"]) {
      const err = await registrationError([plugin("weird", { kernel })], "KEEL_KERNEL_RANGE_UNSUPPORTED");
      expect(err.plugin).toBe("weird");
      expect(err.message).toContain(JSON.stringify(kernel));
    }
  });

  it("KEEL_KERNEL_RANGE_UNSUPPORTED: a kernel range that is not a string is a coded error, not a TypeError", async () => {
    const err = await registrationError(
      [plugin("numeric", { kernel: 1 as unknown as string })],
      "KEEL_KERNEL_RANGE_UNSUPPORTED",
    );
    expect(err.plugin).toBe("numeric");
  });

  it("accepted kernel ranges", async () => {
    const agent = await agentWith([
      plugin("a", { kernel: "^1" }),
      plugin("b", { kernel: ">=1.0.0 <2" }),
      plugin("c", { kernel: "*" }),
      plugin("d", { kernel: "^0.9 || ^1.0.0" }),
    ]);
    expect(agent.registry.plugins.map((p) => p.kernel)).toEqual(["^1", ">=1.0.0 <2", "*", "^0.9 || ^1.0.0"]);
    await agent.close();
  });

  it("KEEL_DEPENDENCY_MISSING names the plugin and the missing dependency", async () => {
    const err = await registrationError(
      [plugin("a"), plugin("needy", { dependencies: { a: "^1", memory: "^1" } })],
      "KEEL_DEPENDENCY_MISSING",
    );
    expect(err.plugin).toBe("needy");
    expect(err.location.path).toBe("plugins[1].dependencies");
    expect(err.message).toContain('"memory"');
    expect(err.message).toContain("Add the dependency");
    // The array form of dependencies too.
    const arr = await registrationError([plugin("needy", { dependencies: ["memory"] })], "KEEL_DEPENDENCY_MISSING");
    expect(arr.message).toContain('"memory"');
  });

  it("KEEL_DEPENDENCY_VERSION shows the required range and the registered version", async () => {
    const err = await registrationError(
      [plugin("memory", { version: "1.4.0" }), plugin("needy", { dependencies: { memory: "^2.0.0" } })],
      "KEEL_DEPENDENCY_VERSION",
    );
    expect(err.plugin).toBe("needy");
    expect(err.message).toContain('"memory" ^2.0.0');
    expect(err.message).toContain("1.4.0");
    expect(err.message).toContain("Install a matching version");
    // A malformed dependency range is never satisfied.
    const bad = await registrationError(
      [plugin("memory"), plugin("needy", { dependencies: { memory: "one" } })],
      "KEEL_DEPENDENCY_VERSION",
    );
    expect(bad.plugin).toBe("needy");
    // A non-string range is a coded error, not a TypeError.
    const numeric = await registrationError(
      [plugin("memory"), plugin("needy", { dependencies: { memory: 1 as unknown as string } })],
      "KEEL_DEPENDENCY_VERSION",
    );
    expect(numeric.plugin).toBe("needy");
  });

  it("satisfied dependencies (object and array forms) register", async () => {
    const agent = await agentWith([
      plugin("memory", { version: "1.4.0" }),
      plugin("x", { dependencies: { memory: "^1.2" } }),
      plugin("y", { dependencies: ["memory", "x"] }),
    ]);
    expect(agent.registry.plugins.map((p) => [p.name, p.dependencies])).toEqual([
      ["memory", {}],
      ["x", { memory: "^1.2" }],
      ["y", { memory: "*", x: "*" }],
    ]);
    await agent.close();
  });

  it("KEEL_DEPENDENCY_CYCLE for plugin dependencies shows the cycle", async () => {
    const err = await registrationError(
      [plugin("a", { dependencies: ["b"] }), plugin("b", { dependencies: ["a"] })],
      "KEEL_DEPENDENCY_CYCLE",
    );
    expect(err.plugin).toBe("a");
    expect(err.message).toContain("a -> b -> a");
    const longer = await registrationError(
      [
        plugin("x"),
        plugin("a", { dependencies: ["b"] }),
        plugin("b", { dependencies: ["c"] }),
        plugin("c", { dependencies: ["a", "x"] }),
      ],
      "KEEL_DEPENDENCY_CYCLE",
    );
    expect(longer.message).toContain("a -> b -> c -> a");
    const self = await registrationError(
      [plugin("narcissus", { dependencies: ["narcissus"] })],
      "KEEL_DEPENDENCY_CYCLE",
    );
    expect(self.message).toContain("narcissus -> narcissus");
  });

  it("KEEL_DEPENDENCY_CYCLE for after/before edges within a phase", async () => {
    const err = await registrationError(
      [
        subscriber("a", (ctx) => ctx.on("turn.pre_policy", noop, { after: ["b"] })),
        subscriber("b", (ctx) => ctx.on("turn.pre_policy", noop, { after: ["a"] })),
      ],
      "KEEL_DEPENDENCY_CYCLE",
    );
    expect(err.plugin).toBe("a");
    expect(err.phase).toBe("turn.pre_policy");
    expect(err.message).toContain("a:turn.pre_policy");
    expect(err.message).toContain("b:turn.pre_policy");
    expect(err.message).toContain("`after`/`before` edges");
    // after + before that contradict each other.
    const mixed = await registrationError(
      [
        subscriber("a", (ctx) => ctx.on("round.pre_request", noop, { before: ["b"] })),
        subscriber("b", (ctx) => ctx.on("round.pre_request", noop, { before: ["a"] })),
      ],
      "KEEL_DEPENDENCY_CYCLE",
    );
    expect(mixed.phase).toBe("round.pre_request");
  });

  it("edges in different phases do not form a cycle", async () => {
    const agent = await agentWith([
      subscriber("a", (ctx) => ctx.on("turn.pre_policy", noop, { after: ["b"] })),
      subscriber("b", (ctx) => {
        ctx.on("turn.pre_policy", noop);
        ctx.on("turn.post_turn", noop, { after: ["a"] });
      }),
    ]);
    expect(agent.registry.phases.get("turn.pre_policy")!.map((s) => s.plugin)).toEqual(["b", "a"]);
    await agent.close();
  });

  it("KEEL_PHASE_UNKNOWN for a typo'd phase name", async () => {
    const err = await registrationError(
      [subscriber("typo", (ctx) => ctx.on("turn.pre_promt_context" as PhaseName, noop))],
      "KEEL_PHASE_UNKNOWN",
    );
    expect(err.plugin).toBe("typo");
    expect(err.phase).toBe("turn.pre_promt_context");
    expect(err.message).toContain('"turn.pre_promt_context" is not a phase');
    expect(err.message).toContain("PHASES");
    // Object.prototype keys are not phases either.
    await registrationError(
      [subscriber("proto", (ctx) => ctx.on("toString" as PhaseName, noop))],
      "KEEL_PHASE_UNKNOWN",
    );
  });

  it("KEEL_SUBSCRIPTION_DUPLICATE: the same phase twice without distinct ids", async () => {
    const err = await registrationError(
      [
        subscriber("twice", (ctx) => {
          ctx.on("turn.pre_policy", noop);
          ctx.on("turn.pre_policy", noop);
        }),
      ],
      "KEEL_SUBSCRIPTION_DUPLICATE",
    );
    expect(err.plugin).toBe("twice");
    expect(err.phase).toBe("turn.pre_policy");
    expect(err.location.subscription).toBe("twice:turn.pre_policy");
    expect(err.message).toContain("distinct `id`");
    const sameId = await registrationError(
      [
        subscriber("twice", (ctx) => {
          ctx.on("turn.pre_policy", noop, { id: "x" });
          ctx.on("turn.pre_policy", noop, { id: "x" });
        }),
      ],
      "KEEL_SUBSCRIPTION_DUPLICATE",
    );
    expect(sameId.location.subscription).toBe("twice:turn.pre_policy#x");
  });

  it("distinct ids in the same phase are accepted (and one subscription may omit its id)", async () => {
    const agent = await agentWith([
      subscriber("multi", (ctx) => {
        ctx.on("turn.pre_policy", noop);
        ctx.on("turn.pre_policy", noop, { id: "second" });
        ctx.on("turn.pre_policy", noop, { id: "third" });
      }),
    ]);
    expect(agent.registry.phases.get("turn.pre_policy")!.map((s) => s.id)).toEqual([
      "multi:turn.pre_policy",
      "multi:turn.pre_policy#second",
      "multi:turn.pre_policy#third",
    ]);
    await agent.close();
  });

  it("KEEL_SUBSCRIPTION_INVALID: bad await, failure, timeout, stage, priority or handler", async () => {
    const cases: Array<[string, (ctx: PluginSetupContext<unknown>) => void, string]> = [
      ["await", (ctx) => ctx.on("turn.pre_policy", noop, { await: "sometimes" as AwaitPolicy }), 'await "sometimes"'],
      [
        "failure",
        (ctx) => ctx.on("turn.pre_policy", noop, { failure: "explode" as FailurePolicy }),
        'failure "explode"',
      ],
      [
        "timeout zero",
        (ctx) => ctx.on("turn.pre_policy", noop, { timeoutMs: 0 }),
        "timeoutMs must be a positive number",
      ],
      ["timeout negative", (ctx) => ctx.on("turn.pre_policy", noop, { timeoutMs: -5 }), "timeoutMs"],
      ["timeout NaN", (ctx) => ctx.on("turn.pre_policy", noop, { timeoutMs: NaN }), "timeoutMs"],
      ["timeout Infinity", (ctx) => ctx.on("turn.pre_policy", noop, { timeoutMs: Infinity }), "timeoutMs"],
      ["stage", (ctx) => ctx.on("turn.pre_policy", noop, { stage: "middle" as Stage }), 'stage "middle"'],
      ["priority", (ctx) => ctx.on("turn.pre_policy", noop, { priority: NaN }), "priority"],
      ["handler", (ctx) => ctx.on("turn.pre_policy", "handler" as unknown as typeof noop), "not a function"],
    ];
    for (const [label, sub, text] of cases) {
      const err = await registrationError([subscriber("sub", sub)], "KEEL_SUBSCRIPTION_INVALID");
      expect(err.plugin, label).toBe("sub");
      expect(err.phase, label).toBe("turn.pre_policy");
      expect(err.message, label).toContain(text);
      expect(err.message, label).toContain("Fix the option named");
    }
  });

  it("KEEL_SUBSCRIPTION_INVALID: a fallback of a kind the phase does not accept, or an invalid fallback", async () => {
    const wrongKind = await registrationError(
      [
        subscriber("fb", (ctx) =>
          ctx.on("turn.pre_policy", noop, {
            failure: "fallback",
            fallback: [{ kind: "prompt_context", id: "x", domain: "d", content: "c" } as never],
          }),
        ),
      ],
      "KEEL_SUBSCRIPTION_INVALID",
    );
    expect(wrongKind.plugin).toBe("fb");
    expect(wrongKind.message).toContain(
      'fallback[0] is a "prompt_context" contribution, which turn.pre_policy does not accept',
    );
    const invalid = await registrationError(
      [
        subscriber("fb", (ctx) =>
          ctx.on("turn.pre_policy", noop, {
            failure: "fallback",
            fallback: [{ kind: "policy", domain: "", key: "k", value: 1 }],
          }),
        ),
      ],
      "KEEL_SUBSCRIPTION_INVALID",
    );
    expect(invalid.message).toContain("fallback[0] is invalid at domain");
  });

  it("a valid fallback is stored validated, with defaults applied", async () => {
    const agent = await agentWith([
      subscriber("fb", (ctx) =>
        ctx.on("turn.pre_policy", noop, {
          failure: "fallback",
          fallback: [{ kind: "policy", domain: "fs", key: "mode", value: "ro" }],
        }),
      ),
    ]);
    const sub = agent.registry.phases.get("turn.pre_policy")![0]!;
    expect(sub.failure).toBe("fallback");
    expect(sub.fallback).toEqual([{ kind: "policy", domain: "fs", key: "mode", value: "ro", priority: 0 }]);
    await agent.close();
  });

  it("KEEL_FALLBACK_EMPTY: failure fallback without fallback contributions", async () => {
    for (const fallback of [undefined, []]) {
      const err = await registrationError(
        [
          subscriber("fb", (ctx) =>
            ctx.on("turn.pre_policy", noop, { failure: "fallback", ...(fallback ? { fallback } : {}) }),
          ),
        ],
        "KEEL_FALLBACK_EMPTY",
      );
      expect(err.plugin).toBe("fb");
      expect(err.phase).toBe("turn.pre_policy");
      expect(err.message).toContain("fb:turn.pre_policy");
      expect(err.message).toContain("at least one fallback contribution");
    }
  });

  it("KEEL_ORDER_UNKNOWN_PLUGIN: after/before naming no registered plugin", async () => {
    const err = await registrationError(
      [plugin("real"), subscriber("orderly", (ctx) => ctx.on("turn.pre_policy", noop, { after: ["real", "ghost"] }))],
      "KEEL_ORDER_UNKNOWN_PLUGIN",
    );
    expect(err.plugin).toBe("orderly");
    expect(err.phase).toBe("turn.pre_policy");
    expect(err.message).toContain('after: ["ghost"]');
    expect(err.message).toContain("ctx.hasPlugin(name)");
    const before = await registrationError(
      [subscriber("orderly", (ctx) => ctx.on("tool.pre_call", noop, { before: ["ghost"] }))],
      "KEEL_ORDER_UNKNOWN_PLUGIN",
    );
    expect(before.message).toContain('before: ["ghost"]');
  });

  it("an edge to a registered plugin with no subscription in that phase is accepted", async () => {
    const agent = await agentWith([
      plugin("elsewhere", { setup: (ctx) => ctx.on("turn.post_turn", noop) }),
      subscriber("orderly", (ctx) => ctx.on("turn.pre_policy", noop, { after: ["elsewhere"] })),
    ]);
    expect(agent.registry.phases.get("turn.pre_policy")!.map((s) => s.plugin)).toEqual(["orderly"]);
    await agent.close();
  });

  it("KEEL_PLUGIN_OPTIONS_INVALID gives the exact path and what was found", async () => {
    const retrieval = definePlugin({
      name: "retrieval",
      version: "1.0.0",
      options: z.object({
        topK: z.number().int().positive().default(5),
        index: z.object({ name: z.string() }).optional(),
      }),
      input: { topK: "ten" as unknown as number },
      setup: noop,
    });
    const err = await registrationError([plugin("first"), retrieval], "KEEL_PLUGIN_OPTIONS_INVALID");
    expect(err.plugin).toBe("retrieval");
    expect(err.location.path).toBe("plugins[1].options.topK");
    expect(err.message).toContain("at plugins[1].options.topK");
    expect(err.message).toContain('(found "ten")');
    expect(err.message).toContain("Fix the option at the path shown");

    const nested = await registrationError(
      [{ ...retrieval, input: { topK: 3, index: { name: 42 } } } as KeelPlugin],
      "KEEL_PLUGIN_OPTIONS_INVALID",
    );
    expect(nested.location.path).toBe("plugins[0].options.index.name");
    expect(nested.message).toContain("(found number 42)");

    const negative = await registrationError(
      [{ ...retrieval, input: { topK: -1 } } as KeelPlugin],
      "KEEL_PLUGIN_OPTIONS_INVALID",
    );
    expect(negative.location.path).toBe("plugins[0].options.topK");
    expect(negative.message).toContain("(found number -1)");
  });

  it("KEEL_PLUGIN_SETUP_FAILED: setup throws; the original error is the cause", async () => {
    const boom = new Error("database unreachable");
    const err = await registrationError(
      [
        plugin("fine"),
        plugin("broken", {
          setup() {
            throw boom;
          },
        }),
      ],
      "KEEL_PLUGIN_SETUP_FAILED",
    );
    expect(err.plugin).toBe("broken");
    expect(err.location.path).toBe("plugins[1]");
    expect(err.cause).toBe(boom);
    expect(err.message).toContain("database unreachable");
    expect(err.message).toContain("Fix the plugin or remove it");
  });

  it("KEEL_PLUGIN_SETUP_TIMEOUT: a setup that never settles fails within setupTimeoutMs, naming the plugin; its signal aborts", async () => {
    let seen: PluginSetupContext<unknown> | undefined;
    const stuck = plugin("stuck", {
      setup(ctx) {
        seen = ctx;
        return new Promise<void>(() => {});
      },
    });
    const t0 = performance.now();
    const err = await createAgent({
      provider: scriptedProvider([]),
      store: new MemorySessionStore(),
      plugins: [plugin("fine"), stuck],
      setupTimeoutMs: 50,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(isKeelError(err, "KEEL_PLUGIN_SETUP_TIMEOUT")).toBe(true);
    expect((err as KeelError).plugin).toBe("stuck");
    expect((err as KeelError).location.path).toBe("plugins[1]");
    expect((err as KeelError).message).toContain("within 50 ms");
    expect(seen!.signal.aborted).toBe(true);
    expect((seen!.signal.reason as KeelError).code).toBe("KEEL_PLUGIN_SETUP_TIMEOUT");
  });

  it("a setup that finishes within the deadline is unaffected, and a slow one can be allowed more time", async () => {
    const slow = plugin("slow", {
      async setup() {
        await sleep(60);
      },
    });
    await expect(buildRegistry([slow], undefined, { setupTimeoutMs: 20 })).rejects.toMatchObject({
      code: "KEEL_PLUGIN_SETUP_TIMEOUT",
    });
    const registry = await buildRegistry([slow], undefined, { setupTimeoutMs: 1_000 });
    expect(registry.plugins.map((p) => p.name)).toEqual(["slow"]);
  });

  it("KEEL_PLUGIN_SETUP_FAILED: an async setup that rejects, or throws a non-Error", async () => {
    const rejected = await registrationError(
      [
        plugin("async", {
          async setup() {
            await sleep(1);
            throw new TypeError("bad config");
          },
        }),
      ],
      "KEEL_PLUGIN_SETUP_FAILED",
    );
    expect(rejected.cause).toBeInstanceOf(TypeError);
    expect(rejected.message).toContain("bad config");
    const str = await registrationError(
      [
        plugin("stringy", {
          setup() {
            throw "just a string";
          },
        }),
      ],
      "KEEL_PLUGIN_SETUP_FAILED",
    );
    expect(str.cause).toBe("just a string");
    expect(str.message).toContain("just a string");
  });

  it("KEEL_REGISTRY_FROZEN: ctx.on after setup does not throw into the caller; it is ignored and recorded as a diagnostic naming the plugin", async () => {
    let kept: PluginSetupContext<unknown> | undefined;
    const agent = await agentWith([
      subscriber("sneaky", (ctx) => {
        kept = ctx;
        ctx.on("turn.pre_policy", noop);
      }),
    ]);
    const session = await agent.session();
    expect(() => kept!.on("turn.post_turn", noop)).not.toThrow();
    // Nothing was added.
    expect(agent.registry.phases.has("turn.post_turn")).toBe(false);
    expect(agent.inspect().find((r) => r.phase === "turn.post_turn")!.subscriptions).toEqual([]);
    const diags = (await session.events()).filter((e) => e.type === "diagnostic" && e.code === "KEEL_REGISTRY_FROZEN");
    expect(diags).toHaveLength(1);
    expect(diags[0]).toMatchObject({ plugin: "sneaky", phase: "turn.post_turn", level: "error" });
    expect((diags[0] as { message: string }).message).toContain("Move the ctx.on(...) call into setup");
    await agent.close();
  });

  it("KEEL_REGISTRY_FROZEN: ctx.on after the plugin's own setup returned, while another setup is still running, is reported once a session opens", async () => {
    let late: unknown = "not called";
    const early = definePlugin({
      name: "early",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_policy", noop);
        // Fires while "slow" is still setting up.
        setTimeout(() => {
          try {
            ctx.on("turn.post_turn", noop);
            late = undefined;
          } catch (err) {
            late = err;
          }
        }, 5);
      },
    });
    const slow = definePlugin({
      name: "slow",
      version: "1.0.0",
      async setup() {
        await sleep(30);
      },
    });
    const agent = await agentWith([early, slow]);
    expect(late).toBeUndefined();
    expect(agent.registry.phases.has("turn.post_turn")).toBe(false);
    const session = await agent.session();
    expect(
      (await session.events()).filter(
        (e) => e.type === "diagnostic" && e.code === "KEEL_REGISTRY_FROZEN" && e.plugin === "early",
      ),
    ).toHaveLength(1);
    await agent.close();
  });

  it("a setup failure is thrown as-is when it already is a KeelError (e.g. from ctx.on)", async () => {
    const err = await registrationError(
      [subscriber("typo", (ctx) => ctx.on("nope" as PhaseName, noop))],
      "KEEL_PHASE_UNKNOWN",
    );
    expect(err.cause).toBeUndefined();
  });
});

describe("registration guarantees", () => {
  it("runs no setup when any plugin's metadata is invalid, even a later one", async () => {
    const invalidLater: Array<[PluginEntry, ErrorCode]> = [
      [{ name: "bad", version: "1.0.0" } as unknown as PluginEntry, "KEEL_PLUGIN_INVALID"],
      [plugin("first"), "KEEL_PLUGIN_DUPLICATE"],
      [plugin("future", { kernel: "^2" }), "KEEL_KERNEL_RANGE_UNSUPPORTED"],
      [plugin("needy", { dependencies: ["missing"] }), "KEEL_DEPENDENCY_MISSING"],
      [plugin("needy", { dependencies: { first: "^9" } }), "KEEL_DEPENDENCY_VERSION"],
      [
        {
          name: "opts",
          version: "1.0.0",
          options: z.object({ n: z.number() }),
          input: { n: "x" },
          setup: noop,
        } as unknown as PluginEntry,
        "KEEL_PLUGIN_OPTIONS_INVALID",
      ],
    ];
    for (const [bad, code] of invalidLater) {
      const log: string[] = [];
      await registrationError([plugin("first", {}, log), plugin("second", {}, log), bad], code);
      expect(log, code).toEqual([]);
    }
    // A dependency cycle among later plugins also stops everything before any setup.
    const log: string[] = [];
    await registrationError(
      [plugin("first", {}, log), plugin("a", { dependencies: ["b"] }, log), plugin("b", { dependencies: ["a"] }, log)],
      "KEEL_DEPENDENCY_CYCLE",
    );
    expect(log).toEqual([]);
  });

  it("runs setups in dependency order even when listed in reverse; independents keep list order", async () => {
    const log: string[] = [];
    const agent = await agentWith([
      plugin("app", { dependencies: { tools: "^1", memory: "^1" } }, log),
      plugin("tools", { dependencies: ["core"] }, log),
      plugin("z-independent", {}, log),
      plugin("memory", { dependencies: ["core"] }, log),
      plugin("core", {}, log),
    ]);
    expect(log).toEqual(["core", "tools", "memory", "app", "z-independent"]);
    // The registry keeps the list order for plugins.
    expect(agent.registry.plugins.map((p) => p.name)).toEqual(["app", "tools", "z-independent", "memory", "core"]);
    // Subscription order is by list position, not setup order.
    expect(agent.registry.phases.get("turn.pre_policy")!.map((s) => s.plugin)).toEqual([
      "app",
      "tools",
      "z-independent",
      "memory",
      "core",
    ]);
    await agent.close();
  });

  it("ignores falsy entries so `cond && plugin` works, and keeps real indexes in paths", async () => {
    const enabled = false as boolean;
    const log: string[] = [];
    const agent = await agentWith([
      false,
      null,
      undefined,
      0,
      "",
      enabled && plugin("off", {}, log),
      plugin("on", {}, log),
    ]);
    expect(log).toEqual(["on"]);
    expect(agent.registry.plugins.map((p) => p.name)).toEqual(["on"]);
    await agent.close();
    const err = await registrationError(
      [false, null, plugin("a"), { name: "bad", version: "1" } as unknown as PluginEntry],
      "KEEL_PLUGIN_INVALID",
    );
    expect(err.location.path).toBe("plugins[3]");
    const dup = await registrationError([null, plugin("a"), false, plugin("a")], "KEEL_PLUGIN_DUPLICATE");
    expect(dup.message).toContain("plugins[1] and plugins[3]");
  });

  it("an empty plugin list gives an empty registry", async () => {
    const registry = await buildRegistry([]);
    expect(registry.plugins).toEqual([]);
    expect(registry.phases.size).toBe(0);
    expect(registry.kernelVersion).toBe(KERNEL_VERSION);
  });

  it("parses options with defaults applied and passes them to setup as ctx.options", async () => {
    let seen: unknown;
    const schema = z.object({
      topK: z.number().default(5),
      mode: z.enum(["fast", "exact"]).default("fast"),
      label: z.string().transform((s) => s.toUpperCase()),
    });
    const p = definePlugin({
      name: "retrieval",
      version: "1.0.0",
      options: schema,
      input: { label: "docs" },
      setup(ctx) {
        seen = ctx.options;
        const k: number = ctx.options.topK; // typed from the schema
        expect(k).toBe(5);
      },
    });
    const agent = await agentWith([p]);
    expect(seen).toEqual({ topK: 5, mode: "fast", label: "DOCS" });
    expect(agent.registry.plugins[0]!.options).toEqual({ topK: 5, mode: "fast", label: "DOCS" });
    await agent.close();
  });

  it("without an options schema, ctx.options is the raw input", async () => {
    let seen: unknown = "unset";
    const input = { anything: [1, 2] };
    await buildRegistry([
      { name: "raw", version: "1.0.0", input, setup: (ctx) => void (seen = ctx.options) } as KeelPlugin,
    ]);
    expect(seen).toBe(input);
  });

  it("awaits async setups: their subscriptions are registered, and dependents set up after them", async () => {
    const log: string[] = [];
    const agent = await agentWith([
      plugin("dependent", { dependencies: ["slow"], setup: () => void log.push("dependent") }),
      plugin("slow", {
        async setup(ctx) {
          log.push("slow:start");
          await sleep(15);
          ctx.on("turn.pre_policy", noop, { id: "after-await" });
          log.push("slow:end");
        },
      }),
    ]);
    expect(log).toEqual(["slow:start", "slow:end", "dependent"]);
    expect(agent.registry.phases.get("turn.pre_policy")!.map((s) => s.id)).toEqual([
      "slow:turn.pre_policy#after-await",
    ]);
    await agent.close();
  });

  it("ctx exposes the plugin name, the kernel version and hasPlugin", async () => {
    const seen: Record<string, unknown> = {};
    const agent = await agentWith([
      plugin("memory"),
      plugin("probe", {
        setup(ctx) {
          seen.plugin = ctx.plugin;
          seen.kernelVersion = ctx.kernelVersion;
          seen.hasMemory = ctx.hasPlugin("memory");
          seen.hasSelf = ctx.hasPlugin("probe");
          seen.hasLater = ctx.hasPlugin("later"); // registered later in the list, not yet set up
          seen.hasGhost = ctx.hasPlugin("ghost");
          // The optional-edge pattern: only add the edge when the plugin is there.
          ctx.on("turn.pre_policy", noop, { after: ["memory", "ghost"].filter((n) => ctx.hasPlugin(n)) });
        },
      }),
      plugin("later"),
    ]);
    expect(seen).toEqual({
      plugin: "probe",
      kernelVersion: KERNEL_VERSION,
      hasMemory: true,
      hasSelf: true,
      hasLater: true,
      hasGhost: false,
    });
    expect(agent.registry.phases.get("turn.pre_policy")!.find((s) => s.plugin === "probe")!.after).toEqual(["memory"]);
    await agent.close();
  });

  it("freezes the registry, its plugins and its subscriptions", async () => {
    const registry = await buildRegistry([
      plugin("a"),
      subscriber("b", (ctx) => {
        ctx.on("turn.pre_policy", noop, { after: ["a"] });
        ctx.on("tool.pre_call", noop);
      }),
    ]);
    expect(Object.isFrozen(registry)).toBe(true);
    expect(Object.isFrozen(registry.plugins)).toBe(true);
    for (const p of registry.plugins) expect(Object.isFrozen(p)).toBe(true);
    let count = 0;
    for (const subs of registry.phases.values()) {
      expect(Object.isFrozen(subs)).toBe(true);
      for (const s of subs) {
        count++;
        expect(Object.isFrozen(s)).toBe(true);
        expect(Object.isFrozen(s.waitFor)).toBe(true);
      }
    }
    expect(count).toBe(3);
    const sub = registry.phases.get("turn.pre_policy")![1]!;
    expect(() => {
      (sub as { priority: number }).priority = -100;
    }).toThrow(TypeError);
    expect(() => {
      (registry as { kernelVersion: string }).kernelVersion = "9.9.9";
    }).toThrow(TypeError);
    expect(() => (registry.plugins as KeelPlugin[]).push(plugin("x"))).toThrow(TypeError);
    expect(sub.priority).toBe(0);
    expect(registry.kernelVersion).toBe(KERNEL_VERSION);
  });
});

describe("agent.inspect()", () => {
  it("lists every phase in lifecycle order with its kind and accepted kinds", async () => {
    const agent = await agentWith([]);
    const rows = agent.inspect();
    expect(rows.map((r) => r.phase)).toEqual(PHASE_NAMES);
    expect(rows).toHaveLength(13);
    for (const r of rows) {
      expect(r.kind).toBe(PHASES[r.phase].kind);
      expect(r.accepts).toEqual(PHASES[r.phase].accepts);
      expect(r.subscriptions).toEqual([]);
    }
    await agent.close();
  });

  it("lists subscriptions in resolved order (stage, priority, list order, after/before) with their policies", async () => {
    const agent = await agentWith([
      subscriber("a-post", (ctx) => ctx.on("turn.pre_policy", noop, { stage: "post" })),
      subscriber("b-prio5", (ctx) => ctx.on("turn.pre_policy", noop, { priority: 5, await: "deadline" })),
      subscriber("c-after-b", (ctx) =>
        ctx.on("turn.pre_policy", noop, { priority: -1, after: ["b-prio5"], await: "background" }),
      ),
      subscriber("d-pre", (ctx) => ctx.on("turn.pre_policy", noop, { stage: "pre", timeoutMs: 250 })),
      subscriber("e-before-b", (ctx) => ctx.on("turn.pre_policy", noop, { priority: 10, before: ["b-prio5"] })),
      subscriber("f-normal", (ctx) => {
        ctx.on("turn.pre_policy", noop);
        ctx.on("tool.pre_call", noop);
        ctx.on("turn.pre_policy", noop, { id: "late", priority: 5 });
      }),
    ]);
    const row = agent.inspect().find((r) => r.phase === "turn.pre_policy")!;
    // Sorted by stage, then priority, then list position; then the edges (e before b, c after b)
    // pull e ahead of b and hold b and c back, while unconstrained subscriptions keep their place.
    expect(row.subscriptions.map((s) => s.id)).toEqual([
      "d-pre:turn.pre_policy",
      "f-normal:turn.pre_policy",
      "f-normal:turn.pre_policy#late",
      "e-before-b:turn.pre_policy",
      "b-prio5:turn.pre_policy",
      "c-after-b:turn.pre_policy",
      "a-post:turn.pre_policy",
    ]);
    const byId = Object.fromEntries(row.subscriptions.map((s) => [s.id, s]));
    expect(byId["b-prio5:turn.pre_policy"]).toEqual({
      id: "b-prio5:turn.pre_policy",
      plugin: "b-prio5",
      stage: "normal",
      priority: 5,
      after: [],
      before: [],
      await: "deadline",
      timeoutMs: 1_000,
      failure: "best_effort",
    });
    expect(byId["c-after-b:turn.pre_policy"]).toMatchObject({
      priority: -1,
      after: ["b-prio5"],
      await: "background",
      timeoutMs: 180_000,
      failure: "best_effort",
    });
    expect(byId["d-pre:turn.pre_policy"]).toMatchObject({ stage: "pre", await: "blocking", timeoutMs: 250 });
    expect(byId["e-before-b:turn.pre_policy"]).toMatchObject({
      stage: "normal",
      priority: 10,
      before: ["b-prio5"],
      after: [],
      timeoutMs: 30_000,
    });
    expect(byId["a-post:turn.pre_policy"]).toMatchObject({ stage: "post", priority: 0 });
    // Default failure policy comes from the phase table.
    const tool = agent.inspect().find((r) => r.phase === "tool.pre_call")!;
    expect(tool.subscriptions).toEqual([
      {
        id: "f-normal:tool.pre_call",
        plugin: "f-normal",
        stage: "normal",
        priority: 0,
        after: [],
        before: [],
        await: "blocking",
        timeoutMs: 30_000,
        failure: "fail_closed",
      },
    ]);
    // Positions and waitFor in the registry agree with the listed order.
    const subs = agent.registry.phases.get("turn.pre_policy")!;
    expect(subs.map((s) => s.position)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(subs[4]!.waitFor).toEqual([3]); // b waits for e
    expect(subs[5]!.waitFor).toEqual([4]); // c waits for b
    expect(subs[0]!.waitFor).toEqual([]);
    await agent.close();
  });

  it("the order the registry reports is the order handlers run", async () => {
    const ran: string[] = [];
    const rec = (name: string) => () => void ran.push(name);
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "hi" }]),
      store: new MemorySessionStore(),
      plugins: [
        subscriber("late", (ctx) => ctx.on("turn.pre_policy", rec("late"), { stage: "post" })),
        subscriber("second", (ctx) => ctx.on("turn.pre_policy", rec("second"), { after: ["first"] })),
        subscriber("first", (ctx) => ctx.on("turn.pre_policy", rec("first"))),
        subscriber("early", (ctx) => ctx.on("turn.pre_policy", rec("early"), { stage: "pre" })),
      ],
    });
    const expected = agent
      .inspect()
      .find((r) => r.phase === "turn.pre_policy")!
      .subscriptions.map((s) => s.plugin);
    expect(expected).toEqual(["early", "first", "second", "late"]);
    const session = await agent.session();
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    expect(ran).toEqual(expected);
    await agent.close();
  });
});

describe("options without input", () => {
  it("an object schema with defaults gets its defaults when the user gives no options", async () => {
    let seen: unknown;
    const p = definePlugin({
      name: "defaults-only",
      version: "1.0.0",
      options: z.object({ topK: z.number().default(5), scope: z.enum(["user", "project"]).default("project") }),
      setup(ctx) {
        seen = ctx.options;
      },
    });
    await buildRegistry([p]);
    expect(seen).toEqual({ topK: 5, scope: "project" });
  });

  it("a schema that needs a value still fails without input", async () => {
    const p = definePlugin({
      name: "needs-key",
      version: "1.0.0",
      options: z.object({ apiKey: z.string() }),
      setup() {},
    });
    await expect(buildRegistry([p])).rejects.toMatchObject({
      code: "KEEL_PLUGIN_OPTIONS_INVALID",
      plugin: "needs-key",
    });
  });
});

describe("background subscriptions", () => {
  it.each(["required", "fail_closed", "fallback"] as const)(
    "refuse failure %s (nothing waits for them) with KEEL_SUBSCRIPTION_INVALID",
    async (failure) => {
      const p = definePlugin({
        name: "bg",
        version: "1.0.0",
        setup(ctx) {
          ctx.on("turn.post_turn", () => undefined, {
            await: "background",
            failure,
            fallback: [{ kind: "diagnostic", code: "x", message: "y" }],
          });
        },
      });
      await expect(buildRegistry([p])).rejects.toMatchObject({
        code: "KEEL_SUBSCRIPTION_INVALID",
        plugin: "bg",
        message: expect.stringContaining("nothing waits for it"),
      });
    },
  );

  it("default to best_effort even on a fail_closed phase", async () => {
    const p = definePlugin({
      name: "bg",
      version: "1.0.0",
      setup: (ctx) => ctx.on("tool.pre_call", () => undefined, { await: "background" }),
    });
    const registry = await buildRegistry([p]);
    expect(registry.phases.get("tool.pre_call")![0]!.failure).toBe("best_effort");
  });
});
