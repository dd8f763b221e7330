import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { findSecrets, looksSecret, PostgresMemoryStore, redactSecrets, SqliteMemoryStore } from "../src/index.ts";
import type { MemoryStore } from "../src/index.ts";
import { dropTestSchemas, rawRows, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";
import { cleanup, tempDir } from "./support/helpers.ts";

afterEach(cleanup);

/** The same contract on both backends: a SQLite file, and a fresh schema on PostgreSQL. */
const backends: Array<[string, () => MemoryStore]> = [
  ["SQLite", () => new SqliteMemoryStore({ path: join(tempDir(), "memory.sqlite") })],
  ["PostgreSQL", () => new PostgresMemoryStore(testTarget())],
];

beforeAll(requirePostgres);
afterAll(dropTestSchemas);

describe.each(backends)("MemoryStore on %s", (_name, store) => {
  it("supersedes a memory with the same key, scope and namespace and keeps the old one for audit", async () => {
    const s = store();
    const a = await s.write({ namespace: "u1", key: "user.editor", content: "The user edits with vim" });
    const b = await s.write({ namespace: "u1", key: "user.editor", content: "The user edits with helix" });
    expect(b.superseded).toEqual([a.memory.id]);
    expect((await s.get("u1", a.memory.id))!.supersededBy).toBe(b.memory.id);
    expect((await s.byKey("u1", "user.editor")).map((m) => m.content)).toEqual(["The user edits with helix"]);
    expect((await s.history("u1", "user.editor")).map((m) => m.id)).toEqual([a.memory.id, b.memory.id]);
    expect((await s.search({ namespace: "u1", terms: ["edits"], limit: 10 })).map((h) => h.memory.id)).toEqual([
      b.memory.id,
    ]);
    // Another scope or namespace with the same key is left alone.
    const c = await s.write({
      namespace: "u1",
      scope: "project",
      key: "user.editor",
      content: "Project standard: helix",
    });
    const d = await s.write({ namespace: "u2", key: "user.editor", content: "The user edits with emacs" });
    expect(c.superseded).toEqual([]);
    expect(d.superseded).toEqual([]);
    expect(await s.byKey("u1", "user.editor")).toHaveLength(2);
    await s.close();
  });

  it("forgets softly: never found again, still auditable", async () => {
    const s = store();
    const m = (await s.write({ namespace: "u1", content: "The user is allergic to peanuts" })).memory;
    expect((await s.forget("u1", m.id, "asked"))!.forgottenAt).toBeTypeOf("number");
    expect(await s.forget("u1", m.id)).toBeUndefined();
    expect(await s.search({ namespace: "u1", terms: ["peanuts"], limit: 5 })).toEqual([]);
    expect(await s.list({ namespace: "u1" })).toEqual([]);
    const audit = await s.list({ namespace: "u1", includeInactive: true });
    expect(audit.map((x) => [x.id, x.forgetReason])).toEqual([[m.id, "asked"]]);
    expect(await s.count("u1")).toBe(0);
    await s.close();
  });

  it("confines reads to the namespace given", async () => {
    const s = store();
    const a = (
      await s.write({ namespace: "alice", content: "Alice's locker code note: blue door", source: { sessionId: "s1" } })
    ).memory;
    const next = (
      await s.write({ namespace: "alice", content: "The locker is on the second floor", source: { sessionId: "s1" } })
    ).memory;
    expect((await s.neighbours("alice", [a], 2)).get(a.id)!.map((m) => m.id)).toEqual([next.id]);
    expect(await s.search({ namespace: "bob", terms: ["locker"], limit: 5 })).toEqual([]);
    expect(await s.get("bob", a.id)).toBeUndefined();
    expect(await s.forget("bob", a.id)).toBeUndefined();
    expect([...(await s.neighbours("bob", [a], 2)).values()].flat()).toEqual([]);
    expect((await s.get("alice", a.id))!.forgottenAt).toBeNull();
    await s.close();
  });

  it("ranks by BM25 over content, key, category and the previous memory's context, stemming words", async () => {
    const s = store();
    const run = (
      await s.write({
        namespace: "n",
        content: "Melanie ran a charity race for mental health",
        source: { sessionId: "d1" },
      })
    ).memory;
    const later = (
      await s.write({ namespace: "n", content: "It was in the park near her home", source: { sessionId: "d1" } })
    ).memory;
    const keyed = (await s.write({ namespace: "n", key: "hobby.running", content: "Likes the outdoors" })).memory;
    await s.write({ namespace: "n", content: "An unrelated note about cooking pasta" });
    // "races" stems to "race"; the next memory carries "race" in its context (weight 1), the key hit weighs 2.
    const hits = await s.search({ namespace: "n", terms: ["races"], limit: 10 });
    expect(hits.map((h) => h.memory.id)).toEqual([run.id, later.id]);
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    expect((await s.search({ namespace: "n", terms: ["running"], limit: 10 })).map((h) => h.memory.id)).toEqual([
      keyed.id,
    ]);
    // Plain (baseline) search reads content only.
    expect(
      (await s.search({ namespace: "n", terms: ["running", "race"], limit: 10, plain: true })).map((h) => h.memory.id),
    ).toEqual([run.id]);
    await s.close();
  });

  it("searches a word no memory holds by the prefix of its stem (variants), and only inside date ranges when asked", async () => {
    const s = store();
    const day = 86_400_000;
    const t0 = Date.UTC(2023, 7, 1);
    const won = (await s.write({ namespace: "n", content: "Nate won the regional tournament", occurredAt: t0, at: t0 }))
      .memory;
    const fed = (
      await s.write({ namespace: "n", content: "Nate fed his turtles", occurredAt: t0 + 20 * day, at: t0 + 20 * day })
    ).memory;
    const neck = (await s.write({ namespace: "n", content: "A turtleneck sweater", occurredAt: t0, at: t0 })).memory;
    // "tourney" (token "tournei") is in no memory: only with variants do its first five letters find "tournament".
    expect(await s.search({ namespace: "n", terms: ["tourney"], limit: 5 })).toEqual([]);
    const ids = async (q: Parameters<MemoryStore["search"]>[0]) => (await s.search(q)).map((h) => h.memory.id);
    expect(await ids({ namespace: "n", terms: ["tourney"], limit: 5, variants: 5 })).toEqual([won.id]);
    // A word the index holds is matched as it is ("turtles", not every "turtl…" word).
    expect(await ids({ namespace: "n", terms: ["tourney", "turtles"], limit: 5, variants: 5 })).toEqual(
      expect.arrayContaining([won.id, fed.id]),
    );
    expect(await ids({ namespace: "n", terms: ["turtles"], limit: 5, variants: 5 })).not.toContain(neck.id);
    // Prefixes shorter than four letters are never used.
    expect(await ids({ namespace: "n", terms: ["nat"], limit: 5, variants: 3 })).toEqual([]);
    // Date ranges: only memories that occurred inside one of them.
    expect(
      await ids({ namespace: "n", terms: ["nate"], limit: 5, within: [{ start: t0 + 10 * day, end: t0 + 30 * day }] }),
    ).toEqual([fed.id]);
    expect(
      (
        await ids({
          namespace: "n",
          terms: ["nate"],
          limit: 5,
          within: [
            { start: t0, end: t0 + day },
            { start: t0 + 20 * day, end: t0 + 21 * day },
          ],
        })
      ).sort(),
    ).toEqual([won.id, fed.id].sort());
    expect(
      await ids({ namespace: "n", terms: ["nate"], limit: 5, within: [{ start: t0 + 40 * day, end: t0 + 50 * day }] }),
    ).toEqual([]);
    await s.close();
  });

  it("bounds scoring by skipping a term that matches more rows than the budget, keeping the rarest", async () => {
    const s = store();
    await (s as SqliteMemoryStore | PostgresMemoryStore).writeMany(
      Array.from({ length: 1600 }, (_, i) => ({ namespace: "u1", content: `common filler line ${i}` })),
    );
    const rare = (await s.write({ namespace: "u1", content: "a quokka wandered past" })).memory;
    const both = await s.search({ namespace: "u1", terms: ["common", "quokka"], limit: 5 });
    expect(both.map((h) => h.memory.id)).toEqual([rare.id]);
    expect(await s.search({ namespace: "u1", terms: ["common"], limit: 5 })).toHaveLength(5);
    // The baseline (plain) scores every match.
    expect(await s.search({ namespace: "u1", terms: ["common", "quokka"], limit: 5, plain: true })).toHaveLength(5);
    expect(await s.search({ namespace: "u2", terms: ["quokka"], limit: 5 })).toEqual([]);
    await s.close();
  });

  it("deduplicates identical active memories and validates input", async () => {
    const s = store();
    const a = await s.write({ namespace: "n", content: "Same fact" });
    const b = await s.write({ namespace: "n", content: "  Same fact " });
    expect(b.duplicate).toBe(true);
    expect(b.memory.id).toBe(a.memory.id);
    await expect(async () => s.write({ namespace: "n", content: "  " })).rejects.toThrow(/KEEL_MEMORY_INPUT_INVALID/);
    await expect(async () => s.write({ namespace: "n", content: "x", importance: 2 })).rejects.toThrow(/importance/);
    await s.close();
  });

  it("logs misses with the query cut to 512 characters", async () => {
    const s = store();
    await s.logMiss({ namespace: "n", query: "q".repeat(2000), sessionId: "s", turnId: "s/1" });
    const [m] = await s.misses("n");
    expect(m!.query).toHaveLength(512);
    expect(m!.turnId).toBe("s/1");
    await s.close();
  });

  it("marks an extraction and its facts in one transaction", async () => {
    const s = store();
    expect(await s.writeExtraction("t1", "n", [{ namespace: "n", content: "fact one" }])).toHaveLength(1);
    expect(await s.writeExtraction("t1", "n", [{ namespace: "n", content: "fact two" }])).toEqual([]);
    expect(await s.isExtracted("t1")).toBe(true);
    // A failing fact rolls the whole extraction back, so a retry can store it.
    await expect(async () =>
      s.writeExtraction("t2", "n", [
        { namespace: "n", content: "ok fact" },
        { namespace: "n", content: "" },
      ]),
    ).rejects.toThrow(/KEEL_MEMORY_INPUT_INVALID/);
    expect(await s.isExtracted("t2")).toBe(false);
    expect(await s.count("n")).toBe(1);
    await s.close();
  });

  it("redacts content, key and category of a direct write, and the miss log's query", async () => {
    const aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const s = store();
    const r = await s.write({
      namespace: "ops",
      key: `deploy ${aws}`,
      content: `Deploy with aws key AKIAQWERTYUIOP234567 with secret ${aws}`,
      category: "token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    });
    expect(r.memory.content).toBe(
      "Deploy with aws key [REDACTED:aws_access_key_id] with secret [REDACTED:high_entropy]",
    );
    expect(r.memory.key).toBe("deploy [REDACTED:high_entropy]");
    expect(r.memory.category).toBe("token [REDACTED:github_token]");
    await s.logMiss({ namespace: "ops", query: `what was my secret ${aws}?` });
    expect((await s.misses("ops"))[0]!.query).toBe("what was my secret [REDACTED:high_entropy]?");
    await s.close();
  });

  it("refuses every call after close()", async () => {
    const s = store();
    await s.write({ namespace: "n", content: "a fact" });
    await s.close();
    await expect(async () => s.count("n")).rejects.toThrow(/KEEL_MEMORY_STORE_FAILED/);
  });
});

describe("MemoryStore backends", () => {
  it("SQLite: an unopenable path is KEEL_MEMORY_STORE_FAILED naming it", () => {
    const dir = tempDir();
    expect(() => new SqliteMemoryStore({ path: dir })).toThrow(
      new RegExp(`KEEL_MEMORY_STORE_FAILED.*${dir.replace(/[/\\]/g, ".")}`),
    );
  });

  it("PostgreSQL: an unreachable server is KEEL_MEMORY_STORE_FAILED naming it without its password", async () => {
    const s = new PostgresMemoryStore({ url: "postgres://keel:hunter2secret@127.0.0.1:1/none", schema: "x" });
    const err = await Promise.resolve(s.count()).catch((e: unknown) => e as Error);
    expect(String(err)).toMatch(/KEEL_MEMORY_STORE_FAILED.*127\.0\.0\.1:1.*not reachable/s);
    expect(String(err)).not.toContain("hunter2secret");
  });

  it("PostgreSQL: an instance that searched an empty store finds what another instance writes next", async () => {
    const target = testTarget();
    const reader = new PostgresMemoryStore(target);
    const writer = new PostgresMemoryStore(target);
    expect(await reader.search({ namespace: "n", terms: ["quokka"], limit: 5 })).toEqual([]);
    await writer.write({ namespace: "n", content: "A quokka lives on Rottnest" });
    expect((await reader.search({ namespace: "n", terms: ["quokka"], limit: 5 })).map((h) => h.memory.content)).toEqual(
      ["A quokka lives on Rottnest"],
    );
    await writer.write({ namespace: "n", content: "The second quokka fact" });
    expect(await reader.search({ namespace: "n", terms: ["second"], limit: 5 })).toHaveLength(1);
  });

  it("PostgreSQL: no secret reaches a row, and one database keeps each store's memories apart by namespace", async () => {
    const target = testTarget();
    const a = new PostgresMemoryStore(target);
    const b = new PostgresMemoryStore(target);
    const aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    await a.write({ namespace: "alice", content: `Alice's staging secret is ${aws}` });
    await b.logMiss({ namespace: "bob", query: `find ${aws}` });
    expect(await b.search({ namespace: "bob", terms: ["staging"], limit: 5 })).toEqual([]);
    expect((await b.search({ namespace: "alice", terms: ["staging"], limit: 5 })).map((h) => h.memory.content)).toEqual(
      ["Alice's staging secret is [REDACTED:credential]"],
    );
    for (const table of ["keel_memories", "keel_memory_misses"]) {
      const rows = await rawRows(target.schema, table);
      expect(rows.length).toBe(1);
      expect(rows.some((r) => r.includes(aws))).toBe(false);
    }
  });
});

describe("secrets", () => {
  const secrets = [
    "my openai key is sk-proj-abcdefghijklmnop1234567890",
    "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "the password is hunter2!",
    "postgres://app:s3cretPass@db.internal:5432/app",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "AWS key AKIAIOSFODNN7EXAMPLE",
    "export STRIPE_SECRET_KEY=rk_live_51Habcdefgh",
  ];
  it.each(secrets)("finds and redacts %s", (text) => {
    expect(looksSecret(text)).toBe(true);
    const r = redactSecrets(text);
    expect(r.kinds.length).toBeGreaterThan(0);
    expect(r.text).toContain("[REDACTED:");
    expect(looksSecret(r.text)).toBe(false);
  });
  it("leaves prose about passwords and keys alone", () => {
    for (const t of [
      "I reset my password yesterday",
      "The key to success is patience",
      "my token of appreciation",
      "Our database is postgres://db.internal:5432/app",
    ])
      expect(findSecrets(t), t).toEqual([]);
  });
});

describe("write-time redaction in the store (no caller can bypass it)", () => {
  const aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  it("redacts content, key and category of a direct store write, and the miss log's query", () => {
    const path = join(tempDir(), "m.sqlite");
    const store = new SqliteMemoryStore({ path });
    const r = store.write({
      namespace: "ops",
      content: `Deploy with aws key AKIAQWERTYUIOP234567 with secret ${aws}`,
      category: "token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    });
    expect(r.memory.content).toBe(
      "Deploy with aws key [REDACTED:aws_access_key_id] with secret [REDACTED:high_entropy]",
    );
    expect(r.memory.category).toBe("token [REDACTED:github_token]");
    store.logMiss({ namespace: "ops", query: `what was my secret ${aws}?` });
    expect(store.misses("ops")[0]!.query).toBe("what was my secret [REDACTED:high_entropy]?");
    store.close();
    for (const f of readdirSync(dirname(path)))
      expect(readFileSync(join(dirname(path), f)).includes(aws), f).toBe(false);
  });

  it("wraps a host-given store so its writes are redacted too", async () => {
    const seen: string[] = [];
    const inner = new SqliteMemoryStore({ path: ":memory:" });
    const host = new Proxy(inner, {
      get: (t, p) =>
        p === "write"
          ? (i: { content: string }) => (seen.push(i.content), t.write(i as never))
          : (Reflect.get(t, p) as (...a: unknown[]) => unknown).bind(t),
    });
    const { redactingStore } = await import("../src/redacting-store.ts");
    const wrapped = redactingStore(host);
    wrapped.write({ namespace: "n", content: `key is sk-ant-api03-${"a1B2".repeat(23)}AA` });
    expect(seen).toEqual(["key is [REDACTED:anthropic_api_key]"]);
  });
});

describe("a memory database written before the shared scanner", () => {
  it("is scrubbed on open: memories and the miss log lose their secrets, on disk too", async () => {
    const { DatabaseSync } = await import("node:sqlite");
    const path = join(tempDir(), "memory.sqlite");
    const first = new SqliteMemoryStore({ path });
    const id = first.write({ namespace: "u1", key: "aws", category: "creds", content: "The deploy key is kept here" })
      .memory.id;
    first.close();
    const aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY";
    // What an older version stored: the secret verbatim.
    const db = new DatabaseSync(path);
    const version = (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
    db.prepare("UPDATE memories SET content = ? WHERE id = ?").run(
      `The deploy key is aws_secret_access_key=${aws}`,
      id,
    );
    db.prepare("INSERT INTO misses (namespace, query, at) VALUES ('u1', ?, 0)").run(`log in with secret ${aws} please`);
    db.exec(`PRAGMA user_version = ${version - 1}`);
    db.close();
    const s = new SqliteMemoryStore({ path });
    expect(s.byKey("u1", "aws")[0]!.content).toMatch(/^The deploy key is .*\[REDACTED/);
    expect(s.misses("u1")[0]!.query).not.toContain(aws);
    expect(s.search({ namespace: "u1", terms: ["deploy"], limit: 5 })).toHaveLength(1);
    s.close();
    const bytes = Buffer.concat(readdirSync(dirname(path)).map((f) => readFileSync(join(dirname(path), f))));
    expect(bytes.includes(Buffer.from(aws))).toBe(false);
  });
});
