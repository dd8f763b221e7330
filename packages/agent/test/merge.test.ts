import { describe, expect, it } from "vitest";
import type {
  Contributed,
  ContributionKind,
  ContributionOf,
  Message,
  MessageEdit,
  ToolDefinition,
  ToolResultMessage,
} from "../src/index.ts";
import {
  applyMessageEdits,
  CONTRIBUTION_SCHEMAS,
  DEFAULT_CAPS,
  mergeDecisions,
  mergePromptContext,
  mergePromptSections,
  mergeRequestOptions,
  mergeToolBundles,
  PolicySet,
  textContent,
} from "../src/index.ts";

/** A contribution as the runner hands it to merge: validated (defaults applied), with its plugin. */
function c<K extends ContributionKind>(
  kind: K,
  plugin: string,
  fields: Record<string, unknown>,
): Contributed<ContributionOf<K>> {
  const value = CONTRIBUTION_SCHEMAS[kind].parse({ kind, ...fields }) as ContributionOf<K>;
  return { plugin, value };
}

const policy = (plugin: string, key: string, value: unknown, priority = 0, domain = "fs") =>
  c("policy", plugin, { domain, key, value, priority });
const ctxEntry = (plugin: string, id: string, content: string, extra: Record<string, unknown> = {}) =>
  c("prompt_context", plugin, { id, domain: "d", content, ...extra });
const section = (plugin: string, id: string, sectionId: string, content: string, extra: Record<string, unknown> = {}) =>
  c("prompt_section", plugin, { id, sectionId, domain: "d", content, ...extra });
const tool = (name: string, meta?: Record<string, unknown>): ToolDefinition => ({
  name,
  description: `${name} tool`,
  execute: () => name,
  ...(meta ? { meta } : {}),
});
const bundle = (plugin: string, bundleId: string, tools: ToolDefinition[], priority = 0) =>
  c("tool_bundle", plugin, { bundleId, tools, priority });
const reqOpts = (plugin: string, options: Record<string, unknown>, priority = 0) =>
  c("request_options", plugin, { options, priority });
const decision = (plugin: string, d: "allow" | "ask" | "deny", reason?: string) =>
  c("tool_decision", plugin, { decision: d, ...(reason ? { reason } : {}) });

