/**
 * Where an agent keeps its data: one rule for the session log and every plugin's store. The
 * `store` createAgent is given wins (a SessionStore, "sqlite" or a postgres:// URL), else
 * KEEL_DATABASE_URL, else SQLite files in the agent's home. Plugins are told the result
 * (PluginSetupContext.storage), so two agents in one process with their own homes or databases
 * never share a plugin's file.
 */
import type { AgentStorage, DigestSeam, SessionStore, TokenCounter } from "@keel/kernel";
import { codePointSlice, KeelError } from "@keel/kernel";
import { MemorySessionStore } from "./memory-store.ts";

/** Environment variables, where the runtime has them (Node's process.env; none in a browser). */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * What only a runtime with a file system and a process has: the home folder, the SQLite store,
 * the o200k counter. `@keel/agent/node` installs Node's (useHostRuntime); createAgent on Node
 * loads it by itself.
 * Contract: `resolveHome` returns an absolute path; `sqlite` opens nothing before it is called.
 */
export interface HostRuntime {
  readonly name: string;
  defaultHome(env: Env): string;
  resolveHome(home: string): string;
  sqlite(home: string): SessionStore;
  tokenCounter(): TokenCounter;
  /** Request digests of content as the log stores it (secrets redacted). */
  readonly digest?: DigestSeam;
  /** The full connection-credential masker for error messages. */
  readonly maskCredentials?: (text: string) => string;
}

let installed: HostRuntime | undefined;

/** Contract: createAgent uses `runtime` from now on, in this process (the Node entry calls it when loaded). */
export function useHostRuntime(runtime: HostRuntime): void {
  installed = runtime;
}

const proc = (globalThis as { process?: { versions?: { node?: string }; env?: Env } }).process;
/** The Node entry, loaded by name so a bundle for a browser or a Worker never includes it. */
const NODE_ENTRY = "@keel/agent/node";

/**
 * Whether this runtime may load the Node entry. workerd with `nodejs_compat` sets
 * `process.versions.node` too but has no file system nor node:sqlite, and its bundle never
 * holds the entry; it names itself in `navigator.userAgent` ("Cloudflare-Workers"). Anything
 * else with a Node version (Node, a DOM emulation such as jsdom running on it, Deno and Bun,
 * which run Node packages) loads it.
 */
function onNode(): boolean {
  if (!proc?.versions?.node) return false;
  return (globalThis as { navigator?: { userAgent?: unknown } }).navigator?.userAgent !== "Cloudflare-Workers";
}

/** What an application bundled with @keel/agent inside it does so the bundle carries the Node entry. */
const IMPORT_NODE_ENTRY = `Import it once in the application's entry (import "${NODE_ENTRY}") so a bundler includes it.`;

/**
 * The runtime createAgent uses: the one installed, else, on Node, the Node entry's (loaded now),
 * else none (a Worker, a browser: the in-memory store, no home folder, estimated token counts).
 * Contract: on Node, a runtime or KEEL_STORE_FAILED, never none: an application bundled with
 * @keel/agent inside it finds the entry missing, or loads another copy of the host from
 * node_modules, which installs its runtime into that copy; either is said, with the import
 * that fixes it.
 */
export async function hostRuntime(): Promise<HostRuntime | undefined> {
  if (installed || !onNode()) return installed;
  await load(NODE_ENTRY, "createAgent on Node", IMPORT_NODE_ENTRY);
  if (!installed)
    throw new KeelError(
      "KEEL_STORE_FAILED",
      `createAgent on Node loaded ${NODE_ENTRY}, from another copy of @keel/agent than this one (as when this one is bundled into the application and that one is installed in node_modules), so its runtime is not this copy's: one process takes one copy of the host and the kernel. ${IMPORT_NODE_ENTRY}`,
      { path: "store" },
    );
  return installed;
}

/** This runtime's environment variables (none outside Node). */
export function runtimeEnv(): Env {
  return proc?.env ?? {};
}

