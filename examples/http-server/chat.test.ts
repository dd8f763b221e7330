/**
 * useChat's protocol against the HTTP example over real sockets (`node server.ts` in a child
 * process), driven by the AI SDK's own client pieces: DefaultChatTransport posts the chat,
 * readUIMessageStream builds the assistant message, lastAssistantMessageIsCompleteWithApprovalResponses
 * decides to send the approval. The server is SIGKILLed between the pause and the approval: the
 * chat, its session and the pending approval are on disk. Also AG-UI's interrupt and resume.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, readUIMessageStream } from "ai";
import type { UIMessage } from "ai";

const here = dirname(fileURLToPath(import.meta.url));
const children: ChildProcess[] = [];

async function start(home: string, env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [join(here, "server.ts")], {
    env: { ...process.env, KEEL_HOME: home, PORT: "0", KEEL_MODEL: "", DEPLOY_STEP_MS: "20", WORKER: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
  return { url, child };
}

afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

/** One useChat request: the transport's stream, read into the assistant message. */
async function send(url: string, chatId: string, messages: UIMessage[]): Promise<UIMessage> {
  const transport = new DefaultChatTransport({ api: `${url}/api/chat` });
  const stream = await transport.sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  const last = messages.at(-1)!;
  let message: UIMessage | undefined;
  const errors: unknown[] = [];
  for await (const m of readUIMessageStream({
    stream,
    ...(last.role === "assistant" ? { message: structuredClone(last) } : {}),
    onError: (e) => errors.push(e),
  }))
    message = m;
  expect(errors).toEqual([]);
  return message!;
}

describe("examples/http-server: useChat and AG-UI", () => {
  it("a deploy asked in the chat waits for approval across a server crash, then runs and is recorded", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-chat-"));
    const user: UIMessage = { id: "u1", role: "user", parts: [{ type: "text", text: "please deploy v1.4.2" }] };
    let server = await start(home);
    const paused = await send(server.url, "chat-1", [user]);
    expect(paused.parts.find((p) => p.type === "text")).toMatchObject({ text: "Deploying v1.4.2." });
    const tool = paused.parts.find((p) => p.type === "tool-deploy") as Record<string, any>;
    expect(tool).toMatchObject({ state: "approval-requested", input: { version: "v1.4.2" } });
    expect(existsSync(join(home, "deployments.log"))).toBe(false);

    server.child.kill("SIGKILL");
    server = await start(home);
    // What addToolApprovalResponse does, and the check sendAutomaticallyWhen makes.
    Object.assign(tool, { state: "approval-responded", approval: { id: tool.approval.id, approved: true } });
    expect(lastAssistantMessageIsCompleteWithApprovalResponses({ messages: [user, paused] })).toBe(true);
    const done = await send(server.url, "chat-1", [user, paused]);
    expect(done.id).toBe(paused.id);
    expect(done.parts.find((p) => p.type === "tool-deploy")).toMatchObject({
      state: "output-available",
      output: expect.stringContaining("v1.4.2 is live"),
    });
    expect(done.parts.at(-1)).toMatchObject({ type: "text", text: expect.stringContaining("Done.") });
    expect(readFileSync(join(home, "deployments.log"), "utf8")).toMatch(/ v1\.4\.2 by /);

    // A body useChat would never send is a 400 with a JSON error.
    const bad = await fetch(`${server.url}/api/chat`, { method: "POST", body: '{"id": 1}' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("BAD_REQUEST");
    // The example's own API is still there.
    expect((await fetch(`${server.url}/sessions`, { method: "POST" })).status).toBe(201);
  });

  it("a turn over MAX_COST_USD: the chat message says the stop and KEEL_BUDGET_EXCEEDED (no empty bubble), the next one too, and AG-UI says it", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-chat-budget-"));
    const { url } = await start(home, { MAX_COST_USD: "0.01" });
    const messages: UIMessage[] = [];
    for (const [i, text] of ["please deploy v1.4.2", "status?"].entries()) {
      messages.push({ id: `u${i}`, role: "user", parts: [{ type: "text", text }] });
      const answer = await send(url, "budget-chat", messages);
      const texts = answer.parts.flatMap((p) => (p.type === "text" ? [p.text] : []));
      expect(texts).toEqual([
        expect.stringMatching(
          /^Stopped: This turn spent \$0\.0000 of limits\.maxCostUsd \$0\.0100; .* \(KEEL_BUDGET_EXCEEDED\)$/s,
        ),
      ]);
      expect(answer.parts.find((p) => p.type === "data-keel-end")).toMatchObject({
        data: { status: "stopped", reason: "budget", code: "KEEL_BUDGET_EXCEEDED" },
      });
      messages.push(answer);
    }
    const res = await fetch(`${url}/api/agui`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({
        threadId: "t-budget",
        runId: "r1",
        messages: [{ id: "u1", role: "user", content: "status?" }],
        tools: [],
        context: [],
      }),
    });
    const events = (await res.text())
      .split("\n\n")
      .filter((f) => f.startsWith("data: "))
      .map((f) => JSON.parse(f.slice(6)) as Record<string, any>);
    expect(events.find((e) => e.type === "TEXT_MESSAGE_CONTENT")!.delta).toMatch(/\(KEEL_BUDGET_EXCEEDED\)$/);
    expect(events.at(-1)).toMatchObject({ type: "RUN_FINISHED", metadata: { keel: { code: "KEEL_BUDGET_EXCEEDED" } } });
    expect(existsSync(join(home, "deployments.log"))).toBe(false);
  });

  it("AG-UI: the run ends with an approval interrupt, the next run's resume denies it", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-agui-"));
    const { url } = await start(home);
    const run = async (body: object) => {
      const res = await fetch(`${url}/api/agui`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({ threadId: "t1", messages: [], tools: [], context: [], ...body }),
      });
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      return (await res.text())
        .split("\n\n")
        .filter((f) => f.startsWith("data: "))
        .map((f) => JSON.parse(f.slice(6)) as Record<string, any>);
    };
    const first = await run({ runId: "r1", messages: [{ id: "u1", role: "user", content: "deploy v2.0.0" }] });
    const interrupt = first.at(-1)!.outcome.interrupts[0];
    expect(interrupt).toMatchObject({ reason: "tool_approval" });
    const second = await run({
      runId: "r2",
      resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: false, reason: "freeze" } }],
    });
    expect(second.find((e) => e.type === "TOOL_CALL_RESULT")!.content).toContain("freeze");
    expect(second.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "success" } });
    expect(existsSync(join(home, "deployments.log"))).toBe(false);
  });
});
