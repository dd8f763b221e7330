/**
 * Intra-turn pruning and `prun`: what goes and what stays, on hand-built turns and on the
 * 3,000 generated adversarial histories of the pair tests (no orphan made, no pair split, edits
 * reproduce the result), and through real kernel turns (prun applied after the round's tools,
 * durable across a restart; pruning from the third round with a diagnostic).
 */
import type { AssistantMessage, Message, ToolResultMessage } from "@keel/kernel";
import { applyMessageEdits, createAgent, defineTool } from "@keel/agent";
import { isWellFormed } from "@keel/text";
import { z } from "zod";
import { MemorySessionStore, scriptedProvider, seededRandom } from "@keel/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { compaction, diffEdits, PRUNED_PREFIX, prunEdits, pruneTurn } from "../src/index.ts";
import { plainText } from "../src/messages.ts";
import type { PruneTurnOptions } from "../src/index.ts";
import { adversarialHistory, cleanupDirs, diagnostics, ofType, scriptedTool, tempDir } from "./support.ts";
import { join } from "node:path";

afterAll(cleanupDirs);

const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
const said = (calls: Array<[string, string, unknown]>, thinking?: string, text?: string): AssistantMessage => ({
  role: "assistant",
  content: [
    ...(thinking
      ? [
          {
            type: "thinking" as const,
            text: thinking,
            providerData: { provider: "anthropic", signature: `sig-${thinking}` },
          },
        ]
      : []),
    ...(text ? [{ type: "text" as const, text }] : []),
    ...calls.map(([id, name, args]) => ({ type: "tool_call" as const, id, name, args })),
  ],
});
const res = (id: string, name: string, text: string, isError = false): ToolResultMessage => ({
  role: "tool",
  toolCallId: id,
  toolName: name,
  content: [{ type: "text", text }],
  isError,
});
const opts = (over: Partial<PruneTurnOptions> = {}): PruneTurnOptions => ({
  keep: new Set(),
  informational: () => true,
  minCandidateTokens: 0,
  maxMessages: 5,
  countText: (t) => Math.ceil(t.length / 4),
  ...over,
});
const ids = (ms: readonly Message[]) => ms.flatMap((m) => (m.role === "tool" ? [m.toolCallId] : []));

