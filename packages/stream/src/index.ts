/**
 * @keel/stream: a turn as an async iterable of typed events (streamTurn, streamResume), and as
 * server-sent events (toSSEStream, sseResponse) for fetch-style servers. Built on the kernel's
 * prepared turns and its event feed; the kernel does not depend on it.
 */
export { sseResponse, streamResume, streamTurn, toSSEStream, TurnStream } from "./turn-stream.ts";
export type { StreamOptions, ToolRunStatusView, TurnStreamEvent } from "./turn-stream.ts";
