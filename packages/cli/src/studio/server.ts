/**
 * `keel studio`: a local web page over the session store. Loopback only, an unguessable token
 * on every request (in the URL of the page and its two files, then an Authorization header from
 * the page; never a cookie, which every port of 127.0.0.1 would receive), read-only unless started
 * with approvals allowed. The page polls a cheap endpoint, so turns run by any process appear
 * and no request holds a connection (a browser allows six per host). Experiments (`keel eval`)
 * are listed and compared with their baseline when the studio is given their store.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { ExperimentStore } from "@keel/eval";
import type { KeelEvent, SessionInfo, SessionStore } from "@keel/kernel";
import { errorMessage, isKeelError, maskCredentials } from "@keel/kernel";
import { headOf } from "@keel/text";
import { experimentReader } from "./experiments.ts";
import { totalCost, turnsOf } from "./turns.ts";

/** Answers a pending approval (studio started with approvals allowed). Contract: throws a KeelError (HTTP 409) when the call is not waiting for an answer. */
export type ApprovalAnswerer = (
  sessionId: string,
  callId: string,
  answer: { approved: boolean; reason?: string },
) => Promise<{ resumed: boolean }>;

/**
 * Replays a session with today's config (keel replay, tools from the log).
 * Contract: never writes to the session store; rejects with a KeelError the page shows.
 */
export type Replayer = (sessionId: string) => Promise<import("@keel/eval").ReplayReport>;

/** Options of startStudio. Contract: only `store` and `where` are required; without `answer` nothing is ever written. */
export interface StudioOptions {
  store: SessionStore;
  /** Shown on the page: where the sessions are (a path or a URL; its credentials are masked before it is shown). */
  where: string;
  /** Only this agent's sessions (the config's name), when set. */
  agent?: string;
  /** Port on 127.0.0.1; 0 picks a free one. Default 0. */
  port?: number;
  /** Set: the page may answer pending approvals through it. */
  answer?: ApprovalAnswerer;
  /** Set: the page can replay a session with today's config (one replay at a time). */
  replay?: Replayer;
  /** Fixed token (tests); default 32 random bytes. */
  token?: string;
  /** The experiments beside the sessions (`openExperimentStore`); without it the page lists none. Only read, never closed. */
  experiments?: ExperimentStore;
}

/** A running studio. Contract: `url` carries the token; `close` stops serving and drops every open connection. */
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
/** Sessions listed (most recently updated first). */
const LIST_LIMIT = 200;
/** Sessions whose events the server keeps in memory for their detail view (the most recently viewed). */
const DETAILS_KEPT = 8;
/** Turns of one session sent to the page (the most recent); the rest are counted. */
const TURNS_SENT = 100;

