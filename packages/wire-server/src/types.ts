/** Which wire format a request spoke, by its path. */
export type WireApi = "anthropic" | "chat" | "responses";

/** A tool call the scripted model makes. Contract: `args` is JSON-encoded unless `argsJson` is given verbatim. */
export interface WireToolCall {
  id?: string;
  name: string;
  args?: unknown;
  /** Raw arguments text (may be invalid JSON, to test the adapter). */
  argsJson?: string;
  /** Number of argument deltas. Default 2. */
  chunks?: number;
}

/** Token counts the scripted model reports. Absent counts are estimated (chars / 4) or 0. */
export interface WireUsage {
  input?: number;
  output?: number;
  cacheRead?: number;
  /** Cache writes (Anthropic: 5-minute tier unless `cacheWrite1h`). */
  cacheWrite?: number;
  cacheWrite1h?: number;
  reasoning?: number;
}

/** Model reasoning. Anthropic: a thinking block (or `redactedData`); OpenAI Responses: a reasoning item with a summary; chat: `reasoning_content` deltas. */
export interface WireThinking {
  text: string;
  /** Anthropic signature; default a fixed opaque string. */
  signature?: string;
  /** Anthropic redacted_thinking data: emit a redacted block instead. */
  redactedData?: string;
  /** OpenAI Responses encrypted_content. */
  encrypted?: string;
  chunks?: number;
}

/** Kinds of error the server can answer with, in each provider's real error shape. */
export type WireErrorKind =
  | "rate_limit"
  | "overloaded"
  | "server_error"
  | "auth"
  | "context_length"
  | "invalid_request";

/**
 * A failure after the stream started. `cut`: the TCP connection is reset; `error_event`: an
 * in-band error event, then a clean end; `truncate`: a clean end without the final event(s);
 * `hang`: the stream stays open without sending anything more.
 */
export interface WireStreamFault {
  type: "cut" | "error_event" | "truncate" | "hang";
  /** Content events sent before the fault (default: half of them). */
  afterEvents?: number;
  /** For `error_event`. Default `overloaded`. */
  errorKind?: WireErrorKind;
  /** Responses API only: send `response.failed` instead of an `error` event. */
  responsesFailed?: boolean;
}

/** A scripted streamed answer. Contract: rendered in the wire format of the endpoint that was called. */
export interface WireReply {
  text?: string;
  /** Number of text deltas. Default 3 (fewer for short text). */
  chunks?: number;
  /**
   * Cut text, thinking and tool-argument deltas by UTF-16 unit, and also right after every
   * high surrogate, so each surrogate pair straddles two events (each escaped alone in its
   * JSON, `"\ud83d"` then `"\ude00"`), as a stream cut at byte-level token pieces can be.
   */
  splitPairs?: boolean;
  thinking?: WireThinking;
  toolCalls?: WireToolCall[];
  /** Chat Completions only: interleave the tool calls' argument deltas by index. */
  interleave?: boolean;
  usage?: WireUsage;
  /** Default: `tool_use` with tool calls, else `end_turn`. */
  stopReason?: "end_turn" | "tool_use" | "max_tokens" | "refusal";
  model?: string;
  /** Delay between SSE events in ms (default 0: everything is written at once). */
  delayMs?: number;
  fault?: WireStreamFault;
  /** The endpoint this answer is meant for; another endpoint gets a 400. */
  api?: WireApi;
}

/** An HTTP error before any stream, in the provider's error shape. */
export interface WireHttpError {
  error: WireErrorKind;
  /** Default by kind: 429, 529 (Anthropic) / 503 (OpenAI), 500, 401, 400, 400. */
  status?: number;
  /** `retry-after` header value (seconds; fractions allowed, the SDKs accept them). */
  retryAfter?: string | number;
  message?: string;
  headers?: Record<string, string>;
  api?: WireApi;
}

/** Never answer (no headers): only an abort or a client timeout ends the request. */
export interface WireHang {
  hang: "before_headers";
  api?: WireApi;
}

/** One scripted answer, or a function choosing one from the recorded request. */
export type WireResponse =
  | WireReply
  | WireHttpError
  | WireHang
  | ((request: RecordedRequest) => WireReply | WireHttpError | WireHang);

/** How an exchange ended, as the server saw it. */
export type WireOutcome =
  | "pending"
  | "completed"
  | "http_error"
  | "cut"
  | "truncated"
  | "error_event"
  | "client_closed"
  | "rejected";

/** A request the server received. Contract: `body` is the parsed JSON (or the raw text when it is not JSON). */
export interface RecordedRequest {
  index: number;
  method: string;
  path: string;
  api: WireApi | "other";
  headers: Record<string, string>;
  body: any;
  /** What the server did; `client_closed` means the client closed the connection before the end. */
  outcome: WireOutcome;
  /** The scripted answer used (functions resolved). */
  response?: WireReply | WireHttpError | WireHang;
}

/** Options of startWireServer. */
export interface WireServerOptions {
  /** Default 0 (a free port). */
  port?: number;
  /** Answer when the queue is empty. Default: a 400 saying the script ran out. */
  onEmpty?: WireResponse;
  /** When set, requests must carry this key (`x-api-key` for Anthropic, or `Authorization: Bearer`), else 401. */
  apiKey?: string;
}

/** A running server. Contract: `close()` ends hanging exchanges and frees the port. */
export interface WireServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Pass as the Anthropic SDK's `baseURL` (the SDK appends `/v1/messages`). */
  anthropicBaseURL: string;
  /** Pass as the OpenAI SDK's `baseURL` (`<url>/v1`). */
  openaiBaseURL: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Queue scripted answers (first in, first served, whichever endpoint is called). */
  enqueue(...responses: WireResponse[]): void;
  /** Answers still queued. */
  pending(): number;
  /** Resolves when request `index` has been received and its exchange is over (any outcome). */
  settled(index: number): Promise<RecordedRequest>;
  close(): Promise<void>;
}
