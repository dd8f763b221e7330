/**
 * JSON-RPC at the edge: what a malformed message gets (the protocol's own error codes, never
 * a crash or a stack), and the stdio transport that answers a bad line instead of dropping it.
 */
import type { Readable, Writable } from "node:stream";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";

/** JSON-RPC 2.0's codes, and MCP's "session not found". */
export const RPC = { parse: -32700, invalid: -32600, server: -32000, noSession: -32001, internal: -32603 } as const;

/** A JSON-RPC error response. */
export function rpcError(code: number, message: string, id: string | number | null = null): object {
  return { jsonrpc: "2.0", error: { code, message }, id };
}

/** The id of a message that may be malformed, when it has a usable one. */
function idOf(v: unknown): string | number | null {
  const id = v && typeof v === "object" ? (v as { id?: unknown }).id : undefined;
  return typeof id === "string" || typeof id === "number" ? id : null;
}

/**
 * Check parsed JSON as one JSON-RPC message or a batch.
 * Contract: returns the messages, or the error response for the first bad one (-32600).
 */
export function checkMessages(body: unknown): { ok: true; messages: JSONRPCMessage[] } | { ok: false; error: object } {
  const list = Array.isArray(body) ? body : [body];
  if (!list.length) return { ok: false, error: rpcError(RPC.invalid, "Invalid Request: an empty batch") };
  const messages: JSONRPCMessage[] = [];
  for (const m of list) {
    const r = JSONRPCMessageSchema.safeParse(m);
    if (!r.success)
      return {
        ok: false,
        error: rpcError(RPC.invalid, "Invalid Request: not a JSON-RPC 2.0 request, notification or response", idOf(m)),
      };
    messages.push(r.data);
  }
  return { ok: true, messages };
}

/** Parse one text as JSON-RPC. Contract: a malformed one is its error response (-32700, -32600). */
export function parseMessages(text: string): { ok: true; messages: JSONRPCMessage[] } | { ok: false; error: object } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, error: rpcError(RPC.parse, "Parse error: the message is not JSON") };
  }
  return checkMessages(body);
}

/**
 * MCP over stdio, one JSON-RPC message per line. Contract: a malformed line is answered with
 * its JSON-RPC error on stdout and the server goes on; stdout carries protocol only; the end of
 * stdin closes the transport.
 */
export class LineTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private buffer = "";
  private closed = false;

  private readonly input: Readable;
  private readonly output: Writable;

  constructor(input: Readable, output: Writable) {
    this.input = input;
    this.output = output;
  }

  async start(): Promise<void> {
    this.input.setEncoding("utf8");
    this.input.on("data", this.onData);
    this.input.on("end", this.onEnd);
    this.input.on("error", this.onEnd);
  }

  private readonly onData = (chunk: string): void => {
    this.buffer += chunk;
    for (let i = this.buffer.indexOf("\n"); i >= 0; i = this.buffer.indexOf("\n")) {
      const line = this.buffer.slice(0, i).replace(/\r$/, "");
      this.buffer = this.buffer.slice(i + 1);
      if (line.trim()) this.receive(line);
    }
  };

  private readonly onEnd = (): void => void this.close();

  private receive(line: string): void {
    const r = parseMessages(line);
    if (!r.ok) return void this.write(r.error);
    for (const m of r.messages) this.onmessage?.(m);
  }

  private write(message: object): Promise<void> {
    return new Promise((resolve) => {
      if (this.closed || this.output.destroyed) return resolve();
      if (this.output.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.output.once("drain", resolve);
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.write(message);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.input.off("data", this.onData);
    this.input.off("end", this.onEnd);
    this.input.off("error", this.onEnd);
    this.input.pause();
    this.onclose?.();
  }
}
