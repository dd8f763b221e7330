/**
 * Run the minimal agent for one turn and stream what it does.
 * Offline: the model is the scripted provider replaying script.json (provider adapters for
 * Anthropic and OpenAI come with their own package).
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildAgent } from "./agent.ts";

const here = dirname(fileURLToPath(import.meta.url));
const home = process.env.KEEL_HOME ?? join(here, ".keel");
const input = process.argv.slice(2).join(" ") || "Which items of the TODO list are still open?";

process.stderr.write(
  "keel: offline mode — the model is the scripted provider replaying examples/minimal/script.json\n",
);
const agent = await buildAgent({ home });
agent.subscribe((e) => {
  if (e.type === "model.delta" && e.channel === "text") process.stdout.write(e.text);
  else if (e.type === "tool.started") process.stderr.write(`  → ${e.name}(${JSON.stringify(e.args)})\n`);
  else if (e.type === "tool.completed")
    process.stderr.write(`  ${e.status === "ok" ? "✓" : "✗"} ${e.name} ${e.status} in ${e.durationMs.toFixed(1)} ms\n`);
  else if (e.type === "prompt.compiled")
    process.stderr.write(
      `  · request ${e.manifest.round}: ${e.manifest.messageCount} messages, ${e.manifest.tools.length} tools, ~${e.manifest.tokenEstimate.total} tokens\n`,
    );
});
const session = await agent.session();
process.stderr.write(`> ${input}\n`);
const result = await session.run(input);
process.stdout.write("\n");
process.stderr.write(
  `\nverdict: ${result.verdict.status} (${result.verdict.reason}), ${result.rounds} rounds, ${result.toolCalls} tool calls, ${result.usage.inputTokens} in / ${result.usage.outputTokens} out tokens\n`,
);
process.stderr.write(`session ${session.id} stored in ${join(home, "sessions.sqlite")}\n`);
await agent.close();
process.exitCode = result.verdict.status === "completed" ? 0 : 1;
