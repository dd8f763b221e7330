/**
 * The user model through real kernel turns: profiles per namespace (two users of one agent
 * never see each other's), the prompt section once enough turns were seen, durability across
 * a restart, no secret in the database file, and the person seeing and resetting their profile
 * through the tools.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { detectStyle, UserModelStore, userModel } from "../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-user-model-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const dbPath = () => join(dir, `um-${++n}.sqlite`);
const ok = (k: number): ScriptStep[] => Array.from({ length: k }, () => ({ text: "ok" }));

describe("user model", () => {
  it("keeps one profile per namespace: each user's section reflects only their own messages", async () => {
    const path = dbPath();
    const provider = scriptedProvider(ok(8));
    const agent = await createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [userModel({ path })],
    });
    const alice = await agent.session();
    const bob = await agent.session();
    for (const t of [
      "hey, kubernetes pod crashloop again lol",
      "tl;dr the helm chart fix pls",
      "just the command for the kubernetes rollback",
    ])
      await alice.run(t, { metadata: { userId: "alice" } });
    for (const t of [
      "Dear assistant, could you please explain in detail how the invoice ledger reconciles?",
      "I would appreciate a thorough explanation of the ledger accruals.",
      "Could you please walk me through the invoice approval, step by step?",
    ])
      await bob.run(t, { metadata: { userId: "bob" } });
    await alice.run("and the helm values?", { metadata: { userId: "alice" } });
    await bob.run("And the ledger closing?", { metadata: { userId: "bob" } });
    const sys = provider.requests.map((r) => r.system);
    const aliceLast = sys[6]!;
    const bobLast = sys[7]!;
    expect(aliceLast).toContain("Prefers brief, direct answers.");
    expect(aliceLast).toContain("Writes casually");
    expect(aliceLast).toMatch(/Often talks about: .*kubernetes/);
    expect(aliceLast).not.toMatch(/ledger|invoice/);
    expect(bobLast).toContain("Prefers detailed answers");
    expect(bobLast).toContain("Writes formally");
    expect(bobLast).toMatch(/Often talks about: .*ledger/);
    expect(bobLast).not.toMatch(/kubernetes|helm/);
    // Before three turns there is no section at all.
    expect(sys[0]).not.toContain("About this user");
    await agent.close();
    // Durable: another process reads the same profiles.
    const db = new UserModelStore(path);
    expect(db.profile("alice").turns).toBe(4);
    expect(db.profile("bob").detail).toBeGreaterThan(0.3);
    db.close();
  });

  it("never stores a secret the person typed", async () => {
    const path = dbPath();
    const key = `sk-ant-api03-${"Zq8".repeat(22)}`;
    const agent = await createAgent({
      provider: scriptedProvider(ok(2)),
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [userModel({ path })],
    });
    const s = await agent.session();
    await s.run(`my key is ${key} and the db password=Hunter2Secret!x9 please keep going`);
    await s.run(`ANTHROPIC_API_KEY=${key}`);
    await agent.close();
    const files = readdirSync(dir).filter((f) => f.startsWith(`um-${n}.sqlite`));
    for (const f of files) {
      const bytes = readFileSync(join(dir, f)).toString("latin1");
      expect(bytes).not.toContain(key.slice(14, 40));
      expect(bytes).not.toContain("Hunter2Secret");
    }
    expect(Object.keys(new UserModelStore(path).profile("default").terms).join(" ")).not.toMatch(/zq8|hunter2/i);
  });

  it("the person sees and resets their profile through the tools; the section goes with it", async () => {
    const path = dbPath();
    const provider = scriptedProvider([
      ...ok(3),
      { toolCalls: [{ id: "p1", name: "user_profile", args: {} }] },
      { text: "Here is what I learned." },
      { toolCalls: [{ id: "r1", name: "user_profile_reset", args: {} }] },
      { text: "Forgotten." },
      { text: "ok" },
    ]);
    const agent = await createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [userModel({ path })],
    });
    const s = await agent.session();
    for (const t of ["terraform plan pls", "terraform apply, short answer", "terraform state again lol"])
      await s.run(t, { metadata: { userId: "carol" } });
    await s.run("what do you know about how I write?", { metadata: { userId: "carol" } });
    const shown = JSON.parse(
      JSON.stringify(s.messages.find((m) => m.role === "tool" && m.toolCallId === "p1")!.content[0]),
    ).text as string;
    expect(JSON.parse(shown)).toMatchObject({
      turnsObserved: 4,
      recurringWords: expect.arrayContaining(["terraform"]),
    });
    await s.run("forget my profile", { metadata: { userId: "carol" } });
    // The reset also drops what this very turn taught it.
    expect(new UserModelStore(path).profile("carol").turns).toBe(0);
    await s.run("hi", { metadata: { userId: "carol" } });
    expect(provider.requests.at(-1)!.system).not.toContain("About this user");
    await agent.close();
  });

  it("the style detector reads detail, tone and words from one message", () => {
    expect(detectStyle("tl;dr pls")).toMatchObject({ detail: -1, tone: -1 });
    expect(detectStyle("Could you please explain in detail how caching works?")).toMatchObject({ detail: 1, tone: 1 });
    expect(detectStyle("deploy the kubernetes cluster 12345678").terms).toEqual(["deploy", "kubernetes", "cluster"]);
  });
});
