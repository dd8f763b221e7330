/**
 * The kernel's and the host's own schemas are written with zod/mini; users' schemas (tool
 * inputs, plugin options, `output`) may be classic zod or zod/mini: both convert to the same
 * JSON Schema and check values alike, and the kernel's messages stay zod's English ones even
 * when the application never loads classic zod.
 */
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as classic from "zod";
import * as mini from "zod/mini";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ToolDefinition } from "../src/index.ts";
import { createAgent, definePlugin, defineTool, outputSpecOf } from "../src/index.ts";

const classicInput = classic.object({ city: classic.string().min(1), days: classic.number().int().optional() });
const miniInput = mini.object({
  city: mini.string().check(mini.minLength(1)),
  days: mini.optional(mini.number().check(mini.int())),
});

async function run(tools: ToolDefinition[], steps: ScriptStep[]) {
  const provider = scriptedProvider(steps);
  const agent = await createAgent({ provider, store: new MemorySessionStore(), tools });
  const session = await agent.session();
  const result = await session.run("go");
  await agent.close();
  return { provider, result };
}

/** The text of every tool result the model was sent back, by call id. */
function toolResults(provider: ReturnType<typeof scriptedProvider>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of provider.requests.at(-1)!.messages)
    if (m.role === "tool") out[m.toolCallId] = m.content.map((b) => (b.type === "text" ? b.text : "")).join("");
  return out;
}

describe("users' schemas: classic zod and zod/mini alike", () => {
  it("a classic and a mini tool input give the provider the same JSON Schema, and both check the arguments", async () => {
    const seen: unknown[] = [];
    const tool = (name: string, input: typeof classicInput | typeof miniInput) =>
      defineTool({
        name,
        description: "The weather of a city.",
        input,
        execute: (args) => {
          seen.push(args);
          return `${args.city}: sunny`;
        },
      });
    const { provider, result } = await run(
      [tool("classic_tool", classicInput), tool("mini_tool", miniInput)],
      [
        {
          toolCalls: [
            { id: "c1", name: "classic_tool", args: { city: "Paris", days: 2 } },
            { id: "c2", name: "mini_tool", args: { city: "Paris", days: 2 } },
            { id: "c3", name: "classic_tool", args: { city: "", days: 1.5 } },
            { id: "c4", name: "mini_tool", args: { city: "", days: 1.5 } },
          ],
        },
        { text: "done" },
      ],
    );
    expect(result.verdict.status).toBe("completed");
    const [classicSchema, miniSchema] = provider.requests[0]!.tools.map((t) => t.parameters);
    expect(classicSchema).toMatchObject({ type: "object", properties: { city: { type: "string", minLength: 1 } } });
    expect(miniSchema).toEqual(classicSchema);
    expect(seen).toEqual([
      { city: "Paris", days: 2 },
      { city: "Paris", days: 2 },
    ]);
    const results = toolResults(provider);
    expect(results.c1).toBe("Paris: sunny");
    expect(results.c2).toBe("Paris: sunny");
    expect(results.c3).toContain(
      "Invalid arguments — city: Too small: expected string to have >=1 characters; days: Invalid input: expected int, received number.",
    );
    expect(results.c4).toBe(results.c3!.replace("classic_tool", "mini_tool"));
  });

  it("toJSONSchema from zod/mini converts a classic schema as classic zod does", () => {
    expect(mini.toJSONSchema(classicInput)).toEqual(classic.toJSONSchema(classicInput));
    expect(mini.toJSONSchema(miniInput)).toEqual(classic.toJSONSchema(classicInput));
  });

  it("structured output and plugin options take a mini schema as they take a classic one", async () => {
    const spec = outputSpecOf(mini.object({ steps: mini.array(mini.string()) }));
    expect(spec.format.schema).toEqual(
      outputSpecOf(classic.object({ steps: classic.array(classic.string()) })).format.schema,
    );
    const got: unknown[] = [];
    const plugin = (options: typeof miniInput | typeof classicInput, input: unknown) =>
      definePlugin({
        name: `p${got.length}`,
        version: "1.0.0",
        options,
        input: input as never,
        setup: (ctx) => void got.push(ctx.options),
      });
    const provider = scriptedProvider([{ text: "hi" }]);
    await createAgent({ provider, plugins: [plugin(miniInput, { city: "Oslo" })] }).then((a) => a.close());
    await createAgent({ provider, plugins: [plugin(classicInput, { city: "Oslo" })] }).then((a) => a.close());
    expect(got).toEqual([{ city: "Oslo" }, { city: "Oslo" }]);
    const bad = await createAgent({ provider, plugins: [plugin(miniInput, { city: 3 })] }).catch((e: Error) => e);
    const badClassic = await createAgent({ provider, plugins: [plugin(classicInput, { city: 3 })] }).catch(
      (e: Error) => e,
    );
    expect(String(bad)).toContain("Invalid input: expected string, received number");
    expect(String(bad).replace("p4", "p5")).toBe(String(badClassic));
  });
});

describe("the kernel's messages without classic zod", () => {
  it("are zod's English ones when only zod/mini is loaded", () => {
    const root = join(dirname(fileURLToPath(import.meta.url)), "../../..");
    // A fresh process that imports the host (kernel included) and never classic zod.
    const script = `
      const { registerHooks } = await import("node:module");
      const loaded = [];
      registerHooks({ resolve: (spec, ctx, next) => { const r = next(spec, ctx); loaded.push(r.url); return r; } });
      const { createAgent, validateContribution } = await import("@keel/agent");
      const { config } = await import("zod/mini");
      const out = { contribution: validateContribution({ kind: "stop", reason: 3 }) };
      out.options = await createAgent({ provider: { stream() {} }, limits: { maxRounds: 0 } }).catch((e) => e.message);
      out.zod = [...new Set(loaded.filter((u) => u.includes("/zod/")).map((u) => u.replace(/.*\\/zod\\/(v4\\/)?/, "").split("/")[0]))];
      out.english = typeof config().localeError === "function";
      console.log(JSON.stringify(out));
    `;
    const out = JSON.parse(
      execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8" }),
    ) as { contribution: { message: string }; options: string; english: boolean; zod: string[] };
    expect(out.zod).toContain("mini");
    expect(out.zod).not.toContain("classic");
    expect(out.english).toBe(true);
    expect(out.contribution.message).toBe("Invalid input: expected string, received number");
    expect(out.options).toContain("limits.maxRounds: Too small: expected number to be >0.");
  });
});
