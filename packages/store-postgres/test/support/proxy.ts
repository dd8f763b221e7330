/**
 * A TCP proxy in front of the test PostgreSQL server, to take "the database" away without
 * stopping the server other tests share: `down()` destroys every live connection (the
 * backends are gone, as when they are killed) and refuses new ones until `up()`; `reset()`
 * only destroys the live connections (a mass pg_terminate_backend).
 */
import { createServer, Socket } from "node:net";
import type { Server } from "node:net";
import { PG_URL } from "./pg.ts";

export interface PgProxy {
  /** PG_URL through the proxy. */
  url: string;
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  down(): Promise<void>;
  up(): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

/** Start a proxy to PG_URL's host and port on a free local port. */
export async function startPgProxy(): Promise<PgProxy> {
  const target = new URL(PG_URL);
  const host = target.hostname || "127.0.0.1";
  const targetPort = Number(target.port || 5432);
  const sockets = new Set<Socket>();
  let accepted = 0;
  let server: Server | undefined;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        accepted++;
        const upstream = new Socket();
        sockets.add(client);
        sockets.add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on("error", drop).on("close", drop);
        upstream.on("error", drop).on("close", drop);
        upstream.connect(targetPort, host, () => {
          client.pipe(upstream);
          upstream.pipe(client);
        });
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        port = (s.address() as { port: number }).port;
        server = s;
        resolve();
      });
    });
  const reset = () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  const down = async () => {
    const s = server;
    server = undefined;
    reset();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  };
  await listen();
  const url = new URL(PG_URL);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    port,
    accepted: () => accepted,
    down,
    up: async () => {
      if (!server) await listen();
    },
    reset,
    close: down,
  };
}

/** The error a query gets when its backend is terminated under it (pg_terminate_backend, SQLSTATE 57P01). */
export async function terminatedQueryError(): Promise<unknown> {
  const { default: pg } = await import("pg");
  const victim = new pg.Client({ connectionString: PG_URL });
  victim.on("error", () => undefined);
  await victim.connect();
  const killer = new pg.Client({ connectionString: PG_URL });
  await killer.connect();
  try {
    const { rows } = await victim.query("SELECT pg_backend_pid() AS pid");
    const pending = victim.query("SELECT pg_sleep(5)").catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 100));
    await killer.query("SELECT pg_terminate_backend($1)", [(rows[0] as { pid: number }).pid]);
    return await pending;
  } finally {
    await killer.end();
    await victim.end().catch(() => undefined);
  }
}

/** The error of a statement PostgreSQL rejects (a syntax error, SQLSTATE 42601). */
export async function syntaxError(): Promise<unknown> {
  const { default: pg } = await import("pg");
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    return await c.query("SELEC 1").catch((e: unknown) => e);
  } finally {
    await c.end();
  }
}
