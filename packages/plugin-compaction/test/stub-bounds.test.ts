/**
 * What a stub or summary leaves behind stays within bounds: it opens no code fence that the
 * rest of the prompt would read as code, its identifier index is sized by what it replaces,
 * and a side model's summary is cut to the budget it was given.
 */
import type { Message, ToolResultMessage } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { isWellFormed } from "@keel/text";
import { scriptedProvider } from "@keel/testkit";
import { describe, expect, it } from "vitest";
import type { CompactOptions } from "../src/index.ts";
import {
  compactHistory,
  deterministicSummary,
  digestOutput,
  MASK_PREFIX,
  reduceText,
  SHORTENED_TEXT_MARK,
  summarizeTurns,
} from "../src/index.ts";
import { fitSummary } from "../src/summarize.ts";
import { textOf } from "./support.ts";

const counter = defaultTokenCounter();
const countText = (t: string) => counter.countText(t);
const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
const say = (id: string, text: string): Message => ({
  role: "assistant",
  content: [
    { type: "text", text },
    { type: "tool_call", id, name: "bash", args: { command: "ls" } },
  ],
});
const result = (id: string, text: string): ToolResultMessage => ({
  role: "tool",
  toolCallId: id,
  toolName: "bash",
  content: [{ type: "text", text }],
  isError: false,
});
const base: CompactOptions = {
  strategy: "mask",
  soft: 0.6,
  hard: 0.99,
  target: 0.1,
  protectedTail: { tokens: 0, messages: 2, share: 0.15 },
  cooldownRounds: 2,
  minMaskTokens: 60,
  summaryTokens: 1_200,
  summaryTimeoutMs: 1_000,
  retrieveTool: "context_retrieve",
  stubIdentifiers: 150,
  maskArguments: false,
  maskText: true,
};

async function compact(history: Message[], o: CompactOptions, windowShare = 0.9) {
  return (await compactHistory({
    messages: history,
    overhead: 0,
    window: Math.floor(counter.countMessages(history) / windowShare),
    calibration: 1,
    pinned: new Set([0]),
    state: { round: 1, lastHard: undefined, exhausted: false },
    options: o,
    countText,
    countMessage: (m) => counter.countMessage(m),
    stash: (_m) => "m1",
    model: undefined,
    goal: "the task",
  }))!;
}

/** True when `text` leaves a Markdown code fence open (CommonMark: a fence line opens, a bare run as long closes). */
function leavesFenceOpen(text: string): boolean {
  let open = "";
  for (const line of text.split("\n")) {
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (!m || (m[1]![0] === "`" && m[2]!.includes("`"))) continue;
    if (!open) open = m[1]!;
    else if (m[1]![0] === open[0] && m[1]!.length >= open.length && !m[2]!.trim()) open = "";
  }
  return open !== "";
}

const body = "The reasoning goes on about the plan, weighing one option against another at length. ".repeat(12);
const code = Array.from({ length: 20 }, (_, i) => `    result_${i} = compute_value(${i})  # step ${i}`).join("\n");
/** Assistant texts whose first sentence or line opens a fence. */
const fenced = [
  `\`\`\`python\nimport os\n${code}\n\`\`\`\n${body}`,
  `~~~\n${code}\n~~~\n${body}`,
  `\`\`\`\`bash\nls -la /srv/app\n\`\`\`\`\n${body}`,
  `Here is the fix. \`\`\`python\n${code}\n\`\`\`\n${body}`,
  `Here is the fix \`\`\`python\n${code}\n\`\`\`\n${body}`,
  `\`\`\`\n\n${code}\n\`\`\`\nWhat does step 3 return?\n${body}`,
];

