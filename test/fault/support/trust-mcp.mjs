// Stdio MCP "servers" for the class-14 scenarios "child processes end with keel". Run as
//   node trust-mcp.mjs <role> <marker> <dir>
// Every process writes <dir>/<role>.<pid> when it starts and carries <marker> in its argv, so
// a test can find what is left of a run. Roles:
//   ready       answers initialize and tools/list (one tool), but only once every process of
//               the other roles below has written its file (so they are all up before the first
//               turn goes on); exits when its stdin ends, like a well-behaved server
//   mute        never answers, ignores the end of its stdin; a SIGTERM ends it
//   stubborn    never answers, ignores the end of its stdin, SIGTERM, SIGINT and SIGHUP
//   wrapper     like `npx`: starts a `grandchild` (same stdio), waits for it, never answers itself
//   grandchild  as stubborn
import { spawn } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [role, marker, dir] = process.argv.slice(2);
writeFileSync(join(dir, `${role}.${process.pid}`), "");
const keepAlive = () => setInterval(() => {}, 60_000);

if (role === "mute") {
  process.stdin.resume();
  keepAlive();
} else if (role === "stubborn" || role === "grandchild") {
  for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(s, () => {});
  process.stdin.resume();
  keepAlive();
} else if (role === "wrapper") {
  const child = spawn(process.execPath, [process.argv[1], "grandchild", marker, dir], { stdio: "inherit" });
  child.on("exit", (code) => process.exit(code ?? 1));
} else if (role === "ready") {
  const others = ["mute", "stubborn", "wrapper", "grandchild"];
  const othersUp = () => {
    const files = readdirSync(dir);
    return others.every((r) => files.some((f) => f.startsWith(`${r}.`)));
  };
  const send = (msg) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
  const answer = (m) => {
    if (m.id === undefined) return;
    if (m.method === "initialize")
      return send({
        id: m.id,
        result: {
          protocolVersion: m.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "ready", version: "1.0.0" },
        },
      });
    if (m.method === "tools/list")
      return send({
        id: m.id,
        result: {
          tools: [{ name: "ping", description: "Answers pong.", inputSchema: { type: "object", properties: {} } }],
        },
      });
    if (m.method === "tools/call") return send({ id: m.id, result: { content: [{ type: "text", text: "pong" }] } });
    send({ id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } });
  };
  const whenUp = (m) => (othersUp() ? answer(m) : setTimeout(() => whenUp(m), 20));
  let buf = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk) => {
    buf += chunk;
    for (let i; (i = buf.indexOf("\n")) >= 0; ) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) whenUp(JSON.parse(line));
    }
  });
  process.stdin.on("end", () => process.exit(0));
} else {
  process.stderr.write(`trust-mcp: unknown role ${role}\n`);
  process.exit(2);
}
