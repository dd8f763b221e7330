/**
 * Adversarial scenarios for classes 2–4 of issue 12 (broken Unicode, secrets and isolation,
 * unbounded input), tried from outside after the fixes were merged: each drives the real
 * `keel` binary (or an agent with the official SDK providers) against the wire server and
 * asserts the promise on what the provider was sent, what is on disk and how the run ended.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { complete, createAgent, definePlugin } from "../../packages/agent/src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../packages/testkit/src/index.ts";
import { SqliteSessionStore } from "../../packages/store-sqlite/src/index.ts";
import { isWellFormed } from "../../packages/text/src/index.ts";
import { anthropicProvider } from "../../packages/providers/src/anthropic.ts";
import { startWireServer } from "../../packages/wire-server/src/index.ts";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import { redact } from "../../packages/secrets/src/index.ts";
import { filesContaining, keel as keelRun, MCP_SERVER, project } from "./support/adversarial-b.ts";
import { gate } from "../../packages/cli/test/support/gate.ts";
import type { Project } from "./support/adversarial-b.ts";
import { secrets } from "./support/secrets.ts";
import { wellFormedDeep } from "./support/unicode.ts";

const S = secrets();
// Every scenario has its own project and wire server, so the blocks run concurrently; their
// `keel` processes take turns, two at a time (a run's `ms` counts from its own start), and the
// runs moving megabytes one at a time (two of them side by side would share the cores their
// bounds assume). A scenario may wait its turn, so the blocks' timeouts are hang bounds (120 s).
const slot = gate(2);
const heavy = gate(1);
const keel = (...args: Parameters<typeof keelRun>) => slot(() => keelRun(...args));
const keelHeavy = (...args: Parameters<typeof keelRun>) => heavy(() => keel(...args));
const QUEUED = { timeout: 120_000 };
const projects: Project[] = [];
const servers: WireServer[] = [];
async function world(): Promise<{ p: Project; server: WireServer }> {
  const p = project();
  const server = await startWireServer();
  projects.push(p);
  servers.push(server);
  return { p, server };
}
afterAll(async () => {
  for (const s of servers) await s.close();
  for (const p of projects) p.cleanup();
});

/** Random base62 (a realistic key body; no key literal in the repository). */
const rnd = (n: number) =>
  [...randomBytes(n)].map((b) => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[b % 62]).join("");

function userTexts(home: string): string[] {
  const db = new DatabaseSync(join(home, "sessions.sqlite"), { readOnly: true });
  try {
    const rows = db.prepare("SELECT data FROM events WHERE type = 'message.appended' ORDER BY seq").all() as Array<{
      data: string;
    }>;
    return rows
      .map((r) => JSON.parse(r.data).message)
      .filter((m: { role: string }) => m.role === "user")
      .map((m: { content: Array<{ text?: string }> }) => m.content.map((b) => b.text ?? "").join(""));
  } finally {
    db.close();
  }
}

const MODELS = {
  anthropic: "anthropic:claude-sonnet-4-6",
  chat: "openai-compatible:gpt-4o",
  responses: "openai:gpt-4.1",
} as const;

