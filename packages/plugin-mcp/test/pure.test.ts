/** Name sanitising and collisions, schema normalising and result mapping (no servers). */
import { describe, expect, it } from "vitest";
import { TOOL_NAME_PATTERN } from "@keel/kernel";
import { assignToolNames, identityKey, mapCallResult, normalizeInputSchema, sanitizeToolName } from "../src/index.ts";
import { mayBeOf } from "../src/names.ts";

describe("sanitizeToolName", () => {
  it("builds mcp__<server>__<tool> and replaces characters providers reject", () => {
    expect(sanitizeToolName("fs", "read_file")).toBe("mcp__fs__read_file");
    expect(sanitizeToolName("my server", "weird name/with.dots")).toBe("mcp__my_server__weird_name_with_dots");
    expect(sanitizeToolName("docs", "查询")).toBe("mcp__docs___");
  });

  it("cuts long names to 64 characters with a hash that keeps them apart", () => {
    const a = sanitizeToolName(
      "a-very-long-server-name-for-testing",
      "an_extremely_long_tool_name_that_goes_past_the_limit_one",
    );
    const b = sanitizeToolName(
      "a-very-long-server-name-for-testing",
      "an_extremely_long_tool_name_that_goes_past_the_limit_two",
    );
    expect(a).toHaveLength(64);
    expect(a).toMatch(TOOL_NAME_PATTERN);
    expect(a).not.toBe(b);
    expect(
      sanitizeToolName(
        "a-very-long-server-name-for-testing",
        "an_extremely_long_tool_name_that_goes_past_the_limit_one",
      ),
    ).toBe(a);
  });
});

describe("mayBeOf", () => {
  it("places every assigned name with its server, whatever the key's length (cut names included) and collisions", () => {
    const tools: Array<{ server: string; tool: string }> = [];
    for (let len = 1; len <= 80; len += 3) {
      const server = "svc.é-".repeat(14).slice(0, len);
      for (const tool of ["a", "a.b", "a b", "x".repeat(70)]) tools.push({ server, tool });
    }
    const names = assignToolNames(tools, ["mcp__svc_____a"]);
    let cut = 0;
    for (const t of tools) {
      const name = names.get(identityKey(t))!;
      if (!name.startsWith(`mcp__${t.server.replace(/[^a-zA-Z0-9_-]+/g, "_")}__`)) cut++;
      expect(mayBeOf(name, t.server)).toBe(true);
    }
    expect(cut).toBeGreaterThan(0);
    expect(mayBeOf("mcp__github__create_issue", "git")).toBe(false);
  });
});

describe("assignToolNames", () => {
  it("gives colliding tools hash suffixes that do not depend on input order", () => {
    const tools = [
      { server: "s", tool: "a.b" },
      { server: "s", tool: "a b" },
      { server: "s", tool: "c" },
    ];
    const one = assignToolNames(tools);
    const two = assignToolNames([...tools].reverse());
    expect([...one.entries()].sort()).toEqual([...two.entries()].sort());
    expect(one.get(identityKey(tools[2]!))).toBe("mcp__s__c");
    const clashing = [one.get(identityKey(tools[0]!))!, one.get(identityKey(tools[1]!))!];
    expect(new Set(clashing).size).toBe(2);
    for (const n of clashing) expect(n).toMatch(/^mcp__s__a_b_[0-9a-f]{8}$/);
  });

  it("never hands out a reserved (built-in) name and keeps every name valid", () => {
    const names = assignToolNames([{ server: "x", tool: "y" }], ["mcp__x__y"]);
    expect(names.get(identityKey({ server: "x", tool: "y" }))).toMatch(/^mcp__x__y_[0-9a-f]{8}$/);
    const many = assignToolNames(
      Array.from({ length: 50 }, (_, i) => ({
        server: "s".repeat(40),
        tool: `${"t".repeat(40)}${i % 2 ? "." : "/"}${Math.floor(i / 2)}`,
      })),
    );
    expect(new Set(many.values()).size).toBe(50);
    for (const n of many.values()) expect(n).toMatch(TOOL_NAME_PATTERN);
  });
});

