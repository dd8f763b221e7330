/**
 * Class 3 of issue 12, secrets and isolation: nothing secret is persisted anywhere under
 * KEEL_HOME (every file's raw bytes are searched, -wal and -shm included, each key also in
 * lower case; the goals and user-model databases, which keep text from the user's words, are
 * in every world), nothing secret is recalled into a later prompt, and every retrieval path stays
 * in its session and namespace. Each scenario drives the real `keel` binary against the wire
 * server through the official Anthropic SDK, with its own KEEL_HOME (two CLIs at most at once).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect } from "vitest";
import { ok, scenario, secrets, sent, sessionOf } from "./support/secrets.ts";

const S = secrets();

function rows<T>(file: string, sql: string): T[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

/** Text of the tool results in a request. */
const toolResults = (body: { messages?: Array<{ content?: unknown }> }) =>
  JSON.stringify(
    (body.messages ?? []).flatMap((m) =>
      Array.isArray(m.content) ? m.content.filter((b: { type?: string }) => b.type === "tool_result") : [],
    ),
  );

describe("nothing secret is persisted or recalled", () => {
  scenario(
    "memory_remember of an AWS key 'with secret wJalr…' stores it redacted; no file holds it; a later session's prompt never sees it",
    {},
    async (w) => {
      w.script.main.push(
        {
          toolCalls: [
            {
              name: "memory_remember",
              args: { content: `Deploy account uses aws key ${S.awsId} with secret ${S.awsSecret} in eu-west-1` },
            },
          ],
        },
        { text: "Noted." },
      );
      await ok(w.run(`Remember: deploy account uses aws key ${S.awsId} with secret ${S.awsSecret} in eu-west-1`));
      expect(toolResults(w.mainRequests()[1]!.body)).toMatch(
        /stored; secret-like parts redacted \(aws_access_key_id, high_entropy\)/,
      );
      await ok(w.run("Which aws key and region does the deploy account use?"));
      const last = sent(w.mainRequests().at(-1)!);
      expect(last).toContain(
        "Deploy account uses aws key [REDACTED:aws_access_key_id] with secret [REDACTED:high_entropy] in eu-west-1",
      );
      expect(last).not.toContain(S.awsSecret);
      expect(w.filesContaining([S.awsSecret, S.awsId])).toEqual([]);
    },
  );

  scenario("memory_remember of an Anthropic key inside a sentence: the fact is kept, the key is not", {}, async (w) => {
    w.script.main.push(
      {
        toolCalls: [
          {
            name: "memory_remember",
            args: { content: `The eval project calls Claude with key ${S.anthropic} from CI` },
          },
        ],
      },
      { text: "Noted." },
    );
    await ok(w.run(`Remember the eval project calls Claude with key ${S.anthropic} from CI`));
    const stored = rows<{ content: string }>(join(w.home, "memory.sqlite"), "SELECT content FROM memories");
    expect(stored.map((r) => r.content)).toEqual([
      "The eval project calls Claude with key [REDACTED:anthropic_api_key] from CI",
    ]);
    expect(w.filesContaining([S.anthropic])).toEqual([]);
  });

  scenario("memory_remember of nothing but a private key is refused, and the key is in no file", {}, async (w) => {
    w.script.main.push(
      { toolCalls: [{ name: "memory_remember", args: { content: S.privateKey } }] },
      { text: "I will not store that." },
    );
    await ok(w.run(`keep my deploy key:\n${S.privateKey}`));
    expect(toolResults(w.mainRequests()[1]!.body)).toMatch(/Not stored: the content is a secret \(private_key\)/);
    expect(rows(join(w.home, "memory.sqlite"), "SELECT * FROM memories")).toEqual([]);
    expect(w.filesContaining(S.privateKey.split("\n").slice(1, 3))).toEqual([]);
  });

  scenario("memory_remember of a password in a connection URL keeps the URL without the password", {}, async (w) => {
    const url = `postgres://app:${S.dbPassword}@db.staging.internal:5432/app`;
    w.script.main.push(
      { toolCalls: [{ name: "memory_remember", args: { content: `The staging database is ${url}` } }] },
      { text: "Noted." },
    );
    await ok(w.run(`Remember the staging database is ${url}`));
    const [m] = rows<{ content: string }>(join(w.home, "memory.sqlite"), "SELECT content FROM memories");
    expect(m!.content).toMatch(/^The staging database is .*\[REDACTED:[a-z_]+\]/);
    expect(m!.content).not.toContain(S.dbPassword);
    expect(w.filesContaining([S.dbPassword])).toEqual([]);
  });

  scenario(
    "extraction: a model extractor that returns a fact holding an OpenAI key stores the other facts only",
    {},
    async (w) => {
      w.script.facts = [
        {
          content: `The user's OpenAI key is ${S.openai}`,
          key: "user.openai_key",
          category: "note",
          importance: 0.9,
          confidence: 0.9,
          scope: "user",
        },
        {
          content: "The user's editor is Zed",
          key: "user.editor",
          category: "preference",
          importance: 0.6,
          confidence: 0.9,
          scope: "user",
        },
      ];
      w.script.main.push({ text: "Got it." });
      await ok(w.run(`My OpenAI key is ${S.openai} and my editor is Zed.`));
      const stored = rows<{ content: string }>(join(w.home, "memory.sqlite"), "SELECT content FROM memories").map(
        (r) => r.content,
      );
      expect(stored).toEqual(["The user's editor is Zed"]);
      expect(w.filesContaining([S.openai])).toEqual([]);
    },
  );

  scenario("the miss log keeps a question with a Slack token redacted, never the message verbatim", {}, async (w) => {
    w.script.main.push({ text: "I do not know." });
    await ok(w.run(`Which channel does the bot token ${S.slack} post to?`));
    const misses = rows<{ query: string }>(join(w.home, "memory.sqlite"), "SELECT query FROM misses");
    expect(misses.length).toBeGreaterThan(0);
    for (const m of misses) expect(m.query).not.toContain(S.slack);
    expect(misses.some((m) => m.query.includes("[REDACTED:slack_token]"))).toBe(true);
    expect(w.filesContaining([S.slack])).toEqual([]);
  });

  scenario(
    "the session log holds a Stripe key redacted; the live turn had it, the resumed session's request does not",
    {},
    async (w) => {
      w.script.main.push({ text: "Refunded." }, { text: "Also refunded." });
      const first = await ok(w.run(`Use stripe key ${S.stripe} to refund order 42`, { json: true }));
      expect(sent(w.mainRequests()[0]!)).toContain(S.stripe);
      await ok(w.run("and order 43 too", { session: sessionOf(first) }));
      const resumed = sent(w.mainRequests().at(-1)!);
      expect(resumed).toContain("Use stripe key [REDACTED:");
      expect(resumed).not.toContain(S.stripe);
      expect(w.filesContaining([S.stripe])).toEqual([]);
    },
  );

  scenario(
    "skills: a JWT in a request reaches neither the pick, the streak, the routing terms nor the file",
    { skill: true, skillsThreshold: 5 },
    async (w) => {
      w.script.main.push({ text: "Deployed." });
      await ok(w.run(`Deploy the service with the session token ${S.jwt} and verify credentials`));
      const db = join(w.home, "skills.sqlite");
      const picks = rows<{ input: string; signature: string }>(db, "SELECT input, signature FROM picks");
      expect(picks).toHaveLength(1);
      expect(picks[0]!.input).toContain("[REDACTED:jwt]");
      const streaks = rows<{ examples: string; namespace: string }>(db, "SELECT examples, namespace FROM ns_streaks");
      expect(streaks).toHaveLength(1);
      expect(streaks[0]!.examples).toContain("[REDACTED:jwt]");
      const jwtParts = S.jwt.split(".");
      expect(w.filesContaining([S.jwt, jwtParts[2]!])).toEqual([]);
    },
  );

  scenario(
    "skills auto-draft: a GitHub token in the inputs and repeated by the drafting model is in no file, and the draft's name is not made of it",
    { skillsThreshold: 2 },
    async (w) => {
      w.script.draftBody = `## When to use\n\nRotating webhooks. Authenticate with ${S.github} (Slack: ${S.slack}).`;
      w.script.main.push({ text: "Rotated." }, { text: "Rotated again." });
      const ask = `Rotate the billing webhook using token ${S.github}`;
      await ok(w.run(ask));
      await ok(w.run(ask));
      const dir = join(w.home, "skills", "auto", "billing-rotate-webhook");
      expect(existsSync(join(dir, "SKILL.md"))).toBe(true);
      const md = readFileSync(join(dir, "SKILL.md"), "utf8");
      expect(md).toContain("name: auto-billing-rotate-webhook");
      expect(md).toContain("Authenticate with [REDACTED:github_token]");
      expect(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"))).toMatchObject({
        namespace: "default",
        needs_review: true,
      });
      expect(w.filesContaining([S.github, S.github.slice(4), S.slack])).toEqual([]);
    },
  );

  scenario(
    "compaction: a tool output with a database password and an Anthropic key is stored raw-but-redacted; no file holds either",
    { bigTool: bigOutput() },
    async (w) => {
      w.script.main.push({ toolCalls: [{ name: "dump_config", args: {} }] }, { text: "Config read." });
      await ok(w.run("Dump the service configuration"));
      const raw = rows<{ text: string; session_id: string }>(
        join(w.home, "compaction.sqlite"),
        "SELECT text, session_id FROM raw",
      );
      expect(raw).toHaveLength(1);
      expect(raw[0]!.text).toContain("[REDACTED:anthropic_api_key]");
      expect(raw[0]!.text).toContain("DATABASE_URL=[REDACTED:");
      expect(raw[0]!.text).toContain("line 299: worker ok");
      expect(w.filesContaining([S.dbPassword, S.anthropic])).toEqual([]);
    },
  );

  scenario(
    "MCP audit: a server error that echoes a Slack token is logged redacted; mcp-audit.sqlite holds no token",
    { mcp: true },
    async (w) => {
      w.script.main.push(
        { toolCalls: [{ name: "mcp__fx__fail", args: { text: `token ${S.slack}` } }] },
        { text: "The call failed." },
      );
      await ok(w.run("Call the failing tool"));
      const audit = rows<{ error: string; outcome: string }>(
        join(w.home, "mcp-audit.sqlite"),
        "SELECT error, outcome FROM mcp_calls",
      );
      expect(audit).toEqual([{ outcome: "rejected", error: expect.stringContaining("token [REDACTED:slack_token]") }]);
      expect(w.filesContaining([S.slack])).toEqual([]);
    },
  );

  scenario(
    "a skills database written before redaction (raw inputs in picks and streaks) is scrubbed on the next run",
    {},
    async (w) => {
      mkdirSync(w.home, { recursive: true });
      const db = new DatabaseSync(join(w.home, "skills.sqlite"));
      db.exec(
        "CREATE TABLE picks (session_id TEXT NOT NULL, turn_id TEXT NOT NULL, skill TEXT NOT NULL, terms TEXT NOT NULL, candidates TEXT NOT NULL, forced INTEGER NOT NULL, signature TEXT NOT NULL, input TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (session_id, turn_id))",
      );
      db.exec(
        "CREATE TABLE streaks (signature TEXT PRIMARY KEY, count INTEGER NOT NULL, examples TEXT NOT NULL, ts INTEGER NOT NULL)",
      );
      db.prepare("INSERT INTO picks VALUES ('s', 't', 'x', '[]', '[]', 0, 'sig', ?, 1)").run(`push with ${S.github}`);
      db.prepare("INSERT INTO streaks VALUES ('sig', 2, ?, 1)").run(
        JSON.stringify([{ input: `push with ${S.github}`, answer: "" }]),
      );
      db.close();
      w.script.main.push({ text: "hello" });
      await ok(w.run("hello there, what can you do"));
      expect(rows<{ input: string }>(join(w.home, "skills.sqlite"), "SELECT input FROM picks")).toEqual([
        { input: "push with [REDACTED:github_token]" },
      ]);
      expect(w.filesContaining([S.github])).toEqual([]);
    },
  );
});

