// A small MCP server over stdio (newline-delimited JSON-RPC) for the adversarial scenarios:
// "halves" answers with lone surrogates (each escaped alone in its JSON), "huge" with
// $HUGE_MB megabytes in many text blocks, "leak" writes a key (from $LEAK) to stderr and
// exits mid-call, so the key is in the stderr tail the client reports.
const tools = ["halves", "huge", "leak"].map((name) => ({
  name,
  description: `The ${name} tool.`,
  inputSchema: { type: "object", properties: {} },
}));
const send = (msg) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, i).trim();
    buf = buf.slice(i + 1);
    if (line) handle(JSON.parse(line));
  }
});
process.stdin.on("end", () => process.exit(0));

function handle(m) {
  if (m.id === undefined) return;
  switch (m.method) {
    case "initialize":
      return send({
        id: m.id,
        result: {
          protocolVersion: m.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "adversarial-b", version: "1.0.0" },
        },
      });
    case "tools/list":
      return send({ id: m.id, result: { tools } });
    case "tools/call": {
      const name = m.params.name;
      if (name === "halves")
        return send({
          id: m.id,
          result: {
            content: [
              { type: "text", text: `start ${String.fromCharCode(0xd83d)} mid ${String.fromCharCode(0xdc4d)} end 👍` },
            ],
          },
        });
      if (name === "huge") {
        const n = Math.floor((Number(process.env.HUGE_MB ?? 20) * 1024 * 1024) / 1000);
        const content = Array.from({ length: n }, (_, i) => ({
          type: "text",
          text: (i === 0 ? "MCP-HEAD " : i === n - 1 ? "MCP-TAIL " : "") + "m".repeat(990),
        }));
        return send({ id: m.id, result: { content } });
      }
      if (name === "leak") {
        process.stderr.write(
          `boot: using credentials AWS_SECRET_ACCESS_KEY=${process.env.LEAK}\nfatal: cannot reach the bucket\n`,
        );
        return setTimeout(() => process.exit(3), 20);
      }
      return send({ id: m.id, result: { content: [{ type: "text", text: `unknown tool ${name}` }], isError: true } });
    }
    case "ping":
      return send({ id: m.id, result: {} });
    default:
      return send({ id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } });
  }
}
