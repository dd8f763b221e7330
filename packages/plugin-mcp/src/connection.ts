import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/** The MCP SDK, loaded when the first server connects (an agent without servers never loads it). */
type Sdk = {
  Client: typeof import("@modelcontextprotocol/sdk/client/index.js").Client;
  StdioClientTransport: typeof import("@modelcontextprotocol/sdk/client/stdio.js").StdioClientTransport;
  StreamableHTTPClientTransport: typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPClientTransport;
  getDefaultEnvironment: typeof import("@modelcontextprotocol/sdk/client/stdio.js").getDefaultEnvironment;
  codec: StdioCodec;
  types: typeof import("@modelcontextprotocol/sdk/types.js");
};
let sdkLoading: Promise<Sdk> | undefined;
let loaded: Sdk | undefined;
function sdk(): Promise<Sdk> {
  sdkLoading ??= Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/types.js"),
    import("@modelcontextprotocol/sdk/shared/stdio.js"),
  ]).then(
    ([c, s, h, types, io]) =>
      (loaded = {
        Client: c.Client,
        StdioClientTransport: s.StdioClientTransport,
        StreamableHTTPClientTransport: h.StreamableHTTPClientTransport,
        getDefaultEnvironment: s.getDefaultEnvironment,
        codec: { ReadBuffer: io.ReadBuffer, serializeMessage: io.serializeMessage },
        types,
      }),
    (err: unknown) => {
      // An optional peer: a project with MCP servers installs it. Loaded again on the next connect.
      sdkLoading = undefined;
      throw sdkMissing(err) ?? err;
    },
  );
  return sdkLoading;
}

/** KEEL_PACKAGE_MISSING naming the MCP SDK when `err` is Node's "no such package" for it; else undefined. */
function sdkMissing(err: unknown): KeelError | undefined {
  const pkg = missingPackageOf(err, ["@modelcontextprotocol/sdk"]);
  return pkg === undefined
    ? undefined
    : packageMissing(pkg, "The mcp plugin's MCP servers (`servers`)", { plugin: "@keel/plugin-mcp" }, err);
}
type RpcCode = "RequestTimeout" | "ConnectionClosed" | "InvalidParams" | "MethodNotFound" | "InvalidRequest";
const isMcpError = (err: unknown, ...codes: RpcCode[]): boolean =>
  !!loaded && err instanceof loaded.types.McpError && codes.some((c) => err.code === loaded!.types.ErrorCode[c]);
const isAnyMcpError = (err: unknown): boolean => !!loaded && err instanceof loaded.types.McpError;
/**
 * What a failure to reach a host over the network says (undici, Node's net/dns/tls, Python's
 * requests/httpx); urllib3's "Max retries exceeded" only when the retries were not for error
 * answers (ResponseError: the host was reached, e.g. 429s).
 */
const NETWORK =
  /\bfetch failed|\bENOTFOUND\b|\bEAI_AGAIN\b|\bECONNREFUSED\b|\bECONNRESET\b|\bETIMEDOUT\b|\bEHOSTUNREACH\b|\bENETUNREACH\b|getaddrinfo|socket hang up|UND_ERR_CONNECT|certificate has expired|self[- ]signed certificate|unable to verify the first certificate|Name or service not known|Temporary failure in name resolution|Connection refused|Max retries exceeded(?![\s\S]*Caused by ResponseError)|\bConnectError|\bConnectTimeout|network is unreachable/i;
import { type KeelError, missingPackageOf, packageMissing } from "@keel/kernel";
import { z } from "zod";
import type { McpCallResult } from "./results.ts";
import type { McpServerConfig } from "./options.ts";
import { tailOf } from "@keel/text";
import { DEFAULT_STOP_GRACE_MS, PROCESS_GROUPS, ServerProcess, type StdioCodec } from "./child.ts";

/**
 * Proxy and certificate variables an MCP server inherits by default (both cases of the proxy
 * names, as tools read either): without them `npx` and HTTP clients behind a proxy stall.
 */
