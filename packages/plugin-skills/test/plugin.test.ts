import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { KeelEvent, ModelProvider } from "@keel/kernel";
import { afterEach, describe, expect, it } from "vitest";
import skillsDefault, { skills } from "../src/index.ts";

const FIXTURES = fileURLToPath(new URL("./fixtures/catalog", import.meta.url));
const temps: string[] = [];
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

function home(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-skills-home-"));
  temps.push(d);
  return d;
}

function writeSkill(
  root: string,
  dir: string,
  name: string,
  description: string,
  body = "Do the thing step by step.",
): void {
  mkdirSync(join(root, dir), { recursive: true });
  writeFileSync(join(root, dir, "SKILL.md"), `---\nname: ${name}\ndescription: ${description}\n---\n\n${body}\n`);
}

async function agentWith(plugin: ReturnType<typeof skills>, provider: ModelProvider, limits?: { maxRounds?: number }) {
  const agent = await createAgent({
    provider,
    store: new MemorySessionStore(),
    plugins: [plugin],
    ...(limits ? { limits } : {}),
  });
  closers.push(
    () => agent.close(),
    () => plugin.close(),
  );
  return { agent, session: await agent.session() };
}

const diagnostics = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type === "diagnostic") as Array<Extract<KeelEvent, { type: "diagnostic" }>>;

