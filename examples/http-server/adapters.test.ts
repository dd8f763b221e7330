/**
 * The example's fetch-style handler mounted in Hono (as is), Express and Fastify, each over real
 * HTTP: a turn streams as server-sent events to its verdict, and a client that disconnects
 * mid-stream leaves the turn (and its deploy) running to the end while the server keeps answering.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { afterAll, describe, expect, it } from "vitest";
import type { TurnStreamEvent } from "@keel/stream";
import { expressApp } from "./adapters/express.ts";
import { fastifyApp } from "./adapters/fastify.ts";
import { honoApp } from "./adapters/hono.ts";
import { buildAgent } from "./agent.ts";
import { createHandler } from "./app.ts";
import { offlineModel } from "./offline-model.ts";

type Handler = (request: Request) => Promise<Response>;
/** Listen on a free loopback port; the base URL and how to stop. */
type Mount = (handler: Handler) => Promise<{ url: string; stop: () => Promise<void> }>;

const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const stopNode = (server: Server) => () =>
  new Promise<void>((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });

const frameworks: Record<string, Mount> = {
  hono: (handler) =>
    new Promise((resolve) => {
      const server = serve({ fetch: honoApp(handler).fetch, port: 0, hostname: "127.0.0.1" }, () =>
        resolve({ url: urlOf(server as Server), stop: stopNode(server as Server) }),
      );
    }),
  express: (handler) =>
    new Promise((resolve) => {
      const server = expressApp(handler).listen(0, "127.0.0.1", () =>
        resolve({ url: urlOf(server), stop: stopNode(server) }),
      );
    }),
  fastify: async (handler) => {
    const app = fastifyApp(handler);
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    return { url, stop: () => app.close() };
  },
};

const homes: string[] = [];
afterAll(() => {
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

const post = (url: string, body: unknown, signal?: AbortSignal) =>
  fetch(url, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
    ...(signal ? { signal } : {}),
  });

/** The events of an SSE body (stopping early once `stopAt` holds). */
async function events(res: Response, stopAt?: (e: TurnStreamEvent) => boolean): Promise<TurnStreamEvent[]> {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  const out: TurnStreamEvent[] = [];
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body!) {
    buf += decoder.decode(chunk, { stream: true });
    for (let cut = buf.indexOf("\n\n"); cut >= 0; cut = buf.indexOf("\n\n")) {
      const data = buf
        .slice(0, cut)
        .split("\n")
        .find((l) => l.startsWith("data: "));
      buf = buf.slice(cut + 2);
      if (!data) continue;
      out.push(JSON.parse(data.slice(6)) as TurnStreamEvent);
      if (stopAt?.(out.at(-1)!)) return out;
    }
  }
  return out;
}

describe.each(Object.keys(frameworks))("the handler in %s", (name) => {
  it("streams a turn as SSE; a client that disconnects mid-stream does not stop the turn or the server", async () => {
    const home = mkdtempSync(join(tmpdir(), `keel-${name}-`));
    homes.push(home);
    const agent = await buildAgent({ home, provider: offlineModel, stepMs: 100 });
    const { url, stop } = await frameworks[name]!(createHandler(agent));
    try {
      const created = await post(`${url}/sessions`, {});
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const turn = await events(await post(`${url}/sessions/${id}/turns`, { input: "status" }));
      expect(turn.at(-1)).toMatchObject({ type: "verdict", result: { verdict: { status: "completed" } } });

      const asked = await events(await post(`${url}/sessions/${id}/turns`, { input: "deploy v4.0" }));
      const callId = (asked.find((e) => e.type === "approval.requested") as { callId: string }).callId;
      const gone = new AbortController();
      const res = await post(`${url}/sessions/${id}/approvals`, { answers: [{ callId, approve: true }] }, gone.signal);
      const seen = await events(res, (e) => e.type === "tool.progress");
      expect(seen.at(-1)).toMatchObject({ type: "tool.progress" });
      gone.abort();

      // The server answers on; once the unread turn has ended, the session takes a new turn, and the deploy happened.
      let next: Response | undefined;
      for (let i = 0; i < 300; i++) {
        next = await post(`${url}/sessions/${id}/turns`, { input: "status" });
        if (next.status !== 409) break;
        await next.body?.cancel();
        await new Promise((r) => setTimeout(r, 100));
      }
      const after = await events(next!);
      expect(after.at(-1)).toMatchObject({ type: "verdict", result: { verdict: { status: "completed" } } });
      expect(readFileSync(join(home, "deployments.log"), "utf8")).toContain("v4.0");
      const missing = await fetch(`${url}/sessions/nope/messages`);
      expect(missing.status).toBe(404);
    } finally {
      await stop();
      await agent.close();
    }
  });
});
