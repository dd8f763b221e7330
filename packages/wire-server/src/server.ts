/** The HTTP server: routing, recording, scripted answers and faults. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { anthropicError, checkAnthropic, renderAnthropic } from "./anthropic.ts";
import type { RenderedError, RenderedStream, UnicodeFault } from "./common.ts";
import { unicodeFault } from "./common.ts";
import { checkChat, openaiError, renderChat } from "./openai-chat.ts";
import { checkResponses, renderResponses } from "./openai-responses.ts";
import { applyPromptCache, type CacheStore } from "./prompt-cache.ts";
import type {
  RecordedRequest,
  WireApi,
  WireErrorKind,
  WireHttpError,
  WireReply,
  WireResponse,
  WireServer,
  WireServerOptions,
} from "./types.ts";

const ROUTES: Record<string, WireApi> = {
  "/v1/messages": "anthropic",
  "/v1/chat/completions": "chat",
  "/v1/responses": "responses",
};

/**
 * Start a server on 127.0.0.1 that answers Anthropic Messages and OpenAI Chat Completions /
 * Responses streaming requests from a queue of scripted answers.
 * Contract: one queued answer per request, whichever endpoint; every request is recorded.
 */
export async function startWireServer(options: WireServerOptions = {}): Promise<WireServer> {
  const queue: WireResponse[] = [];
  const requests: RecordedRequest[] = [];
  const waiters = new Map<number, { promise: Promise<RecordedRequest>; resolve: (r: RecordedRequest) => void }>();
  const sockets = new Set<Socket>();
  const promptCache: CacheStore = new Map();
  const waiter = (index: number) => {
    let w = waiters.get(index);
    if (!w) {
      let resolve!: (r: RecordedRequest) => void;
      const promise = new Promise<RecordedRequest>((r) => (resolve = r));
      w = { promise, resolve };
      waiters.set(index, w);
    }
    return w;
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const bytes = Buffer.concat(chunks);
      const raw = bytes.toString("utf8");
      let body: unknown = raw;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        // kept as text
      }
      const path = (req.url ?? "/").split("?")[0]!;
      const record: RecordedRequest = {
        index: requests.length,
        method: req.method ?? "GET",
        path,
        api: ROUTES[path] ?? "other",
        headers: headersOf(req),
        body,
        outcome: "pending",
      };
      requests.push(record);
      res.on("close", () => {
        if (record.outcome === "pending") record.outcome = "client_closed";
        waiter(record.index).resolve(record);
      });
      handle(record, res, bytes, raw);
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });

  function handle(record: RecordedRequest, res: ServerResponse, bytes: Buffer, raw: string): void {
    const api = record.api;
    if (api === "other" || record.method !== "POST") {
      sendJson(res, {
        status: 404,
        body: {
          error: { message: `wire-server: no route for ${record.method} ${record.path}`, type: "not_found_error" },
        },
        headers: {},
      });
      record.outcome = "rejected";
      return;
    }
    if (options.apiKey !== undefined) {
      const given =
        (api === "anthropic" ? record.headers["x-api-key"] : undefined) ??
        record.headers["authorization"]?.replace(/^Bearer /, "");
      if (given !== options.apiKey) return void httpError(record, res, { error: "auth" });
    }
    // The real APIs' strict JSON parsers refuse a lone surrogate before anything else happens
    // (no scripted answer is used up).
    const bad = unicodeFault(bytes, raw);
    if (bad) {
      const rendered =
        api === "anthropic"
          ? anthropicError("invalid_request", anthropicUnicodeMessage(bad))
          : openaiError("invalid_request", api, OPENAI_BAD_JSON);
      record.outcome = "rejected";
      sendJson(res, rendered);
      return;
    }
    let next = queue.shift() ??
      options.onEmpty ?? {
        error: "invalid_request",
        message: "wire-server: the script has no answer left for this request; enqueue one more.",
        api,
      };
    if (typeof next === "function") next = next(record);
    record.response = next;
    if (next.api && next.api !== api)
      return void httpError(record, res, {
        error: "invalid_request",
        message: `wire-server: the scripted answer is for the ${next.api} API but ${record.path} was called.`,
      });
    if ("error" in next) return void httpError(record, res, next);
    if ("hang" in next) return;
    const problem =
      api === "anthropic"
        ? checkAnthropic(record.body)
        : api === "chat"
          ? checkChat(record.body)
          : checkResponses(record.body);
    if (problem) {
      httpError(record, res, { error: "invalid_request", message: problem });
      record.outcome = "rejected";
      return;
    }
    stream(record, res, next, api);
  }

  function httpError(record: RecordedRequest, res: ServerResponse, e: WireHttpError): void {
    const api = record.api as WireApi;
    const rendered =
      api === "anthropic"
        ? anthropicError(e.error, e.message, e.status)
        : openaiError(e.error, api, e.message, e.status);
    if (e.retryAfter !== undefined) rendered.headers["retry-after"] = String(e.retryAfter);
    Object.assign(rendered.headers, e.headers ?? {});
    record.outcome = "http_error";
    sendJson(res, rendered);
  }

  function stream(record: RecordedRequest, res: ServerResponse, reply: WireReply, api: WireApi): void {
    const u = reply.usage ?? {};
    if (
      api === "anthropic" &&
      u.cacheRead === undefined &&
      u.cacheWrite === undefined &&
      u.cacheWrite1h === undefined
    ) {
      // No scripted cache figures: take them from the modelled prompt cache.
      const c = applyPromptCache(promptCache, record.body);
      reply = {
        ...reply,
        usage: {
          ...u,
          input: u.input ?? c.total - c.read - c.write5m - c.write1h,
          cacheRead: c.read,
          cacheWrite: c.write5m,
          cacheWrite1h: c.write1h,
        },
      };
    }
    const rendered: RenderedStream =
      api === "anthropic"
        ? renderAnthropic(reply, record.body)
        : api === "chat"
          ? renderChat(reply, record.body)
          : renderResponses(reply, record.body);
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      [api === "anthropic" ? "request-id" : "x-request-id"]: `req_wire_${record.index}`,
    });
    const fault = reply.fault;
    const after = fault
      ? Math.max(0, Math.min(fault.afterEvents ?? Math.floor(rendered.finishAt / 2), rendered.finishAt))
      : rendered.frames.length;
    let frames = rendered.frames.slice(0, fault?.type === "truncate" ? rendered.finishAt : after);
    if (fault?.type === "error_event")
      frames = frames.concat(
        rendered.errorFrames(fault.errorKind ?? ("overloaded" as WireErrorKind), after, fault.responsesFailed === true),
      );
    const finish = () => {
      if (res.destroyed) return;
      if (!fault) {
        record.outcome = "completed";
        res.end();
      } else if (fault.type === "truncate") {
        record.outcome = "truncated";
        res.end();
      } else if (fault.type === "error_event") {
        record.outcome = "error_event";
        res.end();
      } else if (fault.type === "cut") {
        record.outcome = "cut";
        // Let the frames reach the client before the reset, so the cut is mid-stream.
        setTimeout(() => res.socket?.resetAndDestroy(), 20);
      }
      // hang: keep the exchange open until the client goes away or the server closes.
    };
    const delay = reply.delayMs ?? 0;
    if (delay <= 0) {
      if (frames.length) res.write(frames.join(""));
      finish();
      return;
    }
    let i = 0;
    const tick = () => {
      if (res.destroyed) return;
      if (i >= frames.length) return finish();
      res.write(frames[i++]!);
      setTimeout(tick, delay);
    };
    tick();
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    anthropicBaseURL: url,
    openaiBaseURL: `${url}/v1`,
    requests,
    enqueue: (...responses) => void queue.push(...responses),
    pending: () => queue.length,
    settled: (index) => waiter(index).promise,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Anthropic's message for a body its JSON parser refuses (as the real API words it). */
function anthropicUnicodeMessage(f: UnicodeFault): string {
  const what =
    f.kind === "no_low"
      ? "no low surrogate in string"
      : f.kind === "lone_low"
        ? "invalid low surrogate in string"
        : "invalid UTF-8 in string";
  return `The request body is not valid JSON: ${what}: line ${f.line} column ${f.column} (char ${f.char})`;
}

/** OpenAI's message for a body that is not valid JSON. */
const OPENAI_BAD_JSON =
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)";

function headersOf(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
  return out;
}

function sendJson(res: ServerResponse, e: RenderedError): void {
  const text = JSON.stringify(e.body);
  res.writeHead(e.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...e.headers,
  });
  res.end(text);
}
