/**
 * The wire server on its own, with plain fetch: SSE framing of each format, error shapes,
 * request checks the real APIs make, key checks, the empty-queue answer, and the CLI.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWireServer, type WireServer } from "../src/index.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
const anthropicBody = (messages: unknown[]) => ({
  model: "claude-sonnet-4-6",
  max_tokens: 100,
  stream: true,
  messages,
});
const events = (sse: string) =>
  sse
    .split("\n\n")
    .filter(Boolean)
    .map((frame) => ({ event: /^event: (.*)$/m.exec(frame)?.[1], data: /^data: (.*)$/m.exec(frame)?.[1] }));

describe("wire server", () => {
  it("frames an Anthropic stream as named SSE events ending with message_stop", async () => {
    server.enqueue({ text: "abc", chunks: 3 });
    const res = await post("/v1/messages", anthropicBody([{ role: "user", content: "hi" }]));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const ev = events(await res.text());
    expect(ev.map((e) => e.event)).toEqual([
      "message_start",
      "content_block_start",
      "ping",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    for (const e of ev) expect(JSON.parse(e.data!).type).toBe(e.event);
  });

  it("frames chat chunks as data-only events ending with [DONE], usage only when asked", async () => {
    server.enqueue({ text: "hi" }, { text: "hi" });
    const plain = events(
      await (
        await post("/v1/chat/completions", {
          model: "gpt-4o",
          stream: true,
          messages: [{ role: "user", content: "x" }],
        })
      ).text(),
    );
    expect(plain.every((e) => e.event === undefined)).toBe(true);
    expect(plain.at(-1)!.data).toBe("[DONE]");
    expect(plain.some((e) => e.data !== "[DONE]" && JSON.parse(e.data!).usage)).toBe(false);
    const withUsage = events(
      await (
        await post("/v1/chat/completions", {
          model: "gpt-4o",
          stream: true,
          stream_options: { include_usage: true },
          messages: [{ role: "user", content: "x" }],
        })
      ).text(),
    );
    expect(JSON.parse(withUsage.at(-2)!.data!)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: expect.any(Number) },
    });
  });

  it("numbers Responses events and ends with response.completed", async () => {
    server.enqueue({ text: "hi", toolCalls: [{ name: "f", args: {} }] });
    const ev = events(await (await post("/v1/responses", { model: "gpt-5", stream: true, input: "x" })).text());
    expect(ev.map((e) => JSON.parse(e.data!).sequence_number)).toEqual(ev.map((_, i) => i));
    expect(ev.at(-1)!.event).toBe("response.completed");
  });

  it("answers errors in each provider's shape with retry-after", async () => {
    server.enqueue({ error: "rate_limit", retryAfter: 3 }, { error: "context_length" });
    const a = await post("/v1/messages", anthropicBody([{ role: "user", content: "hi" }]));
    expect(a.status).toBe(429);
    expect(a.headers.get("retry-after")).toBe("3");
    expect(await a.json()).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
    const o = await post("/v1/chat/completions", { model: "gpt-4o", stream: true, messages: [] });
    expect(o.status).toBe(400);
    expect(await o.json()).toMatchObject({ error: { code: "context_length_exceeded", type: "invalid_request_error" } });
  });

  it("rejects what the real API rejects: a tool_result without its tool_use", async () => {
    server.enqueue({ text: "never" });
    const res = await post(
      "/v1/messages",
      anthropicBody([{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_x", content: "r" }] }]),
    );
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("toolu_x");
    expect(server.requests.at(-1)!.outcome).toBe("rejected");
  });

  it("rejects structured-output requests the real APIs reject", async () => {
    const bad = [
      [
        "/v1/messages",
        {
          model: "m",
          max_tokens: 10,
          stream: true,
          messages: [{ role: "user", content: [{ type: "text", text: "x" }] }],
          tool_choice: { type: "any" },
        },
        "may only be specified while providing tools",
      ],
      [
        "/v1/messages",
        {
          model: "m",
          max_tokens: 10,
          stream: true,
          messages: [{ role: "user", content: [{ type: "text", text: "x" }] }],
          tools: [{ name: "a", input_schema: { type: "object" } }],
          tool_choice: { type: "tool", name: "b" },
        },
        "Tool 'b' not found",
      ],
      [
        "/v1/chat/completions",
        {
          model: "m",
          stream: true,
          messages: [{ role: "user", content: "x" }],
          response_format: { type: "json_schema", json_schema: { schema: {} } },
        },
        "json_schema.name",
      ],
      [
        "/v1/responses",
        { model: "m", stream: true, input: "x", text: { format: { type: "json_schema", name: "n" } } },
        "text.format.schema",
      ],
    ] as const;
    for (const [path, body, message] of bad) {
      server.enqueue({ text: "never" });
      const res = await post(path, body);
      expect(res.status, path).toBe(400);
      expect(await res.text(), path).toContain(message);
      expect(server.requests.at(-1)!.outcome).toBe("rejected");
    }
  });

  it("checks the key when one is configured, and says when the script ran out", async () => {
    const keyed = await startWireServer({ apiKey: "right" });
    try {
      keyed.enqueue({ text: "a" });
      const wrong = await fetch(`${keyed.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer wrong" },
        body: "{}",
      });
      expect(wrong.status).toBe(401);
      expect(await wrong.json()).toMatchObject({ error: { code: "invalid_api_key" } });
      expect(keyed.pending()).toBe(1); // a rejected key does not use up an answer
      const right = await fetch(`${keyed.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer right" },
        body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "x" }] }),
      });
      expect(right.status).toBe(200);
      await right.text();
      expect(keyed.pending()).toBe(0);
    } finally {
      await keyed.close();
    }
    const bare = await startWireServer();
    try {
      const res = await fetch(`${bare.url}/v1/messages`, {
        method: "POST",
        body: JSON.stringify(anthropicBody([{ role: "user", content: "x" }])),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain("no answer left");
    } finally {
      await bare.close();
    }
  });

  it("runs from the command line, prints its URL and echoes the user", async () => {
    const main = join(dirname(fileURLToPath(import.meta.url)), "..", "src", "main.ts");
    const child = spawn(process.execPath, [main], { stdio: ["ignore", "pipe", "pipe"] });
    try {
      const [chunk] = (await once(child.stdout!, "data")) as [Buffer];
      const url = chunk.toString().split("\n")[0]!;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "ping" }] }),
      });
      const text = events(await res.text())
        .filter((e) => e.data !== "[DONE]")
        .map((e) => JSON.parse(e.data!).choices[0]?.delta?.content ?? "")
        .join("");
      expect(text).toBe("You said: ping");
    } finally {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  });
});

describe("wire server: bodies the real APIs' strict JSON parsers refuse", () => {
  const raw = (path: string, body: string | Buffer) =>
    fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });
  const textBody = (text: string) => JSON.stringify(anthropicBody([{ role: "user", content: text }]));

  it("an escaped lone high surrogate gets Anthropic's 400 invalid_request_error, and no scripted answer is used up", async () => {
    server.enqueue({ text: "kept for the next request" });
    const before = server.pending();
    const body = textBody("emoji cut in half: \ud83d end");
    expect(body).toContain("\\ud83d");
    const res = await raw("/v1/messages", body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { type: string; error: { type: string; message: string }; request_id: string };
    expect(json.type).toBe("error");
    expect(json.error.type).toBe("invalid_request_error");
    expect(json.error.message).toMatch(
      /^The request body is not valid JSON: no low surrogate in string: line 1 column (\d+) \(char (\d+)\)$/,
    );
    const [, column, char] = /column (\d+) \(char (\d+)\)/.exec(json.error.message)!;
    expect(body.slice(Number(char), Number(char) + 6)).toBe("\\ud83d");
    expect(Number(column)).toBe(Number(char) + 1);
    expect(server.pending()).toBe(before);
    expect(server.requests.at(-1)!.outcome).toBe("rejected");
    const ok = await raw("/v1/messages", textBody("whole emoji 😀"));
    expect(ok.status).toBe(200);
    await ok.text();
  });

  it("a lone low surrogate and raw non-UTF-8 bytes (a raw lone surrogate in WTF-8) are refused too", async () => {
    const low = await raw("/v1/messages", textBody("x\ude00y"));
    expect(low.status).toBe(400);
    expect(((await low.json()) as { error: { message: string } }).error.message).toContain(
      "invalid low surrogate in string",
    );
    const wtf8 = Buffer.concat([
      Buffer.from('{"model":"claude-sonnet-4-6","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"a'),
      Buffer.from([0xed, 0xa0, 0xbd]),
      Buffer.from('"}]}'),
    ]);
    const bytes = await raw("/v1/messages", wtf8);
    expect(bytes.status).toBe(400);
    expect(((await bytes.json()) as { error: { message: string } }).error.message).toContain("not valid JSON");
  });

  it("a paired surrogate escape and an escaped backslash before 'ud83d' are valid JSON and pass", async () => {
    server.enqueue({ text: "a" }, { text: "b" });
    const paired = await raw("/v1/messages", textBody("x").replace('"x"', '"\\ud83d\\ude00"'));
    expect(paired.status).toBe(200);
    await paired.text();
    const backslash = await raw("/v1/messages", textBody("\\ud83d is just text"));
    expect(backslash.status).toBe(200);
    await backslash.text();
  });

  it("OpenAI's Chat Completions and Responses endpoints answer a lone surrogate with their 400 invalid-JSON error", async () => {
    for (const [path, body] of [
      ["/v1/chat/completions", { model: "gpt-4o", stream: true, messages: [{ role: "user", content: "a\ud83d" }] }],
      ["/v1/responses", { model: "gpt-4.1", stream: true, input: [{ role: "user", content: "a\ud83d" }] }],
    ] as const) {
      const res = await raw(path, JSON.stringify(body));
      expect(res.status, path).toBe(400);
      const json = (await res.json()) as { error: { type: string; message: string; param: unknown; code: unknown } };
      expect(json.error.type).toBe("invalid_request_error");
      expect(json.error.message).toMatch(/^We could not parse the JSON body of your request/);
      expect(json.error.param).toBeNull();
    }
  });
});
