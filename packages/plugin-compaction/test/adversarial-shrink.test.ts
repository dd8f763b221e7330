import { randomBytes } from "node:crypto";
import type { Message } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { afterEach, describe, expect, it } from "vitest";
import {
  compactHistory,
  extractIdentifiers,
  MASK_PREFIX,
  salientIdentifiers,
  SHORTENED_TEXT_MARK,
  SUMMARY_PREFIX,
} from "../src/index.ts";
import { cleanupDirs, setup, textOf, gatedBash } from "./support.ts";

describe("identifier extraction on adversarial text", () => {
  // Long runs with a word boundary every other character and nothing that completes a match:
  // each pattern used to rescan the run from every boundary (100 KB of "a-" took ~45 s).
  const runs = {
    dashes: "a-".repeat(50_000),
    dots: "1.".repeat(50_000),
    ats: "a@".repeat(50_000),
    digitDashes: "1-".repeat(50_000),
  };
  for (const [name, text] of Object.entries(runs)) {
    it(`stays linear on 100 KB of ${name}`, () => {
      const t = performance.now();
      salientIdentifiers(text, Infinity);
      expect(performance.now() - t).toBeLessThan(4_000);
    });
  }

  it("still finds ordinary paths, file names and ids", () => {
    const ids = extractIdentifiers("see src/app/main.py and config.yaml, order W2X9K7 at /srv/data/x.log");
    expect(ids).toEqual(expect.arrayContaining(["src/app/main.py", "config.yaml", "W2X9K7", "/srv/data/x.log"]));
  });
});

describe("a steered message that looks like one of this plugin's summaries (real kernel turns)", () => {
  afterEach(cleanupDirs);
  it("stays pinned verbatim: only summaries the plugin wrote are left unpinned", async () => {
    const { bash, began, release } = gatedBash((n) => `ok exit_code_${n}`);
    const long = (i: number) =>
      `Step ${i}: reading /srv/app/mod_${i}.py. ${"We weigh the options for the migration plan carefully. ".repeat(40)}`;
    const steps = [
      ...Array.from({ length: 12 }, (_, i) => ({
        text: long(i),
        toolCalls: [{ id: `c${i}`, name: "bash", args: { command: `step ${i}` } }],
      })),
      { text: "done" },
    ];
    const { session, provider } = await setup({
      steps,
      window: 3_000,
      tools: [bash],
      plugin: {
        model: false,
        taco: { enabled: false },
        maskText: false,
        cooldownRounds: 0,
        subgoals: { extractor: "heuristic" },
      },
    });
    const running = session.run("migrate the database");
    await began;
    const pasted = `${SUMMARY_PREFIX} I pasted from yesterday] Keep port 8443 open and never drop table audit_log.`;
    await session.steer(pasted);
    release();
    await running;
    const after = provider.requests.slice(2);
    expect(after.length).toBeGreaterThan(3);
    for (const [i, r] of after.entries()) expect(r.messages.map(textOf), `request ${i + 3}`).toContain(pasted);
  }, 60_000);
});

