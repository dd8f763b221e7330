import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { ModelProvider } from "@keel/kernel";
import { afterEach, describe, expect, it } from "vitest";
import { safeTerm, skills, SkillsStore, taskSignature } from "../src/index.ts";

const temps: string[] = [];
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});
function home(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-skills-scope-"));
  temps.push(d);
  return d;
}
async function agentWith(plugin: ReturnType<typeof skills>, provider: ModelProvider) {
  const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [plugin] });
  closers.push(
    () => agent.close(),
    () => plugin.close(),
  );
  return { agent, session: await agent.session() };
}
/** Every file under `dir` (recursively) whose raw bytes contain `needle`. */
function filesContaining(dir: string, needle: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const p = join(dir, name);
    if (statSync(p).isFile() && readFileSync(p).includes(needle)) out.push(name);
  }
  return out;
}

const SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const GH = `ghp_${"Zq8x".repeat(9)}`;

describe("secrets never reach skills.sqlite or a draft", () => {
  it("signatures skip secrets: the longest tokens of the input are not the key", () => {
    expect(taskSignature(`deploy the service with secret ${SECRET}`)).toBe("deploy-secret-service");
    expect(taskSignature(`push using ${GH} to github`)).toBe("github-push-using");
    expect(taskSignature(`ok ${SECRET}`)).toBe("ok");
  });

  it("safeTerm hashes key-like terms and keeps words", () => {
    expect(safeTerm("invoice")).toBe("invoice");
    expect(safeTerm("k7mdengbpxrficy9examplekey")).toMatch(/^#[0-9a-f]{16}$/);
  });

  it("a streak, its picks and the model-written draft hold no secret, even when the model repeats it", async () => {
    const h = home();
    const writer = scriptedProvider([{ text: `## When to use\n\nDeploys. Use the secret ${SECRET} and token ${GH}.` }]);
    const plugin = skills({ home: h, model: writer, autoDraft: { threshold: 2 } });
    const { agent, session } = await agentWith(
      plugin,
      scriptedProvider([{ text: `done with ${GH}` }, { text: "done" }]),
    );
    const ask = `deploy the billing service with secret ${SECRET} and token ${GH}`;
    await session.run(ask);
    await session.run(ask);
    await agent.drain();
    expect(plugin.drafts()).toEqual([expect.objectContaining({ status: "drafted", source: "model" })]);
    plugin.close();
    for (const needle of [SECRET, GH, "wjalrxutnfemi", GH.toLowerCase().slice(4)])
      expect(filesContaining(h, needle), needle).toEqual([]);
    const md = readFileSync(join(h, "skills", "auto", "billing-deploy-service", "SKILL.md"), "utf8");
    expect(md).toContain("[REDACTED:");
  });

  it("scrubs a database written before redaction: old streaks dropped, pick inputs redacted", async () => {
    const h = home();
    const path = join(h, "skills.sqlite");
    const { DatabaseSync } = await import("node:sqlite");
    const db = new DatabaseSync(path);
    db.exec(
      "CREATE TABLE picks (session_id TEXT NOT NULL, turn_id TEXT NOT NULL, skill TEXT NOT NULL, terms TEXT NOT NULL, candidates TEXT NOT NULL, forced INTEGER NOT NULL, signature TEXT NOT NULL, input TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (session_id, turn_id))",
    );
    db.exec(
      "CREATE TABLE streaks (signature TEXT PRIMARY KEY, count INTEGER NOT NULL, examples TEXT NOT NULL, ts INTEGER NOT NULL)",
    );
    db.prepare("INSERT INTO picks VALUES ('s', 't', 'x', '[]', '[]', 0, 'sig', ?, 1)").run(`token ${GH}`);
    db.prepare("INSERT INTO streaks VALUES ('sig', 2, ?, 1)").run(JSON.stringify([{ input: `token ${GH}` }]));
    db.close();
    const store = new SkillsStore(path);
    expect(store.getPick("t", "s")!.input).toBe("token [REDACTED:github_token]");
    store.close();
    expect(filesContaining(h, GH)).toEqual([]);
  });
});

describe("drafts are scoped to the namespace that produced them until reviewed", () => {
  it("lists and serves an unreviewed draft only to its namespace; reviewDraft opens it to all", async () => {
    const h = home();
    const writer = scriptedProvider([{ text: "## When to use\n\nInvoices to JSON, step by step." }]);
    const plugin = skills({ home: h, model: writer, autoDraft: { threshold: 2 } });
    const provider = scriptedProvider([
      { text: "a" },
      { text: "b" },
      { toolCalls: [{ id: "c1", name: "skill_read", args: { name: "auto-convert-invoices-json" } }] },
      { text: "bob done" },
      { text: "alice" },
      { text: "bob after review" },
    ]);
    const { agent, session } = await agentWith(plugin, provider);
    const alice = { metadata: { userId: "alice" } };
    const bob = { metadata: { userId: "bob" } };
    await session.run("convert invoices to json", alice);
    await session.run("convert invoices to json", alice);
    await agent.drain();
    const manifest = JSON.parse(
      readFileSync(join(h, "skills", "auto", "convert-invoices-json", "manifest.json"), "utf8"),
    );
    expect(manifest).toMatchObject({ namespace: "alice", needs_review: true });
    await session.run("convert invoices to json", bob);
    const bobReq = provider.requests[2]!;
    expect(bobReq.system).not.toContain("auto-convert-invoices-json");
    const read = provider.requests[3]!.messages.filter((m) => m.role === "tool");
    // Bob sees no skill at all, so skill_read is not even offered; the draft's body never reaches him.
    expect(bobReq.tools.map((t) => t.name)).not.toContain("skill_read");
    expect(read[0]).toMatchObject({ isError: true });
    expect(JSON.stringify(read[0])).not.toContain("Invoices to JSON");
    await session.run("convert invoices to json", alice);
    expect(provider.requests[4]!.system).toContain("auto-convert-invoices-json [draft, needs review]");
    expect(plugin.reviewDraft("convert-invoices-json")).toEqual({ reviewed: true });
    await session.run("convert invoices to json", bob);
    expect(provider.requests[5]!.system).toContain("auto-convert-invoices-json");
    expect(plugin.listSkills()[0]!.draft).toEqual({ namespace: "alice", reviewed: true });
  });
});

describe("skill_read bound to the namespace", () => {
  it("refuses another namespace's unreviewed draft by name, as if it did not exist", async () => {
    const { SkillCatalog, readSkill } = await import("../src/index.ts");
    const { mkdirSync, writeFileSync } = await import("node:fs");
    const h = home();
    const auto = join(h, "auto");
    mkdirSync(join(auto, "x"), { recursive: true });
    writeFileSync(join(auto, "x", "SKILL.md"), "---\nname: auto-x\ndescription: d\n---\n\nbody of x\n");
    writeFileSync(join(auto, "x", "manifest.json"), JSON.stringify({ namespace: "alice", needs_review: true }));
    const cat = new SkillCatalog([{ dir: auto, auto: true }], { autoDir: auto });
    cat.refresh();
    expect(readSkill(cat, "auto-x", undefined, "alice")).toMatchObject({ ok: true });
    expect(readSkill(cat, "auto-x", undefined, "bob")).toEqual({
      ok: false,
      error:
        'No skill named "auto-x" (0 skills loaded). None is close; call skill_read with other words of the task to search.',
    });
    writeFileSync(join(auto, "x", "manifest.json"), JSON.stringify({ needs_review: true }));
    cat.refresh();
    expect(readSkill(cat, "auto-x", undefined, "alice")).toMatchObject({ ok: false });
  });
});
