/**
 * Which Keel session each useChat chat (or AG-UI thread) is, per caller, in `<home>/chats.sqlite`:
 * a chat survives a restart like its session does, and every process on the same home shares it.
 */
import { join } from "node:path";
import { openSqlite } from "@keel/store-sqlite";
import type { ChatSessions } from "@keel/ui-stream";

/** The chats of `home`. Contract: (owner, chat id) → session id; the first mapping written wins. */
export function sqliteChatSessions(home: string): ChatSessions & { close(): void } {
  const db = openSqlite(join(home, "chats.sqlite"));
  db.exec(
    "CREATE TABLE IF NOT EXISTS chats (owner TEXT NOT NULL, chat_id TEXT NOT NULL, session_id TEXT NOT NULL, PRIMARY KEY (owner, chat_id))",
  );
  const get = db.prepare("SELECT session_id FROM chats WHERE owner = ? AND chat_id = ?");
  const set = db.prepare("INSERT OR IGNORE INTO chats (owner, chat_id, session_id) VALUES (?, ?, ?)");
  return {
    get: (owner, chatId) => (get.get(owner, chatId) as { session_id: string } | undefined)?.session_id,
    set: (owner, chatId, sessionId) => void set.run(owner, chatId, sessionId),
    close: () => db.close(),
  };
}