describe("PolicySet", () => {
  it("a higher priority wins whatever the order", () => {
    for (const items of [
      [policy("low", "mode", "a", 0), policy("high", "mode", "b", 5)],
      [policy("high", "mode", "b", 5), policy("low", "mode", "a", 0)],
    ]) {
      const set = new PolicySet();
      const log = set.merge(items, "turn.pre_policy");
      expect(set.get("fs", "mode")).toBe("b");
      expect(set.entries()).toEqual([{ domain: "fs", key: "mode", value: "b", plugin: "high" }]);
      expect(log.diagnostics).toEqual([]);
    }
  });

  it("records which contribution was applied and which rejected", () => {
    const set = new PolicySet();
    const log = set.merge(
      [policy("low", "mode", "a", 0), policy("high", "mode", "b", 5), policy("mid", "mode", "c", 2)],
      "turn.pre_policy",
    );
    expect(log.records.map((r) => [r.plugin, r.status])).toEqual([
      ["low", "applied"],
      ["high", "applied"],
      ["mid", "rejected"],
    ]);
    expect(log.records[1]!.reason).toContain("low");
    expect(log.records[0]!.id).toBe("fs.mode");
  });

  it("an equal-priority conflict keeps the first value and emits policy.merge.conflict", () => {
    const set = new PolicySet();
    const log = set.merge(
      [policy("first", "mode", "strict", 1), policy("second", "mode", "lax", 1)],
      "turn.pre_tool_materialization",
    );
    expect(set.get("fs", "mode")).toBe("strict");
    expect(set.entries()[0]!.plugin).toBe("first");
    expect(log.diagnostics).toHaveLength(1);
    const d = log.diagnostics[0]!;
    expect(d).toMatchObject({
      level: "warn",
      code: "policy.merge.conflict",
      plugin: "second",
      phase: "turn.pre_tool_materialization",
    });
    expect(d.message).toContain("first");
    expect(d.message).toContain("fs.mode");
    expect(log.records[1]).toMatchObject({ plugin: "second", status: "rejected" });
  });

  it("identical values at equal priority do not warn", () => {
    const set = new PolicySet();
    const log = set.merge(
      [policy("a", "limits", { max: 3 }, 0), policy("b", "limits", { max: 3 }, 0)],
      "turn.pre_policy",
    );
    expect(log.diagnostics).toEqual([]);
    expect(log.records[1]).toMatchObject({ plugin: "b", status: "rejected", reason: "duplicate of an applied value" });
    expect(set.get("fs", "limits")).toEqual({ max: 3 });
  });

  it("a lower-priority different value is rejected without a conflict diagnostic", () => {
    const set = new PolicySet();
    const log = set.merge([policy("high", "mode", "x", 3), policy("low", "mode", "y", 1)], "turn.pre_policy");
    expect(set.get("fs", "mode")).toBe("x");
    expect(log.diagnostics).toEqual([]);
  });

  it("keys by (domain, key): same key in different domains does not conflict", () => {
    const set = new PolicySet();
    const log = set.merge([policy("a", "mode", 1, 0, "fs"), policy("b", "mode", 2, 0, "net")], "turn.pre_policy");
    expect(set.get("fs", "mode")).toBe(1);
    expect(set.get("net", "mode")).toBe(2);
    expect(set.has("net", "mode")).toBe(true);
    expect(set.has("db", "mode")).toBe(false);
    expect(set.get("db", "mode")).toBeUndefined();
    expect(log.diagnostics).toEqual([]);
  });

  it("keeps merging across phases: a later phase can override with a higher priority, and conflicts are still detected", () => {
    const set = new PolicySet();
    set.merge([policy("a", "mode", 1, 0)], "turn.pre_policy");
    const conflict = set.merge([policy("b", "mode", 2, 0)], "turn.pre_tool_materialization");
    expect(set.get("fs", "mode")).toBe(1);
    expect(conflict.diagnostics.map((d) => d.code)).toEqual(["policy.merge.conflict"]);
    set.merge([policy("c", "mode", 3, 9)], "turn.pre_tool_materialization");
    expect(set.get("fs", "mode")).toBe(3);
  });
});

