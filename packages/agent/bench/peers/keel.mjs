// Keel's createAgent with a stateless scripted provider. Variants (argv[2]):
//   bare     no plugins, in-memory store (the store keeps every session's log: that is its job)
//   plugins  5 no-op plugins subscribed to every phase, in-memory store
//   sqlite   no plugins, the default durable SQLite store in a temp dir
//   sqlite-10 as sqlite, 10 turns per session (the first of each opens it)
//   bare-50  as bare, 50 turns per session (a history of up to 300 messages)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { measure, weather, USER, CITIES, FINAL, TOOL } from "./scenario.mjs";
const { createAgent, definePlugin, PHASE_NAMES } = await import("../../src/index.ts");
const { MemorySessionStore } = await import("../../../testkit/src/index.ts");
const { SqliteSessionStore } = await import("../../../store-sqlite/src/index.ts");
const variant = process.argv[2] ?? "bare";
let n = 0;
const provider = {
  id: "scripted",
  async *stream(request) {
    const usage = { input: 10, output: 5 };
    if (request.messages[request.messages.length - 1].role !== "tool")
      yield {
        type: "response",
        stopReason: "tool_use",
        usage,
        message: {
          role: "assistant",
          content: CITIES.map((city) => ({ type: "tool_call", id: `c${n++}`, name: TOOL.name, args: { city } })),
        },
      };
    else
      yield {
        type: "response",
        stopReason: "end_turn",
        usage,
        message: { role: "assistant", content: [{ type: "text", text: FINAL }] },
      };
  },
};
const noop = () => undefined;
const plugins =
  variant === "plugins"
    ? Array.from({ length: 5 }, (_, i) =>
        definePlugin({
          name: `noop-${i}`,
          version: "1.0.0",
          kernel: "^1",
          setup(ctx) {
            for (const p of PHASE_NAMES) ctx.on(p, noop);
          },
        }),
      )
    : [];
const dir = variant.startsWith("sqlite") ? mkdtempSync(join(tmpdir(), "keel-peers-")) : undefined;
const store = dir ? new SqliteSessionStore({ path: join(dir, "s.sqlite") }) : new MemorySessionStore();
const agent = await createAgent({
  name: "bench",
  provider,
  plugins,
  store,
  tools: [
    { name: TOOL.name, description: TOOL.description, parameters: TOOL.schema, category: "info", execute: weather },
  ],
});
const perSession = variant === "sqlite-10" ? 10 : variant === "bare-50" ? 50 : 1;
let session,
  used = 0;
await measure(`keel ${variant}`, async () => {
  if (!session) session = await agent.session();
  const r = await session.run(USER);
  if (++used % perSession === 0) {
    await session.close();
    session = undefined;
  }
  if (r.verdict.status !== "completed") throw new Error(JSON.stringify(r.verdict));
  return r.text;
});
await session?.close();
await agent.close();
if (dir) rmSync(dir, { recursive: true, force: true });
