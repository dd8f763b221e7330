/**
 * @keel/ui-stream: a Keel turn stream (@keel/stream) in the protocols browser UIs speak: the AI
 * SDK's UI message stream (what `useChat` reads, tool approvals included) and AG-UI events
 * (@ag-ui/core, encoded by @ag-ui/encoder); and fetch-style handlers that run and resume turns
 * for them, each chat mapped to a Keel session of its caller. `ai`, `@ag-ui/core` and
 * `@ag-ui/encoder` are optional peers: importing this package loads none of them; a handler
 * names the one it lacks when it is created (KEEL_PACKAGE_MISSING).
 */
export { AGUIEventMapper, aguiResponse, APPROVAL_INTERRUPT, toAGUIEvents } from "./ag-ui.ts";
export type { AGUIStreamOptions } from "./ag-ui.ts";
export { ApprovalPayloadSchema, createAGUIHandler } from "./agui-handler.ts";
export { ChatRequestSchema, createChatHandler } from "./chat-handler.ts";
export { chatMessages, rejoinResponse, turnMessageId } from "./chat-history.ts";
export { agentChatSessions, CHAT_MIGRATIONS } from "./chat-store.ts";
export type { ChatStoreKind } from "./chat-store.ts";
export { memoryChatSessions } from "./http.ts";
export type { ChatHandlerOptions, ChatSessions } from "./http.ts";
export {
  toUIMessageStream,
  UI_STREAM_HEADERS,
  UIChunkMapper,
  uiChunksToSSE,
  uiMessageStreamResponse,
} from "./ui-message-stream.ts";
export type { UIStreamOptions } from "./ui-message-stream.ts";
export { streamError, TURN_END_CHARS, turnEnd } from "./turn-end.ts";
export type { TurnEnd } from "./turn-end.ts";
