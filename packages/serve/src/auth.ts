/**
 * Who may call a served agent, and whose sessions are whose: the bind rule (loopback unless a
 * bearer token is required), the request check (Host against DNS rebinding, the token compared
 * in constant time) and session ownership (a caller opens only the sessions it created).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { DatabaseSync } from "node:sqlite";
import { KeelError } from "@keel/kernel";
import type { Agent, Session } from "@keel/agent";

/** Where and how to listen, as given (flags, options). */
export interface BindOptions {
  /** Default 127.0.0.1. Any other address needs a token. */
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
  /** Bearer token(s) callers must send; default `KEEL_SERVE_TOKEN` (comma-separated for several callers). */
  token?: string | string[];
}

/** A checked bind. Contract: `tokens` is non-empty whenever `loopback` is false. */
export interface Bind {
  host: string;
  port: number;
  tokens: string[];
  loopback: boolean;
}

/** A request's caller: its principal (whose sessions it may open), or why it is refused. */
export type Caller = { ok: true; principal: string } | { ok: false; status: 401 | 421; message: string };

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1"]);
const MIN_TOKEN = 16;

/**
 * Check where a server may listen.
 * Contract: a non-loopback host without a token, or a token shorter than 16 characters, is
 * KEEL_SERVE_TOKEN_REQUIRED before anything listens.
 */
export function resolveBind(options: BindOptions, env: NodeJS.ProcessEnv = process.env): Bind {
  // "[::1]" is how an IPv6 host is written in a URL; listen() wants it bare.
  const host = (options.host ?? "127.0.0.1").replace(/^\[(.*)\]$/, "$1");
  const given = options.token ?? env.KEEL_SERVE_TOKEN ?? "";
  const tokens = (Array.isArray(given) ? given : given.split(",")).map((t) => t.trim()).filter(Boolean);
  const loopback = LOOPBACK.has(host);
  if (!loopback && !tokens.length)
    throw new KeelError(
      "KEEL_SERVE_TOKEN_REQUIRED",
      `Serving on ${host} reaches other machines: pass --token (or set KEEL_SERVE_TOKEN) so only callers holding it get in, or bind 127.0.0.1.`,
      { path: "--host" },
    );
  const short = tokens.find((t) => [...t].length < MIN_TOKEN);
  if (short !== undefined)
    throw new KeelError(
      "KEEL_SERVE_TOKEN_REQUIRED",
      `A serve token must have at least ${MIN_TOKEN} characters (one has ${[...short].length}); use e.g. \`openssl rand -base64 32\`.`,
      { path: "--token" },
    );
  return { host, port: options.port ?? 0, tokens, loopback };
}

/** The principal a token stands for: a hash, so no token is ever stored. */
function principalOf(token: string): string {
  return `token:${createHash("sha256").update(token).digest("hex").slice(0, 32)}`;
}

function bearer(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m?.[1];
}

/**
 * Check one HTTP request against a bind that listens on `port`.
 * Contract: on loopback, a Host other than 127.0.0.1/localhost/[::1] with this port is refused
 * (421); with tokens, a request without one of them is refused (401); `fallback` is the
 * principal when no token is required (the protocol's own connection or session identity).
 */
export function authorize(
  bind: Bind,
  port: number,
  headers: { host?: string | undefined; authorization?: string | undefined },
  fallback = "local",
): Caller {
  if (bind.loopback) {
    const host = (headers.host ?? "").toLowerCase();
    const ok = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`].includes(host);
    if (!ok) return { ok: false, status: 421, message: `This server answers on 127.0.0.1:${port} only.` };
  }
  if (!bind.tokens.length) return { ok: true, principal: fallback };
  const given = bearer(headers.authorization);
  if (given !== undefined) {
    const g = Buffer.from(given);
    for (const token of bind.tokens) {
      const t = Buffer.from(token);
      if (g.length === t.length && timingSafeEqual(g, t)) return { ok: true, principal: principalOf(token) };
    }
  }
  return { ok: false, status: 401, message: "Send the server's token as `Authorization: Bearer <token>`." };
}

/**
 * Which caller created which session, in a SQLite file (or in memory).
 * Contract: a caller opens only sessions it created; another caller's id is "not found", the
 * same answer as an id that never existed.
 */
export class SessionOwners {
  private readonly db: DatabaseSync;

  constructor(path = ":memory:") {
    this.db = new DatabaseSync(path);
    this.db.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;");
    this.db.exec(
      "CREATE TABLE IF NOT EXISTS owners (session_id TEXT PRIMARY KEY, principal TEXT NOT NULL, created_at INTEGER NOT NULL)",
    );
  }

  /** Record that `principal` created `sessionId`. */
  claim(principal: string, sessionId: string): void {
    this.db
      .prepare("INSERT OR IGNORE INTO owners (session_id, principal, created_at) VALUES (?, ?, ?)")
      .run(sessionId, principal, Date.now());
  }

  /** Whether `principal` created `sessionId`. */
  owns(principal: string, sessionId: string): boolean {
    const row = this.db.prepare("SELECT principal FROM owners WHERE session_id = ?").get(sessionId) as
      | { principal: string }
      | undefined;
    return row?.principal === principal;
  }

  /** The sessions `principal` created, newest first (at most `limit`). */
  sessionsOf(principal: string, limit = 50): string[] {
    const rows = this.db
      .prepare("SELECT session_id FROM owners WHERE principal = ? ORDER BY created_at DESC, rowid DESC LIMIT ?")
      .all(principal, limit) as Array<{ session_id: string }>;
    return rows.map((r) => r.session_id);
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }
}

/**
 * Open a caller's session: a new one (claimed for the caller) when `id` is absent, else the
 * caller's own. Contract: another caller's session is KEEL_SESSION_NOT_FOUND, never opened.
 */
export async function openOwned(agent: Agent, owners: SessionOwners, principal: string, id?: string): Promise<Session> {
  if (id === undefined) {
    const session = await agent.session();
    owners.claim(principal, session.id);
    return session;
  }
  if (!owners.owns(principal, id)) throw new KeelError("KEEL_SESSION_NOT_FOUND", `No session "${id}".`);
  return agent.session(id);
}