describe.concurrent("adversarial: broken Unicode", QUEUED, () => {
  it("a stream that cuts every surrogate pair between two SSE events (Anthropic, Chat Completions, Responses): keel prints and stores each emoji whole, never as two U+FFFD", async () => {
    const { p, server } = await world();
    const text = "Party 😀🎉 at the 𝔘niversity, family 👨‍👩‍👧 too!";
    for (const api of ["anthropic", "chat", "responses"] as const) {
      server.enqueue({ text, chunks: 7, splitPairs: true, api });
      const run = await keel(p, server, ["say it"], { FAULT_MODEL: MODELS[api] });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout, api).toBe(`${text}\n`);
      expect(run.stdout).not.toContain("\uFFFD");
    }
    // The wire really cut the pairs: each event's JSON carries an escaped half.
    expect(server.requests.map((r) => r.outcome)).toEqual(["completed", "completed", "completed"]);
    const stored = userTexts(p.home);
    expect(stored).toHaveLength(3);
  });

  it("tool arguments whose emoji straddle two argument deltas, with a lone surrogate too, come back to the provider well-formed: the pair whole, the lone half as U+FFFD", async () => {
    const { p, server } = await world();
    server.enqueue(
      {
        toolCalls: [
          {
            name: "post",
            args: { url: "https://example.com/🎉", data: `party 😀 then half ${"\ud83d"} end` },
            chunks: 9,
          },
        ],
        splitPairs: true,
        api: "anthropic",
      },
      { text: "Posted.", api: "anthropic" },
    );
    const run = await keel(p, server, ["post it"]);
    expect(run.code, run.stderr).toBe(0);
    const reqs = server.requests;
    expect(reqs.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    expect(wellFormedDeep(reqs[1]!.body)).toBe(true);
    const sent = JSON.stringify(reqs[1]!.body.messages);
    expect(sent).toContain("party 😀 then half \uFFFD end");
    expect(sent).toContain("https://example.com/🎉");
  });

  it("a plugin's side call through complete() with its own model (the docs' pattern) is repaired too: a lone surrogate in the user's input never reaches that provider", async () => {
    const server = await startWireServer({ onEmpty: () => ({ text: "a summary" }) });
    servers.push(server);
    const own = anthropicProvider({
      model: "claude-haiku-4-5",
      apiKey: "sk-test",
      baseURL: server.anthropicBaseURL,
      maxRetries: 0,
    });
    const summaries: string[] = [];
    const failures: string[] = [];
    const summarizer = definePlugin({
      name: "summarizer",
      version: "1.0.0",
      setup(ctx) {
        ctx.on(
          "turn.post_turn",
          async (event, hook) => {
            try {
              const r = await complete(
                own,
                {
                  system: "Summarize.",
                  messages: [{ role: "user", content: [{ type: "text", text: event.input }] }],
                  options: { maxTokens: 50 },
                },
                { signal: hook.signal },
              );
              summaries.push(r.text);
            } catch (err) {
              failures.push(String(err));
            }
          },
          { await: "blocking", timeoutMs: 5_000 },
        );
      },
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      store: new MemorySessionStore(),
      sideModel: false,
      plugins: [summarizer],
    });
    const session = await agent.session();
    await session.run(`pasted from a broken terminal: ${"\ud83d"} and ${"\ude00"} here`);
    await agent.close();
    expect(failures).toEqual([]);
    expect(summaries).toEqual(["a summary"]);
    expect(server.requests.map((r) => r.outcome)).toEqual(["completed"]);
    expect(JSON.stringify(server.requests[0]!.body.messages)).toContain("terminal: \uFFFD and \uFFFD here");
  });

  it("a lone surrogate in the config's instructions reaches the provider as U+FFFD and the turn completes", async () => {
    const { p, server } = await world();
    server.enqueue({ text: "Fine.", api: "anthropic" });
    const run = await keel(p, server, ["hello"], { FAULT_INSTRUCTIONS: "Be terse <LONE> always." });
    expect(run.code, run.stderr).toBe(0);
    const [req] = server.requests;
    expect(req!.outcome).toBe("completed");
    expect(JSON.stringify(req!.body.system)).toContain("Be terse \uFFFD always.");
  });
});