describe("pruneTurn", () => {
  const turn: Message[] = [
    user("fix the bug"),
    said([["c1", "read", { path: "a.py" }]], "look at a.py"),
    res("c1", "read", "ENOENT: a.py", true),
    said([["c2", "read", { path: "src/a.py" }]], "try src"),
    res("c2", "read", "def a(): return 1"),
    said([["c3", "ls", { dir: "empty" }]]),
    res("c3", "ls", "   "),
    said([["c4", "grep", { q: "TODO" }]], undefined, "searching"),
    res("c4", "grep", "src/a.py:3: TODO fix"),
    said([["c5", "grep", { q: " TODO " }]]),
    res("c5", "grep", "src/a.py:3: TODO fix"),
    said([["c6", "read", { path: "b.py" }]], "latest thoughts"),
    res("c6", "read", "ENOENT: b.py", true),
  ];

  it("removes the failed call a later call of the tool got past, empty results and repeats; strips old reasoning; keeps the latest message whole", () => {
    const r = pruneTurn(turn, 0, opts())!;
    // Reasoning went from both older messages that had it (c1's message went whole).
    expect(r.report).toEqual({ failed: ["c1"], empty: ["c3"], duplicate: ["c4"], thinkingStripped: 2 });
    expect(ids(r.messages)).toEqual(["c2", "c5", "c6"]);
    // c1's message held only its call (and thinking): it went; c4's kept its text without the call.
    expect(r.messages.filter((m) => m.role === "assistant").map((m) => m.content.map((b) => b.type).join("+"))).toEqual(
      ["tool_call", "text", "tool_call", "thinking+tool_call"],
    );
    // The latest assistant message and its failure are untouched: the model must see what just failed.
    expect(r.messages.at(-2)).toBe(turn.at(-2));
    expect(r.messages.at(-1)).toBe(turn.at(-1));
    expect(applyMessageEdits(turn, diffEdits(turn, r.messages))).toEqual(r.messages);
  });

  it("does nothing below minCandidateTokens, and removes at most maxMessages results a pass (oldest first)", () => {
    expect(pruneTurn(turn, 0, opts({ minCandidateTokens: 10_000 }))).toBeUndefined();
    expect(pruneTurn(turn, 0, opts({ maxMessages: 1 }))!.report).toMatchObject({
      failed: ["c1"],
      empty: [],
      duplicate: [],
    });
  });

  it("an empty result of a tool that may change state is kept (the only record that it ran); a failure nothing got past is kept", () => {
    const r = pruneTurn(turn, 0, opts({ informational: (id) => id !== "c3" }))!;
    expect(r.report.empty).toEqual([]);
    const lone: Message[] = [
      user("x"),
      said([["f1", "deploy", {}]]),
      res("f1", "deploy", "Error: 500", true),
      said([["f2", "read", {}]]),
      res("f2", "read", "ok"),
    ];
    expect(pruneTurn(lone, 0, opts())).toBeUndefined();
  });

  it("never touches what came before the turn, except reasoning; tools in keep stay", () => {
    const history: Message[] = [
      user("old"),
      said([["o1", "read", { p: 1 }]], "old think"),
      res("o1", "read", "", false),
      said([], undefined, "done"),
      ...turn.slice(0).map((m, i) => (i === 0 ? user("fix the bug") : m)),
    ];
    const r = pruneTurn(history, 4, opts({ keep: new Set(["grep"]) }))!;
    expect(ids(r.messages)).toContain("o1");
    expect(r.report.duplicate).toEqual([]);
    expect(r.report.thinkingStripped).toBe(3);
  });

  it("ids a server reuses every round: branches are found by position, so the latest call and other turns stay", () => {
    const h: Message[] = [
      user("earlier turn"),
      said([["call_0", "read", { path: "x" }]]),
      res("call_0", "read", ""),
      said([], undefined, "done"),
      user("read my files"),
      said([["call_0", "read", { path: "missing" }]]),
      res("call_0", "read", "ENOENT", true),
      said([["call_0", "read", { path: "a" }]]),
      res("call_0", "read", "a: data"),
      said([["call_0", "read", { path: "b" }]]),
      res("call_0", "read", "b: data"),
    ];
    const r = pruneTurn(h, 4, opts())!;
    expect(r.report).toEqual({ failed: ["call_0"], empty: [], duplicate: [], thinkingStripped: 0 });
    expect(r.messages.map((m) => (m.role === "tool" ? plainText(m) : m.role))).toEqual([
      "user",
      "assistant",
      "",
      "assistant",
      "user",
      "assistant",
      "a: data",
      "assistant",
      "b: data",
    ]);
  });

  it("an earlier success is never dropped for a later repeat that failed", () => {
    const h: Message[] = [
      user("summarise config.json"),
      said([["c1", "read", { path: "config.json" }]]),
      res("c1", "read", '{"db":"prod-eu-1"}'),
      said([["c2", "read", { path: "config.json" }]]),
      res("c2", "read", "KEEL_TOOL_TIMEOUT: timed out", true),
      said([["c3", "ls", {}]]),
      res("c3", "ls", "a b"),
    ];
    const r = pruneTurn(h, 0, opts());
    expect(JSON.stringify(r?.messages ?? h)).toContain("prod-eu-1");
    expect(r?.report.duplicate ?? []).not.toContain("c1");
  });

  it("3,000 generated adversarial histories: no call loses its result, no result its call, user messages kept, edits reproduce the result", () => {
    let changed = 0;
    for (let seed = 1; seed <= 3_000; seed++) {
      const rnd = seededRandom(seed);
      const history = adversarialHistory(rnd);
      const start = Math.floor(rnd() * history.length * 0.5);
      const r = pruneTurn(history, start, opts({ maxMessages: 1 + Math.floor(rnd() * 6) }));
      if (!r) continue;
      changed++;
      // By position (ids repeat in these histories): a call's results are those with its id before the next assistant message.
      const stats = (ms: readonly Message[]) => {
        let unanswered = 0;
        const claimed = new Set<number>();
        ms.forEach((m, i) => {
          if (m.role !== "assistant") return;
          for (const b of m.content) {
            if (b.type !== "tool_call") continue;
            let found = false;
            for (let j = i + 1; j < ms.length && ms[j]!.role !== "assistant"; j++)
              if (ms[j]!.role === "tool" && (ms[j] as ToolResultMessage).toolCallId === b.id && !claimed.has(j))
                claimed.add(j), (found = true);
            if (!found) unanswered++;
          }
        });
        return { unanswered, orphans: ms.filter((m, j) => m.role === "tool" && !claimed.has(j)).length };
      };
      const before = stats(history);
      const after = stats(r.messages);
      // No call lost its result (none went without its call), and no result lost its call.
      expect(after.unanswered, `seed ${seed}: unanswered calls`).toBe(before.unanswered);
      expect(after.orphans, `seed ${seed}: orphaned results`).toBeLessThanOrEqual(before.orphans);
      expect(r.messages.filter((m) => m.role === "user")).toEqual(history.filter((m) => m.role === "user"));
      expect(
        applyMessageEdits(history, diffEdits(history, r.messages)).map((m) => JSON.stringify(m)),
        `seed ${seed}`,
      ).toEqual(r.messages.map((m) => JSON.stringify(m)));
    }
    expect(changed).toBeGreaterThan(200);
  });

  it("prun on the 3,000 generated adversarial histories: masks only, so every message, call and result stays where it was", () => {
    let masked = 0;
    for (let seed = 1; seed <= 3_000; seed++) {
      const rnd = seededRandom(seed);
      const history = adversarialHistory(rnd);
      const results = ids(history);
      const pick = () => results[Math.floor(rnd() * results.length)] ?? "none";
      const args =
        rnd() < 0.5
          ? { ids: Array.from({ length: 1 + Math.floor(rnd() * 4) }, pick), reason: "stale \ud83d 🎉" }
          : { from: pick(), ...(rnd() < 0.7 ? { to: pick() } : {}) };
      const withPrun: Message[] = [...history, said([[`prun${seed}`, "prun", args]]), res(`prun${seed}`, "prun", "ok")];
      const edits = prunEdits(withPrun, "prun");
      const out = applyMessageEdits(withPrun, edits);
      masked += edits.length;
      expect(
        out.map((m) => `${m.role}:${m.role === "tool" ? m.toolCallId : ""}`),
        `seed ${seed}`,
      ).toEqual(withPrun.map((m) => `${m.role}:${m.role === "tool" ? m.toolCallId : ""}`));
      for (const e of edits)
        if (e.op === "mask_tool_result")
          expect(e.text.startsWith(PRUNED_PREFIX) && isWellFormed(e.text), `seed ${seed}`).toBe(true);
      // Applied once: the next round asks for nothing more.
      expect(prunEdits(out, "prun"), `seed ${seed}`).toEqual([]);
    }
    expect(masked).toBeGreaterThan(3_000);
  });
});