describe("mergePromptContext", () => {
  it("sorts by priority desc, then domain, then id, then arrival", () => {
    const items = [
      ctxEntry("p1", "b", "1", { domain: "beta" }),
      ctxEntry("p2", "z", "2", { priority: 10 }),
      ctxEntry("p3", "a", "3", { domain: "beta" }),
      ctxEntry("p4", "a", "4", { domain: "alpha" }),
      ctxEntry("p5", "a", "5", { domain: "beta" }),
      ctxEntry("p6", "m", "6", { priority: -1, domain: "aaa" }),
    ];
    const { entries, records, diagnostics } = mergePromptContext(items, "turn.pre_prompt_context");
    expect(entries.map((e) => e.plugin)).toEqual(["p2", "p4", "p3", "p5", "p1", "p6"]);
    expect(entries[0]).toEqual({ id: "z", domain: "d", priority: 10, content: "2", plugin: "p2" });
    expect(records.every((r) => r.status === "applied")).toBe(true);
    expect(diagnostics).toEqual([]);
  });

  it("caps the number of entries at 16, omitting the lowest ranked with a record and a diagnostic", () => {
    // Arrival order is the reverse of rank, so the cap must follow rank, not arrival.
    const items = Array.from({ length: 20 }, (_, i) =>
      ctxEntry(`p${i}`, `e${String(i).padStart(2, "0")}`, "x", { priority: i }),
    );
    const { entries, records, diagnostics } = mergePromptContext(items, "turn.pre_prompt_context");
    expect(DEFAULT_CAPS.contextEntries).toBe(16);
    expect(entries).toHaveLength(16);
    expect(entries.map((e) => e.priority)).toEqual(Array.from({ length: 16 }, (_, i) => 19 - i));
    const omitted = records.filter((r) => r.status === "omitted");
    expect(omitted.map((r) => r.plugin)).toEqual(["p3", "p2", "p1", "p0"]);
    expect(omitted[0]!.reason).toContain("16 entries");
    expect(diagnostics).toHaveLength(4);
    expect(
      diagnostics.every(
        (d) => d.code === "KEEL_MERGE_CAPPED" && d.level === "warn" && d.phase === "turn.pre_prompt_context",
      ),
    ).toBe(true);
    expect(diagnostics.map((d) => d.plugin)).toEqual(["p3", "p2", "p1", "p0"]);
  });

  it("caps total characters at 12,000: the entry that crosses is truncated, later ones omitted", () => {
    const items = [
      ctxEntry("a", "1", "a".repeat(5000), { priority: 3 }),
      ctxEntry("b", "2", "b".repeat(5000), { priority: 2 }),
      ctxEntry("c", "3", "c".repeat(5000), { priority: 1 }),
      ctxEntry("d", "4", "d", { priority: 0 }),
    ];
    const { entries, records, diagnostics } = mergePromptContext(items, "turn.pre_prompt_context");
    expect(DEFAULT_CAPS.contextChars).toBe(12_000);
    expect(entries.map((e) => e.plugin)).toEqual(["a", "b", "c"]);
    expect(entries.map((e) => e.content.length)).toEqual([5000, 5000, 2000]);
    expect(entries.reduce((n, e) => n + e.content.length, 0)).toBe(12_000);
    expect(entries[2]!.content.endsWith("…")).toBe(true);
    expect(entries[2]!.content.startsWith("c".repeat(1999))).toBe(true);
    expect(records.map((r) => r.status)).toEqual(["applied", "applied", "truncated", "omitted"]);
    expect(records[2]!.reason).toBe("5000 → 2000 chars");
    expect(records[3]!.reason).toContain("12000 chars");
    expect(diagnostics.map((d) => [d.plugin, d.level, d.code])).toEqual([
      ["c", "info", "KEEL_MERGE_CAPPED"],
      ["d", "warn", "KEEL_MERGE_CAPPED"],
    ]);
  });

  it("honours an entry's maxChars", () => {
    const { entries, records, diagnostics } = mergePromptContext(
      [ctxEntry("a", "1", "0123456789".repeat(10), { maxChars: 10 })],
      "turn.pre_prompt_context",
    );
    expect(entries[0]!.content).toBe("012345678…");
    expect(records[0]).toMatchObject({ status: "truncated", reason: "100 → 10 chars" });
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]!.message).toContain('"1"');
  });

  it("content exactly at maxChars is applied untouched", () => {
    const { entries, records } = mergePromptContext(
      [ctxEntry("a", "1", "0123456789", { maxChars: 10 })],
      "turn.pre_prompt_context",
    );
    expect(entries[0]!.content).toBe("0123456789");
    expect(records[0]!.status).toBe("applied");
  });

  it("uses custom caps", () => {
    const caps = { ...DEFAULT_CAPS, contextEntries: 2, contextChars: 15 };
    const r1 = mergePromptContext(
      [ctxEntry("a", "1", "x"), ctxEntry("b", "2", "y"), ctxEntry("c", "3", "z")],
      "turn.pre_prompt_context",
      caps,
    );
    expect(r1.entries.map((e) => e.plugin)).toEqual(["a", "b"]);
    expect(r1.records[2]).toMatchObject({ plugin: "c", status: "omitted", reason: "over 2 entries" });
    const r2 = mergePromptContext(
      [ctxEntry("a", "1", "0123456789"), ctxEntry("b", "2", "0123456789")],
      "turn.pre_prompt_context",
      caps,
    );
    expect(r2.entries.map((e) => e.content)).toEqual(["0123456789", "0123…"]);
  });

  it("returns nothing for no contributions", () => {
    expect(mergePromptContext([], "turn.pre_prompt_context")).toEqual({ entries: [], records: [], diagnostics: [] });
  });
});

