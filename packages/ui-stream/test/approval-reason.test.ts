/**
 * The approver sees why (fault class 18 through class 22's protocols): a permission rule's `ask`
 * (@keel/plugin-permissions, the real plugin) reaches the useChat approval part in the AI SDK's
 * own fields (`approval.requestReason`, `approval.descriptor.plugin`) and the AG-UI interrupt
 * (message and metadata, checked by @ag-ui/core) — also after a restart on the same SQLite file,
 * where the stream is rejoined from the log. A credential in the rule's reason never reaches them.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { EventSchema } from "@ag-ui/core/schemas";
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";
import type { UIMessage } from "ai";
import { createAgent, defineTool } from "@keel/agent";
import { rejoinTurn } from "@keel/stream";
import permissions from "../../plugin-permissions/src/index.ts";
import { ScriptedProvider } from "../../testkit/src/index.ts";
import { AGUIEventMapper, createChatHandler, toUIMessageStream } from "../src/index.ts";

const RULE = {
  id: "prod-deploys",
  decision: "ask",
  tool: "deploy",
  reason: "deploys reach production; page https://ops:hunter2@pager.example.com first",
} as const;

async function agentOn(home: string) {
  const deploy = defineTool({
    name: "deploy",
    description: "Deploy a version.",
    input: z.object({ version: z.string() }),
    category: "exec",
    execute: async ({ version }) => `${version} is live`,
  });
  return createAgent({
    provider: new ScriptedProvider([
      { text: "Deploying v2.", toolCalls: [{ id: "call_1", name: "deploy", args: { version: "v2" } }] },
      { text: "Done." },
    ]),
    tools: [deploy],
    plugins: [permissions({ rules: [RULE] })],
    home,
  });
}

type ApprovalPart = { state: string; approval: { id: string; requestReason?: string; descriptor?: unknown } };
const approvalOf = (m: UIMessage | undefined) => m?.parts.find((p) => p.type === "tool-deploy") as ApprovalPart;

async function read(stream: ReadableStream<any>): Promise<UIMessage | undefined> {
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream({ stream })) last = m;
  return last;
}

function expectWhy(reason: string | undefined): void {
  expect(reason).toMatch(
    /^rules\[0\] \(prod-deploys\) .* asks about it: deploys reach production; page https:\/\/ops:/,
  );
  expect(reason).not.toContain("hunter2");
}

describe("fault class 18: the approver sees why a permission rule asks", () => {
  it("useChat's approval part and AG-UI's interrupt carry the rule's reason and the plugin, also after a restart", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-approval-reason-"));
    let agent = await agentOn(home);
    const chat = createChatHandler({ agent });
    const res = await chat(
      new Request("http://localhost/api/chat", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          id: "c1",
          trigger: "submit-message",
          messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "deploy v2" }] }],
        }),
      }),
    );
    const sessionId = res.headers.get("x-keel-session")!;
    const chunks = parseJsonEventStream({ stream: res.body!, schema: uiMessageChunkSchema }).pipeThrough(
      new TransformStream<any, any>({
        transform(parsed, c) {
          if (!parsed.success) throw new Error(`A chunk the SDK rejects: ${String(parsed.error)}`);
          c.enqueue(parsed.value);
        },
      }),
    );
    const paused = approvalOf(await read(chunks));
    expect(paused.state).toBe("approval-requested");
    expectWhy(paused.approval.requestReason);
    expect(paused.approval.descriptor).toEqual({ plugin: "@keel/plugin-permissions" });
    await agent.close();

    // A new process on the same SQLite file: the pause and its reason come from the log.
    agent = await agentOn(home);
    const session = await agent.session(sessionId);
    const [pending] = session.pendingApprovals();
    expectWhy(pending?.reason);
    expect(pending?.plugin).toBe("@keel/plugin-permissions");
    const rejoined = approvalOf(await read(toUIMessageStream(await rejoinTurn(session))));
    expect(rejoined.state).toBe("approval-requested");
    expectWhy(rejoined.approval.requestReason);
    expect(rejoined.approval.descriptor).toEqual({ plugin: "@keel/plugin-permissions" });

    const mapper = new AGUIEventMapper({ threadId: "c1", runId: "r1" });
    const events: Array<Record<string, any>> = [];
    for await (const e of await rejoinTurn(session))
      for (const ev of mapper.map(e)) events.push(EventSchema.parse(JSON.parse(JSON.stringify(ev))));
    const [interrupt] = events.at(-1)!.outcome.interrupts;
    expect(interrupt.message).toMatch(/^Approve deploy \(rules\[0\] \(prod-deploys\) .*deploys reach production/);
    expect(interrupt.message).not.toContain("hunter2");
    expectWhy(interrupt.metadata.reason);
    expect(interrupt.metadata.plugin).toBe("@keel/plugin-permissions");
    await session.close();
    await agent.close();
  });
});
