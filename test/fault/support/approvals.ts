/**
 * A process step of the durable-approval loss scenarios: each run opens the session in
 * `$KEEL_HOME/sessions.sqlite`, does one step, and (in the `die` steps) SIGKILLs itself at the
 * worst moment. The `deploy` tool is asked by the `review` plugin; it appends to $LEDGER after
 * `$TOOL_MS` ms, printing TOOL STARTED first, so the parent can kill it mid-run.
 *
 *   pause                     run "deploy" until the turn pauses; print RESULT
 *   approve-then-die <sid>    approve the pending call, then SIGKILL self before resume()
 *   resume <sid>              print PENDING, resume(); print RESULT
 *   run <sid> <input>         print PENDING, run another turn; print RESULT
 */
import { appendFileSync, writeSync } from "node:fs";
import { createAgent, definePlugin } from "../../../packages/agent/src/index.ts";
import { scriptedProvider } from "../../../packages/testkit/src/index.ts";
import { SqliteSessionStore } from "../../../packages/store-sqlite/src/index.ts";
import type { ToolDefinition } from "../../../packages/kernel/src/index.ts";

const say = (line: string) => writeSync(1, `${line}\n`);
const [step, sid, input] = process.argv.slice(2) as [string, string | undefined, string | undefined];

const deploy: ToolDefinition = {
  name: "deploy",
  description: "Deploys.",
  category: "exec",
  parameters: { type: "object", properties: { version: { type: "string" } }, required: ["version"] },
  execute: async (args: { version: string }, ctx) => {
    say("TOOL STARTED");
    await new Promise((r, j) => {
      const t = setTimeout(r, Number(process.env.TOOL_MS ?? 0));
      ctx.signal.addEventListener("abort", () => (clearTimeout(t), j(ctx.signal.reason)), { once: true });
    });
    appendFileSync(process.env.LEDGER!, `${args.version} pid ${process.pid}\n`);
    return `deployed ${args.version}`;
  },
};
const review = definePlugin({
  name: "review",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("tool.pre_call", (e) =>
      e.call.name === "deploy" ? { kind: "tool_decision", decision: "ask", reason: "deploys are reviewed" } : undefined,
    );
  },
});

const agent = await createAgent({
  name: "fault-approvals",
  store: new SqliteSessionStore({ path: `${process.env.KEEL_HOME}/sessions.sqlite` }),
  tools: [deploy],
  plugins: [review],
  // Every process gets the script from where the conversation stands: a call, then prose.
  provider: scriptedProvider(
    step === "pause"
      ? [{ toolCalls: [{ id: "d1", name: "deploy", args: { version: "v9" } }] }]
      : [{ text: "Done." }, { text: "Next." }],
  ),
});
const session = await agent.session(sid);
if (step === "pause") say(`RESULT ${JSON.stringify(await session.run("deploy v9"))}`);
else if (step === "approve-then-die") {
  await session.approve(session.pendingApprovals()[0]!.callId);
  process.kill(process.pid, "SIGKILL");
} else if (step === "resume" || step === "run") {
  say(`PENDING ${JSON.stringify(session.pendingApprovals())}`);
  say(`RESULT ${JSON.stringify(step === "resume" ? await session.resume() : await session.run(input!))}`);
}
await agent.close();
