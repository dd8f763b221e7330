/**
 * What run() accepts besides a string: content blocks (checked at the door) and an output
 * schema (structured output, on the scripted provider; the wire formats are tested in
 * packages/providers/test/embedding.test.ts).
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { keelErrorOf } from "./support/helpers.ts";

async function setup(steps: ScriptStep[]) {
  const provider = scriptedProvider(steps);
  const agent = await createAgent({ provider, store: new MemorySessionStore() });
  return { agent, provider, session: await agent.session() };
}

const Plan = z.object({ steps: z.array(z.string()).min(1), risky: z.boolean() });

describe("structured output", () => {
  it("valid JSON (also fenced) comes back parsed, and the request carries the schema", async () => {
    const { agent, session, provider } = await setup([{ text: '```json\n{"steps":["a","b"],"risky":false}\n```' }]);
    const r = await session.run("plan it", { output: Plan, outputName: "plan" });
    expect(r.output).toEqual({ steps: ["a", "b"], risky: false });
    expect(provider.requests[0]!.options.output).toMatchObject({
      name: "plan",
      schema: { type: "object", required: ["steps", "risky"] },
    });
    expect(provider.requests[0]!.options.output!.schema).not.toHaveProperty("$schema");
    await agent.close();
  });

  it("invalid, then corrected: one corrective user message naming the problem", async () => {
    const { agent, session, provider } = await setup([
      { text: "Sure! Here is the plan." },
      { text: '{"steps":["a"],"risky":true}' },
    ]);
    const r = await session.run("plan it", { output: Plan });
    expect(r.verdict.status).toBe("completed");
    expect(r.output).toEqual({ steps: ["a"], risky: true });
    const corrective = provider.requests[1]!.messages.at(-1)!;
    expect(corrective.role).toBe("user");
    expect(JSON.stringify(corrective.content)).toContain("the answer is not JSON");
    await agent.close();
  });

  it("invalid twice: a failed verdict with KEEL_OUTPUT_INVALID and the issues, no output", async () => {
    const { agent, session } = await setup([{ text: '{"steps":[]}' }, { text: '{"steps":[],"risky":"no"}' }]);
    const r = await session.run("plan it", { output: Plan });
    expect(r.verdict).toMatchObject({ status: "failed", reason: "output_invalid", code: "KEEL_OUTPUT_INVALID" });
    expect(r.verdict.status === "failed" && r.verdict.message).toMatch(/steps: .*; risky/);
    expect(r).not.toHaveProperty("output");
    await agent.close();
  });

  it("a non-object schema is refused before anything is stored", async () => {
    const { agent, session } = await setup([{ text: "[]" }]);
    expect((await keelErrorOf(() => session.run("x", { output: z.array(z.string()) as never }))).code).toBe(
      "KEEL_OUTPUT_SCHEMA_INVALID",
    );
    expect((await session.events()).filter((e) => e.type === "turn.started")).toHaveLength(0);
    await agent.close();
  });
});

describe("content-block input", () => {
  it("bad blocks get KEEL_INPUT_INVALID naming the block; nothing is stored", async () => {
    const { agent, session } = await setup([{ text: "x" }]);
    const cases: Array<[unknown, string]> = [
      [[], "empty array"],
      [[{ type: "text" }], "[0]: a text block needs a string `text`"],
      [
        [
          { type: "text", text: "a" },
          { type: "image", mediaType: "image/tiff", data: "AAAA" },
        ],
        "[1]: an image needs mediaType",
      ],
      [[{ type: "image", mediaType: "image/png", data: "not base64!" }], "base64"],
      [[{ type: "audio", data: "x" }], 'unknown block type "audio"'],
      [
        [{ type: "file", mediaType: "text/csv", data: "AAAA" }],
        '[0]: a file must be a PDF, mediaType "application/pdf" (got "text/csv")',
      ],
      [
        [{ type: "file", mediaType: "application/pdf", data: "AAAA", name: 7 }],
        "[0]: a file's `name` must be a non-empty string",
      ],
      [[{ type: "file", data: "data:application/pdf,not-base64" }], "[0]: a data: URL must be base64"],
      [42, "got number"],
    ];
    for (const [input, message] of cases) {
      const err = await keelErrorOf(() => session.run(input as never));
      expect(err.code).toBe("KEEL_INPUT_INVALID");
      expect(err.message).toContain(message);
    }
    expect((await session.events()).filter((e) => e.type === "turn.started")).toHaveLength(0);
    await agent.close();
  });

  it("a data: URL image is split into mediaType and data; text is made well-formed", async () => {
    const { agent, session, provider } = await setup([{ text: "ok" }]);
    await session.run([
      { type: "text", text: "look \ud83d" },
      { type: "image", data: "data:image/jpeg;base64,/9j/AA==" } as never,
    ]);
    expect(provider.requests[0]!.messages[0]!.content).toEqual([
      { type: "text", text: "look \ufffd" },
      { type: "image", mediaType: "image/jpeg", data: "/9j/AA==" },
    ]);
    await agent.close();
  });

  it("a PDF file block (data: URL or base64) reaches the provider and counts in the token estimate by size", async () => {
    const { agent, session, provider } = await setup([{ text: "ok" }, { text: "ok" }]);
    const pdf = Buffer.from(`%PDF-1.4\n${"x".repeat(200_000)}`).toString("base64");
    await session.run([
      { type: "text", text: "summarise" },
      { type: "file", data: `data:application/pdf;base64,${pdf}`, name: "spec \ud83d.pdf" } as never,
    ]);
    expect(provider.requests[0]!.messages[0]!.content).toEqual([
      { type: "text", text: "summarise" },
      { type: "file", mediaType: "application/pdf", data: pdf, name: "spec \ufffd.pdf" },
    ]);
    const first = (await session.events()).find((e) => e.type === "prompt.compiled");
    // ~195 KB decoded at 40 tokens per KB: far above the 1,500 floor, far below what the text of 270 KB of base64 would count.
    expect(first?.type === "prompt.compiled" && first.manifest.tokenEstimate.total).toBeGreaterThan(7_500);
    expect(first?.type === "prompt.compiled" && first.manifest.tokenEstimate.total).toBeLessThan(12_000);
    await agent.close();
  });
});
