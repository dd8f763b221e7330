/**
 * Fault class "Broken Unicode": every truncation site cuts by code point (a property test
 * over an explicit table of sites), and no lone surrogate ever reaches a provider — through
 * the real `keel` binary and the official SDKs against the wire server, which refuses such a
 * body with a 400 exactly as the real APIs do.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  boundResult,
  createAgent,
  DEFAULT_CAPS,
  mergePromptContext,
  mergePromptSections,
  preview,
  runPreflight,
} from "../../packages/agent/src/index.ts";
import { scriptedProvider } from "../../packages/testkit/src/index.ts";
import { SqliteSessionStore } from "../../packages/store-sqlite/src/index.ts";
import { codePointSlice, headOf, isWellFormed, tailOf, truncate } from "../../packages/text/src/index.ts";
import type { AgentEvent, ToolResultMessage } from "../../packages/kernel/src/index.ts";
import { seededRandom } from "../../packages/testkit/src/index.ts";
import { startWireServer } from "../../packages/wire-server/src/index.ts";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import { anthropicProvider } from "../../packages/providers/src/anthropic.ts";
import { openaiProvider } from "../../packages/providers/src/openai.ts";
import { ProviderError } from "../../packages/kernel/src/index.ts";
import { recall, renderMemory, SqliteMemoryStore } from "../../packages/plugin-memory/src/index.ts";
import type { Memory } from "../../packages/plugin-memory/src/index.ts";
import { reduceText } from "../../packages/plugin-compaction/src/reduce.ts";
import { sliceRaw } from "../../packages/plugin-compaction/src/store.ts";
import { parseExtraction } from "../../packages/plugin-compaction/src/subgoals.ts";
import { deterministicSummary } from "../../packages/plugin-compaction/src/summarize.ts";
import { mapCallResult } from "../../packages/plugin-mcp/src/results.ts";
import { renderer } from "../../packages/cli/src/render.ts";
import { echoProvider } from "../../packages/cli/src/echo-provider.ts";
import {
  keelRun,
  makeHome,
  requestsSince,
  sessionIdOf,
  storedEvents,
  wellFormedDeep,
  wireEnv,
} from "./support/unicode.ts";
import type { FaultHome } from "./support/unicode.ts";

// ---------------------------------------------------------------------------------------------
// The property: strings with astral characters (surrogate pairs), ZWJ sequences and combining
// marks at random positions, cut at every length by every site, come out well-formed, and
// without U+FFFD when the input had none (a U+FFFD would mean a pair was split, then repaired).

const PIECES = ["a", "b", " ", "\n", "😀", "🎉", "𝔘", "👨‍👩‍👧", "é", "e\u0301", "日", "ß", "🇫🇷"];

/** Sites marked `graphemes` also never split a ZWJ sequence, a flag or a letter with its mark. */
const clusters = new Intl.Segmenter(undefined, { granularity: "grapheme" });
const CLUSTERED = /[\u200d\u0300-\u036f]|\p{Regional_Indicator}/u;

function generate(rand: () => number, pieces: number): string {
  let s = "";
  for (let i = 0; i < pieces; i++) s += PIECES[Math.floor(rand() * PIECES.length)]!;
  return s;
}

const count = (t: string) => Math.ceil(t.length / 4);
const memoryOf = (content: string): Memory => ({
  id: 1,
  namespace: "n",
  scope: "user",
  key: null,
  category: null,
  content,
  importance: 0.5,
  confidence: 1,
  source: { via: "import" },
  occurredAt: 0,
  createdAt: 0,
  updatedAt: 0,
  supersededBy: null,
  forgottenAt: null,
  forgetReason: null,
});
const toolResult = (text: string): ToolResultMessage => ({
  role: "tool",
  toolCallId: "c",
  toolName: "t",
  content: [{ type: "text", text }],
  isError: false,
});
const texts = (blocks: readonly { type: string; text?: string }[]) => blocks.map((b) => b.text ?? "").join("");

let memStore: SqliteMemoryStore;
let memDir: string;

