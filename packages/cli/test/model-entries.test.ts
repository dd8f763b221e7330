/** Object-form model entries in the config: `{ model, idleTimeoutMs, firstByteTimeoutMs, maxRetryAfterMs, … }`. */
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

describe("model entries", () => {
  it("accepts a model with its own timeouts, alone, in a chain, and as sideModel", () => {
    const entry = {
      model: "anthropic:claude-sonnet-4-6",
      idleTimeoutMs: 5_000,
      firstByteTimeoutMs: 30_000,
      maxRetryAfterMs: 10_000,
      maxRetries: 1,
      streamRetries: 0,
    };
    expect(check({ model: entry })).toBeTruthy();
    expect(
      check({
        model: [entry, "openai:gpt-4.1"],
        sideModel: { model: "openai:gpt-4.1-mini", idleTimeoutMs: 0 },
        setupTimeoutMs: 2_000,
      }),
    ).toBeTruthy();
  });

  it("rejects a misspelt setting or a bad value with its path", () => {
    const typo = problem({ model: { model: "anthropic:claude-sonnet-4-6", idleTimeout: 5 } });
    expect(typo.code).toBe("KEEL_CONFIG_INVALID");
    expect(typo.message).toMatch(/model: .*idleTimeout/);
    const negative = problem({ model: [{ model: "openai:gpt-4.1", firstByteTimeoutMs: -1 }] });
    expect(negative.message).toContain("model[0].firstByteTimeoutMs");
    const noSpec = problem({ model: { model: "gpt-4.1" } });
    expect(noSpec.message).toContain("model.model");
    expect(problem({ setupTimeoutMs: 0 }).message).toContain("setupTimeoutMs");
  });

  it("the JSON schema describes the object form", () => {
    const text = JSON.stringify(configJsonSchema());
    for (const k of ["idleTimeoutMs", "firstByteTimeoutMs", "maxRetryAfterMs", "setupTimeoutMs"])
      expect(text).toContain(k);
  });
});
