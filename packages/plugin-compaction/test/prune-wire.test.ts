/**
 * Intra-turn pruning on the three wire formats, through the official SDKs against the local
 * wire server, which checks what the real APIs check: every reasoning block sent back carries
 * the signature (or encrypted content) issued for exactly its text, and with Anthropic's
 * thinking on, the assistant message of the latest tool calls still starts with its thinking.
 * From round 3 the older messages lose their reasoning; the latest keeps it, unmodified.
 */
import { createAgent, defineTool } from "@keel/agent";
import type { ModelProvider } from "@keel/kernel";
import { MemorySessionStore } from "@keel/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { join } from "node:path";
import { anthropicProvider, openaiProvider } from "../../providers/src/index.ts";
import { startWireServer } from "../../wire-server/src/index.ts";
import { compaction } from "../src/index.ts";
import { cleanupDirs, tempDir } from "./support.ts";

afterAll(cleanupDirs);

const read = defineTool({
  name: "read",
  description: "Reads a file.",
  category: "info",
  input: z.object({ path: z.string() }),
  execute: ({ path }) =>
    path === "missing.txt"
      ? { content: `ENOENT: ${path} ${"(no such file) ".repeat(60)}`, isError: true }
      : `${path}: ${"line of text ".repeat(60)}`,
});

type Api = "anthropic" | "responses" | "chat";
const formats: Array<{
  api: Api;
  make: (base: { anthropic: string; openai: string }) => ModelProvider;
  extra?: Record<string, unknown>;
}> = [
  {
    api: "anthropic",
    make: (b) => anthropicProvider({ model: "claude-sonnet-4-6", apiKey: "k", baseURL: b.anthropic, maxRetries: 0 }),
    extra: { thinking: { type: "enabled", budget_tokens: 2048 } },
  },
  {
    api: "responses",
    make: (b) => openaiProvider({ model: "gpt-5", api: "responses", apiKey: "k", baseURL: b.openai, maxRetries: 0 }),
  },
  {
    api: "chat",
    make: (b) => openaiProvider({ model: "local", api: "chat", compatible: true, baseURL: b.openai, maxRetries: 0 }),
  },
];

describe("intra-turn pruning on the wire", () => {
  for (const f of formats) {
    it(`${f.api}: every request is accepted; from round 3 only the latest assistant message keeps its reasoning, and the failed branch is gone`, async () => {
      const server = await startWireServer();
      const home = tempDir();
      try {
        // Over minCandidateTokens whether tokens are estimated (tokenizer not loaded yet) or counted exactly.
        const think = (n: number) => ({ text: `Thought ${n}: ${"weighing options ".repeat(40)}` });
        server.enqueue(
          { thinking: think(1), toolCalls: [{ id: "call_1", name: "read", args: { path: "missing.txt" } }] },
          { thinking: think(2), toolCalls: [{ id: "call_2", name: "read", args: { path: "notes.txt" } }] },
          { thinking: think(3), toolCalls: [{ id: "call_3", name: "read", args: { path: "todo.txt" } }] },
          { thinking: think(4), text: "Done reading." },
        );
        const provider = f.make({ anthropic: server.anthropicBaseURL, openai: server.openaiBaseURL });
        const agent = await createAgent({
          provider,
          sideModel: false,
          store: new MemorySessionStore(),
          tools: [read],
          ...(f.extra ? { requestOptions: { extra: f.extra } } : {}),
          plugins: [compaction({ path: join(home, "c.sqlite"), prune: { minCandidateTokens: 50 } })],
        });
        const r = await (await agent.session()).run("Read my files.");
        expect(r.verdict.status, JSON.stringify(server.requests.map((q) => q.outcome))).toBe("completed");
        expect(r.text).toBe("Done reading.");
        expect(server.requests.map((q) => q.outcome)).toEqual(["completed", "completed", "completed", "completed"]);
        const body = server.requests[3]!.body;
        const serialized = JSON.stringify(body);
        // The failed first call went with its result.
        expect(serialized).not.toContain("missing.txt");
        if (f.api === "anthropic") {
          const assistants = body.messages.filter((m: { role: string }) => m.role === "assistant");
          expect(
            assistants.map((m: { content: Array<{ type: string }> }) => m.content.map((b) => b.type).join("+")),
          ).toEqual(["tool_use", "thinking+tool_use"]);
          expect(assistants.at(-1).content[0].thinking).toBe(think(3).text);
        } else if (f.api === "responses") {
          const reasoning = body.input.filter((i: { type: string }) => i.type === "reasoning");
          expect(reasoning).toHaveLength(1);
          expect(JSON.stringify(reasoning[0])).toContain("Thought 3");
        } else expect(serialized).not.toContain("Thought 1");
        await agent.close();
      } finally {
        await server.close();
      }
    });
  }

  it("the wire server really refuses what pruning must avoid: edited reasoning, and a final assistant message without its thinking", async () => {
    const server = await startWireServer();
    try {
      server.enqueue({ text: "never sent" }, { text: "never sent" });
      const post = (body: unknown) =>
        fetch(`${server.anthropicBaseURL}/v1/messages`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01" },
          body: JSON.stringify(body),
        });
      const { signText } = await import("../../wire-server/src/common.ts");
      const base = {
        model: "m",
        max_tokens: 10,
        stream: true,
        thinking: { type: "enabled", budget_tokens: 1024 },
        tools: [{ name: "read", input_schema: { type: "object" } }],
      };
      const edited = await post({
        ...base,
        messages: [
          { role: "user", content: "hi" },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "changed", signature: signText("original") },
              { type: "tool_use", id: "t", name: "read", input: {} },
            ],
          },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "x" }] },
        ],
      });
      expect(edited.status).toBe(400);
      expect(await edited.text()).toContain("Invalid `signature` in `thinking` block");
      const stripped = await post({
        ...base,
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: [{ type: "tool_use", id: "t", name: "read", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "x" }] },
        ],
      });
      expect(stripped.status).toBe(400);
      expect(await stripped.text()).toContain("a final `assistant` message must start with a thinking block");
    } finally {
      await server.close();
    }
  });
});
