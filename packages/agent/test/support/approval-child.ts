/**
 * A child process for durable-approval tests: one process per step, sharing a session in
 * `$KEEL_HOME/sessions.sqlite`, as a web server's requests (or a restart) would.
 *
 * Usage: node approval-child.ts <mode> <json>
 *   start  {input, script}                      run a turn; print RESULT <json>, exit.
 *   hold   {input, script}                      like start, then print PAUSED and wait to be killed.
 *   answer {session, script, answers: [{callId, approve, always?, reason?}]}  answer, resume, print RESULT.
 *   again  {session, input, script}             run another turn in the session; print RESULT.
 * The tool `write_note` (asked by the `guard` plugin) appends to $NOTE_FILE: its effect is
 * real and countable. `read_note` is allowed without asking.
 */
import * as fs from "node:fs";
import { writeSync } from "node:fs";
import { createAgent } from "../../src/agent.ts";
import { definePlugin } from "../../../kernel/src/plugin.ts";
import { scriptedProvider } from "../../../testkit/src/index.ts";
import type { ScriptStep } from "../../../testkit/src/index.ts";
import { defaultKeelHome } from "../../../safe-path/src/index.ts";
import { defaultSessionDbPath, SqliteSessionStore } from "../../../store-sqlite/src/index.ts";
import { estimateTokens, TokenCounter } from "../../../tokens/src/index.ts";
import type { ToolDefinition } from "../../../kernel/src/tools.ts";

class QuickTokenCounter extends TokenCounter {
  override countText(text: string): number {
    return estimateTokens(text);
  }
}

const say = (line: string) => writeSync(1, `${line}\n`);
const noteFile = process.env.NOTE_FILE!;

const tools: ToolDefinition[] = [
  {
    name: "write_note",
    description: "Appends a note.",
    category: "edit",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    execute: (args: { text: string }) => {
      fs.appendFileSync(noteFile, `${args.text}\n`);
      return `wrote "${args.text}" (pid ${process.pid})`;
    },
  },
  {
    name: "read_note",
    description: "Reads the notes.",
    parameters: { type: "object", properties: {} },
    execute: () => (fs.existsSync(noteFile) ? fs.readFileSync(noteFile, "utf8") : "(empty)"),
  },
];

/** Asks for every write; counts turn.post_turn runs in $NOTE_FILE.post. */
const guard = definePlugin({
  name: "guard",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.pre_call", (e) =>
      e.call.name === "write_note"
        ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" }
        : undefined,
    );
    ctx.on("turn.post_turn", () => void fs.appendFileSync(`${noteFile}.post`, "x"));
  },
});

async function main(): Promise<void> {
  const [mode, raw] = process.argv.slice(2) as [string, string];
  const arg = JSON.parse(raw) as {
    input?: string;
    script: ScriptStep[];
    session?: string;
    answers?: Array<{ callId: string; approve: boolean; always?: boolean; reason?: string }>;
  };
  const agent = await createAgent({
    name: "approval-child",
    store: new SqliteSessionStore({ path: defaultSessionDbPath(defaultKeelHome()) }),
    tools,
    plugins: [guard],
    tokenCounter: new QuickTokenCounter(),
    provider: scriptedProvider(arg.script),
  });
  const session = await agent.session(arg.session);
  if (mode === "start" || mode === "hold" || mode === "again") {
    const result = await session.run(arg.input!);
    if (mode === "hold") {
      say(`PAUSED ${JSON.stringify(result)}`);
      setInterval(() => {}, 1 << 30);
      return;
    }
    say(`RESULT ${JSON.stringify(result)}`);
  } else if (mode === "answer") {
    say(`PENDING ${JSON.stringify(session.pendingApprovals())}`);
    for (const a of arg.answers ?? []) {
      if (a.approve)
        await session.approve(a.callId, {
          ...(a.always ? { always: true } : {}),
          ...(a.reason ? { reason: a.reason } : {}),
        });
      else await session.deny(a.callId, a.reason ? { reason: a.reason } : {});
    }
    say(`RESULT ${JSON.stringify(await session.resume())}`);
  } else throw new Error(`unknown mode ${mode}`);
  await agent.close();
}

main().catch((err: unknown) => {
  process.stderr.write(`approval-child failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
