/** The provider pool in the config (`models`) and the budget limits: accepted shapes and located errors. */
import { describe, expect, it } from "vitest";
import { isKeelError } from "@keel/kernel";
import { validateConfig } from "../src/build-agent.ts";
import { configJsonSchema } from "../src/config-schema.ts";

const check = (config: unknown) => validateConfig({ config, filepath: "/p/agent.config.ts" } as never);
const problem = (config: unknown) => {
  try {
    check(config);
  } catch (err) {
    if (isKeelError(err)) return err;
  }
  throw new Error("expected KEEL_CONFIG_INVALID");
};

describe("config models (the provider pool) and budgets", () => {
  it("accepts members as strings, entries with tags, price and window, and a member's own chain", () => {
    expect(
      check({
        model: "anthropic:claude-sonnet-4-5",
        models: {
          fast: { model: "openai:gpt-4.1-mini", tags: ["cheap", "fast"] },
          strong: {
            model: "anthropic:claude-sonnet-4-5",
            tags: ["tools", "images"],
            price: { input: 3, output: 15 },
            contextWindow: 200_000,
          },
          chain: { model: [{ model: "openai:gpt-4o-mini", maxRetries: 0 }, "openai:gpt-4.1-mini"] },
          plain: "openai:gpt-5-mini",
        },
        limits: { maxCostUsd: 0.5, maxSessionCostUsd: 5, maxSessionTokens: 2_000_000 },
      }),
    ).toBeTruthy();
  });

  it("rejects a bad member with its path", () => {
    const tag = problem({ models: { fast: { model: "openai:gpt-4.1-mini", tags: [""] } } });
    expect(tag.code).toBe("KEEL_CONFIG_INVALID");
    expect(tag.message).toContain("models.fast.tags[0]");
    expect(problem({ models: { fast: { model: "gpt-4.1-mini" } } }).message).toContain("models.fast.model");
    expect(problem({ models: { fast: { model: "openai:gpt-4.1-mini", price: { input: 1 } } } }).message).toContain(
      "models.fast: price.output: Invalid input: expected number",
    );
    expect(problem({ models: { fast: { model: "openai:gpt-4.1-mini", tag: ["x"] } } }).message).toMatch(
      /models\.fast: .*tag/,
    );
    expect(problem({ models: { fast: 42 } }).message).toContain(
      'models.fast: expected a pool member: "<provider>:<model>"',
    );
    expect(problem({ models: { "bad name": "openai:gpt-4.1-mini" } }).message).toContain("models");
    expect(problem({ limits: { maxCostUsd: -1 } }).message).toContain("limits.maxCostUsd");
    expect(problem({ limits: { maxSessionTokens: 1.5 } }).message).toContain("limits.maxSessionTokens");
  });

  it("the JSON schema describes the pool and the budgets", () => {
    const text = JSON.stringify(configJsonSchema());
    for (const k of ['"models"', '"tags"', '"contextWindow"', "maxCostUsd", "maxSessionCostUsd", "maxSessionTokens"])
      expect(text).toContain(k);
  });
});