describe("mergePromptSections", () => {
  it("groups fragments by sectionId, joins them, and the first title wins", () => {
    const items = [
      section("a", "f1", "rules", "Rule one.", { title: "Rules" }),
      section("b", "f2", "tools", "Use tools."),
      section("c", "f3", "rules", "Rule two.", { title: "Other title" }),
      section("c", "f4", "tools", "Tool tips.", { title: "Tools" }),
    ];
    const { sections, records, diagnostics } = mergePromptSections(items, "turn.pre_prompt_compile");
    expect(sections).toEqual([
      { sectionId: "rules", title: "Rules", content: "Rule one.\n\nRule two.", plugins: ["a", "c"] },
      { sectionId: "tools", title: "Tools", content: "Use tools.\n\nTool tips.", plugins: ["b", "c"] },
    ]);
    expect(records.every((r) => r.status === "applied")).toBe(true);
    expect(diagnostics).toEqual([]);
  });

  it("orders fragments by priority desc, then arrival", () => {
    const items = [
      section("a", "f1", "s", "low"),
      section("b", "f2", "s", "high", { priority: 5 }),
      section("c", "f3", "s", "low2"),
    ];
    const { sections } = mergePromptSections(items, "turn.pre_prompt_compile");
    expect(sections[0]!.content).toBe("high\n\nlow\n\nlow2");
    expect(sections[0]!.plugins).toEqual(["b", "a", "c"]);
  });

  it("a section without any title has no title field", () => {
    const { sections } = mergePromptSections([section("a", "f1", "s", "x")], "turn.pre_prompt_compile");
    expect(sections[0]).toEqual({ sectionId: "s", content: "x", plugins: ["a"] });
    expect("title" in sections[0]!).toBe(false);
  });

  it("caps the number of sections at 16", () => {
    const items = Array.from({ length: 18 }, (_, i) => section(`p${i}`, `f${i}`, `s${i}`, "x"));
    const { sections, records, diagnostics } = mergePromptSections(items, "turn.pre_prompt_compile");
    expect(DEFAULT_CAPS.sections).toBe(16);
    expect(sections).toHaveLength(16);
    expect(sections.map((s) => s.sectionId)).not.toContain("s16");
    expect(records.filter((r) => r.status === "omitted").map((r) => r.plugin)).toEqual(["p16", "p17"]);
    expect(diagnostics.map((d) => d.code)).toEqual(["KEEL_MERGE_CAPPED", "KEEL_MERGE_CAPPED"]);
    // A fragment for an already-open section is still accepted past the cap.
    const more = mergePromptSections([...items, section("late", "f-late", "s0", "more")], "turn.pre_prompt_compile");
    expect(more.sections[0]!.content).toBe("x\n\nmore");
  });

  it("caps one section at 8,000 characters", () => {
    const items = [
      section("a", "f1", "big", "a".repeat(5000)),
      section("b", "f2", "big", "b".repeat(5000)),
      section("c", "f3", "big", "c"),
    ];
    const { sections, records, diagnostics } = mergePromptSections(items, "turn.pre_prompt_compile");
    expect(DEFAULT_CAPS.sectionChars).toBe(8_000);
    const parts = sections[0]!.content.split("\n\n");
    expect(parts.map((p) => p.length)).toEqual([5000, 3000]);
    expect(parts[1]!.endsWith("…")).toBe(true);
    expect(records.map((r) => r.status)).toEqual(["applied", "truncated", "omitted"]);
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({ plugin: "c", code: "KEEL_MERGE_CAPPED" });
  });

  it("caps all sections together at 16,000 characters", () => {
    const items = [
      section("a", "f1", "s1", "a".repeat(7000)),
      section("b", "f2", "s2", "b".repeat(7000)),
      section("c", "f3", "s3", "c".repeat(7000)),
      section("d", "f4", "s4", "d"),
    ];
    const { sections, records } = mergePromptSections(items, "turn.pre_prompt_compile");
    expect(DEFAULT_CAPS.sectionsTotalChars).toBe(16_000);
    expect(sections.map((s) => s.content.length)).toEqual([7000, 7000, 2000]);
    expect(sections.map((s) => s.sectionId)).toEqual(["s1", "s2", "s3"]);
    expect(records.map((r) => r.status)).toEqual(["applied", "applied", "truncated", "omitted"]);
  });

  it("honours a fragment's maxChars and custom caps", () => {
    const r1 = mergePromptSections([section("a", "f1", "s", "0123456789", { maxChars: 4 })], "turn.pre_prompt_compile");
    expect(r1.sections[0]!.content).toBe("012…");
    const caps = { ...DEFAULT_CAPS, sections: 1, sectionChars: 5 };
    const r2 = mergePromptSections(
      [section("a", "f1", "s", "0123456789"), section("b", "f2", "t", "x")],
      "turn.pre_prompt_compile",
      caps,
    );
    expect(r2.sections).toEqual([{ sectionId: "s", content: "0123…", plugins: ["a"] }]);
    expect(r2.records[1]).toMatchObject({ plugin: "b", status: "omitted", reason: "over 1 sections" });
  });
});