/**
 * Every place the repository cuts text. `cut(s, n)` runs the real site with `s` as its input
 * and `n` as its limit (sites with a fixed limit get `n` characters of padding in front, so
 * their cut point moves across `s`). Add a row when a new cut site appears.
 */
const SITES: Array<{ name: string; graphemes?: true; cut: (s: string, n: number) => string | Promise<string> }> = [
  { name: "kernel truncate (… marker)", cut: (s, n) => truncate(s, n) },
  {
    name: "kernel truncate (head + tail, counting marker)",
    cut: (s, n) => truncate(s, n, { tail: Math.floor(n / 3), marker: (d) => `[${d}]` }),
  },
  {
    name: "kernel headOf / tailOf / codePointSlice",
    cut: (s, n) => headOf(s, n) + tailOf(s, n) + codePointSlice(s, Math.floor(n / 2), n),
  },
  { name: "kernel errors preview (log records of plugin errors)", cut: (s, n) => preview(s, n) },
  {
    name: "kernel merge: prompt_context maxChars",
    graphemes: true,
    cut: (s, n) =>
      mergePromptContext(
        [
          {
            plugin: "p",
            value: { kind: "prompt_context", id: "c", domain: "d", priority: 0, content: s, maxChars: Math.max(1, n) },
          },
        ],
        "turn.pre_prompt_context",
      )
        .entries.map((e) => e.content)
        .join(""),
  },
  {
    name: "kernel merge: prompt section caps",
    graphemes: true,
    cut: (s, n) =>
      mergePromptSections(
        [
          {
            plugin: "p",
            value: { kind: "prompt_section", id: "s", sectionId: "s", domain: "d", priority: 0, content: s },
          },
        ],
        "turn.pre_prompt_compile",
        { ...DEFAULT_CAPS, sectionChars: Math.max(1, n) },
      )
        .sections.map((x) => x.content)
        .join(""),
  },
  {
    name: "kernel per-tool-result cap (boundResult)",
    graphemes: true,
    cut: (s, n) => texts(boundResult(toolResult(s), Math.max(1, n)).content),
  },
  {
    name: "kernel preflight task (8,000 chars)",
    cut: async (s, n) => {
      const p = scriptedProvider([{ text: '{"reveal": []}' }]);
      await runPreflight(
        p,
        "x".repeat(7_990 + (n % 12)) + s,
        [{ name: "hidden", description: s, hidden: true, execute: () => "" }],
        {},
        new AbortController().signal,
      );
      return JSON.stringify(p.requests[0]!.messages);
    },
  },
  {
    name: "memory renderMemory (tool output, 500-char items)",
    cut: (s, n) => renderMemory(memoryOf(s), false, Math.max(1, n)),
  },
  {
    name: "memory recall itemChars (prompt context)",
    cut: async (_s, n) => {
      const items = await recall(memStore, {
        namespace: "prop",
        query: "release",
        itemChars: Math.max(1, n),
        maxChars: 50_000,
      });
      return items.map((r) => r.text).join("|");
    },
  },
  {
    name: "compaction reduceText (one long line)",
    cut: (s, n) => reduceText(s.replace(/\n/g, " ").repeat(4), Math.max(1, n), count),
  },
  {
    name: "compaction reduceText (400-char line clip)",
    cut: (s, n) =>
      reduceText(
        [
          "start",
          ("x".repeat(380 + (n % 30)) + s).replace(/\n/g, " "),
          "end error: failed",
          ...Array.from({ length: 40 }, (_, i) => `line ${i} ${s.replace(/\n/g, " ")}`),
        ].join("\n"),
        60,
        count,
      ),
  },
  {
    name: "compaction sliceRaw (context_retrieve chars and maxChars)",
    cut: (s, n) =>
      sliceRaw(s, { startChar: Math.floor(n / 3), endChar: n + 5 }, Math.max(1, n)).text +
      sliceRaw(s, {}, Math.max(1, n)).text,
  },
  {
    name: "compaction subgoal extraction (200 chars)",
    cut: (s, n) => parseExtraction(`NEXT: ${"x".repeat(190 + (n % 12))}${s.replace(/\n/g, " ")}`, false).next ?? "",
  },
  {
    name: "compaction deterministic summary (200-char questions and errors)",
    cut: (s, n) =>
      deterministicSummary(
        [
          {
            role: "user",
            content: [{ type: "text", text: `Why ${"y".repeat(190 + (n % 12))}${s.replace(/[\n.!?]/g, " ")}?` }],
          },
          {
            role: "tool",
            toolCallId: "c",
            toolName: "t",
            isError: true,
            content: [{ type: "text", text: `error: ${"z".repeat(185 + (n % 15))}${s.replace(/\n/g, " ")}` }],
          },
        ],
        "goal",
        [],
        2_000,
        count,
      ),
  },
  {
    name: "mcp tool result maxChars",
    cut: (s, n) =>
      texts(
        mapCallResult(
          {
            content: [
              { type: "text", text: s },
              { type: "text", text: s },
            ],
          },
          n,
        ).output.content as { type: string; text?: string }[],
      ),
  },
  {
    name: "cli render (tool args and diagnostics, 160 chars)",
    cut: (s, n) => {
      let out = "";
      const r = renderer({ out: (t) => (out += t), err: (t) => (out += t) }, { json: false });
      const pad = "p".repeat(150 + (n % 12));
      r.listener({
        type: "tool.started",
        sessionId: "s",
        turnId: "t",
        seq: 1,
        ts: 0,
        round: 1,
        callId: "c",
        name: "t",
        args: { q: pad + s },
      } as unknown as AgentEvent);
      r.listener({
        type: "diagnostic",
        sessionId: "s",
        turnId: "t",
        seq: 2,
        ts: 0,
        level: "warn",
        code: "X",
        message: pad + s,
      } as unknown as AgentEvent);
      r.dispose();
      return out;
    },
  },
  {
    name: "cli offline echo model (400 chars)",
    cut: async (s, n) => {
      let text = "";
      for await (const e of echoProvider().stream(
        {
          system: "",
          messages: [{ role: "user", content: [{ type: "text", text: "e".repeat(390 + (n % 12)) + s }] }],
          tools: [],
          options: {},
        },
        { signal: new AbortController().signal },
      ))
        if (e.type === "text_delta") text += e.text;
      return text;
    },
  },
];

