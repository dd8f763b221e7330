/**
 * Run the wire server from the command line:
 *   node packages/wire-server/src/main.ts [--port 8765] [--script answers.json]
 * Prints the base URLs, answers the scripted answers first, then echoes the user.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { echoResponder } from "./echo.ts";
import { startWireServer } from "./server.ts";
import type { WireResponse } from "./types.ts";

const { values } = parseArgs({ options: { port: { type: "string" }, script: { type: "string" } } });
const port = values.port === undefined ? 0 : Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`wire-server: --port must be an integer from 0 to 65535, got ${JSON.stringify(values.port)}`);
  process.exit(2);
}
let script: WireResponse[] = [];
if (values.script) {
  try {
    const parsed: unknown = JSON.parse(readFileSync(values.script, "utf8"));
    if (!Array.isArray(parsed)) throw new Error("the file must hold a JSON array of scripted answers");
    script = parsed as WireResponse[];
  } catch (err) {
    console.error(
      `wire-server: cannot read --script ${values.script}: ${err instanceof Error ? err.message : String(err)}`,
    );
    process.exit(2);
  }
}
const server = await startWireServer({ port, onEmpty: echoResponder });
server.enqueue(...script);
console.log(server.url);
console.log(`ANTHROPIC_BASE_URL=${server.anthropicBaseURL}`);
console.log(`OPENAI_BASE_URL=${server.openaiBaseURL}`);
const stop = () => void server.close().then(() => process.exit(0));
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
