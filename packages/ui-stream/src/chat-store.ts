/**
 * The default chat map of the handlers: each chat (useChat's `id`, AG-UI's `threadId`) of a
 * caller → its Keel session, kept where the agent keeps its sessions, so a chat outlives the
 * process as its session does: `<home>/chats.sqlite` beside the SQLite log, or a table in the
 * agent's PostgreSQL database and schema. The stores are loaded by name on first use, so a
 * bundle for a Worker or a browser (where the agent is in memory) never carries them.
 */
import type { Agent } from "@keel/agent";
import { MemorySessionStore } from "@keel/agent";
import { KeelError } from "@keel/kernel";
import type { ChatSessions } from "./http.ts";
import { memoryChatSessions } from "./http.ts";

/** Migrations of the chats table on PostgreSQL (entry i: version i → i + 1). Contract: never edited once released. */
export const CHAT_MIGRATIONS: readonly string[] = [
  `CREATE TABLE {s}.keel_chats (
     owner TEXT NOT NULL,
     chat_id TEXT NOT NULL,
     session_id TEXT NOT NULL,
     created_at BIGINT NOT NULL,
     PRIMARY KEY (owner, chat_id)
   );`,
];

/** Where agentChatSessions() keeps the map: `sqlite` (a file), `postgres` (a table) or `memory`. */
export type ChatStoreKind = "sqlite" | "postgres" | "memory";

/**
 * The chats of `agent`, kept in its own store.
 * Contract: SQLite (`<home>/chats.sqlite`, table `chats`) when the agent's sessions are in
 * SQLite files; the `keel_chats` table in the agent's database and schema when they are in
 * PostgreSQL; in memory only where the agent's sessions are (a MemorySessionStore, or a runtime
 * without a home folder). Opened on first use; a store that cannot open is KEEL_STORE_FAILED
 * naming the file or database (the request is a 500, the next one tries again). The first
 * mapping written wins, across processes too.
 */
export function agentChatSessions(agent: Agent): ChatSessions & { readonly kind: ChatStoreKind } {
  const kind: ChatStoreKind =
    agent.store instanceof MemorySessionStore || !agent.storage.home
      ? "memory"
      : agent.storage.database.kind === "postgres"
        ? "postgres"
        : "sqlite";
  let opened: Promise<ChatSessions> | undefined;
  const open = (): Promise<ChatSessions> => {
    opened ??= (
      kind === "memory"
        ? Promise.resolve(memoryChatSessions())
        : kind === "sqlite"
          ? sqliteChats(agent)
          : postgresChats(agent)
    ).catch((err: unknown) => {
      opened = undefined;
      throw err;
    });
    return opened;
  };
  return {
    kind,
    get: async (owner, chatId) => (await open()).get(owner, chatId),
    set: async (owner, chatId, sessionId) => (await open()).set(owner, chatId, sessionId),
  };
}

/** The chats a handler uses: those given, in memory when asked (`"memory"`), else the agent's own (agentChatSessions). */
export function chatsOf(options: { agent: Agent; chats?: ChatSessions | "memory" }): ChatSessions {
  if (options.chats === "memory") return memoryChatSessions();
  return options.chats ?? agentChatSessions(options.agent);
}

/** A package loaded on first use, by a name a bundler does not follow. */
async function load<T>(name: string): Promise<T> {
  try {
    return (await import(/* @vite-ignore */ name)) as T;
  } catch (err) {
    throw new KeelError(
      "KEEL_STORE_FAILED",
      `@keel/ui-stream keeps chats in the agent's store, which needs ${name}; it could not be loaded (${(err as Error)?.message ?? String(err)}). Install it beside @keel/ui-stream, or pass the handler \`chats\` ("memory" keeps them in this process only).`,
      { path: "chats" },
      { cause: err },
    );
  }
}

interface SqliteModule {
  openSqlite(path: string): {
    exec(sql: string): void;
    prepare(sql: string): { get(...a: unknown[]): unknown; run(...a: unknown[]): unknown };
  };
}

/** `<home>/chats.sqlite`: the same file and table examples/http-server kept, so its chats carry over. */
async function sqliteChats(agent: Agent): Promise<ChatSessions> {
  const [{ openSqlite }, { join }] = await Promise.all([
    load<SqliteModule>("@keel/store-sqlite"),
    load<{ join(...p: string[]): string }>("node:path"),
  ]);
  const db = openSqlite(join(agent.storage.home, "chats.sqlite"));
  db.exec(
    "CREATE TABLE IF NOT EXISTS chats (owner TEXT NOT NULL, chat_id TEXT NOT NULL, session_id TEXT NOT NULL, PRIMARY KEY (owner, chat_id))",
  );
  const get = db.prepare("SELECT session_id FROM chats WHERE owner = ? AND chat_id = ?");
  const set = db.prepare("INSERT OR IGNORE INTO chats (owner, chat_id, session_id) VALUES (?, ?, ?)");
  return {
    get: (owner, chatId) => (get.get(owner, chatId) as { session_id: string } | undefined)?.session_id,
    set: (owner, chatId, sessionId) => void set.run(owner, chatId, sessionId),
  };
}

interface PostgresModule {
  agentDatabase(storage: Agent["storage"]): unknown;
  registerMigrations(component: string, migrations: readonly string[]): void;
  PgComponent: new (
    target: unknown,
    component: string,
    migrations: readonly string[],
    code: string,
  ) => { query<R>(action: string, sql: string, params?: readonly unknown[]): Promise<R[]> };
}

/** The `keel_chats` table in the agent's PostgreSQL database and schema (its pool shared with the session log). */
async function postgresChats(agent: Agent): Promise<ChatSessions> {
  const pg = await load<PostgresModule>("@keel/store-postgres");
  pg.registerMigrations("ui-stream-chats", CHAT_MIGRATIONS);
  const db = new pg.PgComponent(
    pg.agentDatabase(agent.storage),
    "ui-stream-chats",
    CHAT_MIGRATIONS,
    "KEEL_STORE_FAILED",
  );
  return {
    get: async (owner, chatId) =>
      (
        await db.query<{ session_id: string }>(
          "read a chat's session from",
          "SELECT session_id FROM {s}.keel_chats WHERE owner = $1 AND chat_id = $2",
          [owner, chatId],
        )
      )[0]?.session_id,
    set: async (owner, chatId, sessionId) =>
      void (await db.query(
        "keep a chat's session in",
        "INSERT INTO {s}.keel_chats (owner, chat_id, session_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (owner, chat_id) DO NOTHING",
        [owner, chatId, sessionId, Date.now()],
      )),
  };
}