describe("mergeToolBundles", () => {
  it("built-in tools always win over a plugin tool of the same name, whatever the bundle priority", () => {
    const builtinRead = tool("read");
    const pluginRead = tool("read");
    const grep = tool("grep");
    const { tools, records, diagnostics } = mergeToolBundles(
      [builtinRead],
      [bundle("fsplug", "fs", [pluginRead, grep], 100)],
      "turn.pre_tool_materialization",
    );
    expect(tools.map((t) => t.def.name)).toEqual(["read", "grep"]);
    expect(tools[0]!.def).toBe(builtinRead);
    expect(tools[0]!.source).toEqual({ kind: "builtin" });
    // Contributions pass through zod, so the definition is a validated copy with the same execute.
    expect(tools[1]!.def.execute).toBe(grep.execute);
    expect(tools[1]!.source).toEqual({ kind: "plugin", plugin: "fsplug", bundle: "fs" });
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({ code: "KEEL_TOOL_DUPLICATE", plugin: "fsplug", level: "warn" });
    expect(diagnostics[0]!.message).toContain("built-in");
    expect(records[0]).toMatchObject({
      plugin: "fsplug",
      kind: "tool_bundle",
      id: "fs",
      status: "truncated",
      reason: "1 tool(s) shadowed",
    });
  });

  it("a duplicate bundleId keeps the first bundle and emits a diagnostic", () => {
    const { tools, records, diagnostics } = mergeToolBundles(
      [],
      [bundle("a", "fs", [tool("read")]), bundle("b", "fs", [tool("write")])],
      "turn.pre_tool_materialization",
    );
    expect(tools.map((t) => [t.def.name, t.source.plugin])).toEqual([["read", "a"]]);
    expect(records.map((r) => [r.plugin, r.status])).toEqual([
      ["a", "applied"],
      ["b", "rejected"],
    ]);
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({ code: "KEEL_MERGE_CONFLICT", plugin: "b" });
    expect(diagnostics[0]!.message).toContain('"fs"');
  });

  it("a higher-priority bundle is merged first, so it wins name and bundle-id clashes", () => {
    const { tools } = mergeToolBundles(
      [],
      [bundle("low", "x", [tool("search")], 0), bundle("high", "y", [tool("search")], 5)],
      "turn.pre_tool_materialization",
    );
    expect(tools.map((t) => t.source.plugin)).toEqual(["high"]);
  });

  it("records provenance: plugin, bundle and the tool's meta", () => {
    const t = tool("fs_read", { mcpServer: "fs" });
    const { tools } = mergeToolBundles(
      [tool("echo")],
      [bundle("mcp", "mcp:fs", [t, tool("fs_list")])],
      "turn.pre_tool_materialization",
    );
    expect(tools.map((x) => x.source)).toEqual([
      { kind: "builtin" },
      { kind: "plugin", plugin: "mcp", bundle: "mcp:fs", meta: { mcpServer: "fs" } },
      { kind: "plugin", plugin: "mcp", bundle: "mcp:fs" },
    ]);
  });

  it("without bundles, the built-ins are returned in order", () => {
    const b = [tool("a"), tool("b")];
    const { tools, records, diagnostics } = mergeToolBundles(b, [], "turn.pre_tool_materialization");
    expect(tools.map((t) => t.def)).toEqual(b);
    expect(records).toEqual([]);
    expect(diagnostics).toEqual([]);
  });
});

