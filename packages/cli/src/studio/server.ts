/**
 * `keel studio`: a local web page over the session store. Loopback only, an unguessable token
 * on every request (the URL's `?token=`, then a same-site cookie), read-only unless started
 * with approvals allowed. Live updates poll the store, so turns run by any process appear.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { KeelEvent, SessionInfo, SessionStore } from "@keel/kernel";
import { codePointSlice, errorMessage, headOf, isKeelError } from "@keel/kernel";
import { turnsOf } from "./turns.ts";

/** Answers a pending approval (studio started with approvals allowed). */
export type ApprovalAnswerer = (sessionId: string, callId: string, answer: { approved: boolean; reason?: string }) => Promise<{ resumed: boolean }>;

/** Options of startStudio. */
export interface StudioOptions {
  store: SessionStore;
  /** Shown on the page: where the sessions are (a path or a masked URL). */
  where: string;
  /** Only this agent's sessions (the config's name), when set. */
  agent?: string;
  /** Port on 127.0.0.1; 0 picks a free one. Default 0. */
  port?: number;
  /** Set: the page may answer pending approvals through it. */
  answer?: ApprovalAnswerer;
  /** How often live views look for new events, ms. Default 500. */
  pollMs?: number;
  /** Fixed token (tests); default 32 random bytes. */
  token?: string;
}