describe("a shortened assistant text opens no code fence", () => {
  it("keeps the text before a fence, or the first code line, never an open fence, for every form of fence", async () => {
    for (const text of fenced) {
      const history: Message[] = [
        user("the task"),
        say("c0", text),
        result("c0", "ok"),
        say("c1", "next"),
        result("c1", "ok"),
      ];
      const r = await compact(history, base);
      const shortened = textOf(r.messages[1]!);
      expect(shortened, text.slice(0, 40)).toContain(SHORTENED_TEXT_MARK);
      expect(leavesFenceOpen(shortened), shortened).toBe(false);
      expect(shortened).not.toMatch(/```|~~~/);
    }
    const kept = async (text: string) =>
      textOf(
        (
          await compact(
            [user("the task"), say("c0", text), result("c0", "ok"), say("c1", "next"), result("c1", "ok")],
            base,
          )
        ).messages[1]!,
      );
    expect(await kept(fenced[0]!)).toMatch(/^import os \[rest of this message shortened/);
    expect(await kept(fenced[3]!)).toMatch(/^Here is the fix\. \[rest of this message shortened/);
    expect(await kept(fenced[4]!)).toMatch(/^Here is the fix \[rest of this message shortened/);
  });

  it("a deterministic summary's decisions, questions and errors open no fence either", () => {
    const messages: Message[] = [
      say("c0", fenced[5]!),
      result("c0", "```\nerror: build failed in src/app.ts\n```"),
      say("c1", fenced[1]!),
      result("c1", "ok"),
    ];
    const text = deterministicSummary(messages, "```sh\nmake all\n```", ["```step one```"], 1_200, countText);
    expect(leavesFenceOpen(text), text).toBe(false);
    expect(text).not.toMatch(/```|~~~/);
    expect(text).toContain("What does step 3 return?");
  });

  it("a reduction (a TACO digest, a summary's transcript) never leaves open a fence the text closed", async () => {
    const doc = [
      "# Notes",
      "```python",
      ...Array.from({ length: 200 }, (_, i) => `value_${i} = compute_value(${i})  # row ${i}`),
      "```",
      ...Array.from({ length: 60 }, (_, i) => `Plain line ${i} of the document.`),
    ].join("\n");
    expect(leavesFenceOpen(doc)).toBe(false);
    const reduced = reduceText(doc, 300, countText);
    expect(reduced).toContain("[… lines");
    expect(leavesFenceOpen(reduced), reduced).toBe(false);
    const digest = await digestOutput({
      text: doc,
      toolName: "bash",
      args: { command: "cat notes.md" },
      target: 300,
      model: undefined,
      timeoutMs: 1_000,
      count: countText,
    });
    expect(leavesFenceOpen(digest.text)).toBe(false);
    const model = scriptedProvider([{ text: "```python\nvalue_0 = compute_value(0)" }], { model: "side" });
    const fromModel = await digestOutput({
      text: doc,
      toolName: "bash",
      args: {},
      target: 300,
      model,
      timeoutMs: 5_000,
      count: countText,
    });
    expect(fromModel.method).toBe("model");
    expect(leavesFenceOpen(fromModel.text), fromModel.text).toBe(false);
  });

  it("a side model's summary that leaves a fence open gets it closed", async () => {
    const model = scriptedProvider([{ text: "Key facts:\n```sh\nmake all\n- exit 2" }], { model: "side" });
    const p = await summarizeTurns({
      messages: [say("c0", "Probe."), result("c0", "ok")],
      goal: "the task",
      subgoals: [],
      maxTokens: 300,
      model,
      timeoutMs: 5_000,
      count: countText,
    });
    expect(p.method).toBe("model");
    expect(leavesFenceOpen(p.text), p.text).toBe(false);
  });
});

describe("a stub's identifier index is sized by what it replaces", () => {
  // 400-odd tokens of nothing but distinct identifiers: an unbounded index is as large as the output.
  const ids = Array.from({ length: 140 }, (_, i) => `module_${i}.handler_${i}`).join(" ");
  const history: Message[] = [
    user("the task"),
    say("c0", "Listing."),
    result("c0", ids),
    say("c1", "next"),
    result("c1", "ok"),
  ];

  it("keeps the most salient identifiers within the share, so the stub saves most of the output", async () => {
    const r = await compact(history, { ...base, maskText: false, stubIndexShare: 0.25 });
    const stub = textOf(r.messages[2]!);
    expect(stub.startsWith(MASK_PREFIX)).toBe(true);
    const index = /Identifiers: (.*)\]$/.exec(stub)![1]!;
    const replaced = counter.countMessage(history[2]!);
    expect(countText(index)).toBeLessThanOrEqual(replaced * 0.25);
    expect(countText(stub)).toBeLessThan(replaced * 0.4);
    // Most salient first: the index is the head of the unbounded one.
    const all = /Identifiers: (.*)\]$/.exec(
      textOf((await compact(history, { ...base, maskText: false, stubIndexShare: 1 })).messages[2]!),
    )![1]!;
    expect(all.length).toBeGreaterThan(index.length);
    expect(all.startsWith(`${index}, `)).toBe(true);
  });

  it("a shortened assistant text's index is bounded the same way", async () => {
    const text = `I list the handlers. ${ids}`;
    const r = await compact(
      [user("the task"), say("c0", text), result("c0", "ok"), say("c1", "next"), result("c1", "ok")],
      { ...base, stubIndexShare: 0.25 },
    );
    const shortened = textOf(r.messages[1]!);
    expect(shortened).toContain(SHORTENED_TEXT_MARK);
    expect(countText(shortened)).toBeLessThan(countText(text) * 0.4);
  });
});

