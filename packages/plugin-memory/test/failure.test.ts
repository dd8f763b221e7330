import { join } from "node:path";
import { scriptedProvider } from "@keel/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { runExtraction, SqliteMemoryStore } from "../src/index.ts";
import type { MemoryStore } from "../src/index.ts";
import { cleanup, diagnostics, jobs, memoryAgent, tempDir } from "./support/helpers.ts";

afterEach(cleanup);

/** A real SQLite store whose named methods throw (always, or the first `times` calls). */
function faulty(
  path: string,
  methods: Array<keyof MemoryStore>,
  times = Infinity,
): { store: MemoryStore; inner: SqliteMemoryStore } {
  const inner = new SqliteMemoryStore({ path });
  let left = times;
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        if (methods.includes(prop as keyof MemoryStore) && left-- > 0)
          throw new Error(`disk on fire in ${String(prop)}`);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, inner };
}

describe("extraction is idempotent per turn id", () => {
  it("a failed write is retried by the kernel (2 attempts) and stores the facts once; a further retry adds nothing", async () => {
    const { store, inner } = faulty(join(tempDir(), "m.sqlite"), ["writeExtraction"], 1);
    const { agent } = await memoryAgent([{ text: "ok" }], { store });
    const s = await agent.session();
    const r = await s.run("My editor is Zed. I prefer tabs over spaces.");
    await agent.drain();
    const [job] = jobs(await s.events());
    expect(job).toMatchObject({ status: "ok", attempts: 2 });
    expect(inner.count()).toBe(2);
    expect(inner.isExtracted(r.turnId)).toBe(true);
    const again = {
      store,
      namespace: "default",
      sessionId: s.id,
      turnId: r.turnId,
      userText: "My editor is Zed. I prefer tabs over spaces.",
      assistantText: "ok",
      write: true,
      maxFacts: 8,
      maxChars: 8000,
    };
    const second = await runExtraction(again, new AbortController().signal);
    expect(second).toMatchObject({ status: "already_extracted", stored: [] });
    expect(
      inner
        .list({ namespace: "default" })
        .map((m) => m.content)
        .sort(),
    ).toEqual(["The user prefers tabs over spaces", "The user's editor is Zed"]);
    inner.close();
  });

  it("a turn's job runs once per idempotency key; at most 8 facts from at most 8,000 characters", async () => {
    const path = join(tempDir(), "m.sqlite");
    const { agent, plugin } = await memoryAgent([{ text: "ok" }], { path });
    const s = await agent.session();
    const many = Array.from({ length: 12 }, (_, i) => `My hobby number ${i} is knitting style ${i}.`).join(" ");
    const r = await s.run(`${"filler ".repeat(2000)} ${many}`);
    await agent.drain();
    const store = plugin.memory.store() as SqliteMemoryStore;
    const rows = store.list({ namespace: "default" });
    expect(rows).toHaveLength(8);
    expect(rows.every((m) => m.source.turnId === r.turnId && m.source.via === "extractor")).toBe(true);
    expect(jobs(await s.events()).map((j) => j.idempotencyKey)).toEqual([`memory.extract:${r.turnId}`]);
  });
});

describe("every hook fails open", () => {
  it("a throwing namespace resolver leaves the turn running without memory, with located diagnostics", async () => {
    const { agent, provider } = await memoryAgent([{ text: "fine" }], {
      path: join(tempDir(), "m.sqlite"),
      namespace: () => {
        throw new Error("no tenant");
      },
    });
    const s = await agent.session();
    const r = await s.run("My favorite tea is sencha.");
    await agent.drain();
    expect(r.verdict.status).toBe("completed");
    expect(r.text).toBe("fine");
    const events = await s.events();
    const d = diagnostics(events);
    expect(d.find((x) => x.phase === "turn.pre_policy")!.code).toBe("KEEL_HANDLER_THREW");
    expect(d.find((x) => x.phase === "turn.pre_prompt_context")!.code).toBe("KEEL_MEMORY_RECALL_FAILED");
    expect(d.find((x) => x.phase === "turn.pre_tool_materialization")!.code).toBe("KEEL_MEMORY_STORE_FAILED");
    expect(d.find((x) => x.phase === "turn.post_turn")!.code).toBe("KEEL_MEMORY_EXTRACT_FAILED");
    expect(d.every((x) => x.plugin === "@keel/plugin-memory")).toBe(true);
    expect(provider.requests[0]!.tools.map((t) => t.name)).toEqual([]);
    // The fallback policy forbids writes when the classifier could not run.
    expect(provider.requests[0]!.system).toContain("do not store anything from it");
    expect(jobs(events)).toEqual([]);
  });

  it("a store that throws everywhere: recall, tools and the job fail, the turn completes", async () => {
    const { store, inner } = faulty(join(tempDir(), "m.sqlite"), [
      "search",
      "write",
      "writeExtraction",
      "isExtracted",
      "logMiss",
      "list",
    ]);
    const { agent, provider } = await memoryAgent(
      [
        {
          toolCalls: [
            { name: "memory_search", args: { query: "tea" } },
            { name: "memory_remember", args: { content: "likes tea" } },
          ],
        },
        { text: "done" },
      ],
      { store },
    );
    const s = await agent.session();
    const r = await s.run("What tea do I like? My favorite tea is sencha.");
    await agent.drain();
    expect(r.verdict.status).toBe("completed");
    const events = await s.events();
    expect(diagnostics(events).map((x) => x.code)).toContain("KEEL_MEMORY_RECALL_FAILED");
    const results = provider.requests[1]!.messages.filter((m) => m.role === "tool");
    expect(results.map((m) => m.role === "tool" && m.isError)).toEqual([true, true]);
    expect(jobs(events)[0]!.status).toBe("failed");
    inner.close();
  });

  it("an unopenable path fails open too", async () => {
    const dir = tempDir();
    const { agent } = await memoryAgent([{ text: "ok" }], { path: dir });
    const s = await agent.session();
    expect((await s.run("Remember that the build uses pnpm.")).verdict.status).toBe("completed");
    await agent.drain();
    const codes = diagnostics(await s.events()).map((x) => x.code);
    expect(codes).toContain("KEEL_MEMORY_RECALL_FAILED");
    expect(jobs(await s.events())[0]!.status).toBe("failed");
  });
});

