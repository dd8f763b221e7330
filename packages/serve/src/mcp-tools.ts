/**
 * The served agent as an MCP server: one McpServer per caller (principal), with the tools
 * `ask` (a turn, new or in the caller's session), `sessions` (the caller's own) and `approve`
 * (answer the calls a paused turn waits for, then the resumed turn's answer).
 */
import type { Agent, ApprovalAnswer, PendingApproval, Session } from "@keel/agent";
import { headOf } from "@keel/text";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { openOwned } from "./auth.ts";
import type { SessionOwners } from "./auth.ts";
import type { Asker } from "./mcp-turn.ts";
import { publicDescription } from "./public.ts";
import {
  answerCall,
  errorResult,
  pausedResult,
  progressLine,
  settle,
  thrownResult,
  turnResult,
  waitingLines,
  why,
} from "./mcp-turn.ts";

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** What every MCP server of one agent shares. */
export interface McpServeOptions {
  agent: Agent;
  owners: SessionOwners;
  /** The server version announced (default 0.1.0). */
  version?: string;
  /** What the server's instructions and its `ask` tool say the agent does. Default: the agent's `description` option (never its instructions). */
  description?: string;
  /** Where notes go (never stdout on stdio); default nowhere. */
  note?: (line: string) => void;
}

const PendingSchema = z.object({
  call_id: z.string(),
  tool: z.string(),
  args: z.unknown().optional(),
  reason: z.string().optional(),
  plugin: z.string().optional(),
});
const AnswerShape = {
  session_id: z.string().describe("The session: pass it to ask to continue, or to approve."),
  status: z.enum(["completed", "paused", "stopped", "failed", "interrupted"]),
  answer: z.string().describe("The agent's final text (empty while paused)."),
  pending: z.array(PendingSchema).optional().describe("The calls a paused turn waits for."),
};
const AskInput = {
  input: z.string().min(1).describe("What to ask or tell the agent."),
  session_id: z.string().min(1).optional().describe("Continue this session (from an earlier answer)."),
};
const SessionsInput = {
  limit: z.number().int().min(1).max(200).optional().describe("At most this many (default 20)."),
};
const SessionsOutput = {
  sessions: z.array(
    z.object({ session_id: z.string(), updated_at: z.string(), events: z.number(), waiting: z.array(z.string()) }),
  ),
};
const ApproveInput = {
  session_id: z.string().min(1),
  decision: z.enum(["allow", "always", "deny"]),
  call_id: z.string().min(1).optional().describe("One waiting call; default: every waiting call."),
  reason: z.string().optional().describe("Why (a denial's reason reaches the agent)."),
};
const Decision = z.object({ decision: z.enum(["allow", "always", "deny"]), reason: z.string().optional() });

/**
 * Serves one agent to many callers. Contract: a caller reaches only the sessions it created
 * (another's id is "not found"); one turn at a time per session in this process.
 */
export class ServedAgent {
  private readonly busy = new Set<string>();
  readonly options: McpServeOptions;
  constructor(options: McpServeOptions) {
    this.options = options;
  }

  /** A new McpServer for one caller. */
  server(principal: string): McpServer {
    const { agent } = this.options;
    const name = agent.name;
    // What anyone connecting may read: the agent's public description, never its instructions.
    const about = publicDescription(agent, this.options.description);
    const server = new McpServer(
      { name, version: this.options.version ?? "0.1.0" },
      { instructions: `${name} is a Keel agent${about ? `: ${about}` : "."} Use ask to talk to it.` },
    );
    const ask = {
      title: `Ask ${name}`,
      description: `Ask ${name}, a Keel agent${about ? ` (${about})` : ""}. Returns its final answer and a session_id; pass session_id again to continue that conversation (the agent sees the earlier turns). Without session_id a new conversation starts.`,
      inputSchema: AskInput,
      outputSchema: AnswerShape,
    };
    server.registerTool("ask", ask, (args, extra) => this.ask(server, principal, args, extra));
    const sessions = {
      title: `Your sessions with ${name}`,
      description: `Your own conversations with ${name}, newest first: their session_id (pass it to ask to continue), when they were last used, and the calls any of them waits to have approved.`,
      inputSchema: SessionsInput,
      outputSchema: SessionsOutput,
    };
    server.registerTool("sessions", sessions, (args) => this.sessions(principal, args.limit ?? 20));
    const approve = {
      title: "Answer a paused turn",
      description: `When ${name}'s turn is paused for approval (ask answered with status "paused"), allow or deny the waiting tool calls of your session; once none waits, the turn resumes and this returns its answer. decision "always" allows that tool for the rest of the session.`,
      inputSchema: ApproveInput,
      outputSchema: AnswerShape,
    };
    server.registerTool("approve", approve, (args, extra) => this.approve(server, principal, args, extra));
    return server;
  }

