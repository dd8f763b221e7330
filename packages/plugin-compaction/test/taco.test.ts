import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import type { Message, ModelEvent, ModelProvider } from "@keel/kernel";
import { createAgent, definePlugin, messageText } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { compaction, DIGEST_PREFIX } from "../src/index.ts";
import { bigOutput, cleanupDirs, diagnostics, scriptedTool, setup, tempDir } from "./support.ts";

afterEach(cleanupDirs);

const RAW = bigOutput("svc", 400); // ~ 8,000 tokens, an error line in the middle
const callOnce = (name: string) => [
  { text: "Running it.", toolCalls: [{ id: "c1", name, args: { command: "make test" } }] },
  { text: "done" },
];
const resultOf = (messages: readonly Message[]) => messageText(messages.find((m) => m.role === "tool")!);

describe("TACO at tool.post_result (real kernel turns)", () => {
  it("compresses a large shell output with the side model, tags it and keeps the raw output in SQLite", async () => {
    const digest = "exit code 1; 399 rows ok; ValueError in /srv/svc/core_200.py line 1200";
    const { session, provider, side, home } = await setup({
      steps: callOnce("bash"),
      side: [{ text: digest }],
      tools: [scriptedTool("bash", [RAW])],
      plugin: { subgoals: { extractor: "heuristic" } },
    });
    await session.run("run the tests");
    expect(side.requests).toHaveLength(1);
    expect(side.requests[0]!.system).toMatch(/exit codes/);
    const seen = resultOf(provider.requests[1]!.messages);
    expect(seen.split("\n")[0]).toMatch(
      new RegExp(
        `^\\${DIGEST_PREFIX}: bash, \\d{4} → ~\\d+ tokens \\(model\\); full output: context_retrieve\\(id="t[0-9a-f]{12}", startLine, endLine\\), 400 lines\\]$`,
      ),
    );
    expect(seen).toContain(digest);
    const stored = session.messages.find((m) => m.role === "tool")!;
    expect(stored.role === "tool" && stored.rewrittenBy).toEqual(["@keel/plugin-compaction"]);
    const events = await session.events();
    const d = diagnostics(events, "compaction.taco")[0]!.data as {
      rawTokens: number;
      tokens: number;
      method: string;
      id: string;
    };
    expect(d.method).toBe("model");
    expect(d.rawTokens).toBeGreaterThan(2_000);
    expect(d.tokens).toBeLessThan(d.rawTokens / 5);
    const db = new DatabaseSync(join(home, "compaction.sqlite"));
    const row = db.prepare("SELECT text, tool_name, kind FROM raw WHERE id = ?").get(d.id) as {
      text: string;
      tool_name: string;
      kind: string;
    };
    db.close();
    expect(row).toEqual({ text: RAW, tool_name: "bash", kind: "taco" });
  });

  it("leaves outputs under the threshold, non-listed tools and MCP tools alone", async () => {
    const small = bigOutput("s", 50);
    for (const [name, extra, out] of [
      ["bash", {}, small],
      ["lookup", { category: "info" as const }, RAW],
      ["mcp__fs__read", { category: "info" as const }, RAW],
      ["fs_read", { category: "mcp" as const }, RAW],
    ] as const) {
      const { session, provider, side } = await setup({
        steps: callOnce(name),
        side: [{ text: "digest" }],
        tools: [scriptedTool(name, [out], extra)],
        plugin: { subgoals: { extractor: "heuristic" } },
      });
      await session.run("go");
      expect(resultOf(provider.requests[1]!.messages), name).toBe(out);
      expect(side.requests, name).toHaveLength(0);
    }
  });

  it("never compresses a result the user approved", async () => {
    const asker = definePlugin({
      name: "asker",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "shell" }));
      },
    });
    const { session, provider, side } = await setup({
      steps: callOnce("bash"),
      side: [{ text: "digest" }],
      tools: [scriptedTool("bash", [RAW])],
      extraPlugins: [asker],
      approve: () => true,
      plugin: { subgoals: { extractor: "heuristic" } },
    });
    await session.run("go");
    expect(resultOf(provider.requests[1]!.messages)).toBe(RAW);
    expect(side.requests).toHaveLength(0);
    const skipped = diagnostics(await session.events(), "compaction.taco.skipped");
    expect(skipped[0]!.data).toMatchObject({ reason: "approved_by_user", toolCallId: "c1" });
  });

  for (const [label, step, extra] of [
    ["an error", { error: { class: "overloaded" as const } }, {}],
    ["a timeout", { hang: true }, { timeoutMs: 200 }],
  ] as const) {
    it(`falls back to the deterministic reduction on ${label} of the summariser`, async () => {
      const { session, provider } = await setup({
        steps: callOnce("bash"),
        side: [step],
        tools: [scriptedTool("bash", [RAW])],
        plugin: { taco: extra, subgoals: { extractor: "heuristic" } },
      });
      await session.run("go");
      const seen = resultOf(provider.requests[1]!.messages);
      expect(seen).toMatch(/tokens \(deterministic\)/);
      const body = seen.split("\n").slice(1);
      expect(body[0]).toBe(RAW.split("\n")[0]); // head
      expect(body).toContain(RAW.split("\n").at(-1)); // tail
      expect(body.at(-1)).toMatch(/^\[identifiers in the omitted part: .*\]$/); // what the omitted lines named
      expect(seen).toContain("L200: Traceback: ValueError in /srv/svc/core_200.py line 1200"); // the error line, by number
      expect(seen).toMatch(/\[… lines \d+–\d+ omitted …\]/);
      const events = await session.events();
      const warn = diagnostics(events, "KEEL_COMPACTION_MODEL_FAILED")[0]!;
      expect(warn.message).toContain(label === "a timeout" ? "timed out after 200 ms" : "overloaded");
      const d = diagnostics(events, "compaction.taco")[0]!.data as {
        method: string;
        tokens: number;
        rawTokens: number;
        fallback: string;
      };
      expect(d.method).toBe("deterministic");
      expect(d.tokens).toBeLessThan(d.rawTokens / 5);
    });
  }

  it("the model reads the raw output back by line range through context_retrieve", async () => {
    // A provider that reads the id from the digest header it was sent, then asks for lines 199-201.
    let step = 0;
    const requests: Message[][] = [];
    const provider: ModelProvider = {
      id: "test:retriever",
      contextWindow: 200_000,
      async *stream(req): AsyncIterable<ModelEvent> {
        requests.push([...req.messages]);
        step++;
        const last = req.messages.at(-1)!;
        if (step === 1)
          yield {
            type: "response",
            message: { role: "assistant", content: [{ type: "tool_call", id: "c1", name: "bash", args: {} }] },
            stopReason: "tool_use",
            usage: {},
          };
        else if (step === 2) {
          const id = /id="([^"]+)"/.exec(messageText(last))![1]!;
          yield {
            type: "response",
            message: {
              role: "assistant",
              content: [
                { type: "tool_call", id: "c2", name: "context_retrieve", args: { id, startLine: 199, endLine: 201 } },
              ],
            },
            stopReason: "tool_use",
            usage: {},
          };
        } else
          yield {
            type: "response",
            message: { role: "assistant", content: [{ type: "text", text: "read it" }] },
            stopReason: "end_turn",
            usage: {},
          };
      },
    };
    const home = tempDir();
    const agent = await createAgent({
      provider,
      home,
      store: new MemorySessionStore(),
      tools: [scriptedTool("bash", [RAW])],
      plugins: [compaction({ path: join(home, "c.sqlite"), model: false, subgoals: { extractor: "heuristic" } })],
    });
    const session = await agent.session();
    await session.run("go");
    const got = messageText(requests[2]!.at(-1)!);
    expect(got.split("\n").slice(1)).toEqual(RAW.split("\n").slice(198, 201));
    expect(got.split("\n")[0]).toMatch(/lines 199–201 of 400/);
    await agent.close();
    // A wrong id is an error result that says what to do, not a crash.
    const again = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "x", name: "context_retrieve", args: { id: "nope" } }] },
        { text: "ok" },
      ]),
      home,
      store: new MemorySessionStore(),
      plugins: [compaction({ path: join(home, "c.sqlite"), model: false })],
    });
    const s2 = await again.session();
    await s2.run("go");
    const r = s2.messages.find((m) => m.role === "tool")!;
    expect(r.role === "tool" && r.isError).toBe(true);
    expect(messageText(r)).toContain("KEEL_COMPACTION_NOT_FOUND");
    await again.close();
  });
});