/** A running studio. Contract: `url` carries the token; `close` stops serving and ends live streams. */
export interface Studio {
  url: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

// The page files live in src/studio (shipped with the package), for the sources and the dist build alike.
const PAGE_DIR = join(import.meta.dirname, "..", "..", "src", "studio");
const ASSETS: Record<string, { file: string; type: string }> = {
  "/": { file: "page.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/app.css": { file: "app.css", type: "text/css; charset=utf-8" },
};
const COOKIE = "keel_studio";
/** Sessions listed (most recently updated first). */
const LIST_LIMIT = 200;

/** Start serving. Contract: binds 127.0.0.1 only; every request without the token gets 401. */
export async function startStudio(options: StudioOptions): Promise<Studio> {
  const token = options.token ?? randomBytes(32).toString("base64url");
  const expected = Buffer.from(token);
  const store = options.store;
  const pollMs = options.pollMs ?? 500;
  const live = new Set<ServerResponse>();
  const titles = new Map<string, { count: number; title: string; status: string }>();
  let port = 0;

  const authorized = (req: IncomingMessage, url: URL): boolean => {
    const given = url.searchParams.get("token") ?? cookieOf(req.headers.cookie, COOKIE) ?? bearer(req.headers.authorization);
    if (!given) return false;
    const b = Buffer.from(given);
    return b.length === expected.length && timingSafeEqual(b, expected);
  };

  /** Session summaries with their first input and last verdict, read from the log (cached by event count). */
  const summaries = async (q: string): Promise<Array<SessionInfo & { title: string; status: string }>> => {
    const list = await store.listSessions({ ...(options.agent ? { agent: options.agent } : {}), limit: LIST_LIMIT });
    const out = [];
    for (const s of list) {
      let t = titles.get(s.id);
      if (!t || t.count !== s.eventCount) {
        const events = await store.events(s.id);
        const first = events.find((e) => e.type === "turn.started") as Extract<KeelEvent, { type: "turn.started" }> | undefined;
        const last = [...events].reverse().find((e) => e.type === "turn.started" || e.type.startsWith("turn.") && "verdict" in e);
        t = { count: s.eventCount, title: first ? headOf(first.input, 120) : "(no turns)", status: !last ? "empty" : last.type === "turn.started" ? "running" : (last as { verdict: { status: string } }).verdict.status };
        titles.set(s.id, t);
      }
      const needle = q.toLowerCase();
      if (needle && !`${s.id} ${s.agent} ${t.title}`.toLowerCase().includes(needle)) continue;
      out.push({ ...s, title: t.title, status: t.status });
    }
    return out;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // DNS rebinding: a page from another origin that resolves to 127.0.0.1 still sends its own Host.
    const host = req.headers.host ?? "";
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) return send(res, 421, { error: `keel studio answers on 127.0.0.1:${port} only.` });
    const url = new URL(req.url ?? "/", `http://${host}`);
    if (!authorized(req, url)) return send(res, 401, { error: "This page needs the token that keel studio printed: open the full URL it shows (…?token=…)." });
    const path = url.pathname;
    const asset = req.method === "GET" ? ASSETS[path] : undefined;
    if (asset) {
      const headers: Record<string, string> = { "content-type": asset.type };
      // The token moves from the URL into a cookie only this origin sends.
      if (url.searchParams.has("token")) headers["set-cookie"] = `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`;
      return sendRaw(res, 200, readFileSync(join(PAGE_DIR, asset.file)), headers);
    }
    if (req.method === "GET" && path === "/api/sessions") return send(res, 200, { where: options.where, approvals: !!options.answer, sessions: await summaries(url.searchParams.get("q") ?? "") });
    const m = /^\/api\/sessions\/([^/]+)(\/live|\/approvals\/([^/]+))?$/.exec(path);
    if (!m) return send(res, 404, { error: `No such page: ${headOf(path, 80)}` });
    const id = decodeURIComponent(m[1]!);
    if (req.method === "GET" && !m[2]) {
      const info = await store.getSession(id);
      if (!info) return send(res, 404, { error: `No session "${headOf(id, 80)}" in ${options.where}.` });
      const events = await store.events(id);
      return send(res, 200, { info, lastSeq: events.at(-1)?.seq ?? 0, approvals: !!options.answer, turns: turnsOf(events) });
    }
    if (req.method === "GET" && m[2] === "/live") return openLive(res, id, Number(url.searchParams.get("after") ?? 0));
    if (req.method === "POST" && m[3]) {
      if (!options.answer) return send(res, 403, { error: "keel studio is read-only: start it with --allow-approvals to answer approvals from the page." });
      // A form on another site cannot set this header without a CORS preflight, which this server never grants.
      if (req.headers["x-keel-studio"] !== "1") return send(res, 403, { error: "Missing the X-Keel-Studio header." });
      const body = await readJson(req);
      if (typeof body?.approved !== "boolean") return send(res, 400, { error: 'Expected {"approved": true|false, "reason"?: string}.' });
      const reason = typeof body.reason === "string" && body.reason ? { reason: codePointSlice(body.reason, 0, 2_000) } : {};
      try {
        return send(res, 200, await options.answer(id, decodeURIComponent(m[3]), { approved: body.approved, ...reason }));
      } catch (err) {
        return send(res, isKeelError(err) ? 409 : 500, { error: errorMessage(err) });
      }
    }
    return send(res, 405, { error: `${req.method} is not allowed here.` });
  };

  /** Server-sent events: `changed` with the last seq whenever the session's log grows. */
  const openLive = async (res: ServerResponse, id: string, after: number): Promise<void> => {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store", connection: "keep-alive" });
    res.write(": live\n\n");
    live.add(res);
    let last = after;
    let busy = false;
    const timer = setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        const fresh = await store.events(id, { afterSeq: last });
        if (fresh.length) {
          last = fresh.at(-1)!.seq;
          res.write(`event: changed\ndata: ${JSON.stringify({ lastSeq: last, types: [...new Set(fresh.map((e) => e.type))] })}\n\n`);
        }
      } catch (err) {
        res.write(`event: failed\ndata: ${JSON.stringify({ error: errorMessage(err) })}\n\n`);
      } finally {
        busy = false;
      }
    }, pollMs);
    res.on("close", () => {
      clearInterval(timer);
      live.delete(res);
    });
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) send(res, 500, { error: errorMessage(err) });
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    token,
    close: async () => {
      for (const r of live) r.end();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const SECURITY_HEADERS = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
};

function send(res: ServerResponse, status: number, body: unknown): void {
  sendRaw(res, status, Buffer.from(JSON.stringify(body)), { "content-type": "application/json; charset=utf-8" });
}

function sendRaw(res: ServerResponse, status: number, body: Buffer, headers: Record<string, string>): void {
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers, "content-length": String(body.length) });
  res.end(body);
}

function cookieOf(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return undefined;
}

function bearer(header: string | undefined): string | undefined {
  return header?.startsWith("Bearer ") ? header.slice(7) : undefined;
}

/** At most 64 KB of JSON. */
async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 65_536) return undefined;
    chunks.push(c as Buffer);
  }
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
    return v && typeof v === "object" ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