describe("fault: broken Unicode — every truncation site cuts by code point (property)", () => {
  const rand = seededRandom(12);
  const inputs = Array.from({ length: 6 }, () => generate(rand, 8 + Math.floor(rand() * 24)));
  const withLone = inputs.map((s, i) => s.slice(0, i + 1) + (i % 2 ? "\ud83d" : "\ude00") + s.slice(i + 1));

  beforeAll(() => {
    memDir = mkdtempSync(join(tmpdir(), "keel-fault-prop-"));
    memStore = new SqliteMemoryStore({ path: join(memDir, "memory.sqlite") });
  });
  afterAll(() => {
    memStore.close?.();
    rmSync(memDir, { recursive: true, force: true });
  });

  for (const site of SITES) {
    it(`${site.name}: well-formed at every cut length, no pair${site.graphemes ? " or cluster" : ""} split, lone surrogates repaired`, async () => {
      let checked = 0;
      for (const [i, s] of inputs.entries()) {
        if (site.name.startsWith("memory recall")) {
          await memStore.write({ namespace: "prop", content: `release ${s}`, at: i });
        }
        for (let n = 0; n <= s.length + 2; n++) {
          const out = await site.cut(s, n);
          if (!isWellFormed(out) || out.includes("\uFFFD"))
            throw new Error(`${site.name}: cut ${n} of ${JSON.stringify(s)} gave ${JSON.stringify(out)}`);
          if (site.graphemes)
            for (const { segment } of clusters.segment(out))
              if (CLUSTERED.test(segment) && !PIECES.includes(segment))
                throw new Error(
                  `${site.name}: cut ${n} of ${JSON.stringify(s)} split the cluster ${JSON.stringify(segment)}`,
                );
          checked++;
        }
      }
      for (const s of withLone) {
        for (let n = 0; n <= s.length + 2; n += 3) {
          const out = await site.cut(s, n);
          if (!isWellFormed(out))
            throw new Error(
              `${site.name}: cut ${n} of ${JSON.stringify(s)} left a lone surrogate: ${JSON.stringify(out)}`,
            );
          checked++;
        }
      }
      expect(checked).toBeGreaterThan(100);
    });
  }
});

