/** The fetch-style handler (app.ts) under node:http, and so under Express. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";

/**
 * node:http → Request, Response → node:http. A client that goes away aborts `request.signal`.
 * Contract: the returned function never rejects once the response has started; Express mounts it
 * as is (its req and res are node:http's).
 */
export function nodeHandler(handler: (request: Request) => Promise<Response>) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const gone = new AbortController();
    res.on("close", () => res.writableFinished || gone.abort());
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const request = new Request(new URL(req.url ?? "/", `http://${req.headers.host ?? "localhost"}`), {
      method: req.method!,
      headers: Object.entries(req.headers).flatMap(([k, v]) =>
        v === undefined ? [] : (Array.isArray(v) ? v : [v]).map((x): [string, string] => [k, x]),
      ),
      signal: gone.signal,
      ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream, duplex: "half" } : {}),
    } as RequestInit);
    const response = await handler(request);
    res.writeHead(response.status, [...response.headers].flat());
    // A stream's status goes out now, not with its first event (a rejoin may wait for one).
    res.flushHeaders();
    // Streams the SSE body chunk by chunk; if the client disconnects, pipeline destroys the body,
    // which detaches the turn stream (app.ts: the turn runs on, the client may rejoin it).
    if (response.body)
      await pipeline(Readable.fromWeb(response.body as import("node:stream/web").ReadableStream), res).catch(
        () => undefined,
      );
    else res.end();
  };
}
