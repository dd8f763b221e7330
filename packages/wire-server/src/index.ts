/**
 * @keel/wire-server — a local HTTP server on 127.0.0.1 that speaks Anthropic's Messages and
 * OpenAI's Chat Completions / Responses streaming wire formats from a queue of scripted
 * answers, with faults (HTTP errors, cut connections, in-band errors, truncation, hangs).
 * Test support: no dependencies.
 */
export { startWireServer } from "./server.ts";
export { echoResponder, lastUserText } from "./echo.ts";
export type {
  RecordedRequest,
  WireApi,
  WireErrorKind,
  WireHang,
  WireHttpError,
  WireOutcome,
  WireReply,
  WireResponse,
  WireServer,
  WireServerOptions,
  WireStreamFault,
  WireThinking,
  WireToolCall,
  WireUsage,
} from "./types.ts";
