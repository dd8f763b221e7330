/**
 * What a finished call's part shows is what the session stored for it, not a placeholder: the
 * kernel announces a call's end just before it appends the result, so the result is read once
 * the next event arrives. A tool's error text reaches tool-output-error; a denial's reason
 * reaches AG-UI's TOOL_CALL_RESULT.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { streamTurn } from "@keel/stream";
import { createAgent, defineTool } from "@keel/agent";
import { createAGUIHandler, toUIMessageStream } from "../src/index.ts";
import { ScriptedProvider } from "../../testkit/src/index.ts";
import { drain, scriptedAgent } from "./support.ts";
import { resultText } from "../src/http.ts";

describe("@keel/ui-stream: tool results", () => {
  it("a tool that fails shows its own error text", async () => {
    const broken = defineTool({
      name: "backup",
      description: "Back up the database.",
      input: z.object({}),
      category: "info",
      execute: async () => {
        throw new Error("disk full on /var/backups");
      },
    });
    const agent = await createAgent({
      provider: new ScriptedProvider([{ toolCalls: [{ id: "b1", name: "backup", args: {} }] }, { text: "It failed." }]),
      tools: [broken],
      home: mkdtempSync(join(tmpdir(), "keel-ui-results-")),
    });
    const session = await agent.session();
    const chunks = await drain(toUIMessageStream(streamTurn(session, "back up"), { outputOf: resultText(session) }));
    const failed = chunks.find((c) => c.type === "tool-output-error") as { errorText: string } | undefined;
    expect(failed?.errorText).toContain("disk full on /var/backups");
    await agent.close();
  });

  it("AG-UI: a denied call's result carries the person's reason", async () => {
    const { agent } = await scriptedAgent([
      { toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }] },
      { text: "Not deployed." },
    ]);
    const agui = createAGUIHandler({ agent });
    const run = (runId: string, extra: object = {}) =>
      new Request("http://localhost/api/agui", {
        method: "POST",
        body: JSON.stringify({
          threadId: "t1",
          runId,
          messages: [{ id: "u1", role: "user", content: "deploy v2" }],
          tools: [],
          context: [],
          ...extra,
        }),
      });
    await (await agui(run("r1"))).text();
    const resume = [{ interruptId: "call_1", status: "resolved", payload: { approved: false, reason: "code freeze" } }];
    const text = await (await agui(run("r2", { resume }))).text();
    const result = text
      .split("\n\n")
      .filter((f) => f.startsWith("data: "))
      .map((f) => JSON.parse(f.slice(6)) as { type: string; content?: string })
      .find((e) => e.type === "TOOL_CALL_RESULT");
    expect(result?.content).toContain("code freeze");
    await agent.close();
  });
});
