import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { findSecrets, looksSecret, redactSecrets, SqliteMemoryStore } from "../src/index.ts";
import { cleanup, tempDir } from "./support/helpers.ts";

afterEach(cleanup);

function store(): SqliteMemoryStore {
  return new SqliteMemoryStore({ path: join(tempDir(), "memory.sqlite") });
}

describe("SqliteMemoryStore", () => {
  it("supersedes a memory with the same key, scope and namespace and keeps the old one for audit", () => {
    const s = store();
    const a = s.write({ namespace: "u1", key: "user.editor", content: "The user edits with vim" });
    const b = s.write({ namespace: "u1", key: "user.editor", content: "The user edits with helix" });
    expect(b.superseded).toEqual([a.memory.id]);
    expect(s.get("u1", a.memory.id)!.supersededBy).toBe(b.memory.id);
    expect(s.byKey("u1", "user.editor").map((m) => m.content)).toEqual(["The user edits with helix"]);
    expect(s.history("u1", "user.editor").map((m) => m.id)).toEqual([a.memory.id, b.memory.id]);
    expect(s.search({ namespace: "u1", terms: ["edits"], limit: 10 }).map((h) => h.memory.id)).toEqual([b.memory.id]);
    // Another scope or namespace with the same key is left alone.
    const c = s.write({ namespace: "u1", scope: "project", key: "user.editor", content: "Project standard: helix" });
    const d = s.write({ namespace: "u2", key: "user.editor", content: "The user edits with emacs" });
    expect(c.superseded).toEqual([]);
    expect(d.superseded).toEqual([]);
    expect(s.byKey("u1", "user.editor")).toHaveLength(2);
    s.close();
  });

  it("forgets softly: never found again, still auditable", () => {
    const s = store();
    const m = s.write({ namespace: "u1", content: "The user is allergic to peanuts" }).memory;
    expect(s.forget("u1", m.id, "asked")!.forgottenAt).toBeTypeOf("number");
    expect(s.forget("u1", m.id)).toBeUndefined();
    expect(s.search({ namespace: "u1", terms: ["peanuts"], limit: 5 })).toEqual([]);
    expect(s.list({ namespace: "u1" })).toEqual([]);
    const audit = s.list({ namespace: "u1", includeInactive: true });
    expect(audit.map((x) => [x.id, x.forgetReason])).toEqual([[m.id, "asked"]]);
    expect(s.count("u1")).toBe(0);
    s.close();
  });

  it("confines reads to the namespace given", () => {
    const s = store();
    const a = s.write({ namespace: "alice", content: "Alice's locker code note: blue door", source: { sessionId: "s1" } }).memory;
    const next = s.write({ namespace: "alice", content: "The locker is on the second floor", source: { sessionId: "s1" } }).memory;
    expect(s.neighbours("alice", [a], 2).get(a.id)!.map((m) => m.id)).toEqual([next.id]);
    expect(s.search({ namespace: "bob", terms: ["locker"], limit: 5 })).toEqual([]);
    expect(s.get("bob", a.id)).toBeUndefined();
    expect(s.forget("bob", a.id)).toBeUndefined();
    expect([...s.neighbours("bob", [a], 2).values()].flat()).toEqual([]);
    expect(s.get("alice", a.id)!.forgottenAt).toBeNull();
    s.close();
  });

  it("bounds scoring by skipping a term that matches more rows than the budget, keeping the rarest", () => {
    const s = store();
    s.writeMany(Array.from({ length: 1600 }, (_, i) => ({ namespace: "u1", content: `common filler line ${i}` })));
    const rare = s.write({ namespace: "u1", content: "a quokka wandered past" }).memory;
    const both = s.search({ namespace: "u1", terms: ["common", "quokka"], limit: 5 });
    expect(both.map((h) => h.memory.id)).toEqual([rare.id]);
    expect(s.search({ namespace: "u1", terms: ["common"], limit: 5 })).toHaveLength(5);
    // The baseline (plain) scores every match.
    expect(s.search({ namespace: "u1", terms: ["common", "quokka"], limit: 5, plain: true })).toHaveLength(5);
    expect(s.search({ namespace: "u2", terms: ["quokka"], limit: 5 })).toEqual([]);
    s.close();
  });

  it("deduplicates identical active memories and validates input", () => {
    const s = store();
    const a = s.write({ namespace: "n", content: "Same fact" });
    const b = s.write({ namespace: "n", content: "  Same fact " });
    expect(b.duplicate).toBe(true);
    expect(b.memory.id).toBe(a.memory.id);
    expect(() => s.write({ namespace: "n", content: "  " })).toThrow(/KEEL_MEMORY_INPUT_INVALID/);
    expect(() => s.write({ namespace: "n", content: "x", importance: 2 })).toThrow(/importance/);
    s.close();
  });

  it("logs misses with the query cut to 512 characters", () => {
    const s = store();
    s.logMiss({ namespace: "n", query: "q".repeat(2000), sessionId: "s", turnId: "s/1" });
    const [m] = s.misses("n");
    expect(m!.query).toHaveLength(512);
    expect(m!.turnId).toBe("s/1");
    s.close();
  });

  it("marks an extraction and its facts in one transaction", () => {
    const s = store();
    expect(s.writeExtraction("t1", "n", [{ namespace: "n", content: "fact one" }])).toHaveLength(1);
    expect(s.writeExtraction("t1", "n", [{ namespace: "n", content: "fact two" }])).toEqual([]);
    expect(s.isExtracted("t1")).toBe(true);
    // A failing fact rolls the whole extraction back, so a retry can store it.
    expect(() => s.writeExtraction("t2", "n", [{ namespace: "n", content: "ok fact" }, { namespace: "n", content: "" }])).toThrow(/KEEL_MEMORY_INPUT_INVALID/);
    expect(s.isExtracted("t2")).toBe(false);
    expect(s.count("n")).toBe(1);
    s.close();
  });

  it("reports an unopenable path as KEEL_MEMORY_STORE_FAILED naming it", () => {
    const dir = tempDir();
    expect(() => new SqliteMemoryStore({ path: dir })).toThrow(new RegExp(`KEEL_MEMORY_STORE_FAILED.*${dir.replace(/[/\\]/g, ".")}`));
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
    for (const t of ["I reset my password yesterday", "The key to success is patience", "my token of appreciation", "Our database is postgres://db.internal:5432/app"]) expect(findSecrets(t), t).toEqual([]);
  });
});