export const INHERITED_NETWORK_ENV: readonly string[] = [
  ...["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"].flatMap((k) => [k, k.toLowerCase()]),
  "NODE_EXTRA_CA_CERTS",
  "NODE_USE_ENV_PROXY",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
  "GIT_SSL_CAINFO",
  "npm_config_proxy",
  "npm_config_https_proxy",
  "npm_config_noproxy",
  "npm_config_registry",
  "npm_config_cafile",
  "npm_config_strict_ssl",
];

/** The variables of `from` a server inherits under `setting`. Contract: only names set in `from`; never anything for `false`. */
export function inheritedEnv(setting: boolean | readonly string[], from: NodeJS.ProcessEnv): Record<string, string> {
  if (setting === false) return {};
  const names = setting === true ? INHERITED_NETWORK_ENV : [...INHERITED_NETWORK_ENV, ...setting];
  const out: Record<string, string> = {};
  for (const k of names) if (typeof from[k] === "string") out[k] = from[k];
  return out;
}

/** A tool as an MCP server lists it. Contract: `name` is non-empty; `inputSchema` is as sent (normalised later). */
export interface McpToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
}

/** Where a server connection is in its life. Contract: `closed` is final; `failed` is final for Streamable HTTP and after the last restart. */
export type ServerState = "idle" | "connecting" | "ready" | "restarting" | "failed" | "closed";

/**
 * Why a call failed.
 * Contract: one value per failure; `crashed`: the transport closed during the call; `rejected`:
 * the server refused the request as invalid (JSON-RPC invalid params, unknown method or tool);
 * `upstream`: the server answered with an error saying it could not reach a host over the
 * network; `protocol_error`: any other error answer; `unavailable`: the server is not connected
 * or could not be reached.
 */
export type CallFailure =
  | "timeout"
  | "cancelled"
  | "crashed"
  | "protocol_error"
  | "rejected"
  | "upstream"
  | "unavailable";

/** A call that did not produce a result. Contract: `kind` says why; `message` is for the model. */
export class McpCallError extends Error {
  readonly kind: CallFailure;
  constructor(kind: CallFailure, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "McpCallError";
    this.kind = kind;
  }
}

/** Settings a connection needs beyond its server config. Contract: the restart delay is min(maxDelayMs, baseDelayMs x 2^n). */
export interface ConnectionSettings {
  clientName: string;
  clientVersion: string;
  connectTimeoutMs: number;
  restart: { maxAttempts: number; baseDelayMs: number; maxDelayMs: number };
  /** How long a stdio server has to exit after its stdin closes, and again after SIGTERM (default DEFAULT_STOP_GRACE_MS). */
  stopGraceMs?: number;
}

const STDERR_TAIL = 4_000;
const MAX_PAGES = 1_000;

/**
 * One MCP server: its transport, client, cached tool list and restarts.
 * Contract: `connect` never leaves a child process behind when it fails (it is ended in the
 * background: stdin closed, then SIGTERM, then SIGKILL, `stopGraceMs` apart); a stdio server
 * that exits while ready is restarted with exponential backoff up to `restart.maxAttempts`;
 * calls in flight when it exits fail with kind `crashed`; `close` stops restarts and resolves
 * once every child process this connection started (its process group on POSIX) has ended.
 */
export class McpServerConnection {
  readonly key: string;
  readonly config: McpServerConfig;
  state: ServerState = "idle";
  tools: McpToolInfo[] = [];
  instructions: string | undefined;
  /** Last characters the server wrote to stderr (stdio only). */
  stderrTail = "";
  /** The buffer limit a message from the server exceeded (the SDK then closed the connection). */
  #oversize: number | undefined;
  lastError: string | undefined;
  /** Restarts since the last successful call. */
  restarts = 0;
  /** Bumped whenever the tool list changes. */
  toolsVersion = 0;
  onToolsChanged: (() => void) | undefined;
  onCrash: ((message: string) => void) | undefined;

