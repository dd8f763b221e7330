import { describe, expect, it } from "vitest";
import type { PhaseName } from "../src/index.ts";
import { createAgent, isKeelError, PHASE_NAMES, validateContribution } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { closestName, didYouMean } from "../../text/src/index.ts";
import type { KeelPlugin } from "../src/index.ts";

async function registrationMessage(plugins: KeelPlugin[]): Promise<string> {
  try {
    const agent = await createAgent({ provider: scriptedProvider([]), store: new MemorySessionStore(), plugins });
    await agent.close();
  } catch (err) {
    if (isKeelError(err)) return err.message;
    throw err;
  }
  throw new Error("registration should have failed");
}
const noop = () => undefined;

describe("closestName", () => {
  it("finds a typo's intended name, case-insensitively, and nothing for an unrelated word", () => {
    expect(closestName("turn.pre_promt_context", PHASE_NAMES)).toBe("turn.pre_prompt_context");
    expect(closestName("TOOL.PRE_CALL", PHASE_NAMES)).toBe("tool.pre_call");
    expect(closestName("prompt_sectoin", ["prompt_context", "prompt_section"])).toBe("prompt_section");
    expect(closestName("banana", PHASE_NAMES)).toBeUndefined();
    expect(closestName("x", ["y"])).toBe("y");
    expect(closestName("ab", ["xy"])).toBeUndefined();
    // Counted by code point: an emoji is one edit, not two.
    expect(closestName("memory🙂", ["memory", "mem"])).toBe("memory");
  });
  it("didYouMean says nothing for an exact name or a non-string", () => {
    expect(didYouMean("run", ["run"])).toBe("");
    expect(didYouMean(42, ["run"])).toBe("");
    expect(didYouMean("rnu", ["run", "chat"])).toBe(' Did you mean "run"?');
  });
});

describe("did you mean, where names are checked", () => {
  it("an unknown phase in ctx.on", async () => {
    const msg = await registrationMessage([
      { name: "typo", version: "1.0.0", setup: (ctx) => ctx.on("turn.pre_promt_context" as PhaseName, noop) },
    ]);
    expect(msg).toMatch(/^KEEL_PHASE_UNKNOWN/);
    expect(msg).toContain('Did you mean "turn.pre_prompt_context"?');
  });
  it("an unknown dependency and an unknown after/before plugin", async () => {
    const memory: KeelPlugin = { name: "@keel/plugin-memory", version: "1.0.0", setup: noop };
    const dep = await registrationMessage([
      memory,
      { name: "needy", version: "1.0.0", dependencies: { "@keel/plugin-memroy": "*" }, setup: noop },
    ]);
    expect(dep).toMatch(/^KEEL_DEPENDENCY_MISSING/);
    expect(dep).toContain('Did you mean "@keel/plugin-memory"?');
    const order = await registrationMessage([
      memory,
      {
        name: "orderly",
        version: "1.0.0",
        setup: (ctx) => ctx.on("turn.pre_policy", noop, { after: ["@keel/plugin-memory2"] }),
      },
    ]);
    expect(order).toMatch(/^KEEL_ORDER_UNKNOWN_PLUGIN/);
    expect(order).toContain('Did you mean "@keel/plugin-memory"?');
  });
  it("an unknown contribution kind", () => {
    const v = validateContribution({ kind: "prompt_sectoin", id: "a" });
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.message).toContain('did you mean "prompt_section"?');
  });
});

describe("every validation issue at once", () => {
  it("a prompt_section missing id, sectionId and domain names all three in one message", () => {
    const v = validateContribution({ kind: "prompt_section", content: "Be brief." });
    expect(v.ok).toBe(false);
    if (v.ok) return;
    expect(v.path).toBe("id");
    for (const path of ["sectionId", "domain"]) expect(v.message).toContain(`and at ${path}:`);
  });
  it("a single issue keeps its short form", () => {
    const v = validateContribution({ kind: "prompt_context", id: "a", domain: "d", content: 5 });
    expect(v.ok).toBe(false);
    if (!v.ok) {
      expect(v.path).toBe("content");
      expect(v.message).not.toContain("and at");
    }
  });
});
