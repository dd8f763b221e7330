/**
 * Compile-time contracts of defineConfig, checked by `tsc` in `pnpm test`: each
 * `@ts-expect-error` line fails the typecheck if the config types stop rejecting it.
 */
import { describe, expect, it } from "vitest";
import { defineConfig, definePlugin } from "../src/index.ts";
import type { KnownModelName, ModelName } from "../src/index.ts";

const plugin = definePlugin({ name: "p", version: "1.0.0", setup: () => undefined });

describe("defineConfig types", () => {
  it("accept a full, valid config and return it unchanged", () => {
    const config = {
      name: "typed",
      model: [
        "anthropic:claude-sonnet-4-6",
        { model: "openai:gpt-4.1", idleTimeoutMs: 30_000 },
        "openai-compatible:llama3.3",
      ],
      sideModel: "anthropic:claude-some-future-model",
      plugins: [plugin, false, "@keel/plugin-memory", ["@keel/plugin-skills", { dirs: ["./skills"] }]],
      limits: { maxRounds: 10, wallTimeMs: 60_000 },
      lease: { ttlMs: 10_000 },
      home: ".keel",
    } as const;
    expect(defineConfig(config)).toBe(config);
    const known: KnownModelName = "openai:gpt-4.1";
    const any: ModelName = "openai:some-model-released-tomorrow";
    expect([known, any]).toHaveLength(2);
  });

  it("reject unknown keys and misspelt providers at compile time", () => {
    const configs = [
      // @ts-expect-error an unknown top-level key
      defineConfig({ modle: "anthropic:claude-sonnet-4-6" }),
      // @ts-expect-error an unknown key inside limits
      defineConfig({ limits: { maxRound: 3 } }),
      // @ts-expect-error a misspelt provider prefix
      defineConfig({ model: "anthropc:claude-sonnet-4-6" }),
      // @ts-expect-error a model string without a provider
      defineConfig({ model: "gpt-4.1" }),
      // @ts-expect-error a misspelt provider in a chain's entry
      defineConfig({ model: [{ model: "opanai:gpt-4.1" }] }),
      // @ts-expect-error an unknown per-model setting
      defineConfig({ model: { model: "openai:gpt-4.1", idleTimeout: 5 } }),
    ];
    // At run time defineConfig is the identity: the CLI's schema reports these with locations.
    expect(configs).toHaveLength(6);
  });
});
