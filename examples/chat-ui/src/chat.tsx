/**
 * A chat with the release assistant through the AI SDK's useChat, unchanged: DefaultChatTransport
 * posts to /api/chat (the http example, @keel/ui-stream). Text streams in; a tool call shows its
 * input, progress and output; a deploy waiting for a person shows Approve / Deny, answered with
 * addToolApprovalResponse, and sendAutomaticallyWhen sends the answer so the turn resumes.
 * The chat id is in the URL's hash: a reload reads the chat back (GET /api/chat/:id/messages,
 * a waiting approval included) and rejoins a running turn (`resume: true`).
 */
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, isToolUIPart, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import type { UIMessage } from "ai";
import { useEffect, useRef, useState } from "react";
import type { FormEvent } from "react";

type ToolPart = Extract<UIMessage["parts"][number], { toolCallId: string }>;
type Answer = (a: { id: string; approved: boolean; reason?: string }) => void | PromiseLike<void>;

/** One tool call: name, input, state; Approve / Deny while it waits. */
function ToolCall({ part, answer }: { part: ToolPart; answer: Answer }) {
  const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
  return (
    <div className="tool" data-state={part.state} data-tool={name}>
      <code>
        {name}({JSON.stringify(part.input ?? {})})
      </code>{" "}
      <span className="state">{part.state}</span>
      {part.state === "approval-requested" && (
        <span className="approval">
          {part.approval.requestReason && <em> {part.approval.requestReason} </em>}
          <button type="button" onClick={() => answer({ id: part.approval.id, approved: true })}>
            Approve
          </button>
          <button
            type="button"
            onClick={() => answer({ id: part.approval.id, approved: false, reason: "Denied in the chat page." })}
          >
            Deny
          </button>
        </span>
      )}
      {part.state === "output-available" && <pre className="output">{String(part.output)}</pre>}
      {part.state === "output-error" && <pre className="error">{part.errorText}</pre>}
      {part.state === "output-denied" && <span className="denied"> denied</span>}
    </div>
  );
}

/** A message: its text, reasoning, tool calls and the latest progress line. */
function Message({ message, answer }: { message: UIMessage; answer: Answer }) {
  return (
    <div className={`message ${message.role}`} data-role={message.role}>
      {message.parts.map((part, i) => {
        const key = `${message.id}-${i}`;
        if (part.type === "text")
          return (
            <p key={key} className="text">
              {part.text}
            </p>
          );
        if (part.type === "reasoning")
          return (
            <p key={key} className="reasoning">
              {part.text}
            </p>
          );
        if (part.type === "data-tool-progress")
          return (
            <p key={key} className="progress">
              {(part.data as { message: string }).message}
            </p>
          );
        if (isToolUIPart(part)) return <ToolCall key={key} part={part} answer={answer} />;
        return null;
      })}
    </div>
  );
}

/** This chat's id, kept in the URL's hash so a reload (or the link) opens the same chat. */
function chatId(): string {
  const kept = decodeURIComponent(location.hash.slice(1));
  if (kept) return kept;
  const id = globalThis.crypto?.randomUUID?.() ?? `c${Date.now().toString(36)}${Math.random().toString(36).slice(2)}`;
  history.replaceState(null, "", `#${encodeURIComponent(id)}`);
  return id;
}

/** The server's words for a refused request: its JSON error's message (else what the SDK says). */
function errorText(error: Error): string {
  try {
    return (JSON.parse(error.message) as { error: { message: string } }).error.message || error.message;
  } catch {
    return error.message;
  }
}

/** The chat page: reads the chat back from the server (after a reload), then shows it. */
export function Chat() {
  const [id] = useState(chatId);
  const [messages, setMessages] = useState<UIMessage[]>();
  useEffect(() => {
    fetch(`/api/chat/${encodeURIComponent(id)}/messages`)
      .then((r) => (r.ok ? (r.json() as Promise<{ messages: UIMessage[] }>) : { messages: [] }))
      .then((body) => setMessages(body.messages))
      .catch(() => setMessages([]));
  }, [id]);
  return messages ? (
    <ChatView id={id} initial={messages} />
  ) : (
    <p id="status" data-status="loading">
      loading
    </p>
  );
}

/** The chat with its messages so far. */
function ChatView({ id, initial }: { id: string; initial: UIMessage[] }) {
  const [input, setInput] = useState("");
  const chat = useRef<{ setMessages: (f: (m: UIMessage[]) => UIMessage[]) => void }>(null);
  const { messages, sendMessage, status, error, addToolApprovalResponse, setMessages } = useChat({
    id,
    messages: initial,
    // A turn still running when the page reloaded streams on into its message.
    resume: true,
    transport: new DefaultChatTransport({ api: "/api/chat" }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    // A message the server refused before answering (409 while a deploy waits, a 400) goes back
    // to the input box: it stays the user's, and a waiting approval stays the last message, so
    // Approve / Deny still send their answer.
    onError: () =>
      chat.current?.setMessages((all) => {
        const last = all.at(-1);
        if (last?.role !== "user") return all;
        setInput(last.parts.map((p) => (p.type === "text" ? p.text : "")).join(""));
        return all.slice(0, -1);
      }),
  });
  chat.current = { setMessages };
  const busy = status === "submitted" || status === "streaming";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!input.trim()) return;
    void sendMessage({ text: input });
    setInput("");
  };
  return (
    <main>
      <h1>Release assistant</h1>
      <p className="hint">Try “deploy v1.4.2” or “status”.</p>
      <div id="messages">
        {messages.map((m) => (
          <Message key={m.id} message={m} answer={addToolApprovalResponse} />
        ))}
      </div>
      {error && <p className="error">{errorText(error)}</p>}
      <form onSubmit={submit}>
        <input
          aria-label="Message"
          value={input}
          onChange={(e) => setInput(e.target.value)}
          placeholder="deploy v1.4.2"
          disabled={busy}
        />
        <button type="submit" disabled={busy}>
          Send
        </button>
      </form>
      <p id="status" data-status={status}>
        {status}
      </p>
    </main>
  );
}