  #settings: ConnectionSettings;
  #client: Client | undefined;
  #transport: Transport | undefined;
  #connecting: Promise<void> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Every stdio child process this connection started (across restarts): close waits until each has ended. */
  #processes = new Set<ServerProcess>();

  constructor(key: string, config: McpServerConfig, settings: ConnectionSettings) {
    this.key = key;
    this.config = config;
    this.#settings = settings;
  }

  /** The child process id (stdio, while connected). */
  get pid(): number | undefined {
    const t = this.#transport;
    if (t instanceof ServerProcess) return t.pid;
    return loaded && t instanceof loaded.StdioClientTransport ? (t.pid ?? undefined) : undefined;
  }

  /** Connect (once; concurrent callers share the attempt). Rejects with a message that names the server and carries the stderr tail. */
  connect(): Promise<void> {
    if (this.state === "ready") return Promise.resolve();
    if (this.state === "closed") return Promise.reject(new Error(`MCP server "${this.key}" is closed.`));
    this.#connecting ??= this.#open().finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  async #open(): Promise<void> {
    this.state = "connecting";
    const timeout = this.config.connectTimeoutMs ?? this.#settings.connectTimeoutMs;
    const m = await sdk();
    // Closed while the SDK loaded: spawn nothing.
    if ((this.state as ServerState) === "closed") throw new Error(`MCP server "${this.key}" is closed.`);
    const client = new m.Client(
      { name: this.#settings.clientName, version: this.#settings.clientVersion },
      { capabilities: {} },
    );
    const transport = this.#makeTransport(m);
    client.setNotificationHandler(m.types.ToolListChangedNotificationSchema, () => void this.refresh().catch(() => {}));
    client.onclose = () => this.#closed(client);
    // The SDK's stdio reader drops the connection on a message over its buffer limit (10 MB): say so, not "exited".
    client.onerror = (err) => {
      const m = /exceeded maximum size of (\d+) bytes/.exec(String((err as { message?: unknown })?.message ?? err));
      if (m) this.#oversize = Number(m[1]);
    };
    this.#oversize = undefined;
    this.#client = client;
    this.#transport = transport;
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(new Error(`no answer within ${timeout} ms`)), timeout);
    try {
      await client.connect(transport, { signal: ctrl.signal, timeout });
      this.instructions = client.getInstructions();
      this.tools = await listAllTools(client, { signal: ctrl.signal, timeout });
      this.toolsVersion++;
      if (this.state !== "connecting")
        throw new Error(this.lastError ?? "the server closed the connection during the handshake");
      this.state = "ready";
      this.lastError = undefined;
    } catch (err) {
      this.lastError = ctrl.signal.aborted ? `no answer within ${timeout} ms` : describe(err);
      this.#client = undefined;
      this.#transport = undefined;
      if ((this.state as ServerState) !== "closed") this.state = "failed";
      // Not waited for: the failure is reported now; the child ends within about 2 × stopGraceMs (close waits for it).
      void client.close().catch(() => {});
      throw new Error(`MCP server "${this.key}" failed to start: ${this.lastError}`);
    } finally {
      clearTimeout(timer);
    }
  }