describe("write-time redaction in the store (no caller can bypass it)", () => {
  const aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  it("redacts content, key and category of a direct store write, and the miss log's query", () => {
    const path = join(tempDir(), "m.sqlite");
    const store = new SqliteMemoryStore({ path });
    const r = store.write({ namespace: "ops", content: `Deploy with aws key AKIAQWERTYUIOP234567 with secret ${aws}`, category: "token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789" });
    expect(r.memory.content).toBe("Deploy with aws key [REDACTED:aws_access_key_id] with secret [REDACTED:high_entropy]");
    expect(r.memory.category).toBe("token [REDACTED:github_token]");
    store.logMiss({ namespace: "ops", query: `what was my secret ${aws}?` });
    expect(store.misses("ops")[0]!.query).toBe("what was my secret [REDACTED:high_entropy]?");
    store.close();
    for (const f of readdirSync(dirname(path))) expect(readFileSync(join(dirname(path), f)).includes(aws), f).toBe(false);
  });

  it("wraps a host-given store so its writes are redacted too", async () => {
    const seen: string[] = [];
    const inner = new SqliteMemoryStore({ path: ":memory:" });
    const host = new Proxy(inner, { get: (t, p) => (p === "write" ? (i: { content: string }) => (seen.push(i.content), t.write(i as never)) : (Reflect.get(t, p) as Function).bind(t)) });
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
    const id = first.write({ namespace: "u1", key: "aws", category: "creds", content: "The deploy key is kept here" }).memory.id;
    first.close();
    const aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY";
    // What an older version stored: the secret verbatim.
    const db = new DatabaseSync(path);
    const version = (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
    db.prepare("UPDATE memories SET content = ? WHERE id = ?").run(`The deploy key is aws_secret_access_key=${aws}`, id);
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