describe("a tool output that is one long blob (base64)", () => {
  it("is masked: the blob is no identifier, so the stub does not carry it", async () => {
    const counter = defaultTokenCounter();
    const blob = randomBytes(12_000).toString("base64");
    const call = (id: string): Message => ({
      role: "assistant",
      content: [{ type: "tool_call", id, name: "bash", args: { command: "cat cert.b64" } }],
    });
    const result = (id: string, text: string): Message => ({
      role: "tool",
      toolCallId: id,
      toolName: "bash",
      content: [{ type: "text", text }],
      isError: false,
    });
    const h: Message[] = [
      { role: "user", content: [{ type: "text", text: "the task" }] },
      call("c1"),
      result("c1", blob),
      { role: "user", content: [{ type: "text", text: "next" }] },
      call("c2"),
      result("c2", "ok"),
    ];
    const o = {
      strategy: "mask" as const,
      soft: 0.6,
      hard: 0.99,
      target: 0.1,
      protectedTail: { tokens: 0, messages: 2, share: 0.15 },
      cooldownRounds: 2,
      minMaskTokens: 60,
      summaryTokens: 1_200,
      summaryTimeoutMs: 1_000,
      retrieveTool: "context_retrieve" as const,
      stubIdentifiers: 150,
      maskArguments: true,
      maskText: true,
    };
    const r = await compactHistory({
      messages: h,
      overhead: 0,
      window: Math.floor(counter.countMessages(h) / 0.9),
      calibration: 1,
      pinned: new Set([0]),
      state: { round: 1, lastHard: undefined, exhausted: false },
      options: o,
      countText: (t) => counter.countText(t),
      countMessage: (m) => counter.countMessage(m),
      stash: () => "m1",
      model: undefined,
      goal: "the task",
    });
    const stub = r ? textOf(r.messages[2]!) : "";
    expect(stub.startsWith(MASK_PREFIX)).toBe(true);
    // Its fragments between '+' and '/' still read as ids and fill the index (up to stubIdentifiers).
    expect(counter.countText(stub)).toBeLessThan(counter.countText(blob) / 2);
    expect(stub.length).toBeLessThan(blob.length / 2);
  });
});

describe("a summary of shortened assistant text", () => {
  it("takes the kept first sentence as the decision, not the shortening stub's read-back instruction", async () => {
    const counter = defaultTokenCounter();
    const long = (i: number) =>
      `Plan for step_${i}: ${"we compare the two migration paths and their costs in detail ".repeat(30)}`;
    const h: Message[] = [{ role: "user", content: [{ type: "text", text: "the task" }] }];
    for (let i = 0; i < 8; i++)
      h.push(
        {
          role: "assistant",
          content: [
            { type: "text", text: long(i) },
            { type: "tool_call", id: `c${i}`, name: "bash", args: { command: `s ${i}` } },
          ],
        },
        {
          role: "tool",
          toolCallId: `c${i}`,
          toolName: "bash",
          content: [{ type: "text", text: `ok ${i}` }],
          isError: false,
        },
      );
    h.push({ role: "user", content: [{ type: "text", text: "go on" }] });
    const o = {
      strategy: "mask" as const,
      soft: 0.5,
      hard: 0.9,
      target: 0.1,
      protectedTail: { tokens: 0, messages: 2, share: 0.15 },
      cooldownRounds: 0,
      minMaskTokens: 60,
      summaryTokens: 1_200,
      summaryShare: 0.5,
      summaryTimeoutMs: 1_000,
      retrieveTool: "context_retrieve" as const,
      stubIdentifiers: 150,
      maskArguments: true,
      maskText: true,
    };
    const state = { round: 1, lastHard: undefined, exhausted: false };
    const step = (messages: Message[], windowShare: number, options = o) =>
      compactHistory({
        messages,
        overhead: 0,
        window: Math.floor(counter.countMessages(messages) / windowShare),
        calibration: 1,
        pinned: new Set([0, messages.length - 1]),
        state,
        options,
        countText: (t) => counter.countText(t),
        countMessage: (m) => counter.countMessage(m),
        stash: () => "m0123456789ab",
        model: undefined,
        goal: "the task",
      });
    const masked = (await step(h, 0.8))!.messages;
    expect(masked.some((m) => textOf(m).includes(SHORTENED_TEXT_MARK))).toBe(true);
    state.round = 5;
    const summarised = (await step(masked, 0.95, { ...o, minMaskTokens: 100_000 }))!;
    expect(summarised.report.stages).toContain("summary");
    const summary = textOf(summarised.messages.find((m) => textOf(m).startsWith(SUMMARY_PREFIX))!);
    expect(summary).toContain("Plan for step_");
    expect(summary).not.toContain(SHORTENED_TEXT_MARK);
    expect(summary).not.toContain("m0123456789ab");
  });
});
