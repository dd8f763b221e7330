import { describe, expect, it } from "vitest";
import type { Contribution, ContributionKind, ValidationResult } from "../src/index.ts";
import { CONTRIBUTION_SCHEMAS, validateContribution } from "../src/index.ts";

function ok(raw: unknown): Contribution {
  const r = validateContribution(raw);
  if (!r.ok) throw new Error(`expected ${JSON.stringify(raw)} to validate, got ${r.path}: ${r.message}`);
  return r.value;
}

function bad(raw: unknown): Extract<ValidationResult, { ok: false }> {
  const r = validateContribution(raw);
  if (r.ok) throw new Error(`expected ${JSON.stringify(raw)} to be rejected`);
  return r;
}

const tool = { name: "read_file", description: "Read a file", execute: () => "ok" };

/** One minimal valid input per kind (defaults omitted). */
const MINIMAL: Record<ContributionKind, Record<string, unknown>> = {
  policy: { kind: "policy", domain: "fs", key: "readonly", value: true },
  prompt_context: { kind: "prompt_context", id: "ctx-1", domain: "memory", content: "remember this" },
  prompt_section: { kind: "prompt_section", id: "frag-1", sectionId: "rules", domain: "safety", content: "be careful" },
  tool_bundle: { kind: "tool_bundle", bundleId: "fs", tools: [tool] },
  tool_visibility: { kind: "tool_visibility", hide: { categories: ["edit"] }, reason: "plan mode" },
  message_edit: {
    kind: "message_edit",
    reason: "compact",
    edits: [{ op: "mask_tool_result", toolCallId: "c1", text: "[masked]" }],
  },
  request_options: { kind: "request_options", options: { temperature: 0.2 } },
  tool_decision: { kind: "tool_decision", decision: "deny" },
  tool_result_rewrite: { kind: "tool_result_rewrite", content: "shorter", reason: "compress" },
  diagnostic: { kind: "diagnostic", code: "x.y", message: "hello" },
  background_job: { kind: "background_job", idempotencyKey: "k1", name: "index", run: () => undefined },
  stop: { kind: "stop", reason: "budget" },
  answer: { kind: "answer", reason: "workflow step", text: "done" },
};

describe("validateContribution: accepts every kind", () => {
  it("the minimal inputs cover every kind of the schema table", () => {
    expect(Object.keys(MINIMAL).sort()).toEqual(Object.keys(CONTRIBUTION_SCHEMAS).sort());
  });

  for (const [kind, raw] of Object.entries(MINIMAL)) {
    it(`accepts a minimal ${kind} and keeps its fields`, () => {
      const v = ok(raw);
      expect(v.kind).toBe(kind);
      for (const [k, val] of Object.entries(raw)) {
        if (typeof val === "function") expect((v as Record<string, unknown>)[k]).toBe(val);
        else if (k !== "tools") expect((v as Record<string, unknown>)[k]).toEqual(val);
      }
    });
  }

  it("applies priority 0 to every kind that has a priority", () => {
    for (const kind of ["policy", "prompt_context", "prompt_section", "tool_bundle", "request_options"] as const) {
      const v = ok(MINIMAL[kind]);
      expect(v.kind).toBe(kind);
      expect((v as { priority: number }).priority, kind).toBe(0);
    }
  });

  it("keeps an explicit priority", () => {
    const v = ok({ ...MINIMAL.policy, priority: 7 });
    expect(v.kind === "policy" && v.priority).toBe(7);
  });

  it("applies diagnostic level info, and keeps an explicit level", () => {
    const d = ok(MINIMAL.diagnostic);
    expect(d.kind === "diagnostic" && d.level).toBe("info");
    const w = ok({ ...MINIMAL.diagnostic, level: "warn" });
    expect(w.kind === "diagnostic" && w.level).toBe("warn");
  });

  it("keeps the tool definitions of a bundle (execute included)", () => {
    const v = ok(MINIMAL.tool_bundle);
    if (v.kind !== "tool_bundle") throw new Error("kind");
    expect(v.tools).toHaveLength(1);
    expect(v.tools[0]!.name).toBe("read_file");
    expect(v.tools[0]!.execute).toBe(tool.execute);
  });

  it("accepts the structured forms: replace edits with messages, rewrite with content blocks", () => {
    const e = ok({
      kind: "message_edit",
      reason: "summarize",
      edits: [
        { op: "replace", start: 0, end: 2, messages: [{ role: "user", content: [{ type: "text", text: "summary" }] }] },
      ],
    });
    expect(e.kind === "message_edit" && e.edits[0]!.op).toBe("replace");
    const r = ok({ kind: "tool_result_rewrite", content: [{ type: "text", text: "x" }], isError: false, reason: "r" });
    expect(r.kind === "tool_result_rewrite" && r.content).toEqual([{ type: "text", text: "x" }]);
  });
});