describe("the plugin through real kernel turns", () => {
  it("lists skills in a capped prompt section with one advisory line, serves skill_read, and reports malformed skills", async () => {
    const h = home();
    const plugin = skills({ dirs: [FIXTURES], home: h, seed: 1 });
    const provider = scriptedProvider([
      {
        toolCalls: [
          { id: "c1", name: "skill_read", args: { name: "invoice-reconciler" } },
          { id: "c2", name: "skill_read", args: { name: "invoice-reconciler", path: "docs/checklist.md" } },
          { id: "c3", name: "skill_read", args: { name: "invoice-reconciler", path: "../bad-yaml/SKILL.md" } },
        ],
      },
      { text: "Reconciled." },
    ]);
    const { session } = await agentWith(plugin, provider);
    const result = await session.run("reconcile the supplier invoices against purchase orders");
    expect(result.verdict).toMatchObject({ status: "completed" });
    const system = provider.requests[0]!.system;
    expect(system).toContain("- invoice-reconciler: Reconcile supplier invoices");
    expect(system).toContain('The "invoice-reconciler" skill may help with this request');
    expect(system.match(/skill may help/g)).toHaveLength(1);
    expect(provider.requests[0]!.tools.map((t) => t.name)).toContain("skill_read");
    const results = provider.requests[1]!.messages.filter((m) => m.role === "tool");
    expect(results.map((m) => m.role === "tool" && m.isError)).toEqual([false, false, true]);
    expect(JSON.stringify(results[0])).toContain("Match each to its purchase order");
    expect(JSON.stringify(results[1])).toContain("totals match within one cent");
    const diags = diagnostics(await session.events());
    const invalid = diags.filter((d) => d.code === "KEEL_SKILL_INVALID");
    expect(invalid.length).toBe(5);
    expect(invalid.find((d) => d.message.includes("bad-yaml"))!.message).toMatch(/bad-yaml\/SKILL\.md:3: invalid YAML/);
    expect(plugin.listSkills().map((s) => s.name)).toEqual(["brainstorming", "invoice-reconciler"]);
  });

  it("@@skill=<name> forces the pick; an unknown name is a diagnostic and the router picks", async () => {
    const h = home();
    const dir = join(h, "catalog");
    writeSkill(dir, "travel", "travel", "Plan trips, flights and hotel bookings.");
    writeSkill(dir, "poems", "poems", "Write poems and verses.");
    const plugin = skillsDefault({ dirs: [dir], home: h, seed: 2 });
    const provider = scriptedProvider([{ text: "ok" }, { text: "ok" }, { text: "ok" }]);
    const { session } = await agentWith(plugin, provider);
    await session.run("book a flight and a hotel @@skill=poems");
    expect(provider.requests[0]!.system).toContain('The "poems" skill may help');
    await session.run("book a flight and a hotel @@skill=nope");
    expect(provider.requests[1]!.system).toContain('The "travel" skill may help');
    expect(
      diagnostics(await session.events()).some(
        (d) => d.code === "KEEL_SKILL_UNKNOWN" && d.message.includes("@@skill=nope"),
      ),
    ).toBe(true);
    // Names load in kebab-case; the name as the user writes it still forces the skill.
    await session.run("book a flight and a hotel @@skill=Poems");
    expect(provider.requests[2]!.system).toContain('The "poems" skill may help');
    expect(diagnostics(await session.events()).filter((d) => d.code === "KEEL_SKILL_UNKNOWN")).toHaveLength(1);
  });

  it("credits the pick from the verdict (success, failure) and from host feedback, and keeps it in <home>/skills.sqlite", async () => {
    const h = home();
    const dir = join(h, "catalog");
    writeSkill(dir, "travel", "travel", "Plan trips, flights and hotel bookings.");
    writeSkill(dir, "poems", "poems", "Write poems and verses.");
    const plugin = skills({ dirs: [dir], home: h, seed: 3, autoDraft: { enabled: false } });
    const provider = scriptedProvider([
      { text: "done" },
      { error: { class: "invalid_request", message: "bad" } },
      { toolCalls: [{ name: "skill_read", args: { name: "travel" } }] },
      { text: "final" },
    ]);
    const { session } = await agentWith(plugin, provider, { maxRounds: 1 });
    const ok = await session.run("book a flight to Oslo @@skill=travel");
    expect(ok.verdict.status).toBe("completed");
    const arm = () => plugin.listSkills().find((s) => s.name === "travel")!.arm;
    expect(arm()).toEqual({ successes: 1, failures: 0 });
    const failed = await session.run("book a hotel in Rome @@skill=travel");
    expect(failed.verdict.status).toBe("failed");
    expect(arm()).toEqual({ successes: 1, failures: 1 });
    const guarded = await session.run("book a train @@skill=travel");
    expect(guarded.verdict).toMatchObject({ status: "stopped", reason: "max_rounds" });
    expect(arm()).toEqual({ successes: 1, failures: 2 });

    expect(await plugin.recordFeedback(ok.turnId, "down")).toEqual({ applied: true, skill: "travel" });
    expect(await plugin.recordFeedback({ sessionId: ok.sessionId, turnId: ok.turnId }, "up")).toEqual({
      applied: true,
      skill: "travel",
    });
    expect(arm()).toEqual({ successes: 2, failures: 3 });
    expect(await plugin.recordFeedback("no-such-turn", "up")).toMatchObject({ applied: false });
    expect(existsSync(join(h, "skills.sqlite"))).toBe(true);

    // A second plugin on the same home (a new process would do the same) sees the same arm and can take feedback.
    const again = skills({ dirs: [dir], home: h });
    closers.push(() => again.close());
    expect(again.listSkills().find((s) => s.name === "travel")!.arm).toEqual({ successes: 2, failures: 3 });
    expect(await again.recordFeedback(ok.turnId, "up")).toEqual({ applied: true, skill: "travel" });
  });

  it("drafts a skill after 3 consecutive successes on one signature, resets on failure, and never redrafts a revoked one", async () => {
    const h = home();
    const plugin = skills({ home: h, seed: 4 });
    const steps = [
      { text: "ok 1" },
      { text: "ok 2" },
      { error: { class: "invalid_request" as const } },
      { text: "ok 3" },
      { text: "ok 4" },
      { text: "ok 5" },
      { text: "unused" },
      { text: "after revoke 1" },
      { text: "after revoke 2" },
      { text: "after revoke 3" },
      { text: "after revoke 4" },
    ];
    const { agent, session } = await agentWith(plugin, scriptedProvider(steps));
    const ask = "convert these invoices to json";
    const sig = "convert-invoices-json";
    const auto = join(h, "skills", "auto", sig);
    await session.run(ask);
    await session.run(`please ${ask}`);
    await session.run(ask); // fails: the streak resets
    await session.run(ask);
    await session.run(ask);
    await agent.drain();
    expect(existsSync(auto)).toBe(false);
    await session.run(ask); // third consecutive success
    await agent.drain();
    const manifest = JSON.parse(readFileSync(join(auto, "manifest.json"), "utf8"));
    expect(manifest).toMatchObject({
      auto_drafted: true,
      signature: sig,
      evidence_count: 3,
      needs_review: true,
      score: null,
    });
    expect(["model", "template"]).toContain(manifest.source);
    await session.run("something unrelated entirely");
    expect(plugin.listSkills()).toEqual([expect.objectContaining({ name: `auto-${sig}`, auto: true })]);

    expect(await plugin.revokeDraft(sig)).toEqual({ removed: true });
    expect(existsSync(auto)).toBe(false);
    for (let i = 0; i < 3; i++) await session.run(ask);
    await agent.drain();
    expect(existsSync(auto)).toBe(false);
    expect(plugin.listSkills()).toEqual([]);
  });

  it("writes the draft body with the model when one is configured", async () => {
    const h = home();
    const writer = scriptedProvider([
      { text: "## When to use\n\nWhen invoices need JSON.\n\n## Steps\n\n1. Parse.\n2. Emit JSON." },
    ]);
    const plugin = skills({ home: h, model: writer, autoDraft: { threshold: 2 } });
    const { agent, session } = await agentWith(plugin, scriptedProvider([{ text: "a" }, { text: "b" }]));
    await session.run("convert invoices to json");
    await session.run("convert invoices to json");
    await agent.drain();
    const md = readFileSync(join(h, "skills", "auto", "convert-invoices-json", "SKILL.md"), "utf8");
    expect(md).toContain("2. Emit JSON.");
    expect(plugin.drafts()).toEqual([expect.objectContaining({ status: "drafted", source: "model" })]);
  });

  it("rejects bad options with the kernel's options error, naming the field", async () => {
    await expect(
      createAgent({
        provider: scriptedProvider([]),
        store: new MemorySessionStore(),
        plugins: [skills({ dirs: "nope" as unknown as string[] })],
      }),
    ).rejects.toMatchObject({ code: "KEEL_PLUGIN_OPTIONS_INVALID" });
    expect(() => skills({ maxPromptChars: 5 }).listSkills()).toThrow(/KEEL_PLUGIN_OPTIONS_INVALID.*maxPromptChars/);
  });
});

describe("faults stay diagnostics", () => {
  it("a database that cannot be opened is one error diagnostic; routing goes on in memory", async () => {
    const h = home();
    writeFileSync(join(h, "not-a-dir"), "x");
    const dir = join(h, "catalog");
    writeSkill(dir, "travel", "travel", "Plan trips, flights and hotel bookings.");
    const plugin = skills({ dirs: [dir], home: h, db: join(h, "not-a-dir", "skills.sqlite") });
    const provider = scriptedProvider([{ text: "a" }, { text: "b" }]);
    const { session } = await agentWith(plugin, provider);
    expect((await session.run("book a flight")).verdict.status).toBe("completed");
    await session.run("book a hotel");
    expect(provider.requests[1]!.system).toContain('The "travel" skill may help');
    const errors = diagnostics(await session.events()).filter((d) => d.code === "KEEL_SKILL_STORE_FAILED");
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toContain("not-a-dir");
    expect(plugin.listSkills()[0]!.arm).toEqual({ successes: 2, failures: 0 });
  });
});
