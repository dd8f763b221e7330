/**
 * Serve the release assistant over plain node:http (no framework): `node server.ts`.
 * Offline by default (offline-model.ts); KEEL_MODEL=anthropic:<model> or openai:<model>
 * uses a real provider (keys from the environment). PORT (default 8787; 0 = any free port),
 * HOST (default 127.0.0.1), KEEL_HOME (default ./.keel) say where it listens and stores;
 * DEPLOY_STEP_MS (default 150) how long each of a deploy's three steps takes. Each server also
 * runs a worker (@keel/worker) that finishes turns a crashed server left, with no user action
 * (WORKER=0 turns it off; LEASE_TTL_MS, default 30 s, is how long a silent holder keeps a turn);
 * `GET /worker/health` says whether its store answers (a short outage is waited out).
 * MAX_COST_USD sets limits.maxCostUsd: a turn that would pass it stops, and the chat says so.
 * `/api/chat` (useChat) and `/api/agui` (AG-UI) serve browser UIs; the chat page built by
 * examples/chat-ui (`pnpm --filter @keel/example-chat-ui build`) is served at `/` when its
 * `dist` folder exists (or CHAT_UI_DIR names another).
 */
import { createServer } from "node:http";
import type { Server } from "node:http";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { resolveModel } from "@keel/providers";
import { startWorker } from "@keel/worker";
import type { WorkerHealth } from "@keel/worker";
import type { Limits, ModelProvider } from "@keel/kernel";
import { buildAgent } from "./agent.ts";
import { nodeHandler } from "./adapters/node.ts";
import { createHandler } from "./app.ts";
import { offlineModel } from "./offline-model.ts";

/** Start the server. Contract: resolves once listening; `close()` stops it and closes the agent (paused turns stay paused). */
export async function startServer(options: {
  home: string;
  provider: ModelProvider;
  port?: number;
  host?: string;
  stepMs?: number;
  /** Run a worker beside the server (default true). */
  worker?: boolean;
  leaseTtlMs?: number;
  /** The agent's limits (MAX_COST_USD sets `maxCostUsd`). */
  limits?: Partial<Limits>;
  /** Serve the chat page's build from this folder at `/`. */
  staticDir?: string;
}): Promise<{ url: string; server: Server; workerHealth: () => WorkerHealth | undefined; close: () => Promise<void> }> {
  const agent = await buildAgent({
    home: options.home,
    provider: options.provider,
    ...(options.stepMs !== undefined ? { stepMs: options.stepMs } : {}),
    ...(options.leaseTtlMs !== undefined ? { leaseTtlMs: options.leaseTtlMs } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
  });
  const stopWorker = new AbortController();
  // A store that fails for a moment is waited out (said once each way); only another failure (bad credentials) stops it.
  const running =
    options.worker === false
      ? undefined
      : startWorker({
          agent,
          signal: stopWorker.signal,
          graceMs: 5_000,
          onEvent: (e) => {
            if (e.type === "store_unavailable")
              process.stderr.write(`worker: store unavailable (${e.code}); retrying with backoff\n`);
            if (e.type === "store_recovered") process.stderr.write(`worker: store back after ${e.downMs} ms\n`);
          },
        });
  const worker = running?.done.catch((err: unknown) => {
    process.stderr.write(`worker stopped: ${err instanceof Error ? err.message : String(err)}\n`);
  });
  // Chats are kept beside the sessions (`<home>/chats.sqlite`): @keel/ui-stream's default.
  const app = createHandler(agent, options.staticDir ? { staticDir: options.staticDir } : {});
  const handler = (request: Request): Promise<Response> =>
    request.method === "GET" && new URL(request.url).pathname === "/worker/health"
      ? Promise.resolve(workerHealth(running?.health()))
      : app(request);
  const server = createServer(nodeHandler(handler));
  await new Promise<void>((resolve) => server.listen(options.port ?? 8787, options.host ?? "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  return {
    url: `http://${options.host ?? "127.0.0.1"}:${address.port}`,
    server,
    workerHealth: () => running?.health(),
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      // The worker's turns get its grace, then are handed back for another server to finish.
      stopWorker.abort();
      await worker;
      await agent.close();
    },
  };
}

/** The worker's health for `GET /worker/health`: 200 while the store answers, 503 while it is retrying or stopped; error codes, never messages. */
function workerHealth(h: WorkerHealth | undefined): Response {
  if (!h) return Response.json({ state: "off" });
  const body = {
    state: h.state,
    lastPollAt: h.lastPollAt ?? null,
    consecutiveFailures: h.consecutiveFailures,
    backoffMs: h.backoffMs,
    ...(h.failingSince !== undefined ? { failingSince: h.failingSince } : {}),
    ...(h.lastError ? { lastError: h.lastError.code } : {}),
    finished: h.report.finished,
    failed: h.report.failed,
  };
  return Response.json(body, { status: h.state === "ok" || h.state === "starting" ? 200 : 503 });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const here = dirname(fileURLToPath(import.meta.url));
  const model = process.env.KEEL_MODEL;
  const page = process.env.CHAT_UI_DIR ?? join(here, "..", "chat-ui", "dist");
  const { url, close } = await startServer({
    home: process.env.KEEL_HOME ?? join(here, ".keel"),
    provider: model ? resolveModel(model) : offlineModel,
    port: Number(process.env.PORT ?? 8787),
    host: process.env.HOST ?? "127.0.0.1",
    ...(process.env.DEPLOY_STEP_MS ? { stepMs: Number(process.env.DEPLOY_STEP_MS) } : {}),
    ...(process.env.WORKER === "0" ? { worker: false } : {}),
    ...(process.env.LEASE_TTL_MS ? { leaseTtlMs: Number(process.env.LEASE_TTL_MS) } : {}),
    ...(process.env.MAX_COST_USD ? { limits: { maxCostUsd: Number(process.env.MAX_COST_USD) } } : {}),
    ...(existsSync(page) ? { staticDir: page } : {}),
  });
  process.stdout.write(`release assistant listening on ${url} (${model ?? 'offline model: try "deploy v1.4.2"'})\n`);
  for (const signal of ["SIGINT", "SIGTERM"] as const)
    process.once(signal, () => void close().then(() => process.exit(0)));
}
