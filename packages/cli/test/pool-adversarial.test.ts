/** The config's pool (`models`) under hostile names: a member named like a prototype key is a member like any other. */
import { describe, expect, it } from "vitest";
import type { KeelConfig, ModelProvider } from "@keel/agent";
import { onlinePool, rigPool } from "../src/pool.ts";

const config = JSON.parse(
  '{"model":"openai:gpt-4.1","models":{"__proto__":"openai:gpt-4.1-mini","constructor":{"model":"openai:gpt-4o-mini","tags":["cheap"]}}}',
) as KeelConfig;
const rig: ModelProvider = { id: "rig", stream: () => (async function* () {})() };

describe("pool members named __proto__ and constructor", () => {
  it("the online pool keeps both as own members (none is lost to the prototype)", async () => {
    const pool = (await onlinePool(config, [], { OPENAI_API_KEY: "sk-test" }, "/p/agent.config.json"))!;
    expect(Object.keys(pool).sort()).toEqual(["__proto__", "constructor"]);
    expect(Object.hasOwn(pool, "__proto__")).toBe(true);
    expect(pool["constructor"]!.tags).toEqual(["cheap"]);
    expect(Object.getPrototypeOf(pool)).toBe(Object.prototype);
  });

  it("the replay rig's pool keeps both", async () => {
    const pool = (await rigPool(config, rig))!;
    expect(Object.keys(pool).sort()).toEqual(["__proto__", "constructor"]);
    expect(Object.getPrototypeOf(pool)).toBe(Object.prototype);
  });
});

describe("a replay's pool estimates as the run did", () => {
  it("each rig member declares the output ceiling its online member's adapter asks for", async () => {
    const cfg = {
      model: "openai:gpt-4.1",
      models: { claude: "anthropic:claude-sonnet-4-5", mini: "openai:gpt-4.1-mini" },
    } as unknown as KeelConfig;
    const online = (await onlinePool(
      cfg,
      [],
      { OPENAI_API_KEY: "sk-test", ANTHROPIC_API_KEY: "sk-test" },
      "/p/agent.config.json",
    ))!;
    const replayed = (await rigPool(cfg, rig))!;
    expect(online.claude!.provider.maxOutputTokens).toBe(8192);
    for (const name of ["claude", "mini"])
      expect(replayed[name]!.provider.maxOutputTokens, name).toBe(online[name]!.provider.maxOutputTokens);
  });
});
