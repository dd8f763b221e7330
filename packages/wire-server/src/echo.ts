/** A default answer for demos: echo the user's last words, or acknowledge a tool result. */
import type { RecordedRequest, WireReply } from "./types.ts";

/** The text of the last user message of a request in any of the three formats ("" when none). */
export function lastUserText(request: RecordedRequest): string {
  const body = request.body as any;
  const items: any[] =
    request.api === "responses"
      ? typeof body?.input === "string"
        ? [{ role: "user", content: body.input }]
        : (body?.input ?? [])
      : (body?.messages ?? []);
  for (let i = items.length - 1; i >= 0; i--) {
    const m = items[i];
    if (m?.role !== "user") continue;
    if (typeof m.content === "string") return m.content;
    const texts = (m.content ?? [])
      .filter((b: any) => b?.type === "text" || b?.type === "input_text")
      .map((b: any) => b.text);
    if (texts.length) return texts.join("");
  }
  return "";
}

/** True when the newest input of the request is a tool result. */
function endsWithToolResult(request: RecordedRequest): boolean {
  const body = request.body as any;
  if (request.api === "responses") return body?.input?.at?.(-1)?.type === "function_call_output";
  const last = body?.messages?.at?.(-1);
  if (request.api === "chat") return last?.role === "tool";
  return Array.isArray(last?.content) && last.content.some((b: any) => b?.type === "tool_result");
}

/** Contract: always answers with text; never calls tools. */
export function echoResponder(request: RecordedRequest): WireReply {
  if (endsWithToolResult(request)) return { text: "The tool answered; that is all I needed." };
  return { text: `You said: ${lastUserText(request) || "(nothing)"}` };
}