describe("retrieval stays in its session and namespace", () => {
  scenario(
    "context_retrieve with another session's id (leaked) answers 'not found' and sends none of its output; the owner session reads it",
    { bigTool: bigOutput() },
    async (w) => {
      w.script.main.push({ toolCalls: [{ name: "dump_config", args: {} }] }, { text: "Config read." });
      const owner = await ok(w.run("Dump the service configuration", { json: true }));
      const digest = toolResults(w.mainRequests()[1]!.body);
      const id = /context_retrieve\(id=\\?"(t[0-9a-f]{12})/.exec(digest)?.[1];
      expect(id, digest.slice(0, 400)).toBeDefined();
      w.script.main.push(
        { toolCalls: [{ name: "context_retrieve", args: { id, startLine: 10, endLine: 12 } }] },
        { text: "Nothing there." },
      );
      await ok(w.run("Read the stored output back"));
      const intruder = toolResults(w.mainRequests().at(-1)!.body);
      expect(intruder).toContain("KEEL_COMPACTION_NOT_FOUND");
      expect(intruder).not.toMatch(/line 1[01]: worker ok/);
      w.script.main.push(
        { toolCalls: [{ name: "context_retrieve", args: { id, startLine: 10, endLine: 12 } }] },
        { text: "Read." },
      );
      await ok(w.run("Read the stored output back", { session: sessionOf(owner) }));
      expect(toolResults(w.mainRequests().at(-1)!.body)).toMatch(/line 10: worker ok/);
    },
  );

  scenario(
    "memory in namespace alice is never recalled for bob, nor readable by id or search from bob's tools",
    {},
    async (w) => {
      w.script.main.push(
        { toolCalls: [{ name: "memory_remember", args: { content: "The release codename is Bluefin" } }] },
        { text: "Noted." },
      );
      await ok(w.run("Remember that the release codename is Bluefin", { ns: "alice" }));
      w.script.main.push(
        {
          toolCalls: [
            { name: "memory_get", args: { id: 1 } },
            { name: "memory_search", args: { query: "release codename Bluefin" } },
          ],
        },
        { text: "I do not know." },
      );
      await ok(w.run("What is the release codename?", { ns: "bob" }));
      const bob = w.mainRequests().slice(-2);
      for (const r of bob) expect(sent(r)).not.toContain("The release codename is Bluefin");
      expect(toolResults(bob[1]!.body)).toContain("No memory #1.");
      expect(toolResults(bob[1]!.body)).toContain("No memories match.");
      w.script.main.push({ text: "Bluefin." });
      await ok(w.run("What is the release codename?", { ns: "alice" }));
      expect(sent(w.mainRequests().at(-1)!)).toContain("The release codename is Bluefin");
    },
  );

  scenario(
    "an auto-drafted skill is listed only in the namespace that produced it until a person reviews it",
    { skillsThreshold: 2 },
    async (w) => {
      w.script.main.push({ text: "a" }, { text: "b" });
      await ok(w.run("convert these invoices to json", { ns: "alice" }));
      await ok(w.run("convert these invoices to json", { ns: "alice" }));
      // Alice's second turn already listed nothing new; the draft is written after it, in the background.
      const manifestFile = join(w.home, "skills", "auto", "convert-invoices-json", "manifest.json");
      expect(JSON.parse(readFileSync(manifestFile, "utf8"))).toMatchObject({ namespace: "alice", needs_review: true });
      w.script.main.push(
        { toolCalls: [{ name: "skill_read", args: { name: "auto-convert-invoices-json" } }] },
        { text: "c" },
      );
      await ok(w.run("convert these invoices to json", { ns: "bob" }));
      const [bobFirst, bobSecond] = w.mainRequests().slice(-2);
      expect(sent(bobFirst!)).not.toContain("auto-convert-invoices-json [draft");
      expect(toolResults(bobSecond!.body)).not.toContain("When to use");
      // The review path: needs_review false in the manifest (what reviewDraft() writes); bob's
      // next turn lists it, which also shows the draft is listable at all.
      writeFileSync(
        manifestFile,
        JSON.stringify({
          ...JSON.parse(readFileSync(manifestFile, "utf8")),
          needs_review: false,
          reviewed_at: new Date().toISOString(),
        }),
      );
      w.script.main.push({ text: "e" });
      await ok(w.run("convert these invoices to json", { ns: "bob" }));
      expect(sent(w.mainRequests().at(-1)!)).toContain("- auto-convert-invoices-json:");
    },
  );
});

/** A 300-line tool output with a connection string and an Anthropic key in it. */
function bigOutput(): string {
  const lines = [
    `DATABASE_URL=postgres://app:${S.dbPassword}@db.internal:5432/app`,
    `ANTHROPIC_API_KEY=${S.anthropic}`,
  ];
  for (let i = 1; i < 300; i++)
    lines.push(`line ${i}: worker ok, shard ${i % 7}, queue depth ${(i * 13) % 97}, latency ${(i * 7) % 41} ms`);
  return lines.join("\n");
}
