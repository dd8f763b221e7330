/**
 * `keel serve --a2a`: the configured agent as an A2A endpoint until Ctrl-C (or SIGTERM), on
 * 127.0.0.1 unless told otherwise (then only with a bearer token), each caller's sessions its own.
 */
import { join } from "node:path";
import { KeelError } from "@keel/kernel";
import type { Agent } from "@keel/kernel";
import { resolveBind, SessionOwners, startA2a } from "@keel/serve";
import type { Bind } from "@keel/serve";
import { EXIT_TERMINATED, exitNow, onSignal } from "./exit.ts";
import type { CliEnv } from "./stdio.ts";

/** The flags `keel serve` reads. */
export interface ServeFlags {
  a2a?: boolean;
  port?: string;
  host?: string;
  token?: string;
}

/**
 * Check the flags before the agent is built.
 * Contract: KEEL_CLI_USAGE without --a2a or with a bad port; KEEL_SERVE_TOKEN_REQUIRED for
 * another host without a token (flag or KEEL_SERVE_TOKEN).
 */
export function serveBind(flags: ServeFlags, rest: readonly string[], env: NodeJS.ProcessEnv): Bind {
  if (rest.length) throw new KeelError("KEEL_CLI_USAGE", `keel serve takes no arguments (got "${rest.join(" ")}").`);
  if (!flags.a2a) throw new KeelError("KEEL_CLI_USAGE", "keel serve needs what to serve: --a2a.");
  const port = flags.port === undefined ? 0 : Number(flags.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new KeelError("KEEL_CLI_USAGE", `--port takes a port number, 0 to 65535 (got "${flags.port}").`);
  return resolveBind(
    { port, ...(flags.host !== undefined ? { host: flags.host } : {}), ...(flags.token ? { token: flags.token } : {}) },
    env,
  );
}

/** Serve `agent` over A2A until a signal. Contract: SIGINT exits 0, SIGTERM 143, after the server closed. */
export async function serveA2a(agent: Agent, io: CliEnv, bind: Bind, home: string): Promise<number> {
  const db = join(home, "serve.sqlite");
  const owners = new SessionOwners(db);
  try {
    const server = await startA2a({ agent, owners, bind, tasksPath: db }).catch((err: NodeJS.ErrnoException) => {
      throw new KeelError(
        "KEEL_CLI_USAGE",
        err.code === "EADDRINUSE"
          ? `Port ${bind.port} on ${bind.host} is in use: pick another --port (or leave it out for a free one).`
          : `Cannot listen on ${bind.host}:${bind.port} (${err.code ?? err.message}): check --host and --port.`,
      );
    });
    let offSignals = () => {};
    const stopped = new Promise<"SIGINT" | "SIGTERM">((resolve) => {
      let stopping = false;
      offSignals = onSignal((signal) => {
        if (stopping)
          exitNow(signal, `keel: ${signal === "SIGTERM" ? "terminated" : "interrupted"} while stopping; exiting now\n`);
        stopping = true;
        resolve(signal);
      });
    });
    io.err(
      `keel: A2A endpoint ${server.url} (JSON-RPC)\nkeel: agent card ${server.url}.well-known/agent-card.json\nkeel: ${bind.tokens.length ? "callers send Authorization: Bearer <token>" : "loopback only, no token"}; Ctrl-C stops it\n`,
    );
    const signal = await stopped;
    try {
      await server.close();
    } finally {
      offSignals();
    }
    return signal === "SIGINT" ? 0 : EXIT_TERMINATED;
  } finally {
    owners.close();
  }
}