describe("normalizeInputSchema", () => {
  it("forces an object at the top and drops keywords OpenAI rejects there, keeping nested schemas", () => {
    const input = {
      $schema: "http://json-schema.org/draft-07/schema#",
      anyOf: [
        { type: "object", properties: { a: { type: "string" } } },
        { properties: { b: { anyOf: [{ type: "number" }, { type: "null" }] } } },
      ],
      required: ["a", "zzz"],
      $defs: { X: { type: "string" } },
    };
    const out = normalizeInputSchema(input);
    expect(out).toEqual({
      type: "object",
      properties: { a: { type: "string" }, b: { anyOf: [{ type: "number" }, { type: "null" }] } },
      required: ["a"],
      $defs: { X: { type: "string" } },
    });
    expect(input.required).toEqual(["a", "zzz"]);
  });

  it("turns a missing or non-object schema into an empty object schema", () => {
    expect(normalizeInputSchema(undefined)).toEqual({ type: "object", properties: {} });
    expect(normalizeInputSchema({ type: "string" })).toEqual({ type: "object", properties: {} });
  });
});

describe("mapCallResult", () => {
  it("maps text, images, resource links, embedded resources and structured content", () => {
    const r = mapCallResult(
      {
        content: [
          { type: "text", text: "hello" },
          { type: "image", data: "aGk=", mimeType: "image/png" },
          { type: "resource_link", uri: "file:///a.txt", name: "a.txt", mimeType: "text/plain" },
          { type: "resource", resource: { uri: "mem://x", mimeType: "text/plain", text: "inner" } },
          { type: "resource", resource: { uri: "mem://b", mimeType: "application/zip", blob: "AAAA" } },
          { type: "audio", data: "AAAA", mimeType: "audio/wav" },
        ],
        structuredContent: { n: 1 },
      },
      10_000,
    );
    expect(r.output.isError).toBe(false);
    const blocks = r.output.content as Array<{ type: string; text?: string; mediaType?: string }>;
    expect(blocks[0]).toEqual({ type: "text", text: "hello" });
    expect(blocks[1]).toEqual({ type: "image", mediaType: "image/png", data: "aGk=" });
    expect(blocks[2]!.text).toContain("file:///a.txt");
    expect(blocks[3]!.text).toContain("inner");
    expect(blocks[4]!.text).toContain("binary");
    expect(blocks[5]!.text).toContain("audio/wav");
    expect(blocks.at(-1)).toEqual({ type: "text", text: '{"n":1}' });
    expect(r.output.details).toEqual({ structuredContent: { n: 1 } });
  });

  it("keeps isError and cuts long text with a marker", () => {
    const r = mapCallResult({ content: [{ type: "text", text: "x".repeat(500) }], isError: true }, 100);
    expect(r.output.isError).toBe(true);
    expect(r.truncated).toBe(true);
    expect(r.bytes).toBe(500);
    const text = (r.output.content as Array<{ text: string }>)[0]!.text;
    expect(text.startsWith("x".repeat(100))).toBe(true);
    expect(text).toContain("400 more characters");
  });
});

describe("structured content that repeats the text", () => {
  it("is not added a second time (it stays in details)", () => {
    const r = mapCallResult(
      { content: [{ type: "text", text: "# TODO\n- [ ] a" }], structuredContent: { content: "# TODO\n- [ ] a" } },
      10_000,
    );
    expect(r.output.content).toEqual([{ type: "text", text: "# TODO\n- [ ] a" }]);
    expect(r.output.details).toEqual({ structuredContent: { content: "# TODO\n- [ ] a" } });
    const other = mapCallResult(
      { content: [{ type: "text", text: "sum done" }], structuredContent: { sum: 42 } },
      10_000,
    );
    expect(other.output.content).toEqual([
      { type: "text", text: "sum done" },
      { type: "text", text: '{"sum":42}' },
    ]);
  });
});