describe("side-model paths", () => {
  it("active recall that times out falls back to deterministic recall", async () => {
    const path = join(tempDir(), "m.sqlite");
    const seed = new SqliteMemoryStore({ path });
    seed.write({ namespace: "default", content: "The staging database runs on port 6543" });
    seed.close();
    const model = scriptedProvider([{ hang: true }]);
    const { agent, provider } = await memoryAgent([{ text: "ok" }], {
      path,
      activeRecall: true,
      activeRecallTimeoutMs: 100,
      model,
    });
    const s = await agent.session();
    const r = await s.run("Which port does the staging database use?");
    expect(r.verdict.status).toBe("completed");
    expect(provider.requests[0]!.system).toContain("port 6543");
    expect(diagnostics(await s.events()).map((d) => d.code)).toContain("KEEL_MEMORY_MODEL_FALLBACK");
  });

  it("active recall uses the model's planned queries", async () => {
    const path = join(tempDir(), "m.sqlite");
    const seed = new SqliteMemoryStore({ path });
    seed.write({ namespace: "default", content: "Invoices are archived in the S3 bucket acme-billing" });
    seed.close();
    const model = scriptedProvider([{ text: '{"queries":["invoices archive bucket"]}' }]);
    const { agent, provider } = await memoryAgent([{ text: "ok" }], { path, activeRecall: true, model });
    await (await agent.session()).run("Where did we put last month's bills?");
    expect(model.requests).toHaveLength(1);
    expect(provider.requests[0]!.system).toContain("acme-billing");
  });

  it("model extraction stores schema-valid facts; a malformed answer falls back to the deterministic extractor", async () => {
    const good = scriptedProvider([
      {
        text: '{"facts":[{"content":"The user is migrating billing to Rust","key":"project.billing_language","category":"project","importance":0.7,"confidence":0.9,"scope":"project"},{"content":"password is hunter22","key":null,"category":"note","importance":0.5,"confidence":0.5}]}',
      },
    ]);
    const a = await memoryAgent([{ text: "ok" }], {
      path: join(tempDir(), "m.sqlite"),
      extraction: "model",
      model: good,
    });
    await (await a.agent.session()).run("We're moving billing to Rust.");
    await a.agent.drain();
    const rows = (a.plugin.memory.store() as SqliteMemoryStore).list({ namespace: "default" });
    expect(rows.map((m) => [m.content, m.key, m.scope, m.source.via])).toEqual([
      ["The user is migrating billing to Rust", "project.billing_language", "project", "model_extractor"],
    ]);

    const bad = scriptedProvider([{ text: "Sure! Here are the facts: none" }, { text: '{"facts":[{"content":"x"}]}' }]);
    const b = await memoryAgent([{ text: "ok" }], {
      path: join(tempDir(), "m.sqlite"),
      extraction: "model",
      model: bad,
    });
    await (await b.agent.session()).run("My shell is fish.");
    await b.agent.drain();
    expect(bad.requests).toHaveLength(2);
    expect(
      (b.plugin.memory.store() as SqliteMemoryStore)
        .list({ namespace: "default" })
        .map((m) => [m.content, m.source.via]),
    ).toEqual([["The user's shell is fish", "extractor"]]);
  });

  it("auto extraction does not consume a scripted main provider's steps", async () => {
    const { agent, provider } = await memoryAgent([{ text: "one" }, { text: "two" }], {
      path: join(tempDir(), "m.sqlite"),
      extraction: "auto",
    });
    const s = await agent.session();
    await s.run("My shell is fish.");
    await agent.drain();
    expect((await s.run("And my editor is Zed.")).text).toBe("two");
    expect(provider.requests).toHaveLength(2);
  });
});
