import { DatabaseSync } from "node:sqlite";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { messageText } from "@keel/kernel";
import { afterEach, describe, expect, it } from "vitest";
import memoryDefault, { memory, SqliteMemoryStore } from "../src/index.ts";
import { cleanup, jobs, memoryAgent, tempDir } from "./support/helpers.ts";

afterEach(cleanup);

const child = fileURLToPath(new URL("./support/recall-child.ts", import.meta.url));

describe("memory through the kernel", () => {
  it("subscribes one hook per phase, each with its own await and failure policy", async () => {
    expect(memoryDefault).toBe(memory);
    const { agent } = await memoryAgent([], { path: join(tempDir(), "m.sqlite") });
    const subs = agent
      .inspect()
      .flatMap((row) => row.subscriptions.map((s) => [row.phase, s.id.split("#")[1], s.await, s.failure]));
    expect(subs).toEqual([
      ["turn.pre_policy", "memory.classify", "deadline", "fallback"],
      ["turn.pre_prompt_context", "memory.recall", "deadline", "best_effort"],
      ["turn.pre_tool_materialization", "memory.tools", "deadline", "best_effort"],
      ["turn.pre_prompt_compile", "memory.contract", "deadline", "best_effort"],
      ["turn.post_turn", "memory.extract", "background", "best_effort"],
    ]);
  });

  it("a fact told in one process is recalled by a fresh child process opening the same file", async () => {
    const path = join(tempDir(), "memory.sqlite");
    const { agent, plugin } = await memoryAgent([{ text: "Noted." }], { path });
    const session = await agent.session();
    await session.run("By the way, my favorite database is PostgreSQL 17.", { metadata: { userId: "ana" } });
    await agent.drain();
    expect(jobs(await session.events()).map((j) => j.status)).toEqual(["ok"]);
    await plugin.memory.close();

    const run = (input: string, user: string) => {
      const r = spawnSync(process.execPath, [child, path, input, user], { encoding: "utf8", timeout: 30_000 });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { status: string; system: string };
    };
    const seen = run("Which database should I use for the new service?", "ana");
    expect(seen.status).toBe("completed");
    expect(seen.system).toContain("The user's favorite database is PostgreSQL 17");
    expect(seen.system).toContain("## Memory");
    // Another user in the same file sees nothing of ana's.
    expect(run("Which database should I use for the new service?", "ben").system).not.toContain("PostgreSQL");
  });

  it("a newer fact with the same key supersedes the old one in recall, the old one stays auditable", async () => {
    const path = join(tempDir(), "memory.sqlite");
    const { agent, provider, plugin } = await memoryAgent([{ text: "ok" }, { text: "ok" }, { text: "ok" }], { path });
    const s = await agent.session();
    await s.run("My favorite color is teal.");
    await agent.drain();
    await s.run("Actually my favorite color is green now.");
    await agent.drain();
    await s.run("What is my favorite color?");
    const system = provider.requests[2]!.system;
    expect(system).toContain("favorite color is green");
    expect(system).not.toContain("teal");
    const history = plugin.memory.store().history("default", "user.favorite_color") as Awaited<
      ReturnType<SqliteMemoryStore["history"]>
    >;
    expect(history.map((m) => [m.content, m.supersededBy === null])).toEqual([
      ["The user's favorite color is teal", false],
      ["The user's favorite color is green now", true],
    ]);
  });

  it('"forget that …" soft-deletes the memory; "don\'t remember this" writes nothing', async () => {
    const { agent, provider, plugin } = await memoryAgent(
      [{ text: "ok" }, { text: "ok" }, { text: "ok" }, { text: "ok" }],
      { path: join(tempDir(), "m.sqlite") },
    );
    const s = await agent.session();
    await s.run("I live in Lisbon.");
    await agent.drain();
    await s.run("Please forget that I live in Lisbon.");
    await agent.drain();
    await s.run("Don't remember this: my favorite snack is pretzels.");
    await agent.drain();
    await s.run("Where do I live, and what snack do I like?");
    const store = plugin.memory.store() as SqliteMemoryStore;
    expect(store.count("default")).toBe(0);
    const audit = store.list({ namespace: "default", includeInactive: true });
    expect(audit.map((m) => [m.content, m.forgetReason])).toEqual([
      ["The user lives in Lisbon", "the user asked to forget it"],
    ]);
    expect(provider.requests[3]!.system).not.toContain("Lisbon");
    expect(provider.requests[2]!.system).toContain("do not store anything from it");
  });

  it("never recalls user A's facts for user B, also through the tools", async () => {
    const path = join(tempDir(), "m.sqlite");
    const steps = [
      { text: "ok" },
      {
        toolCalls: [
          { name: "memory_search", args: { query: "allergy peanuts" } },
          { name: "memory_list", args: {} },
          { name: "memory_get", args: { id: 1 } },
          { name: "memory_forget", args: { id: 1 } },
        ],
      },
      { text: "done" },
    ];
    const { agent, provider, plugin } = await memoryAgent(steps, { path });
    const s = await agent.session();
    await s.run("Remember that I am allergic to peanuts.", { metadata: { userId: "alice" } });
    await agent.drain();
    const store = plugin.memory.store() as SqliteMemoryStore;
    expect(store.list({ namespace: "alice" }).map((m) => [m.id, m.content])).toEqual([[1, "I am allergic to peanuts"]]);
    await s.run("Do I have a peanut allergy?", { metadata: { userId: "bob" } });
    expect(provider.requests[1]!.system).not.toContain("peanuts");
    const results = provider.requests[2]!.messages.filter((m) => m.role === "tool").map((m) => messageText(m));
    expect(results).toHaveLength(4);
    expect(results[0]).toBe("No memories match.");
    expect(results[1]).toBe("No memories stored.");
    expect(results[2]).toMatch(/No memory #1/);
    expect(results[3]).toMatch(/No active memory #1/);
    expect(store.get("alice", 1)!.forgottenAt).toBeNull();
    expect(store.misses("bob").map((m) => m.query)).toContain("allergy peanuts");
  });

  it("the tools write in the turn's namespace; remember supersedes by key and redacts secrets", async () => {
    const steps = [
      {
        toolCalls: [
          {
            name: "memory_remember",
            args: {
              content: "Deploys go through the staging cluster first",
              key: "project.deploy",
              category: "decision",
            },
          },
          {
            name: "memory_remember",
            args: { content: "Deploys go straight to production on Fridays", key: "project.deploy" },
          },
          {
            name: "memory_remember",
            args: { content: "The CI token is ghp_abcdefghijklmnopqrstuvwxyz0123456789 for the deploy bot" },
          },
          { name: "memory_remember", args: { content: "sk-proj-abcdefghijklmnopqrstuvwx12345678" } },
        ],
      },
      { text: "stored" },
    ];
    const { agent, provider, plugin } = await memoryAgent(steps, { path: join(tempDir(), "m.sqlite") });
    const s = await agent.session();
    await s.run("Set up the deploy notes.", { metadata: { userId: "ops" } });
    const results = provider.requests[1]!.messages.filter((m) => m.role === "tool").map((m) => messageText(m));
    expect(results[1]).toMatch(/supersedes #1/);
    expect(results[2]).toMatch(/redacted \(github_token\)/);
    expect(results[3]).toMatch(/Not stored: the content is a secret/);
    const store = plugin.memory.store() as SqliteMemoryStore;
    const rows = store.list({ namespace: "ops", includeInactive: true });
    expect(rows.map((m) => m.content).join("\n")).not.toMatch(/ghp_|sk-proj/);
    expect(rows.find((m) => m.content.includes("CI token"))!.content).toContain("[REDACTED:github_token]");
    expect(store.list({ namespace: "default" })).toEqual([]);
  });

  it("extraction never stores a secret the user typed", async () => {
    const { agent, plugin } = await memoryAgent([{ text: "ok" }], { path: join(tempDir(), "m.sqlite") });
    const s = await agent.session();
    await s.run("Remember that my api key is sk-live-abcdefghijklmnopqrstuvwxyz. My editor is Zed.");
    await agent.drain();
    const store = plugin.memory.store() as SqliteMemoryStore;
    const all = store.list({ namespace: "default", includeInactive: true }).map((m) => m.content);
    expect(all).toEqual(["The user's editor is Zed"]);
  });

  it("hides secret-like memories written by someone else from recall and tools", async () => {
    const path = join(tempDir(), "m.sqlite");
    new SqliteMemoryStore({ path }).close();
    // A row from before write-time redaction (or another writer): inserted past the store.
    const raw = new DatabaseSync(path);
    raw
      .prepare(
        "INSERT INTO memories (namespace, scope, content, importance, confidence, occurred_at, created_at, updated_at) VALUES ('default', 'user', ?, 0.5, 0.8, 1, 1, 1)",
      )
      .run("Server deploy password: Tr0ub4dor&3 for the deploy server");
    raw.close();
    const { agent, provider } = await memoryAgent(
      [{ toolCalls: [{ name: "memory_list", args: {} }] }, { text: "ok" }],
      { path },
    );
    await (await agent.session()).run("What is the deploy server password?");
    expect(provider.requests[0]!.system).not.toContain("Tr0ub4dor");
    const listed = provider.requests[1]!.messages.filter((m) => m.role === "tool").map((m) => messageText(m));
    expect(listed[0]).toContain("[hidden: secret-like content]");
  });
});