describe.concurrent("adversarial: secrets and isolation", QUEUED, () => {
  it("a GitHub token in a tool call's `data` argument (and under an `id` key inside it) is in no file under KEEL_HOME", async () => {
    const { p, server } = await world();
    const gh = `ghp_${rnd(36)}`;
    server.enqueue(
      {
        toolCalls: [
          { name: "post", args: { url: "https://api.example.com/hooks", data: `token=${gh}`, headers: { id: gh } } },
        ],
        api: "anthropic",
      },
      { text: "Posted.", api: "anthropic" },
    );
    const run = await keel(p, server, ["post the hook"]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.stringify(server.requests[1]!.body)).toContain(gh); // the live turn had it
    expect(filesContaining(p.home, [gh, gh.slice(4)])).toEqual([]);
  });

  it("a plugin diagnostic whose structured `data` holds a bearer token and a key under `signature` and `id`: the session log holds none of them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-fault-advb-diag-"));
    projects.push({ dir, home: dir, config: "", cleanup: () => {} });
    const token = rnd(40);
    const key = `sk-ant-api03-${rnd(60)}`;
    const chatty = definePlugin({
      name: "chatty",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", () => ({
          kind: "diagnostic",
          level: "warn",
          code: "CHATTY_UPSTREAM",
          message: "upstream answered 401",
          data: { request: { headers: { authorization: `Bearer ${token}` } }, signature: key, id: key },
        }));
      },
    });
    const store = new SqliteSessionStore({ path: join(dir, "sessions.sqlite") });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      store,
      sideModel: false,
      plugins: [chatty],
    });
    const session = await agent.session();
    await session.run("hello");
    await agent.close();
    const db = new DatabaseSync(join(dir, "sessions.sqlite"), { readOnly: true });
    const diag = (
      db.prepare("SELECT data FROM events WHERE data LIKE '%CHATTY_UPSTREAM%'").all() as Array<{ data: string }>
    ).map((r) => r.data);
    db.close();
    expect(diag.length).toBeGreaterThan(0);
    expect(filesContaining(dir, [token, key, key.slice(14)])).toEqual([]);
  });

  it("ordinary developer text quoted from real agent trajectories (paths in stack traces, image URLs, endpoints, doc placeholders, code reading a password) is stored verbatim, not redacted", async () => {
    const { p, server } = await world();
    const lines = [
      `File "/home/runner/work/HENDRICS/HENDRICS/.tox/py310-test-devdeps/lib/python3.10/site-packages/astropy/io/registry/base.py", line 313, in read`,
      "(Open file: /__home__udiboy__projects__LLM_CTF__llm_ctf_automation__LLM_CTF_Dataset_Dev__2016__CSAW-Quals__pwn__WarmUp/exploit.py)",
      "https://warpedtable.com/cdn/shop/products/F331B563-AB73-430A-A6DF-3C5E0F91A4D8.jpg",
      "# http://www.celestrak.com/publications/aiaa/2006-6753/AIAA-2006-6753.pdf",
      'export ANTHROPIC_API_KEY="your-api-key"',
      "  -e GITHUB_TOKEN=ghp_xxx \\",
      'mongosh "mongodb://$DB_USER:$DB_PASSWORD@$DB_HOST:$DB_PORT/$DB_NAME"',
      "valid_urls = ['http://user:pass@example.com']",
      "        passwd = conn_params.get('password', '')",
      "        if passwd:",
      "            env['PGPASSWORD'] = str(passwd)",
      "`PGPASSWORD` is not set if password is empty.",
      'Token Counting (`POST /v1/messages/count_tokens`), token_endpoint: "https://slack.com/api/oauth.v2.access"',
      "thinking: budget_tokens=10000, max_tokens=16000. The token is short-lived and not auto-refreshed.",
      "commit 3f2a9b0c4d5e6f708192a3b4c5d6e7f8091a2b3c, request 123e4567-e89b-12d3-a456-426614174000",
    ];
    const input = lines.join("\n");
    server.enqueue({ text: "Looked.", api: "anthropic" });
    const run = await keel(p, server, [input]);
    expect(run.code, run.stderr).toBe(0);
    const [stored] = userTexts(p.home);
    expect(stored).not.toContain("[REDACTED");
    expect(stored).toBe(input);
  });

  it("secrets in forms the scanner used to miss (db_password=, REDIS_PASS=, a URL-encoded AWS secret in a query, a Google OAuth token) are in no file; the text around them is kept", async () => {
    const { p, server } = await world();
    const pw = `Hq${rnd(10)}7`;
    const redis = `r3d${rnd(9)}`;
    const oauth = `ya29.a0${rnd(60)}`;
    const url = `https://uploads.example.com/put?aws_secret_access_key=${encodeURIComponent(S.awsSecret)}&region=eu-west-1`;
    const input = `config.ini has db_password=${pw} and the .env has REDIS_PASS=${redis}; the uploader calls ${url} with ${oauth}`;
    server.enqueue({ text: "Noted.", api: "anthropic" });
    const run = await keel(p, server, [input]);
    expect(run.code, run.stderr).toBe(0);
    expect(filesContaining(p.home, [pw, redis, oauth.slice(5), encodeURIComponent(S.awsSecret), S.awsSecret])).toEqual(
      [],
    );
    const [stored] = userTexts(p.home);
    expect(stored).toContain("config.ini has db_password=[REDACTED:");
    expect(stored).toContain("&region=eu-west-1");
  });

  it("a .env file pasted whole, a GCP service-account JSON and an Azure connection string: no secret in any file, the ordinary lines kept", async () => {
    const { p, server } = await world();
    const keyId = randomBytes(20).toString("hex");
    const pem = `-----BEGIN PRIVATE KEY-----\n${randomBytes(96).toString("base64")}\n${randomBytes(96).toString("base64")}\n-----END PRIVATE KEY-----\n`;
    const azure = randomBytes(64).toString("base64");
    const session = rnd(32);
    const django = `django-insecure-${rnd(40)}`;
    const env = [
      "APP_NAME=billing",
      "PORT=8080",
      `SESSION_SECRET=${session}`,
      `DJANGO_SECRET_KEY='${django}'`,
      `STRIPE_KEY=${S.stripe}`,
    ].join("\n");
    const sa = JSON.stringify(
      {
        type: "service_account",
        project_id: "acme-prod",
        private_key_id: keyId,
        private_key: pem,
        client_email: "ci@acme-prod.iam.gserviceaccount.com",
      },
      null,
      2,
    );
    const conn = `DefaultEndpointsProtocol=https;AccountName=acmestore;AccountKey=${azure};EndpointSuffix=core.windows.net`;
    server.enqueue({ text: "Set up.", api: "anthropic" });
    const run = await keel(p, server, [
      `Here is my .env:\n${env}\n\nthe service account:\n${sa}\n\nand storage: ${conn}`,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const pemLine = pem.split("\n")[1]!;
    expect(
      filesContaining(p.home, [
        session,
        django,
        S.stripe,
        keyId,
        pemLine.slice(0, 40),
        JSON.stringify(pemLine).slice(1, 40),
        azure.slice(0, 40),
      ]),
    ).toEqual([]);
    const [stored] = userTexts(p.home);
    for (const kept of [
      "APP_NAME=billing",
      "PORT=8080",
      '"project_id": "acme-prod"',
      "ci@acme-prod.iam.gserviceaccount.com",
      "AccountName=acmestore",
      "EndpointSuffix=core.windows.net",
    ])
      expect(stored).toContain(kept);
  });

  it("the scanner's false-positive fixes keep its catches: a key after a path-like word, base64 of a key, and a password in a URL are still redacted", () => {
    const gh = `ghp_${rnd(36)}`;
    expect(redact(`secret: ${rnd(24)}/${rnd(20)}`)).toMatch(/^secret: \[REDACTED:/);
    expect(redact(`auth blob ${Buffer.from(gh).toString("base64")}`)).not.toContain(
      Buffer.from(gh).toString("base64").slice(0, 30),
    );
    expect(redact(`postgres://app:${rnd(14)}@db.internal/app`)).toContain("[REDACTED:");
    expect(redact("http://user:${PASSWORD}@example.com and http://user:pass@example.com")).toBe(
      "http://user:${PASSWORD}@example.com and http://user:pass@example.com",
    );
  });
});

describe.concurrent("adversarial: unbounded input", QUEUED, () => {
  it("a tool result of 40 images of 1 MB: the request carries at most limits.maxToolResultImageBytes (5,000,000) of images, each dropped one leaves a note, and the next turn stays small", async () => {
    const { p, server } = await world();
    server.enqueue(
      { toolCalls: [{ name: "image", args: {} }], api: "anthropic" },
      { text: "Seen.", api: "anthropic" },
      { text: "Still here.", api: "anthropic" },
    );
    const first = await keelHeavy(p, server, ["show the screenshots"], { FAULT_IMAGES: "40", FAULT_IMAGE_MB: "1" });
    expect(first.code, first.stderr).toBe(0);
    const size = (i: number) => JSON.stringify(server.requests[i]!.body).length;
    expect(server.requests.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    expect(size(1)).toBeLessThan(5_300_000);
    const sent = JSON.stringify(server.requests[1]!.body.messages);
    expect(sent.match(/"type":"image"/g)).toHaveLength(4);
    expect(
      sent.match(
        /was dropped from this tool result: its images may hold 5000000 bytes in all \(limits\.maxToolResultImageBytes\)/g,
      ),
    ).toHaveLength(36);
    const session = /session (\S+)/.exec(first.stderr)![1]!;
    const second = await keelHeavy(p, server, ["--session", session, "and now?"]);
    expect(second.code, second.stderr).toBe(0);
    expect(size(2)).toBeLessThan(5_300_000);
  });

  it("a single 12 MB screenshot is dropped with a note under a configured limits.maxToolResultImageBytes; the turn completes", async () => {
    const { p, server } = await world();
    server.enqueue(
      { toolCalls: [{ name: "image", args: {} }], api: "anthropic" },
      { text: "No image.", api: "anthropic" },
    );
    const run = await keelHeavy(p, server, ["show it"], { FAULT_IMAGE_MB: "12", FAULT_MAX_IMAGE: "3000000" });
    expect(run.code, run.stderr).toBe(0);
    const body = JSON.stringify(server.requests[1]!.body);
    expect(body.length).toBeLessThan(100_000);
    expect(body).toContain("the screenshot:");
    expect(body).toMatch(
      /an image \(image\/png, 12582912 bytes\) was dropped from this tool result: its images may hold 3000000 bytes/,
    );
  });

  it("a 20 MB tool result in 50,000 small text blocks is capped like one block: head, tail and the count of what was cut", async () => {
    const { p, server } = await world();
    server.enqueue(
      { toolCalls: [{ name: "blocks", args: {} }], api: "anthropic" },
      { text: "Many blocks.", api: "anthropic" },
    );
    const run = await keelHeavy(p, server, ["list them"], { FAULT_BLOCKS: "50000", FAULT_BLOCK_CHARS: "400" });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(20_000);
    const body = JSON.stringify(server.requests[1]!.body.messages);
    expect(body.length).toBeLessThan(120_000);
    expect(body).toContain("FIRST-BLOCK");
    expect(body).toContain("LAST-BLOCK");
    expect(Number(/\[… (\d+) characters cut from this tool result/.exec(body)?.[1])).toBeGreaterThan(19_000_000);
  });

  it("a model's 3 MB tool argument: the oversize next request is never sent, keel exits 1 with KEEL_CONTEXT_OVERFLOW within the bound", async () => {
    const { p, server } = await world();
    server.enqueue(
      {
        toolCalls: [{ name: "post", args: { url: "https://x.example", data: "word ".repeat(600_000) } }],
        api: "anthropic",
      },
      { text: "never sent", api: "anthropic" },
    );
    const run = await keelHeavy(p, server, ["post a lot"]);
    expect(run.code).toBe(1);
    expect(run.ms).toBeLessThan(20_000);
    expect(run.stderr).toContain("KEEL_CONTEXT_OVERFLOW");
    expect(server.requests).toHaveLength(1);
    expect(server.pending()).toBe(1);
  });
});

describe.concurrent("adversarial: a real MCP server over stdio", QUEUED, () => {
  it("an MCP result holding lone surrogates (each escaped alone in its JSON-RPC line) reaches the provider repaired and is stored well-formed", async () => {
    const { p, server } = await world();
    server.enqueue(
      { toolCalls: [{ name: "mcp__adv__halves", args: {} }], api: "anthropic" },
      { text: "Read.", api: "anthropic" },
    );
    const run = await keel(p, server, ["call halves"], { FAULT_MCP: MCP_SERVER });
    expect(run.code, run.stderr).toBe(0);
    expect(server.requests.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    expect(JSON.stringify(server.requests[1]!.body.messages)).toContain("start \uFFFD mid \uFFFD end 👍");
    const db = new DatabaseSync(join(p.home, "sessions.sqlite"), { readOnly: true });
    const rows = db.prepare("SELECT data FROM events").all() as Array<{ data: string }>;
    db.close();
    expect(rows.every((r) => isWellFormed(r.data) && !/\\ud[89a-f][0-9a-f]{2}/i.test(r.data))).toBe(true);
  });

  it("an 8 MB MCP result in 8,000 blocks is capped: the provider gets head, tail and the count, not 8 MB (the MCP SDK drops a JSON-RPC line over 10 MB: see the plugin README)", async () => {
    const { p, server } = await world();
    server.enqueue(
      { toolCalls: [{ name: "mcp__adv__huge", args: {} }], api: "anthropic" },
      { text: "Big.", api: "anthropic" },
    );
    const run = await keelHeavy(p, server, ["call huge"], { FAULT_MCP: MCP_SERVER, FAULT_HUGE_MB: "8" });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(20_000);
    const body = JSON.stringify(server.requests[1]!.body.messages);
    expect(body.length).toBeLessThan(150_000);
    expect(body).toContain("MCP-HEAD");
    // One marker counts what the MCP cap dropped (not one marker per dropped block).
    expect(body.match(/output cut/g)).toHaveLength(1);
    expect(Number(/output cut: (\d+) more characters in (\d+) blocks not shown/.exec(body)?.[1])).toBeGreaterThan(
      7_000_000,
    );
  });

  it("a 12 MB MCP result (over the MCP SDK's 10 MB message limit): the call gets an error result that says so, not that the server exited, and the turn completes", async () => {
    const { p, server } = await world();
    server.enqueue(
      { toolCalls: [{ name: "mcp__adv__huge", args: {} }], api: "anthropic" },
      { text: "Too big.", api: "anthropic" },
    );
    const run = await keelHeavy(p, server, ["call huge"], { FAULT_MCP: MCP_SERVER, FAULT_HUGE_MB: "12" });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(20_000);
    const body = JSON.stringify(server.requests[1]!.body.messages);
    expect(body).toContain("with a message over the MCP SDK's limit of 10485760 bytes");
    expect(body).not.toContain("exited during the call");
  });

  it("a key an MCP server writes to stderr before it dies is in no file under KEEL_HOME (session log, MCP audit)", async () => {
    const { p, server } = await world();
    const key = rnd(40);
    server.enqueue(
      { toolCalls: [{ name: "mcp__adv__leak", args: {} }], api: "anthropic" },
      { text: "It failed.", api: "anthropic" },
    );
    const run = await keel(p, server, ["call leak"], { FAULT_MCP: MCP_SERVER, FAULT_LEAK: key });
    expect(run.code, run.stderr).toBe(0);
    expect(filesContaining(p.home, [key])).toEqual([]);
  });
});

it.concurrent(
  "support: the wire server's splitPairs really cuts pairs (each half escaped alone), so the Unicode scenario above tests what it says",
  QUEUED,
  async () => {
    const server = await startWireServer();
    servers.push(server);
    server.enqueue({ text: "a😀b", splitPairs: true });
    const res = await fetch(`${server.anthropicBaseURL}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "x", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "m", max_tokens: 10, stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    const raw = await res.text();
    const deltas = [...raw.matchAll(/"text_delta","text":"((?:[^"\\]|\\.)*)"/g)].map(
      (m) => JSON.parse(`"${m[1]}"`) as string,
    );
    expect(deltas.join("")).toBe("a😀b");
    expect(deltas.some((d) => !isWellFormed(d))).toBe(true);
  },
);