  private async ask(
    server: McpServer,
    principal: string,
    args: { input: string; session_id?: string | undefined },
    extra: Extra,
  ): Promise<CallToolResult> {
    return this.inSession(principal, args.session_id, async (session) => {
      if (session.pendingApprovals().length)
        return errorResult(
          `Session ${session.id} has a turn paused for approval; answer it with the approve tool first:\n${waitingLines(session).join("\n")}`,
        );
      const ask = this.asker(server, principal, extra);
      const { signal } = extra;
      // One follower for the whole call: progress values only grow, across the resumes too.
      return this.following(session, extra, async () =>
        turnResult(session, await settle(session, await session.run(args.input, { signal }), ask, signal)),
      );
    });
  }

  private async approve(
    server: McpServer,
    principal: string,
    args: {
      session_id: string;
      decision: "allow" | "always" | "deny";
      call_id?: string | undefined;
      reason?: string | undefined;
    },
    extra: Extra,
  ): Promise<CallToolResult> {
    return this.inSession(principal, args.session_id, async (session) => {
      const waiting = session.pendingApprovals().filter((p) => !p.answer);
      if (!waiting.length) return errorResult(`Session ${session.id} waits for no approval.`);
      const chosen = args.call_id === undefined ? waiting : waiting.filter((p) => p.callId === args.call_id);
      if (!chosen.length)
        return errorResult(
          `Session ${session.id} waits for no call "${args.call_id}"; it waits for:\n${waitingLines(session).join("\n")}`,
        );
      for (const p of chosen) await answerCall(session, p.callId, { ...decided(args), answerer: `mcp:${principal}` });
      if (session.pendingApprovals().some((p) => !p.answer)) return pausedResult(session);
      const ask = this.asker(server, principal, extra);
      const { signal } = extra;
      return this.following(session, extra, async () =>
        turnResult(session, await settle(session, await session.resume({ signal }), ask, signal)),
      );
    });
  }

  private async sessions(principal: string, limit: number): Promise<CallToolResult> {
    const { agent, owners } = this.options;
    const rows = [];
    for (const id of owners.sessionsOf(principal, limit)) {
      const info = await agent.store.getSession(id);
      if (!info) continue;
      rows.push({
        session_id: id,
        updated_at: new Date(info.updatedAt).toISOString(),
        events: info.eventCount,
        waiting: await this.waitingIn(id),
      });
    }
    const lines = rows.map(
      (r) =>
        `${r.session_id}  ${r.updated_at}  ${r.events} events${r.waiting.length ? `  waits for ${r.waiting.join(", ")}` : ""}`,
    );
    return {
      content: [{ type: "text", text: lines.length ? lines.join("\n") : "You have no sessions yet: ask starts one." }],
      structuredContent: { sessions: rows },
    };
  }

  /** The calls session `id` waits to have approved ([] while it runs a turn here). */
  private async waitingIn(id: string): Promise<string[]> {
    if (this.busy.has(id)) return [];
    this.busy.add(id);
    try {
      const session = await this.options.agent.session(id);
      const waiting = session
        .pendingApprovals()
        .filter((p) => !p.answer)
        .map((p) => p.callId);
      await session.close();
      return waiting;
    } catch {
      return [];
    } finally {
      this.busy.delete(id);
    }
  }

