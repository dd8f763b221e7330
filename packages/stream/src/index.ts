/**
 * @keel/stream: a turn as an async iterable of typed events (streamTurn, streamResume), and as
 * server-sent events (toSSEStream, sseResponse) for fetch-style servers, and rejoined after a
 * dropped connection (rejoinTurn, from an SSE Last-Event-ID). Built on the kernel's
 * prepared turns and its event feed; the kernel does not depend on it.
 */
export { rejoinTurn, TurnRejoin } from "./rejoin.ts";
export type { RejoinOptions } from "./rejoin.ts";
export { sseResponse, streamResume, streamTurn, toSSEStream, TurnStream } from "./turn-stream.ts";
export type { SSEOptions, StreamOptions, ToolRunStatusView, TurnStreamEvent } from "./turn-stream.ts";