describe("prun", () => {
  it("masks by id and by range, once, never the prun results themselves", () => {
    const h: Message[] = [
      user("go"),
      said([
        ["a", "read", {}],
        ["b", "read", {}],
      ]),
      res("a", "read", "A"),
      res("b", "read", "B"),
      said([["c", "read", {}]]),
      res("c", "read", "C"),
      said([
        ["p", "prune", { from: "a", to: "b", reason: "old" }],
        ["q", "prune", { ids: ["c", "p"] }],
      ]),
      res("p", "prune", "ok"),
      res("q", "prune", "ok"),
    ];
    const edits = prunEdits(h, "prune");
    expect(edits.map((e) => (e.op === "mask_tool_result" ? e.toolCallId : ""))).toEqual(["a", "b", "c"]);
    expect(edits[0]).toMatchObject({ text: `${PRUNED_PREFIX}: old; read, 1 chars]` });
    expect(prunEdits(applyMessageEdits(h, edits), "prune")).toEqual([]);
  });

  it("through real turns: applied after the round's tools, before the next request; unknown ids are an error result; durable across a restart", async () => {
    const home = tempDir();
    const store = new MemorySessionStore();
    const big = "x".repeat(2_000);
    const provider = scriptedProvider([
      {
        toolCalls: [
          { id: "r1", name: "read", args: { p: 1 } },
          { id: "r2", name: "read", args: { p: 2 } },
        ],
      },
      { toolCalls: [{ id: "p1", name: "prun", args: { ids: ["r1", "nope"] } }] },
      { toolCalls: [{ id: "p2", name: "prun", args: { from: "r1", to: "r2", reason: "done with those" } }] },
      { text: "pruned" },
    ]);
    const agent = await createAgent({
      provider,
      sideModel: false,
      home,
      store,
      tools: [scriptedTool("read", [big, big], { category: "info" })],
      plugins: [compaction({ path: join(home, "c.sqlite"), prun: "prun", prune: { enabled: false } })],
    });
    const s = await agent.session();
    await s.run("read then prune");
    expect(JSON.stringify(s.messages.find((m) => m.role === "tool" && m.toolCallId === "p1"))).toContain(
      `no tool output with id \\"nope\\"`,
    );
    // The request after p2 saw both outputs pruned; the one after p1 (an error) saw them whole.
    const sent = (i: number) =>
      provider.requests[i]!.messages.filter(
        (m) => m.role === "tool" && (m.toolCallId === "r1" || m.toolCallId === "r2"),
      ).map((m) => JSON.stringify(m.content));
    expect(sent(2).every((t) => t.includes("xxxx"))).toBe(true);
    expect(sent(3).every((t) => t.includes(PRUNED_PREFIX) && t.includes("done with those"))).toBe(true);
    const edited = ofType(await store.events(s.id), "context.edited");
    expect(edited.map((e) => e.plugin)).toEqual(["@keel/plugin-compaction"]);
    await agent.close();
    const again = await createAgent({
      provider: scriptedProvider([]),
      sideModel: false,
      home,
      store,
      plugins: [compaction({ path: join(home, "c.sqlite"), prun: "prun" })],
    });
    const s2 = await again.session(s.id);
    expect(
      s2.messages
        .filter((m) => m.role === "tool" && m.toolCallId.startsWith("r"))
        .every((m) => JSON.stringify(m.content).includes(PRUNED_PREFIX)),
    ).toBe(true);
    await again.close();
  });

  it("intra-turn pruning through real turns: from the third round, the failed branch is gone from the request and the log says why", async () => {
    const home = tempDir();
    const store = new MemorySessionStore();
    const long = (t: string) => `${t} ${"detail ".repeat(800)}`;
    const provider = scriptedProvider([
      { toolCalls: [{ id: "c1", name: "read", args: { p: "a" } }] },
      { toolCalls: [{ id: "c2", name: "read", args: { p: "b" } }] },
      { toolCalls: [{ id: "c3", name: "read", args: { p: "c" } }] },
      { text: "done" },
    ]);
    const read = defineTool({
      name: "read",
      description: "Reads.",
      category: "info",
      input: z.object({ p: z.string() }),
      execute: ({ p }) =>
        p === "a" ? { content: long("Error: a is missing"), isError: true } : long(`contents of ${p}`),
    });
    const agent = await createAgent({
      provider,
      sideModel: false,
      home,
      store,
      tools: [read],
      plugins: [compaction({ path: join(home, "c.sqlite"), prune: { minCandidateTokens: 100 } })],
    });
    const s = await agent.session();
    await s.run("read things");
    const toolIds = (i: number) =>
      provider.requests[i]!.messages.flatMap((m) => (m.role === "tool" ? [m.toolCallId] : []));
    expect(toolIds(1)).toEqual(["c1"]);
    // Round 3: c1 failed and a later read got past it, so its branch goes; the latest (c2) stays.
    expect(toolIds(2)).toEqual(["c2"]);
    expect(toolIds(3)).toEqual(["c2", "c3"]);
    const d = diagnostics(await store.events(s.id), "compaction.pruned");
    expect(d).toHaveLength(1);
    expect(d[0]!.data).toMatchObject({ round: 3, failed: ["c1"] });
    await agent.close();
  });
});