  #makeTransport(m: Sdk): Transport {
    const c = this.config;
    if ("url" in c)
      return new m.StreamableHTTPClientTransport(
        new URL(c.url),
        c.headers ? { requestInit: { headers: c.headers } } : {},
      );
    const env = { ...inheritedEnv(c.inheritEnv ?? true, process.env), ...c.env };
    // POSIX: Keel's own transport, which starts the server in a process group of its own and
    // ends the whole group, on close and at process exit (child.ts). Windows has no process
    // groups, and the SDK's spawn resolves `npx.cmd`: its transport and its own close there.
    const t = PROCESS_GROUPS
      ? new ServerProcess({
          command: c.command,
          args: c.args,
          env: { ...m.getDefaultEnvironment(), ...env },
          cwd: c.cwd,
          stopGraceMs: this.#settings.stopGraceMs ?? DEFAULT_STOP_GRACE_MS,
          codec: m.codec,
        })
      : new m.StdioClientTransport({
          command: c.command,
          args: c.args,
          stderr: "pipe",
          ...(Object.keys(env).length ? { env } : {}),
          ...(c.cwd ? { cwd: c.cwd } : {}),
        });
    if (t instanceof ServerProcess) {
      this.#processes.add(t);
      void t.ended.then(() => this.#processes.delete(t));
    }
    t.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = tailOf(this.stderrTail + chunk.toString("utf8"), STDERR_TAIL);
    });
    return t;
  }

  /** The transport closed: intended (close), during connect, or a crash. */
  #closed(client: Client): void {
    if (client !== this.#client) return;
    this.#client = undefined;
    this.#transport = undefined;
    if (this.state === "closed") return;
    if (this.state === "connecting") {
      this.lastError = `the server exited during the handshake${this.stderrTail ? "" : " (no stderr output)"}`;
      this.state = "failed";
      return;
    }
    if (this.state !== "ready") return;
    this.lastError = "the server exited or closed the connection";
    this.onCrash?.(this.lastError);
    this.#scheduleRestart();
  }

  #scheduleRestart(): void {
    const { maxAttempts, baseDelayMs, maxDelayMs } = this.#settings.restart;
    if (this.restarts >= maxAttempts || "url" in this.config) {
      this.state = "failed";
      return;
    }
    const delay = Math.min(maxDelayMs, baseDelayMs * 2 ** this.restarts);
    this.restarts++;
    this.state = "restarting";
    this.#connecting = new Promise<void>((resolve, reject) => {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        if (this.state === "closed") return reject(new Error(`MCP server "${this.key}" is closed.`));
        this.#open().then(resolve, (err: unknown) => {
          if (this.state === "failed") this.#scheduleRestart();
          reject(err);
        });
      }, delay);
    }).finally(() => (this.#connecting = undefined));
    this.#connecting.catch(() => {});
  }

  /** Re-read the whole tool list (all pages). */
  async refresh(): Promise<void> {
    const client = this.#client;
    if (!client || this.state !== "ready") return;
    this.tools = await listAllTools(client, { timeout: this.#settings.connectTimeoutMs });
    this.toolsVersion++;
    this.onToolsChanged?.();
  }

  /**
   * Call a tool. Contract: resolves with the server's result (also `isError` ones); rejects
   * only with McpCallError; on timeout or abort the SDK sends notifications/cancelled.
   */
  async callTool(
    name: string,
    args: unknown,
    options: { signal: AbortSignal; timeoutMs: number },
  ): Promise<McpCallResult> {
    const { signal, timeoutMs } = options;
    if (this.state === "restarting" || this.state === "connecting") {
      try {
        await raceSignal(this.#connecting ?? Promise.resolve(), signal, timeoutMs);
      } catch {
        // fall through to the state check
      }
    }
    const client = this.#client;
    if (!client || this.state !== "ready") {
      throw new McpCallError(
        "unavailable",
        `MCP server "${this.key}" is not connected (${this.state}${this.lastError ? `: ${this.lastError}` : ""}).`,
      );
    }
    const t0 = performance.now();
    try {
      const result = (await client.callTool({ name, arguments: (args ?? {}) as Record<string, unknown> }, undefined, {
        signal,
        timeout: timeoutMs,
        maxTotalTimeout: timeoutMs,
      })) as McpCallResult;
      this.restarts = 0;
      return result;
    } catch (err) {
      if (signal.aborted)
        throw new McpCallError("cancelled", `The call to "${name}" on "${this.key}" was cancelled.`, { cause: err });
      // The SDK's timer, not a -32001 the server answered with early (codes -32000..-32099 are the server's to use).
      if (isMcpError(err, "RequestTimeout") && performance.now() - t0 >= timeoutMs - 5)
        throw new McpCallError(
          "timeout",
          `"${name}" on MCP server "${this.key}" did not answer within ${timeoutMs} ms; the call was cancelled.`,
          { cause: err },
        );
      if ((isMcpError(err, "ConnectionClosed") || client !== this.#client) && this.#oversize !== undefined) {
        throw new McpCallError(
          "crashed",
          `MCP server "${this.key}" answered the call to "${name}" with a message over the MCP SDK's limit of ${this.#oversize} bytes, so the connection was dropped; the server is being restarted. Ask for less (a narrower query, a page, a range).`,
          { cause: err },
        );
      }
      if (isMcpError(err, "ConnectionClosed") || client !== this.#client) {
        throw new McpCallError(
          "crashed",
          `MCP server "${this.key}" exited during the call to "${name}"; it is being restarted.${this.stderrTail ? ` Its stderr ends with: ${tailOf(this.stderrTail, 500).trim()}` : ""}`,
          { cause: err },
        );
      }
      const why = describe(err);
      if (isMcpError(err, "InvalidParams", "MethodNotFound", "InvalidRequest"))
        throw new McpCallError(
          "rejected",
          `MCP server "${this.key}" refused the call to "${name}" as invalid: ${why}`,
          { cause: err },
        );
      if (NETWORK.test(why)) {
        if (isAnyMcpError(err))
          throw new McpCallError(
            "upstream",
            `MCP server "${this.key}" could not reach the service behind "${name}": ${why}`,
            { cause: err },
          );
        throw new McpCallError(
          "unavailable",
          `MCP server "${this.key}" could not be reached over the network for "${name}": ${why}`,
          { cause: err },
        );
      }
      throw new McpCallError(
        "protocol_error",
        `MCP server "${this.key}" answered the call to "${name}" with an error: ${why}`,
        { cause: err },
      );
    }
  }

  /** Close the client and end the child process; no restart follows. */
  async close(): Promise<void> {
    this.state = "closed";
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const client = this.#client;
    this.#client = undefined;
    this.#transport = undefined;
    if (client) await client.close().catch(() => {});
    // Those of failed starts and crashes too (a crashed server's leftovers in its group are being ended).
    const processes = [...this.#processes];
    this.#processes.clear();
    await Promise.all(processes.map((p) => p.close()));
  }
}

/** tools/list read loosely: one malformed tool must not hide a server's other tools. */
const LooseToolList = z.looseObject({
  tools: z.array(z.unknown()),
  nextCursor: z.string().optional(),
});

async function listAllTools(
  client: Client,
  options: { signal?: AbortSignal; timeout: number },
): Promise<McpToolInfo[]> {
  const out: McpToolInfo[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const res = await client.request(
      { method: "tools/list", params: cursor ? { cursor } : {} },
      LooseToolList,
      options,
    );
    for (const raw of res.tools) {
      const t = raw as Partial<Record<keyof McpToolInfo, unknown>>;
      if (typeof t?.name !== "string" || !t.name) continue;
      out.push({
        name: t.name,
        ...(typeof t.title === "string" && t.title ? { title: t.title } : {}),
        ...(typeof t.description === "string" && t.description ? { description: t.description } : {}),
        inputSchema: t.inputSchema,
      });
    }
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  return out;
}

/** The error's message with up to three causes (undici's "fetch failed" says why only in its cause). */
function describe(err: unknown, depth = 0): string {
  if (!(err instanceof Error)) return String(err);
  const cause = depth < 3 && err.cause !== undefined && err.cause !== err ? describe(err.cause, depth + 1) : "";
  return cause && !err.message.includes(cause) ? `${err.message} (cause: ${cause})` : err.message;
}

/** `p`, unless `signal` aborts or `ms` pass first (then it rejects). */
export function raceSignal<T>(p: Promise<T>, signal: AbortSignal, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => done(() => reject(new Error("timeout"))), ms);
    const onAbort = () => done(() => reject(signal.reason));
    const done = (f: () => void) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      f();
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => done(() => resolve(v)),
      (e: unknown) => done(() => reject(e)),
    );
  });
}
