/**
 * `keel serve`: the config's agent served to other agents and clients until Ctrl-C, as an MCP
 * server (`--mcp`: stdio, or Streamable HTTP with `--http`) or an A2A endpoint (`--a2a`).
 * Loopback by default; another host needs a bearer token; callers' sessions are their own
 * (owners in `<home>/serve.sqlite`).
 */
import { join } from "node:path";
import { Writable } from "node:stream";
import type { Agent } from "@keel/agent";
import { isKeelError, KeelError } from "@keel/kernel";
import { headOf } from "@keel/text";
import type { Bind } from "@keel/serve";
import { resolveBind, SessionOwners } from "@keel/serve";
import { stopSignal } from "./exit.ts";
import type { CliEnv } from "./stdio.ts";
import { cliVersion } from "./version.ts";

/** The flags `keel serve` reads. */
export interface ServeFlags {
  mcp?: boolean | undefined;
  a2a?: boolean | undefined;
  http?: boolean | undefined;
  port?: string | undefined;
  host?: string | undefined;
  token?: string | undefined;
}

/** Runs `fn` with the config's agent as `keel run` builds it (and closes it after). */
export type WithAgent = (fn: (agent: Agent, home: string) => Promise<number>) => Promise<number>;

function usage(problem: string): KeelError {
  return new KeelError("KEEL_CLI_USAGE", problem);
}

/** Check the flags before the agent is built: a refused bind never starts an agent. */
function checkFlags(rest: readonly string[], f: ServeFlags, env: NodeJS.ProcessEnv): Bind | undefined {
  if (rest.length) throw usage(`keel serve takes no arguments (got "${headOf(rest.join(" "), 60)}").`);
  if (!f.mcp && !f.a2a)
    throw usage("keel serve needs --mcp (an MCP server: stdio, or --http) or --a2a (an A2A endpoint).");
  if (f.mcp && f.a2a) throw usage("keel serve serves --mcp or --a2a, not both: start two.");
  if (f.http && !f.mcp) throw usage("--http is an option of keel serve --mcp.");
  const networked = f.a2a || f.http;
  if (!networked && (f.port !== undefined || f.host !== undefined || f.token !== undefined))
    throw usage(
      `${f.port !== undefined ? "--port" : f.host !== undefined ? "--host" : "--token"} needs --http: keel serve --mcp alone speaks stdio.`,
    );
  if (!networked) return undefined;
  const port = f.port === undefined ? 0 : Number(f.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw usage(`--port takes a port number, 0 to 65535 (got "${headOf(f.port ?? "", 20)}").`);
  return resolveBind({ port, ...(f.host ? { host: f.host } : {}), ...(f.token ? { token: f.token } : {}) }, env);
}

/** Start a server; a port in use or an address that cannot be bound is a usage error naming the flag. */
async function listening<T>(bind: Bind, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (code === "EADDRINUSE")
      throw usage(`Port ${bind.port} on ${bind.host} is in use: pick another --port (or leave it out for a free one).`);
    if (code === "EADDRNOTAVAIL" || code === "EACCES" || code === "ENOTFOUND")
      throw usage(`Cannot listen on ${bind.host}:${bind.port} (${code}): check --host and --port.`);
    throw err;
  }
}

/** `keel serve`. Contract: returns 0 after Ctrl-C or the stdio client leaving, 143 after SIGTERM. */
export async function serveCommand(
  rest: readonly string[],
  flags: ServeFlags,
  io: CliEnv,
  withAgent: WithAgent,
): Promise<number> {
  const bind = checkFlags(rest, flags, io.env);
  // The protocol's SDK is the project's to install: a missing one is said before the agent is built.
  const { loadA2a, loadMcp } = await import("@keel/serve");
  try {
    await (flags.a2a ? loadA2a() : loadMcp());
  } catch (err) {
    if (isKeelError(err, "KEEL_PACKAGE_MISSING"))
      throw new KeelError(err.code, err.problem, { path: flags.a2a ? "--a2a" : "--mcp" }, { cause: err });
    throw err;
  }
  return withAgent(async (agent, home) => {
    const owners = new SessionOwners(join(home, "serve.sqlite"));
    const { stopped, off } = stopSignal();
    const note = (line: string) => io.err(`${line}\n`);
    try {
      let server: { close(): Promise<void>; closed?: Promise<void> };
      if (flags.a2a) {
        const { startA2a } = await import("@keel/serve");
        const s = await listening(bind!, () =>
          startA2a({ agent, owners, bind: bind!, tasksPath: join(home, "serve.sqlite") }),
        );
        server = s;
        io.err(
          `keel: A2A endpoint ${s.url} (JSON-RPC)\nkeel: agent card ${s.url}.well-known/agent-card.json\nkeel: ${bind!.tokens.length ? "callers send Authorization: Bearer <token>" : "loopback only, no token"}; Ctrl-C stops it\n`,
        );
      } else if (flags.http) {
        const { startMcpHttp } = await import("@keel/serve");
        const s = await listening(bind!, () =>
          startMcpHttp({ agent, owners, bind: bind!, note, version: cliVersion() }),
        );
        server = s;
        io.err(
          `keel: serving ${agent.name} over MCP (Streamable HTTP) at ${s.url}${bind!.tokens.length ? " (bearer token required)" : ""}; Ctrl-C stops it\n`,
        );
      } else {
        const { serveMcpStdio } = await import("@keel/serve");
        const stdout = new Writable({
          write(chunk: Buffer | string, _enc, done) {
            io.out(chunk.toString());
            done();
          },
        });
        server = await serveMcpStdio({ agent, owners, note, version: cliVersion(), stdin: io.stdin, stdout });
        io.err(`keel: serving ${agent.name} over MCP on stdio; Ctrl-C or the end of stdin stops it\n`);
      }
      const why = await Promise.race([
        stopped,
        server.closed?.then(() => "closed" as const) ?? new Promise<never>(() => {}),
      ]);
      await server.close();
      return why === "SIGTERM" ? 143 : 0;
    } finally {
      off();
      owners.close();
    }
  });
}