/**
 * The store an agent writes to, whether it opens it (and closes it), and what its plugins are told.
 * The stores are packages of their own (@keel/store-sqlite through the Node runtime,
 * @keel/store-postgres loaded by name on first use): this is the one place the host reaches one,
 * only when createAgent was not given a store (its composition root).
 * Contract: `open()` creates nothing on disk before it is called (an agent whose plugin setup
 * fails leaves no file behind); it returns the same store every time.
 */
export interface ResolvedStorage {
  open(): SessionStore;
  owns: boolean;
  storage: AgentStorage;
}

const POSTGRES = /^postgres(ql)?:\/\/\S+$/i;

/**
 * Resolve an agent's stores. Contract: a SessionStore given is used as it is; a string (or, when
 * none is given, KEEL_DATABASE_URL) must be "sqlite" or a postgres:// URL, else
 * KEEL_AGENT_OPTIONS_INVALID at `store` naming where it came from and quoting only its scheme;
 * PostgreSQL needs @keel/store-postgres installed (KEEL_STORE_FAILED saying so otherwise).
 * `runtime` omitted (or undefined) is the installed one (useHostRuntime); without any, "sqlite"
 * is refused and no store given means an in-memory log.
 */
export async function resolveStorage(
  options: { store?: SessionStore | string; home?: string },
  env: Env = runtimeEnv(),
  runtime: HostRuntime | undefined = installed,
): Promise<ResolvedStorage> {
  const home = runtime ? runtime.resolveHome(options.home ?? runtime.defaultHome(env)) : (options.home ?? "");
  if (options.store !== undefined && typeof options.store !== "string") {
    const given = options.store;
    return { open: () => given, owns: false, storage: { home, database: given.database ?? { kind: "sqlite" } } };
  }
  const fromOptions = typeof options.store === "string";
  const value = (fromOptions ? (options.store as string) : env.KEEL_DATABASE_URL)?.trim();
  if (!value || value === "sqlite") {
    if (!runtime && value === "sqlite")
      throw new KeelError(
        "KEEL_AGENT_OPTIONS_INVALID",
        `The SQLite store needs Node (node:sqlite); this runtime has none. Pass createAgent a store (new MemorySessionStore() keeps a short-lived agent in memory).`,
        { path: "store" },
      );
    let store: SessionStore | undefined;
    return {
      // Without a runtime (a Worker, a browser tab) the log lives as long as the agent does.
      open: () => (store ??= runtime ? runtime.sqlite(home) : new MemorySessionStore()),
      owns: true,
      storage: { home, database: { kind: "sqlite" } },
    };
  }
  const source = fromOptions ? "createAgent's `store`" : "KEEL_DATABASE_URL";
  if (!POSTGRES.test(value))
    throw new KeelError(
      "KEEL_AGENT_OPTIONS_INVALID",
      `${source} must be a SessionStore, "sqlite" or a postgres:// URL; it starts with ${JSON.stringify(/^[a-z][a-z0-9+.-]*:/i.exec(value)?.[0] ?? codePointSlice(value, 0, 1))}.`,
      { path: "store" },
    );
  const schema = env.KEEL_DATABASE_SCHEMA?.trim() || undefined;
  const pg = (await load(
    "@keel/store-postgres",
    source,
    "Install it beside @keel/agent, or pass createAgent a store.",
  )) as {
    PostgresSessionStore: new (o: { url: string; schema?: string }) => SessionStore;
  };
  // Connects on first use: nothing is opened before the plugins are set up.
  const store = new pg.PostgresSessionStore({ url: value, ...(schema ? { schema } : {}) });
  return {
    open: () => store,
    owns: true,
    storage: { home, database: store.database ?? { kind: "postgres", url: value, ...(schema ? { schema } : {}) } },
  };
}

/** A package loaded on first use, by a name a bundler does not follow (the Node entry, the PostgreSQL store). */
async function load(name: string, what: string, remedy: string): Promise<unknown> {
  try {
    return await import(name);
  } catch (err) {
    throw new KeelError(
      "KEEL_STORE_FAILED",
      `${what} needs ${name}, which could not be loaded (${(err as Error)?.message ?? String(err)}). ${remedy}`,
      { path: "store" },
      { cause: err },
    );
  }
}