describe("validateContribution: rejects with a path", () => {
  it("an unknown kind, naming the valid kinds", () => {
    const r = bad({ kind: "prompt", content: "x" });
    expect(r.kind).toBe("prompt");
    expect(r.path).toBe("kind");
    expect(r.message).toContain('"prompt"');
    for (const k of Object.keys(CONTRIBUTION_SCHEMAS)) expect(r.message).toContain(k);
  });

  it("a missing kind", () => {
    const r = bad({ domain: "fs", key: "k", value: 1 });
    expect(r.kind).toBeUndefined();
    expect(r.path).toBe("kind");
  });

  it("an invalid tool name inside a bundle, at tools.<i>.name", () => {
    const r = bad({ kind: "tool_bundle", bundleId: "fs", tools: [tool, { ...tool, name: "read file!" }] });
    expect(r.kind).toBe("tool_bundle");
    expect(r.path).toBe("tools.1.name");
    expect(r.message).toContain("^[a-zA-Z0-9_-]{1,64}$");
    expect(bad({ kind: "tool_bundle", bundleId: "fs", tools: [{ ...tool, name: "x".repeat(65) }] }).path).toBe(
      "tools.0.name",
    );
  });

  it("a tool without execute, at tools.<i>.execute", () => {
    const { execute: _execute, ...noExec } = tool;
    const r = bad({ kind: "tool_bundle", bundleId: "fs", tools: [noExec] });
    expect(r.path).toBe("tools.0.execute");
    expect(r.message).toContain("execute");
  });

  it("an out-of-range temperature, at options.temperature", () => {
    const r = bad({ kind: "request_options", options: { temperature: 5 } });
    expect(r.path).toBe("options.temperature");
  });

  it("an unknown request option (options are strict)", () => {
    const r = bad({ kind: "request_options", options: { temprature: 0.5 } });
    expect(r.path).toBe("options");
    expect(r.message).toContain("temprature");
  });

  it("field-level errors of other kinds", () => {
    expect(bad({ ...MINIMAL.prompt_section, sectionId: "Bad Section" }).path).toBe("sectionId");
    expect(bad({ ...MINIMAL.prompt_context, maxChars: 0 }).path).toBe("maxChars");
    expect(bad({ ...MINIMAL.prompt_context, id: "" }).path).toBe("id");
    expect(bad({ ...MINIMAL.policy, priority: Infinity }).path).toBe("priority");
    expect(bad({ ...MINIMAL.policy, domain: "" }).path).toBe("domain");
    expect(bad({ ...MINIMAL.tool_decision, decision: "maybe" }).path).toBe("decision");
    expect(bad({ ...MINIMAL.diagnostic, level: "fatal" }).path).toBe("level");
    expect(bad({ ...MINIMAL.message_edit, edits: [] }).path).toBe("edits");
    expect(bad({ ...MINIMAL.message_edit, edits: [{ op: "replace", start: -1, end: 0, messages: [] }] }).path).toBe(
      "edits.0.start",
    );
    expect(
      bad({
        ...MINIMAL.message_edit,
        edits: [{ op: "replace", start: 0, end: 0, messages: [{ role: "robot", content: [] }] }],
      }).path,
    ).toBe("edits.0.messages.0.role");
    expect(bad({ ...MINIMAL.background_job, run: "not a function" }).path).toBe("run");
    expect(bad({ ...MINIMAL.stop, reason: "" }).path).toBe("reason");
    expect(bad({ ...MINIMAL.tool_result_rewrite, content: 42 }).path).toBe("content");
  });
});

describe("validateContribution: never throws", () => {
  const circular: Record<string, unknown> = { kind: "policy" };
  circular.self = circular;
  const garbage: Array<[string, unknown]> = [
    ["null", null],
    ["undefined", undefined],
    ["a number", 42],
    ["NaN", NaN],
    ["a string", "policy"],
    ["a boolean", true],
    ["a function", () => ({ kind: "stop", reason: "x" })],
    ["a symbol", Symbol("kind")],
    ["a bigint", 10n],
    ["an empty array", []],
    ["an array of contributions", [MINIMAL.stop]],
    ["an empty object", {}],
    ["kind: 42", { kind: 42 }],
    ["kind: null", { kind: null }],
    ["kind: an object", { kind: { kind: "policy" } }],
    ["kind: an array", { kind: ["policy"] }],
    ["kind: toString (an Object.prototype key)", { kind: "toString" }],
    ["kind: constructor", { kind: "constructor" }],
    ["kind: __proto__", JSON.parse('{"kind":"__proto__"}')],
    ["kind: hasOwnProperty", { kind: "hasOwnProperty" }],
    ["a null-prototype object", Object.assign(Object.create(null) as object, { kind: "stop" })],
    ["a circular policy without domain", circular],
    ["a date", new Date(0)],
    ["a map", new Map([["kind", "stop"]])],
  ];

  for (const [label, raw] of garbage) {
    it(`${label} → ok: false`, () => {
      let r: ValidationResult | undefined;
      expect(() => {
        r = validateContribution(raw);
      }).not.toThrow();
      expect(r!.ok).toBe(false);
      if (!r!.ok) {
        expect(typeof r!.path).toBe("string");
        expect(r!.message.length).toBeGreaterThan(0);
      }
    });
  }

  it("non-string kinds are reported as kind undefined", () => {
    expect(bad({ kind: 42 }).kind).toBeUndefined();
    expect(bad(null).kind).toBeUndefined();
  });
});