  /** Open the caller's session (new when `id` is absent), hold it for `fn`, close it after. */
  private async inSession(
    principal: string,
    id: string | undefined,
    fn: (session: Session) => Promise<CallToolResult>,
  ): Promise<CallToolResult> {
    const { agent, owners } = this.options;
    // Reserved before any await, and only for the caller's own session (another's is "not found", never "busy").
    let held: string | undefined;
    if (id !== undefined && owners.owns(principal, id)) {
      if (this.busy.has(id))
        return errorResult(`Session ${id} is running a turn; wait for its answer, then ask again.`);
      held = id;
      this.busy.add(id);
    }
    let session: Session | undefined;
    try {
      session = await openOwned(agent, owners, principal, id);
      if (held === undefined) this.busy.add((held = session.id));
      return await fn(session);
    } catch (err) {
      return thrownResult(err);
    } finally {
      await session
        ?.close()
        .catch((err: unknown) => this.options.note?.(`keel serve: closing ${session?.id}: ${String(err)}`));
      if (held !== undefined) this.busy.delete(held);
    }
  }

  /** Run `fn` while progress notifications follow the session (when the caller sent a progressToken). */
  private async following<T>(session: Session, extra: Extra, fn: () => Promise<T>): Promise<T> {
    const token = extra._meta?.progressToken;
    if (token === undefined) return fn();
    let progress = 0;
    // Sent before the call's result: a client reading the result has seen every progress line of the call.
    const sent: Promise<void>[] = [];
    const off = this.options.agent.subscribe((e) => {
      const message = e.sessionId === session.id ? progressLine(e) : undefined;
      if (message)
        sent.push(
          extra
            .sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, progress: ++progress, message },
            })
            .catch(() => {}),
        );
    });
    try {
      return await fn();
    } finally {
      off();
      await Promise.all(sent);
    }
  }

  /** Elicitation when the client declared it; else undefined (the turn stays paused for approve). */
  /** Asks the caller through elicitation; its answers are recorded as the caller's (`mcp:<principal>`). */
  private asker(server: McpServer, principal: string, extra: Extra): Asker | undefined {
    if (!server.server.getClientCapabilities()?.elicitation) return undefined;
    return async (p: PendingApproval, signal: AbortSignal): Promise<ApprovalAnswer | undefined> => {
      try {
        const r = await extra.sendRequest(
          { method: "elicitation/create", params: { message: question(this.options.agent.name, p), requestedSchema } },
          ElicitResultSchema,
          { signal },
        );
        const answerer = `mcp:${principal}`;
        if (r.action === "decline") return { approved: false, reason: "declined by the caller", answerer };
        const d = r.action === "accept" ? Decision.safeParse(r.content) : undefined;
        return d?.success ? { ...decided(d.data), answerer } : undefined;
      } catch (err) {
        this.options.note?.(
          `keel serve: asking the client about ${p.name} failed: ${String(err)}; the turn stays paused`,
        );
        return undefined;
      }
    };
  }
}

const requestedSchema = {
  type: "object" as const,
  properties: {
    decision: {
      type: "string" as const,
      title: "Decision",
      enum: ["allow", "always", "deny"],
      description: "allow once, always (this tool, for the rest of the session), or deny",
    },
    reason: { type: "string" as const, title: "Reason", description: "Why (a denial's reason reaches the agent)" },
  },
  required: ["decision"],
};

function question(agent: string, p: PendingApproval): string {
  let args = "";
  try {
    args = headOf(JSON.stringify(p.args) ?? "", 300);
  } catch {}
  return `${agent} wants to call ${p.name} ${args}${why(p)}. Allow it?`;
}

function decided(d: { decision: "allow" | "always" | "deny"; reason?: string | undefined }): ApprovalAnswer {
  if (d.decision === "deny") return { approved: false, ...(d.reason ? { reason: d.reason } : {}) };
  return { approved: true, ...(d.decision === "always" ? { always: true } : {}) };
}
