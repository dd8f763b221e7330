/**
 * One instance of a fleet sharing one PostgreSQL database (KEEL_DATABASE_URL and
 * KEEL_DATABASE_SCHEMA): a real agent with the memory plugin, serving turns read from stdin,
 * one line each: `<sessionId> <text>`. A plain text makes the model store it with
 * memory_remember, then answer; `ASK <question>\t<word>` answers FOUND or MISSING by whether
 * the recalled context holds <word> (sent after the tab, so it is not part of the question). Prints `START <text>`, then `DONE <text> <status> <answer>`
 * (or `FAILED <text> <code>`), each as one line.
 */
import { writeSync } from "node:fs";
import { createInterface } from "node:readline";
import { createAgent } from "../../../packages/agent/src/index.ts";
import type {
  AssistantMessage,
  Message,
  ModelEvent,
  ModelProvider,
  ModelRequest,
} from "../../../packages/kernel/src/index.ts";
import { memory } from "../../../packages/plugin-memory/src/index.ts";
import { PostgresSessionStore } from "../../../packages/store-postgres/src/index.ts";

const say = (line: string) => writeSync(1, `${line}\n`);
const textOf = (m: Message | undefined): string =>
  m && m.role !== "assistant" ? m.content.map((b) => (b.type === "text" ? b.text : "")).join("") : "";
let calls = 0;
/** The word an ASK turn looks for (sent after a tab, never part of the user's message). */
let expected = "";

const provider: ModelProvider = {
  id: "fleet:model",
  async *stream(request: ModelRequest, options: { signal: AbortSignal }): AsyncIterable<ModelEvent> {
    const last = request.messages.at(-1);
    let message: AssistantMessage;
    if (last?.role === "user") {
      const text = textOf(last);
      if (text.startsWith("ASK ")) {
        const word = expected;
        const context = request.system + JSON.stringify(request.messages.slice(0, -1));
        message = {
          role: "assistant",
          content: [{ type: "text", text: context.includes(word) ? "FOUND" : "MISSING" }],
        };
      } else {
        // Some model time, so kills land mid-turn too.
        await new Promise((r, j) => {
          const t = setTimeout(r, 20 + Math.floor(Math.random() * 120));
          options.signal.addEventListener("abort", () => (clearTimeout(t), j(options.signal.reason)), { once: true });
        });
        message = {
          role: "assistant",
          content: [
            {
              type: "tool_call",
              id: `call-${process.pid}-${++calls}`,
              name: "memory_remember",
              args: { content: text },
            },
          ],
        };
      }
    } else message = { role: "assistant", content: [{ type: "text", text: "Noted." }] };
    const toolUse = message.content.some((b) => b.type === "tool_call");
    yield {
      type: "response",
      message,
      stopReason: toolUse ? "tool_use" : "end_turn",
      usage: { inputTokens: 10, outputTokens: 5 },
    };
  },
};

const store = new PostgresSessionStore({
  url: process.env.KEEL_DATABASE_URL!,
  schema: process.env.KEEL_DATABASE_SCHEMA!,
});
const agent = await createAgent({
  name: "fleet",
  store,
  provider,
  plugins: [memory({ namespace: "fleet", extraction: "off" })],
  lease: { ttlMs: 1_000, waitMs: 60_000 },
});
/** Memory handlers cut by their deadline since the last reset (KEEL_HANDLER_TIMEOUT diagnostics). */
let memoryDeadlines = 0;
agent.subscribe((e) => {
  const d = e as { type?: string; code?: string; plugin?: string };
  if (d.type === "diagnostic" && d.code === "KEEL_HANDLER_TIMEOUT" && d.plugin === "memory") memoryDeadlines++;
});
say("READY");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const at = line.indexOf(" ");
  const sessionId = line.slice(0, at);
  const [text = "", expect = ""] = line.slice(at + 1).split("\t");
  expected = expect;
  memoryDeadlines = 0;
  say(`START ${text}`);
  try {
    const session = await agent.session(sessionId);
    let result = await session.run(text);
    // A recall cut by its deadline (a loaded machine) is not a lost memory: ask again, at most
    // twice, and only when a memory handler's deadline is on record for the turn.
    for (
      let again = 0;
      again < 2 && text.startsWith("ASK ") && result.text === "MISSING" && memoryDeadlines > 0;
      again++
    ) {
      memoryDeadlines = 0;
      result = await session.run(text);
    }
    await session.close();
    say(`DONE ${text}\t${result.verdict.status}\t${result.text ?? ""}`);
  } catch (err) {
    say(`FAILED ${text}\t${(err as { code?: string }).code ?? (err as Error).message}`);
  }
}
await agent.close();
await store.close();
