/**
 * The MCP client against real servers over stdio (server-everything, server-filesystem,
 * server-memory), a hand-written fixture server for faults, and server-everything over
 * Streamable HTTP.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { liveServerPids, McpCallError, McpPool, McpServerConnection, mapCallResult } from "../src/index.ts";
import { alive, childPids, fixture, running, serverBin, SETTINGS, tempDirs, until } from "./support.ts";

const dirs = tempDirs();
const open: McpServerConnection[] = [];
const never = new AbortController().signal;

function connection(
  key: string,
  config: ConstructorParameters<typeof McpServerConnection>[1],
  settings: ConstructorParameters<typeof McpServerConnection>[2] = SETTINGS,
) {
  const c = new McpServerConnection(key, config, settings);
  open.push(c);
  return c;
}
const everything = () =>
  connection("everything", { command: process.execPath, args: [serverBin("server-everything")] });

afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
  dirs.cleanup();
});

afterAll(() => {
  // Every child this file started has been closed: none is left running.
  expect(childPids().filter(alive)).toEqual([]);
});

describe("server-everything over stdio", () => {
  it("connects, lists, calls and maps text, structured content, images and resource links; closing ends the child", async () => {
    const c = everything();
    await c.connect();
    const names = c.tools.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
        "get-resource-links",
        "trigger-long-running-operation",
      ]),
    );
    expect(c.tools.find((t) => t.name === "echo")!.inputSchema).toMatchObject({ type: "object" });

    expect(
      mapCallResult(await c.callTool("echo", { message: "hi" }, { signal: never, timeoutMs: 5_000 }), 1_000).output
        .content,
    ).toEqual([{ type: "text", text: "Echo: hi" }]);
    const structured = mapCallResult(
      await c.callTool("get-structured-content", { location: "New York" }, { signal: never, timeoutMs: 5_000 }),
      1_000,
    ).output;
    expect(structured.details).toMatchObject({ structuredContent: { temperature: expect.any(Number) } });
    const image = mapCallResult(await c.callTool("get-tiny-image", {}, { signal: never, timeoutMs: 5_000 }), 1_000)
      .output.content as Array<{ type: string; mediaType?: string }>;
    expect(image.some((b) => b.type === "image" && b.mediaType === "image/png")).toBe(true);
    const links = mapCallResult(
      await c.callTool("get-resource-links", { count: 2 }, { signal: never, timeoutMs: 5_000 }),
      1_000,
    ).output.content as Array<{ text: string }>;
    expect(links.filter((b) => b.text.startsWith("[resource link]"))).toHaveLength(2);

    const pid = c.pid!;
    expect(alive(pid)).toBe(true);
    await c.close();
    await until(() => !alive(pid), 5_000, "the child to exit");
  });

  it("returns isError results for an unknown tool and invalid arguments", async () => {
    const c = everything();
    await c.connect();
    const unknown = mapCallResult(
      await c.callTool("no-such-tool", {}, { signal: never, timeoutMs: 5_000 }),
      1_000,
    ).output;
    expect(unknown.isError).toBe(true);
    expect(JSON.stringify(unknown.content)).toContain("no-such-tool");
    const bad = mapCallResult(
      await c.callTool("get-sum", { a: "x" }, { signal: never, timeoutMs: 5_000 }),
      1_000,
    ).output;
    expect(bad.isError).toBe(true);
  });

  it("restarts a server killed mid-call: that call fails as crashed, the next one works", async () => {
    const c = everything();
    await c.connect();
    const first = c.pid!;
    const call = c.callTool(
      "trigger-long-running-operation",
      { duration: 20, steps: 20 },
      { signal: never, timeoutMs: 30_000 },
    );
    await new Promise((r) => setTimeout(r, 300));
    process.kill(first, "SIGKILL");
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(McpCallError);
    expect((err as McpCallError).kind).toBe("crashed");
    // The next call waits for the restart (backoff 100 ms) and succeeds on a new process.
    const again = await c.callTool("echo", { message: "back" }, { signal: never, timeoutMs: 15_000 });
    expect(JSON.stringify(again.content)).toContain("Echo: back");
    expect(c.pid).not.toBe(first);
    expect(c.restarts).toBe(0);
  });
});

describe("server-filesystem over stdio (temp dir)", () => {
  it("lists, reads and writes inside the allowed dir, refuses outside it, and cuts a large output", async () => {
    const root = dirs.make();
    const outside = dirs.make();
    writeFileSync(join(root, "a.txt"), "alpha");
    writeFileSync(join(root, "big.txt"), "0123456789\n".repeat(100_000));
    writeFileSync(join(outside, "secret.txt"), "no");
    const c = connection("fs", { command: process.execPath, args: [serverBin("server-filesystem"), root] });
    await c.connect();
    expect(c.tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(["read_text_file", "write_file", "list_directory"]),
    );

    const listing = mapCallResult(
      await c.callTool("list_directory", { path: root }, { signal: never, timeoutMs: 10_000 }),
      10_000,
    ).output;
    expect(JSON.stringify(listing.content)).toContain("a.txt");
    await c.callTool(
      "write_file",
      { path: join(root, "b.txt"), content: "beta" },
      { signal: never, timeoutMs: 10_000 },
    );
    expect(readFileSync(join(root, "b.txt"), "utf8")).toBe("beta");

    const denied = mapCallResult(
      await c.callTool("read_text_file", { path: join(outside, "secret.txt") }, { signal: never, timeoutMs: 10_000 }),
      10_000,
    ).output;
    expect(denied.isError).toBe(true);

    const big = mapCallResult(
      await c.callTool("read_text_file", { path: join(root, "big.txt") }, { signal: never, timeoutMs: 20_000 }),
      50_000,
    );
    expect(big.bytes).toBeGreaterThanOrEqual(1_100_000);
    expect(big.truncated).toBe(true);
    const text = (big.output.content as Array<{ text: string }>).map((b) => b.text).join("");
    expect(text.length).toBeLessThan(50_200);
    expect(text).toContain("more characters not shown");
  });
});

describe("server-memory over stdio", () => {
  it("creates entities and finds them again", async () => {
    const home = dirs.make();
    const file = join(home, "memory.jsonl");
    const c = connection("memory", {
      command: process.execPath,
      args: [serverBin("server-memory")],
      env: { MEMORY_FILE_PATH: file },
    });
    await c.connect();
    await c.callTool(
      "create_entities",
      { entities: [{ name: "Keel", entityType: "project", observations: ["a microkernel for agents"] }] },
      { signal: never, timeoutMs: 10_000 },
    );
    const found = mapCallResult(
      await c.callTool("search_nodes", { query: "microkernel" }, { signal: never, timeoutMs: 10_000 }),
      10_000,
    ).output;
    expect(JSON.stringify(found.content)).toContain("Keel");
    expect(existsSync(file)).toBe(true);
  });
});

describe("faults (fixture servers)", () => {
  it("reads paginated tool lists whole and refreshes on notifications/tools/list_changed", async () => {
    const c = connection("fx", fixture("scripted-server.mjs"));
    await c.connect();
    expect(c.tools.map((t) => t.name)).toEqual(["echo", "hang", "fail", "add_tool", "crash", "weird name/with.dots"]);
    let changed = 0;
    c.onToolsChanged = () => changed++;
    await c.callTool("add_tool", {}, { signal: never, timeoutMs: 5_000 });
    await until(() => c.tools.some((t) => t.name === "late"), 5_000, "the refreshed list");
    expect(changed).toBe(1);
    expect(c.tools).toHaveLength(7);
  });

  it("error answers are told apart by cause (invalid request, unreachable upstream, the server's own failure); a call that never answers times out and is cancelled through MCP", async () => {
    const log = join(dirs.make(), "notes.jsonl");
    const c = connection("fx", fixture("scripted-server.mjs", { FIXTURE_LOG: log }));
    await c.connect();
    const failed = await c.callTool("fail", {}, { signal: never, timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect((failed as McpCallError).kind).toBe("rejected");
    expect((failed as Error).message).toContain("invalid params on purpose");
    const upstream = await c
      .callTool("fail", { text: "upstream" }, { signal: never, timeoutMs: 5_000 })
      .catch((e: unknown) => e);
    expect((upstream as McpCallError).kind).toBe("upstream");
    expect((upstream as Error).message).toContain("ENOTFOUND api.example.invalid");
    const internal = await c
      .callTool("fail", { text: "internal" }, { signal: never, timeoutMs: 5_000 })
      .catch((e: unknown) => e);
    expect((internal as McpCallError).kind).toBe("protocol_error");
    expect((internal as Error).message).toContain("cannot read properties");

    const timedOut = await c.callTool("hang", {}, { signal: never, timeoutMs: 400 }).catch((e: unknown) => e);
    expect((timedOut as McpCallError).kind).toBe("timeout");
    await until(
      () => existsSync(log) && readFileSync(log, "utf8").includes("notifications/cancelled"),
      5_000,
      "notifications/cancelled",
    );

    const ctrl = new AbortController();
    const pending = c.callTool("hang", {}, { signal: ctrl.signal, timeoutMs: 30_000 }).catch((e: unknown) => e);
    setTimeout(() => ctrl.abort(new Error("user pressed stop")), 100);
    expect(((await pending) as McpCallError).kind).toBe("cancelled");
    await until(
      () => readFileSync(log, "utf8").split("notifications/cancelled").length === 3,
      5_000,
      "a second notifications/cancelled",
    );
    // The server is still usable afterwards.
    expect(
      JSON.stringify((await c.callTool("echo", { text: "ok" }, { signal: never, timeoutMs: 5_000 })).content),
    ).toContain("ok");
  });

  it("a server that never answers fails to start within its timeout and leaves no process behind", async () => {
    const c = connection("silent", { ...fixture("silent-server.mjs"), connectTimeoutMs: 800 });
    const started = c.connect().catch((e: unknown) => e);
    await until(() => c.pid !== undefined, 5_000, "the child to spawn");
    const pid = c.pid!;
    const err = (await started) as Error;
    expect(err.message).toContain('MCP server "silent" failed to start: no answer within 800 ms');
    expect(c.state).toBe("failed");
    expect(c.stderrTail).toContain("never answering");
    await until(() => !alive(pid), 5_000, "the silent child to be ended");
  });

  it.runIf(process.platform !== "win32")(
    "close ends the server's whole process group: a grandchild (as under npx) that ignores the end of stdin and SIGTERM is killed after 2 × stopGraceMs",
    async () => {
      const pidFile = join(dirs.make(), "grandchild.pid");
      const c = connection(
        "forking",
        {
          command: process.execPath,
          args: [fixture("forking-server.mjs").args[0]!, pidFile],
          connectTimeoutMs: 60_000,
        },
        { ...SETTINGS, stopGraceMs: 200 },
      );
      const started = c.connect().catch((e: unknown) => e);
      await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "", 10_000, "the grandchild to start");
      const grandchild = Number(readFileSync(pidFile, "utf8"));
      expect(liveServerPids()).toEqual([c.pid]);
      const t0 = performance.now();
      await c.close();
      // stdin closed, 200 ms, SIGTERM to the group (the wrapper ends, the grandchild does not), 200 ms, SIGKILL.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(400);
      expect(performance.now() - t0).toBeLessThan(400 + 1_000 + 2_000);
      expect(running(grandchild)).toBe(false);
      expect(liveServerPids()).toEqual([]);
      expect(String(await started)).toContain('MCP server "forking" failed to start');
    },
  );

  it("the pool reports a server that exits at start with its stderr tail and starts the others", async () => {
    const pool = new McpPool(
      {
        broken: {
          command: process.execPath,
          args: ["-e", "console.error('fatal: FOO_API_KEY is not set'); process.exit(3)"],
        },
        missing: { command: "/nonexistent/keel-no-such-server", args: [] },
        fx: fixture("scripted-server.mjs"),
      },
      SETTINGS,
    );
    try {
      const reports = await pool.start();
      const broken = reports.find((r) => r.server === "broken")!;
      expect(broken.ok).toBe(false);
      expect(broken.stderrTail).toContain("FOO_API_KEY is not set");
      expect(reports.find((r) => r.server === "missing")).toMatchObject({
        ok: false,
        error: expect.stringContaining("ENOENT"),
      });
      expect(reports.find((r) => r.server === "fx")).toMatchObject({ ok: true, tools: 6 });
      const inv = pool.inventory();
      expect(inv.tools.map((t) => t.name)).toContain("mcp__fx__weird_name_with_dots");
      expect(inv.tools.find((t) => t.name === "mcp__fx__weird_name_with_dots")!.parameters).toEqual({
        type: "object",
        properties: { a: { type: "string" }, b: { type: "number" } },
      });
    } finally {
      await pool.close();
    }
  });
});

describe("the environment a stdio server gets", () => {
  // Prints the variables it sees on stderr, then exits: the pool's report carries the stderr tail.
  const printer = {
    command: process.execPath,
    args: [
      "-e",
      "for (const k of ['HTTPS_PROXY','https_proxy','NODE_EXTRA_CA_CERTS','ACME_TOKEN','KEEL_CUSTOM']) console.error(k + '=' + (process.env[k] ?? '<unset>')); process.exit(3)",
    ],
  };
  const saved: Record<string, string | undefined> = {};
  const setEnv = (vars: Record<string, string>) => {
    for (const [k, v] of Object.entries(vars)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  };
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  async function seen(config: Record<string, unknown>): Promise<string> {
    const pool = new McpPool({ p: { ...printer, ...config } as never }, SETTINGS);
    try {
      const [report] = await pool.start();
      expect(report!.ok).toBe(false);
      return report!.stderrTail ?? "";
    } finally {
      await pool.close();
    }
  }

  it("inherits proxy and CA variables by default (the server's own env wins), but no other variable", async () => {
    setEnv({
      HTTPS_PROXY: "http://127.0.0.1:3128",
      https_proxy: "http://127.0.0.1:3129",
      NODE_EXTRA_CA_CERTS: "/etc/corp-ca.pem",
      ACME_TOKEN: "not-for-servers",
      KEEL_CUSTOM: "x",
    });
    const tail = await seen({});
    expect(tail).toContain("HTTPS_PROXY=http://127.0.0.1:3128");
    expect(tail).toContain("https_proxy=http://127.0.0.1:3129");
    expect(tail).toContain("NODE_EXTRA_CA_CERTS=/etc/corp-ca.pem");
    expect(tail).toContain("ACME_TOKEN=<unset>");
    const own = await seen({ env: { HTTPS_PROXY: "http://127.0.0.1:8080" } });
    expect(own).toContain("HTTPS_PROXY=http://127.0.0.1:8080");
  });

  it("inheritEnv: false passes none; a list passes those names too", async () => {
    setEnv({ HTTPS_PROXY: "http://127.0.0.1:3128", KEEL_CUSTOM: "yes" });
    const none = await seen({ inheritEnv: false });
    expect(none).toContain("HTTPS_PROXY=<unset>");
    const extra = await seen({ inheritEnv: ["KEEL_CUSTOM"] });
    expect(extra).toContain("KEEL_CUSTOM=yes");
    expect(extra).toContain("HTTPS_PROXY=http://127.0.0.1:3128");
  });
});

describe("server-everything over Streamable HTTP", () => {
  let server: ChildProcess | undefined;
  afterEach(() => {
    server?.kill("SIGTERM");
    server = undefined;
  });

  it("connects with headers, lists and calls", async () => {
    const port = await freePort();
    server = spawn(process.execPath, [serverBin("server-everything"), "streamableHttp"], {
      env: { ...process.env, PORT: String(port) },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let err = "";
    server.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    await until(() => err.includes("listening"), 15_000, "the HTTP server to listen");
    const c = connection("http", { url: `http://127.0.0.1:${port}/mcp`, headers: { "x-keel-test": "1" } });
    await c.connect();
    expect(c.tools.map((t) => t.name)).toContain("echo");
    const r = await c.callTool("echo", { message: "over http" }, { signal: never, timeoutMs: 5_000 });
    expect(JSON.stringify(r.content)).toContain("Echo: over http");
    // The server goes away: the next call says it cannot be reached and why, not "fix the arguments".
    const exited = new Promise((r) => server!.once("exit", r));
    server.kill("SIGKILL");
    await exited;
    const gone = await c
      .callTool("echo", { message: "again" }, { signal: never, timeoutMs: 5_000 })
      .catch((e: unknown) => e);
    expect((gone as McpCallError).kind).toBe("unavailable");
    expect((gone as Error).message).toMatch(/ECONNREFUSED|fetch failed/);
    await c.close();
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}