/** Start serving. Contract: binds 127.0.0.1 only; every request without the token gets 401. */
export async function startStudio(options: StudioOptions): Promise<Studio> {
  const token = options.token ?? randomBytes(32).toString("base64url");
  const expected = Buffer.from(token);
  const store = options.store;
  const where = maskCredentials(options.where);
  /** An error as the page is told it: a store's or driver's message, credentials masked. */
  const failure = (err: unknown) => ({ error: maskCredentials(errorMessage(err)) });
  /** Per session: what the list shows of it, where reading stopped, and its events while it is one of the few being viewed. */
  const cache = new Map<
    string,
    { lastSeq: number; title: string; status: string; events?: KeelEvent[]; eval?: boolean }
  >();
  /** Sessions whose events are kept, least recently viewed first. */
  const viewed = new Set<string>();
  const experiments = options.experiments && experimentReader(options.experiments, options.agent);
  let port = 0;

  const authorized = (req: IncomingMessage, url: URL): boolean => {
    const given = url.searchParams.get("token") || bearer(req.headers.authorization);
    if (!given) return false;
    const b = Buffer.from(given);
    return b.length === expected.length && timingSafeEqual(b, expected);
  };

  /** A session's log, read only from where the last read stopped; `keep` holds its events for the detail view. */
  const logOf = async (id: string, keep: boolean) => {
    let c = cache.get(id);
    if (!c) cache.set(id, (c = { lastSeq: 0, title: "(no turns)", status: "empty" }));
    const whole = keep && !c.events;
    const fresh = await store.events(id, { afterSeq: whole ? 0 : c.lastSeq });
    if (whole) c.events = [];
    for (const e of fresh) {
      c.events?.push(e);
      if (e.seq <= c.lastSeq) continue;
      if (e.type === "turn.started") {
        if (c.title === "(no turns)") {
          c.title = headOf(e.input, 120);
          // A session keel eval ran (its turns carry the experiment and case): listed only when asked for.
          c.eval = typeof e.metadata?.experiment === "string" && typeof e.metadata.case === "string";
        }
        c.status = "running";
      } else if (e.type === "turn.resumed") c.status = "running";
      else if (
        e.type === "turn.completed" ||
        e.type === "turn.failed" ||
        e.type === "turn.interrupted" ||
        e.type === "turn.paused"
      )
        c.status = e.verdict.status;
    }
    c.lastSeq = Math.max(c.lastSeq, fresh.at(-1)?.seq ?? 0);
    if (keep) {
      viewed.delete(id);
      viewed.add(id);
      for (const old of viewed) {
        if (viewed.size <= DETAILS_KEPT) break;
        viewed.delete(old);
        delete cache.get(old)!.events;
      }
    }
    return c;
  };

  /** Session summaries with their first input and last verdict. */
  const summaries = async (
    q: string,
    evals: boolean,
  ): Promise<Array<SessionInfo & { title: string; status: string }>> => {
    const list = await store.listSessions({ ...(options.agent ? { agent: options.agent } : {}), limit: LIST_LIMIT });
    const needle = q.toLowerCase();
    const out = [];
    for (const s of list) {
      const c = cache.get(s.id)?.lastSeq === s.eventCount ? cache.get(s.id)! : await logOf(s.id, false);
      if (needle && !`${s.id} ${s.agent} ${c.title}`.toLowerCase().includes(needle)) continue;
      if (c.eval && !evals) continue;
      out.push({ ...s, title: c.title, status: c.status });
    }
    return out;
  };

  /** The session if it exists and belongs to the configured agent. */
  const sessionOf = async (id: string): Promise<SessionInfo | undefined> => {
    const info = await store.getSession(id);
    return info && (!options.agent || info.agent === options.agent) ? info : undefined;
  };

  let replaying: Promise<void> = Promise.resolve();
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // DNS rebinding: a page from another origin that resolves to 127.0.0.1 still sends its own Host.
    const host = req.headers.host ?? "";
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`)
      return send(res, 421, { error: `keel studio answers on 127.0.0.1:${port} only.` });
    const url = new URL(req.url ?? "/", `http://${host}`);
    if (!authorized(req, url))
      return send(res, 401, {
        error: "This page needs the token that keel studio printed: open the full URL it shows (…?token=…).",
      });
    const path = url.pathname;
    const read = req.method === "GET" || req.method === "HEAD";
    const asset = read ? ASSETS[path] : undefined;
    if (asset) {
      let body = readFileSync(join(PAGE_DIR, asset.file));
      // The page's own files carry the token in their URLs; the page then sends it as a header.
      if (asset.file === "page.html")
        body = Buffer.from(
          body
            .toString("utf8")
            .replaceAll('"/app.css"', `"/app.css?token=${token}"`)
            .replaceAll('"/app.js"', `"/app.js?token=${token}"`),
        );
      return sendRaw(res, 200, req.method === "HEAD" ? Buffer.alloc(0) : body, { "content-type": asset.type });
    }
    if (read && path === "/api/sessions")
      return send(res, 200, {
        where,
        approvals: !!options.answer,
        sessions: await summaries(url.searchParams.get("q") ?? "", url.searchParams.get("evals") === "1"),
      });
    if (read && path.startsWith("/api/experiments")) return sendExperiment(res, path);
    const m = /^\/api\/sessions\/([^/]+)(\/since|\/replay|\/approvals\/([^/]+))?$/.exec(path);
    if (!m) return send(res, 404, { error: `No such page: ${headOf(path, 80)}` });
    const id = decoded(m[1]!);
    const callId = m[3] === undefined ? undefined : decoded(m[3]);
    if (id === undefined || (m[3] !== undefined && callId === undefined))
      return send(res, 400, { error: "The path is not valid percent-encoding." });
    const info = await sessionOf(id);
    if (!info)
      return send(res, 404, {
        error: `No session "${headOf(id, 80)}"${options.agent ? ` of agent "${options.agent}"` : ""} in ${where}.`,
      });
    if (read && !m[2]) {
      const log = await logOf(id, true);
      const events = log.events ?? [];
      const turns = turnsOf(events);
      const created = events[0]?.type === "session.created" ? events[0] : undefined;
      return send(res, 200, {
        info,
        ...(created?.parent ? { parent: created.parent } : {}),
        lastSeq: log.lastSeq,
        approvals: !!options.answer,
        earlierTurns: Math.max(0, turns.length - TURNS_SENT),
        // Every turn's, the ones not sent included.
        cost: totalCost(turns),
        turns: turns.slice(-TURNS_SENT),
      });
    }
    if (read && m[2] === "/replay") {
      if (!options.replay)
        return send(res, 409, {
          error: "This studio was started without a config, so it cannot replay: start keel studio with --config PATH.",
        });
      // One replay at a time: each builds the agent (its MCP servers too).
      const run = replaying.then(() => options.replay!(id));
      replaying = run.then(
        () => {},
        () => {},
      );
      try {
        return send(res, 200, await run);
      } catch (err) {
        return send(res, isKeelError(err) ? 409 : 500, failure(err));
      }
    }
    if (read && m[2] === "/since") {
      // The page's poll: one indexed read of what is new.
      const after = Number(url.searchParams.get("after") ?? "0");
      if (!Number.isSafeInteger(after) || after < 0)
        return send(res, 400, { error: "`after` must be a sequence number (an integer ≥ 0)." });
      const fresh = await store.events(id, { afterSeq: after });
      return send(res, 200, { lastSeq: fresh.at(-1)?.seq ?? after });
    }
    if (req.method === "POST" && callId !== undefined) {
      if (!options.answer)
        return send(res, 403, {
          error: "keel studio is read-only: start it with --allow-approvals to answer approvals from the page.",
        });
      // A form on another site cannot set this header without a CORS preflight, which this server never grants.
      if (req.headers["x-keel-studio"] !== "1") return send(res, 403, { error: "Missing the X-Keel-Studio header." });
      const body = await readJson(req);
      if (typeof body?.approved !== "boolean")
        return send(res, 400, { error: 'Expected {"approved": true|false, "reason"?: string}.' });
      // The kernel makes a reason well-formed and cuts it (2,000 code points) where it stores it.
      const reason = typeof body.reason === "string" && body.reason ? { reason: body.reason } : {};
      try {
        return send(res, 200, await options.answer(id, callId, { approved: body.approved, ...reason }));
      } catch (err) {
        return send(res, isKeelError(err) ? 409 : 500, failure(err));
      }
    }
    return send(res, 405, { error: `${req.method} is not allowed here.` });
  };

  /** The experiment list, or one experiment compared with its baseline. */
  const sendExperiment = async (res: ServerResponse, path: string): Promise<void> => {
    if (path === "/api/experiments")
      return send(res, 200, { available: !!experiments, experiments: experiments ? await experiments.list() : [] });
    const m = /^\/api\/experiments\/([^/]+)$/.exec(path);
    if (!m) return send(res, 404, { error: `No such page: ${headOf(path, 80)}` });
    const id = decoded(m[1]!);
    if (id === undefined) return send(res, 400, { error: "The path is not valid percent-encoding." });
    const view = experiments && (await experiments.view(id));
    if (!view)
      return send(res, 404, {
        error: `No experiment "${headOf(id, 80)}"${options.agent ? ` of agent "${options.agent}"` : ""} in ${where}.`,
      });
    return send(res, 200, view);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) send(res, 500, failure(err));
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
      const closed = new Promise<void>((r) => server.close(() => r()));
      // Idle keep-alive sockets and half-sent requests must not hold Ctrl-C up.
      server.closeAllConnections();
      await closed;
    },
  };
}

const SECURITY_HEADERS = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
};

function send(res: ServerResponse, status: number, body: unknown): void {
  sendRaw(res, status, Buffer.from(JSON.stringify(body)), { "content-type": "application/json; charset=utf-8" });
}

function sendRaw(res: ServerResponse, status: number, body: Buffer, headers: Record<string, string>): void {
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers, "content-length": String(body.length) });
  res.end(body);
}

/** A path segment decoded; undefined when it is not valid percent-encoding. */
function decoded(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
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