describe("mergeRequestOptions", () => {
  it("per option, the highest priority wins", () => {
    const base = { maxTokens: 1000, temperature: 1 };
    const { options, records, diagnostics } = mergeRequestOptions(
      base,
      [
        reqOpts("a", { temperature: 0.1 }, 10),
        reqOpts("b", { temperature: 0.9, toolChoice: "none" }, 5),
        reqOpts("c", { maxTokens: 50 }, 0),
      ],
      "round.pre_request",
    );
    expect(options).toEqual({ maxTokens: 50, temperature: 0.1, toolChoice: "none" });
    expect(records.map((r) => [r.plugin, r.status])).toEqual([
      ["a", "applied"],
      ["b", "applied"],
      ["c", "applied"],
    ]);
    expect(diagnostics).toEqual([]);
    expect(base).toEqual({ maxTokens: 1000, temperature: 1 });
  });

  it("a later higher priority overrides an earlier lower one", () => {
    const { options } = mergeRequestOptions(
      {},
      [reqOpts("a", { temperature: 0.1 }, 0), reqOpts("b", { temperature: 0.7 }, 3)],
      "round.pre_request",
    );
    expect(options.temperature).toBe(0.7);
  });

  it("an equal-priority conflict keeps the first and emits a diagnostic", () => {
    const { options, records, diagnostics } = mergeRequestOptions(
      {},
      [reqOpts("a", { temperature: 0.1 }), reqOpts("b", { temperature: 0.2 })],
      "round.pre_request",
    );
    expect(options.temperature).toBe(0.1);
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({
      code: "KEEL_MERGE_CONFLICT",
      plugin: "b",
      phase: "round.pre_request",
      level: "warn",
    });
    expect(diagnostics[0]!.message).toContain("temperature");
    expect(records[1]).toMatchObject({ plugin: "b", status: "rejected", reason: "every option was outranked" });
  });

  it("equal-priority identical values do not warn", () => {
    const { diagnostics } = mergeRequestOptions(
      {},
      [reqOpts("a", { cache: "5m" }), reqOpts("b", { cache: "5m" })],
      "round.pre_request",
    );
    expect(diagnostics).toEqual([]);
  });

  it("without contributions, returns a copy of the base", () => {
    const base = { maxTokens: 10 };
    const { options } = mergeRequestOptions(base, [], "round.pre_request");
    expect(options).toEqual(base);
    expect(options).not.toBe(base);
  });
});

describe("mergeDecisions", () => {
  const permutations = <T>(xs: T[]): T[][] =>
    xs.length <= 1
      ? [xs]
      : xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));

  it("deny beats ask beats allow, in every order", () => {
    for (const order of permutations(["allow", "ask", "deny"] as const)) {
      const merged = mergeDecisions(order.map((d) => decision(`p-${d}`, d, `because ${d}`)));
      expect(merged, order.join(",")).toEqual({ decision: "deny", plugin: "p-deny", reason: "because deny" });
    }
    for (const order of permutations(["allow", "ask"] as const)) {
      expect(mergeDecisions(order.map((d) => decision(`p-${d}`, d))).decision).toBe("ask");
    }
  });

  it("no decision means allow", () => {
    expect(mergeDecisions([])).toEqual({ decision: "allow" });
  });

  it("only allows means allow", () => {
    expect(mergeDecisions([decision("a", "allow"), decision("b", "allow")]).decision).toBe("allow");
  });

  it("among equally restrictive decisions the first is reported", () => {
    const merged = mergeDecisions([
      decision("a", "ask", "first"),
      decision("b", "deny", "d1"),
      decision("c", "deny", "d2"),
    ]);
    expect(merged).toEqual({ decision: "deny", plugin: "b", reason: "d1" });
  });
});