// ---------------------------------------------------------------------------------------------
// End to end: the real CLI, the official SDKs, the wire server.

let server: WireServer;
const homes: FaultHome[] = [];
const home = () => {
  const h = makeHome();
  homes.push(h);
  return h;
};
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(async () => {
  await server.close();
  for (const h of homes) h.cleanup();
});

describe("fault: broken Unicode — nothing with a lone surrogate reaches a provider", () => {
  it("the wire server refuses a lone surrogate sent by the real Anthropic and OpenAI SDKs with a 400 (so a regression fails)", async () => {
    const msg = {
      system: "s",
      messages: [{ role: "user" as const, content: [{ type: "text" as const, text: "half \ud83d" }] }],
      tools: [],
      options: { maxTokens: 10 },
    };
    const from = server.requests.length;
    const providers = [
      anthropicProvider({
        model: "claude-sonnet-4-6",
        apiKey: "sk-test",
        baseURL: server.anthropicBaseURL,
        maxRetries: 0,
      }),
      openaiProvider({ model: "gpt-4.1", apiKey: "sk-test", baseURL: server.openaiBaseURL, maxRetries: 0 }),
    ];
    for (const p of providers) {
      const err = await (async () => {
        for await (const _ of p.stream(msg, { signal: new AbortController().signal })) void _;
      })().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, p.id).toBeInstanceOf(ProviderError);
      expect((err as ProviderError).status).toBe(400);
      expect((err as ProviderError).errorClass).toBe("invalid_request");
    }
    const got = server.requests.slice(from);
    expect(got.map((r) => r.outcome)).toEqual(["rejected", "rejected"]);
    expect(server.pending()).toBe(0);
  });

  it("emoji-heavy tool output cut by the per-result cap reaches Anthropic well-formed, no pair split", async () => {
    const h = home();
    const from = server.requests.length;
    server.enqueue(
      { toolCalls: [{ name: "emit", args: {} }], api: "anthropic" },
      { text: "Saw it 🎉", api: "anthropic" },
    );
    const run = await keelRun(
      h,
      wireEnv(server, h, { FAULT_TOOL: "emoji", FAULT_EMOJI_UNITS: "5000", FAULT_MAX_RESULT: "1001" }),
      ["use emit"],
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(15_000);
    const reqs = requestsSince(server, from);
    expect(reqs.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    expect(wellFormedDeep(reqs[1]!.body)).toBe(true);
    const sent = JSON.stringify(reqs[1]!.body.messages);
    expect(sent).toContain("characters cut from this tool result");
    expect(sent).not.toContain("\uFFFD");
    expect(sent).toContain("👨‍👩‍👧");
  });

  it("emoji-heavy tool output reaches OpenAI Chat Completions and Responses well-formed", async () => {
    for (const [model, api] of [
      ["openai-compatible:gpt-4o", "chat"],
      ["openai:gpt-4.1", "responses"],
    ] as const) {
      const h = home();
      const from = server.requests.length;
      server.enqueue({ toolCalls: [{ name: "emit", args: {} }], api }, { text: "ok", api });
      const run = await keelRun(
        h,
        wireEnv(server, h, { FAULT_TOOL: "emoji", FAULT_MAX_RESULT: "777", FAULT_MODEL: model }),
        ["use emit"],
      );
      expect(run.code, `${model}: ${run.stderr}`).toBe(0);
      const reqs = requestsSince(server, from);
      expect(
        reqs.map((r) => r.outcome),
        model,
      ).toEqual(["completed", "completed"]);
      expect(JSON.stringify(reqs[1]!.body)).not.toContain("\uFFFD");
    }
  });

  it("memory recall cut at itemChars through emoji reaches the provider's system prompt well-formed", async () => {
    const h = home();
    const path = join(h.dir, "memory.sqlite");
    const store = new SqliteMemoryStore({ path });
    // Astral characters straddle the 60-code-point cut of every memory.
    for (let k = 0; k < 6; k++)
      await store.write({
        namespace: "default",
        content: `Release notes ${"x".repeat(40 + k)} ${"😀🎉👨‍👩‍👧".repeat(12)}`,
        at: k,
      });
    store.close?.();
    const from = server.requests.length;
    server.enqueue({ text: "Noted.", api: "anthropic" });
    const run = await keelRun(h, wireEnv(server, h, { FAULT_MEMORY: path, FAULT_ITEM_CHARS: "60" }), [
      "what are the release notes?",
    ]);
    expect(run.code, run.stderr).toBe(0);
    const [req] = requestsSince(server, from);
    expect(req!.outcome).toBe("completed");
    const system = JSON.stringify(req!.body.system);
    expect(system).toContain("Release notes");
    expect(system).toContain("…");
    expect(system).not.toContain("\uFFFD");
    expect(wellFormedDeep(req!.body)).toBe(true);
  });

  it("a tool returning lone surrogates: stored well-formed on disk and sent with U+FFFD, the turn completes", async () => {
    const h = home();
    const from = server.requests.length;
    server.enqueue({ toolCalls: [{ name: "emit", args: {} }], api: "anthropic" }, { text: "fine", api: "anthropic" });
    const run = await keelRun(h, wireEnv(server, h, { FAULT_TOOL: "lone" }), ["use emit"]);
    expect(run.code, run.stderr).toBe(0);
    const reqs = requestsSince(server, from);
    expect(reqs.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    expect(JSON.stringify(reqs[1]!.body.messages)).toContain("before \uFFFD middle \uFFFD after 😀");
    const stored = storedEvents(h.home).filter(
      (e) => e.type === "message.appended" && e.data.includes('"role":"tool"'),
    );
    expect(stored).toHaveLength(1);
    expect(stored[0]!.data).not.toMatch(/\\ud[89a-f][0-9a-f]{2}/i);
    expect(JSON.parse(stored[0]!.data).message.content[0].text).toBe("before \uFFFD middle \uFFFD after 😀");
  });

  it("a session whose history already holds a lone surrogate (an older version's) still works: the next turns are sent repaired", async () => {
    const h = home();
    // An older version stored a lone surrogate in the assistant's answer and in a tool result.
    const store = new SqliteSessionStore({ path: join(h.home, "sessions.sqlite") });
    const old = await createAgent({
      provider: scriptedProvider([{ text: "cut emoji \ud83d" }]),
      store,
      sideModel: false,
      tools: [],
      name: "fault-unicode",
    });
    const session = await old.session();
    await session.run("hello \ude00 there");
    const id = session.id;
    await old.close();
    expect(storedEvents(h.home).some((e) => /\\ud83d/i.test(e.data))).toBe(true);
    const from = server.requests.length;
    server.enqueue({ text: "still here", api: "anthropic" }, { text: "and again", api: "anthropic" });
    const first = await keelRun(h, wireEnv(server, h), ["--session", id, "go on"]);
    expect(first.code, first.stderr).toBe(0);
    expect(sessionIdOf(first)).toBe(id);
    const second = await keelRun(h, wireEnv(server, h), ["--session", id, "once more"]);
    expect(second.code, second.stderr).toBe(0);
    const reqs = requestsSince(server, from);
    expect(reqs.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    const body = JSON.stringify(reqs[0]!.body.messages);
    expect(body).toContain("cut emoji \uFFFD");
    expect(body).toContain("hello \uFFFD there");
  });
});
