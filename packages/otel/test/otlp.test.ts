/**
 * The wire path: the official OTLP/HTTP exporter, batched, sends a turn's spans to a local
 * receiver when the agent closes (the observer flushes), as `keel run` would before it exits.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { expect, it } from "vitest";
import { otel } from "../src/index.ts";

interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}

async function body(req: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of req) text += chunk;
  return text;
}

type Batch = { path: string; type: string; spans: OtlpSpan[]; scope: string };

/** A local OTLP/HTTP (JSON) receiver. */
async function startReceiver(): Promise<{ server: Server; url: string; received: Batch[] }> {
  const received: Batch[] = [];
  const server = createServer(async (req, res) => {
    const text = await body(req);
    const json = JSON.parse(text) as {
      resourceSpans: Array<{ scopeSpans: Array<{ scope: { name: string }; spans: OtlpSpan[] }> }>;
    };
    for (const rs of json.resourceSpans)
      for (const ss of rs.scopeSpans)
        received.push({
          path: req.url ?? "",
          type: String(req.headers["content-type"]),
          spans: ss.spans,
          scope: ss.scope.name,
        });
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, received };
}

it("spans reach an OTLP/HTTP receiver when the agent closes", async () => {
  const { server: receiver, url, received } = await startReceiver();
  try {
    // A long batch delay: only the flush on close can deliver the spans in time.
    const provider = new TracerProvider({
      spanProcessors: [
        new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }), scheduledDelayMillis: 60_000 }),
      ],
    });
    const clock = defineTool({ name: "clock", description: "Tells the time.", execute: () => "12:00" });
    const agent = await createAgent({
      name: "wire",
      provider: scriptedProvider([{ toolCalls: [{ id: "t1", name: "clock", args: {} }] }, { text: "It is noon." }], {
        model: "demo",
      }),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [clock],
      observers: [otel({ tracerProvider: provider })],
    });
    const session = await agent.session();
    const r = await session.run("what time is it?");
    expect(r.text).toBe("It is noon.");
    expect(received).toHaveLength(0);
    await agent.close();

    expect(received.length).toBeGreaterThan(0);
    expect(received[0]!.path).toBe("/v1/traces");
    expect(received[0]!.type).toMatch(/^application\/json/);
    expect(received[0]!.scope).toBe("@keel/otel");
    const spans = received.flatMap((b) => b.spans);
    const names = spans.map((s) => s.name).sort();
    expect(names).toEqual(["chat demo", "chat demo", "execute_tool clock", "invoke_agent wire"]);
    const turn = spans.find((s) => s.name === "invoke_agent wire")!;
    for (const s of spans.filter((x) => x !== turn)) {
      expect(s.traceId).toBe(turn.traceId);
      expect(s.parentSpanId).toBe(turn.spanId);
    }
    const attr = (s: OtlpSpan, key: string) => s.attributes.find((a) => a.key === key)?.value;
    expect(attr(turn, "keel.turn.status")).toEqual({ stringValue: "completed" });
    expect(attr(spans.find((s) => s.name === "execute_tool clock")!, "gen_ai.tool.name")).toEqual({
      stringValue: "clock",
    });
    expect(attr(spans.find((s) => s.name === "chat demo")!, "gen_ai.provider.name")).toEqual({
      stringValue: "keel.scripted",
    });
    await provider.shutdown();
  } finally {
    receiver.close();
  }
});

const KEEL_BIN = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "cli", "bin", "keel.js");

it("keel run traces with the observers of agent.config.ts and exports before it exits", async () => {
  const { server: receiver, url, received } = await startReceiver();
  const home = mkdtempSync(join(tmpdir(), "keel-otel-cli-"));
  try {
    const env = { ...process.env, TEST_OTLP_URL: url, KEEL_OFFLINE: "1" };
    const config = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "agent.config.ts");
    // Asynchronously: a synchronous spawn would block the receiver, which runs in this process.
    const child = spawn(process.execPath, [KEEL_BIN, "run", "--config", config, "--home", home, "hello"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => child.on("close", r));
    expect({ code, stderr: code === 0 ? "" : stderr }).toEqual({ code: 0, stderr: "" });
    expect(stdout).toContain("Traced from the CLI.");
    const names = received.flatMap((b) => b.spans.map((s) => s.name));
    expect(names).toContain("invoke_agent traced");
    expect(names.sort()).toEqual(["chat script", "invoke_agent traced"]);
  } finally {
    receiver.close();
    rmSync(home, { recursive: true, force: true });
  }
});
