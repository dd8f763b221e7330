/** Run in a fresh process: open the memory file given, run one turn, print what the model saw. */
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { memory } from "../../src/index.ts";

const [path, input, userId] = process.argv.slice(2);
const provider = scriptedProvider([{ text: "ok" }]);
const plugin = memory({ path: path!, extraction: "deterministic" });
const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [plugin] });
const session = await agent.session();
const result = await session.run(input!, { metadata: userId ? { userId } : {} });
await agent.close();
await plugin.memory.close();
process.stdout.write(JSON.stringify({ status: result.verdict.status, system: provider.requests[0]?.system ?? "" }));