describe("a side model's summary is cut to its budget", () => {
  const headings = ["Goal", "Decisions", "Files touched", "Key facts", "Open questions", "Current state"];
  /** A model that ignores max tokens: about 1,000 tokens, a code block under Key facts. */
  const long = headings
    .map(
      (h) =>
        `${h}:\n${Array.from({ length: 12 }, (_, i) => `- ${h.toLowerCase()} item ${i}: value_${i} in /srv/app/mod_${i}.py, checked twice`).join("\n")}${h === "Key facts" ? `\n\`\`\`\n${code}\n\`\`\`` : ""}`,
    )
    .join("\n");
  const messages: Message[] = [say("c0", "Probe."), result("c0", "value_1 at /srv/app/mod_1.py")];

  it("to maxTokens, not only to limit, keeping every heading, whole lines and closed fences", async () => {
    expect(countText(long)).toBeGreaterThan(800);
    const model = scriptedProvider([{ text: long }], { model: "side" });
    const p = await summarizeTurns({
      messages,
      goal: "the task",
      subgoals: [],
      maxTokens: 200,
      limit: 1_200,
      model,
      timeoutMs: 5_000,
      count: countText,
    });
    expect(p.method).toBe("model");
    expect(countText(p.text)).toBeLessThanOrEqual(200);
    for (const h of headings) expect(p.text).toContain(`${h}:`);
    for (const line of p.text.split("\n")) expect(long.split("\n")).toContain(line);
    expect(p.text).toContain("- goal item 0: value_0 in /srv/app/mod_0.py, checked twice");
    expect(leavesFenceOpen(p.text)).toBe(false);
  });

  it("a model's unclosed fence is closed; a text with no room for its headings is cut by code points, never inside a pair", () => {
    expect(leavesFenceOpen(fitSummary("Key facts:\n```\nx = 1\n- more", 100, countText))).toBe(false);
    // One long line: its head, not nothing; headings that do not fit: the text's head.
    const line = fitSummary("everything ".repeat(400), 50, countText);
    expect(countText(line)).toBeLessThanOrEqual(50);
    expect(countText(line)).toBeGreaterThan(40);
    expect(fitSummary("Goal:\nDecisions:\nKey facts:\nOpen questions:", 4, countText)).toBe("Goal:\nDecisions");
    const emoji = "😀".repeat(400);
    for (const budget of [7, 20, 33]) {
      const cut = fitSummary(emoji, budget, countText);
      expect(countText(cut)).toBeLessThanOrEqual(budget);
      expect(cut.length % 2).toBe(0);
      expect(isWellFormed(cut)).toBe(true);
    }
  });

  it("in a hard compaction the summary text (without its index) stays within the share of what it replaces", async () => {
    const history: Message[] = [user("the task")];
    for (let i = 0; i < 10; i++)
      history.push(
        say(`c${i}`, `Probe ${i}.`),
        result(`c${i}`, Array.from({ length: 12 }, (_, k) => `row ${k}: status fine for node ${k}`).join("\n")),
      );
    history.push(user("go on"));
    const o: CompactOptions = {
      ...base,
      strategy: "subgoal",
      hard: 0.9,
      minMaskTokens: 100_000,
      summaryShare: 0.25,
      stubIdentifiers: 0,
      protectedTail: { tokens: 0, messages: 2, share: 0.25 },
    };
    const model = scriptedProvider([{ text: long }], { model: "side" });
    const r = await compactHistory({
      messages: history,
      overhead: 0,
      window: Math.floor(counter.countMessages(history) / 0.95),
      calibration: 1,
      pinned: new Set([0]),
      state: { round: 1, lastHard: undefined, exhausted: false },
      options: o,
      countText,
      countMessage: (m) => counter.countMessage(m),
      stash: () => "m1",
      model,
      goal: "the task",
    });
    const s = r!.report.summary!;
    expect(s.method).toBe("model");
    const budget = Math.max(150, Math.round(s.tokensReplaced * 0.25));
    const summary = r!.messages.find((m) => m.role === "user" && textOf(m).includes("Key facts:"))!;
    expect(countText(textOf(summary).split("\n").slice(1).join("\n"))).toBeLessThanOrEqual(budget);
  });
});