describe("applyMessageEdits", () => {
  const u = (t: string): Message => ({ role: "user", content: textContent(t) });
  const res = (id: string, t: string): ToolResultMessage => ({
    role: "tool",
    toolCallId: id,
    toolName: "read",
    content: textContent(t),
    isError: false,
  });
  const history = (): Message[] => [
    u("m0"),
    { role: "assistant", content: [{ type: "tool_call", id: "c1", name: "read", args: {} }] },
    res("c1", "big output"),
    u("m3"),
    u("m4"),
  ];
  const texts = (ms: readonly Message[]) =>
    ms.map((m) => (m.content[0] && "text" in m.content[0] ? m.content[0].text : m.role));

  it("replaces a range with new messages", () => {
    const input = history();
    const out = applyMessageEdits(input, [{ op: "replace", start: 1, end: 3, messages: [u("summary")] }]);
    expect(texts(out)).toEqual(["m0", "summary", "m3", "m4"]);
    expect(out[0]).toBe(input[0]);
  });

  it("inserts with an empty range and appends at the end", () => {
    const out = applyMessageEdits(history(), [
      { op: "replace", start: 0, end: 0, messages: [u("first")] },
      { op: "replace", start: 6, end: 6, messages: [u("last")] },
    ]);
    expect(texts(out)).toEqual(["first", "m0", "assistant", "big output", "m3", "m4", "last"]);
  });

  it("deletes a range with no messages", () => {
    expect(texts(applyMessageEdits(history(), [{ op: "replace", start: 3, end: 5, messages: [] }]))).toEqual([
      "m0",
      "assistant",
      "big output",
    ]);
  });

  it("applies edits in order, each to the result of the previous", () => {
    const out = applyMessageEdits(history(), [
      { op: "replace", start: 0, end: 1, messages: [] },
      { op: "replace", start: 0, end: 0, messages: [u("x")] },
    ]);
    expect(texts(out)[0]).toBe("x");
    expect(out).toHaveLength(5);
  });

  it("mask_tool_result replaces only the content of that result", () => {
    const input = history();
    const out = applyMessageEdits(input, [{ op: "mask_tool_result", toolCallId: "c1", text: "[masked]" }]);
    expect(out[2]).toEqual({
      role: "tool",
      toolCallId: "c1",
      toolName: "read",
      content: textContent("[masked]"),
      isError: false,
    });
    expect(out[2]).not.toBe(input[2]);
    expect(out[3]).toBe(input[3]);
  });

  it("throws on an out-of-range or inverted replace, naming the edit", () => {
    const bad: MessageEdit[][] = [
      [{ op: "replace", start: 0, end: 6, messages: [] }],
      [{ op: "replace", start: 3, end: 2, messages: [] }],
    ];
    for (const edits of bad) expect(() => applyMessageEdits(history(), edits)).toThrow(/edits\[0\]/);
    expect(() =>
      applyMessageEdits(history(), [
        { op: "replace", start: 0, end: 0, messages: [] },
        { op: "replace", start: 9, end: 9, messages: [] },
      ]),
    ).toThrow(/edits\[1\].*outside 0\.\.5/);
  });

  it("throws on an unknown tool call id", () => {
    expect(() => applyMessageEdits(history(), [{ op: "mask_tool_result", toolCallId: "nope", text: "" }])).toThrow(
      /edits\[0\].*"nope"/,
    );
  });

  it("never mutates the input array or its messages", () => {
    const input = history();
    const frozen = Object.freeze(
      input.map((m) => Object.freeze({ ...m, content: Object.freeze([...m.content]) })),
    ) as unknown as Message[];
    const snapshot = JSON.stringify(frozen);
    const out = applyMessageEdits(frozen, [
      { op: "mask_tool_result", toolCallId: "c1", text: "[masked]" },
      { op: "replace", start: 3, end: 4, messages: [u("new")] },
    ]);
    expect(JSON.stringify(frozen)).toBe(snapshot);
    expect(out).not.toBe(frozen);
    expect(texts(out)).toEqual(["m0", "assistant", "[masked]", "new", "m4"]);
    // A failing edit list leaves the input untouched too.
    expect(() =>
      applyMessageEdits(frozen, [
        { op: "mask_tool_result", toolCallId: "c1", text: "x" },
        { op: "replace", start: 0, end: 99, messages: [] },
      ]),
    ).toThrow();
    expect(JSON.stringify(frozen)).toBe(snapshot);
  });
});
