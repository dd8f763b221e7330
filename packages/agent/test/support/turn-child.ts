/**
 * A child process for crash-safety tests: it starts a turn against a session in
 * `$KEEL_HOME/sessions.sqlite`, reports on stdout when the turn reached the point under
 * test, and then waits forever for the parent to SIGKILL it.
 *
 * Usage: node turn-child.ts <mode> <user message> [steering text]
 *   provider — the provider stream writes "IN_FLIGHT <sessionId>" and never answers.
 *   tool     — the model calls `hang_probe`; the tool writes "IN_TOOL <sessionId>" and never returns.
 *   steer    — like `provider`, then steer(<steering text>) is queued and "STEERED <sessionId>" written.
 * Every mode first writes "SESSION <sessionId>". Fatal errors go to stderr with exit code 1.
 */
import { writeSync } from "node:fs";
import { createAgent } from "../../src/agent.ts";
import type { ModelEvent, ModelProvider } from "../../../kernel/src/provider.ts";
import { scriptedProvider } from "../../../testkit/src/index.ts";
import { defaultKeelHome } from "../../../safe-path/src/index.ts";
import { defaultSessionDbPath, SqliteSessionStore } from "../../../store-sqlite/src/index.ts";
import { estimateTokens, TokenCounter } from "../../../tokens/src/index.ts";
import type { ToolDefinition } from "../../../kernel/src/tools.ts";

type Mode = "provider" | "tool" | "steer";

/** The id of the orphaned tool call in `tool` mode (crash-safety.test.ts uses the same). */
const ORPHAN_CALL_ID = "call_orphan_1";
/** The tool that hangs in `tool` mode. */
const HANG_TOOL = "hang_probe";

/** Write one line synchronously, so it is out before the parent's kill can arrive. */
function say(line: string): void {
  writeSync(1, `${line}\n`);
}

/** Skips loading the tokenizer (about a second): counts do not matter to a process about to be killed. */
class QuickTokenCounter extends TokenCounter {
  override countText(text: string): number {
    return estimateTokens(text);
  }
}

/** Resolves never; the interval keeps the event loop (and so the process) alive. */
function forever(): Promise<never> {
  setInterval(() => {}, 1 << 30);
  return new Promise<never>(() => {});
}

async function main(): Promise<void> {
  const [mode, input, steerText] = process.argv.slice(2) as [Mode | undefined, string | undefined, string | undefined];
  if (mode !== "provider" && mode !== "tool" && mode !== "steer")
    throw new Error(`unknown mode ${JSON.stringify(mode)}`);
  if (!input) throw new Error("missing the user message argument");
  if (mode === "steer" && !steerText) throw new Error("steer mode needs the steering text argument");

  let sessionId = "";
  let markInFlight: () => void = () => {};
  const inFlight = new Promise<void>((resolve) => (markInFlight = resolve));

  const hangingProvider: ModelProvider = {
    id: "child:hang",
    contextWindow: 200_000,
    stream(): AsyncIterable<ModelEvent> {
      // biome-ignore lint/correctness/useYield: a model that never answers (it waits to be killed)
      return (async function* () {
        say(`IN_FLIGHT ${sessionId}`);
        markInFlight();
        await forever();
      })();
    },
  };
  const hangTool: ToolDefinition = {
    name: HANG_TOOL,
    description: "Probes something; never returns.",
    parameters: { type: "object", properties: { target: { type: "string" } } },
    async execute() {
      say(`IN_TOOL ${sessionId}`);
      return forever();
    },
  };

  const store = new SqliteSessionStore({ path: defaultSessionDbPath(defaultKeelHome()) });
  const agent = await createAgent({
    name: "crash-child",
    store,
    tools: [hangTool],
    tokenCounter: new QuickTokenCounter(),
    provider:
      mode === "tool"
        ? scriptedProvider([
            { text: "Probing.", toolCalls: [{ id: ORPHAN_CALL_ID, name: HANG_TOOL, args: { target: "db" } }] },
          ])
        : hangingProvider,
  });
  const session = await agent.session();
  sessionId = session.id;
  say(`SESSION ${sessionId}`);

  // The turn never ends: the parent kills the process while it runs.
  void session.run(input).then(
    (r) => {
      process.stderr.write(`unexpected: the turn ended with ${JSON.stringify(r.verdict)}\n`);
      process.exit(3);
    },
    (err: unknown) => {
      process.stderr.write(`unexpected: the turn rejected: ${String(err)}\n`);
      process.exit(3);
    },
  );

  if (mode === "steer") {
    await inFlight;
    await session.steer(steerText!);
    say(`STEERED ${sessionId}`);
  }
  await forever();
}

main().catch((err: unknown) => {
  process.stderr.write(`turn-child failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
