/**
 * What a hostile or careless client sends the handlers: a body far over the limit with no
 * Content-Length (chunked) is refused without being read whole; a file or image the user attached
 * is refused (400) rather than dropped unseen while the turn runs on the rest; an AG-UI client
 * with the default `Accept: *\/*` (curl, fetch) gets SSE, not protobuf.
 */
import { describe, expect, it } from "vitest";
import { createAGUIHandler, createChatHandler } from "../src/index.ts";
import type { ScriptedProvider } from "../../testkit/src/index.ts";
import { scriptedAgent } from "./support.ts";

const MB = 1024 * 1024;

/** A body of `total` spaces made on demand; `pulled()` says how much the server read. */
function endless(total: number): { body: ReadableStream<Uint8Array>; pulled: () => number } {
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled >= total) return controller.close();
      pulled += MB;
      controller.enqueue(new Uint8Array(MB).fill(32));
    },
  });
  return { body, pulled: () => pulled };
}

const request = (path: string, body: string | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
  new Request(`http://localhost${path}`, { method: "POST", body, headers, duplex: "half" } as RequestInit);

async function error(res: Response): Promise<{ code: string; message: string }> {
  return ((await res.json()) as { error: { code: string; message: string } }).error;
}

describe("@keel/ui-stream: hostile input", () => {
  it("a chunked body past the limit is 413 after reading little more than the limit", async () => {
    const { agent } = await scriptedAgent([]);
    for (const handler of [
      createChatHandler({ agent, maxBodyBytes: MB }),
      createAGUIHandler({ agent, maxBodyBytes: MB }),
    ]) {
      const big = endless(64 * MB);
      const res = await handler(request("/api", big.body));
      expect(res.status).toBe(413);
      expect((await error(res)).code).toBe("BODY_TOO_LARGE");
      expect(big.pulled()).toBeLessThanOrEqual(4 * MB);
    }
    await agent.close();
  });

  it("a file the user attached is a 400 naming it, and no turn runs without it", async () => {
    const { agent, provider } = await scriptedAgent([{ text: "Sure." }]);
    const chat = createChatHandler({ agent });
    const parts = [
      { type: "text", text: "what is in this picture?" },
      { type: "file", mediaType: "image/png", url: "data:image/png;base64,iVBORw0KGgo=" },
    ];
    const res = await chat(
      request(
        "/api/chat",
        JSON.stringify({ id: "c1", trigger: "submit-message", messages: [{ id: "u1", role: "user", parts }] }),
      ),
    );
    expect(res.status).toBe(400);
    expect((await error(res)).message).toContain("parts[1] is a file");

    const agui = createAGUIHandler({ agent });
    const content = [
      { type: "text", text: "what is in this picture?" },
      { type: "image", source: { type: "data", value: "iVBORw0KGgo=", mimeType: "image/png" } },
    ];
    const input = {
      threadId: "t1",
      runId: "r1",
      messages: [{ id: "u1", role: "user", content }],
      tools: [],
      context: [],
    };
    const run = await agui(request("/api/agui", JSON.stringify(input)));
    expect(run.status).toBe(400);
    expect((await error(run)).message).toContain("content[1] is not text");
    expect((provider as ScriptedProvider).requests).toHaveLength(0);
    await agent.close();
  });

  it("AG-UI answers SSE to Accept */*; protobuf only when Accept names it", async () => {
    const { agent } = await scriptedAgent([{ text: "Hello." }, { text: "Again." }]);
    const agui = createAGUIHandler({ agent });
    const input = (runId: string) =>
      JSON.stringify({
        threadId: "t1",
        runId,
        messages: [{ id: "u1", role: "user", content: "hi" }],
        tools: [],
        context: [],
      });
    const res = await agui(request("/api/agui", input("r1"), { accept: "*/*" }));
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toContain('data: {"type":"RUN_STARTED"');
    const proto = await agui(
      request("/api/agui", input("r2"), { accept: "application/vnd.ag-ui.event+proto, text/event-stream;q=0.5" }),
    );
    expect(proto.headers.get("content-type")).toBe("application/vnd.ag-ui.event+proto");
    await proto.arrayBuffer();
    await agent.close();
  });
});
