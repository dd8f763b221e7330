import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { KeelEvent } from "@keel/kernel";
import { afterEach, describe, expect, it } from "vitest";
import { skills } from "../src/index.ts";

const temps: string[] = [];
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

const TOPICS =
  "gardening knitting pottery chess astronomy origami baking fishing cycling sailing birdwatching calligraphy".split(
    " ",
  );

describe("the skills prompt section with a large catalog", () => {
  it("lists the skills most relevant to the turn within the cap, says how many more exist and how to find them", async () => {
    const h = mkdtempSync(join(tmpdir(), "keel-skills-section-"));
    temps.push(h);
    const dir = join(h, "catalog");
    // 240 unrelated skills first in catalog order, the relevant one last (241 in all).
    for (let i = 0; i < 240; i++) {
      const folder = join(dir, `s${String(i).padStart(3, "0")}`);
      mkdirSync(folder, { recursive: true });
      const topic = TOPICS[i % TOPICS.length]!;
      writeFileSync(
        join(folder, "SKILL.md"),
        `---\nname: ${topic}-helper-${i}\ndescription: Tips and step-by-step guidance for ${topic}, from first steps to advanced practice, with checklists.\n---\n\nBody.\n`,
      );
    }
    mkdirSync(join(dir, "zzz-invoice"), { recursive: true });
    writeFileSync(
      join(dir, "zzz-invoice", "SKILL.md"),
      "---\nname: invoice-reconciler\ndescription: Reconcile supplier invoices against purchase orders and flag mismatches.\n---\n\nBody.\n",
    );
    const plugin = skills({ dirs: [dir], home: h, seed: 5, includeHomeSkills: false });
    const provider = scriptedProvider([
      { toolCalls: [{ id: "c1", name: "skill_read", args: { name: "supplier invoices purchase orders" } }] },
      { text: "done" },
    ]);
    const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [plugin] });
    closers.push(
      () => agent.close(),
      () => plugin.close(),
    );
    const session = await agent.session();
    await session.run("reconcile these supplier invoices with the purchase orders");
    const system = provider.requests[0]!.system;
    const listed = system.split("\n").filter((l) => /^- [a-z0-9-]+: /.test(l));
    expect(listed[0]).toMatch(/^- invoice-reconciler: /);
    const more = /\((\d+) more skills are not listed; call skill_read with a few words of the task/.exec(system);
    expect(more).not.toBeNull();
    expect(listed.length + Number(more![1])).toBe(241);
    const section = system.slice(system.indexOf("Skills you can read"));
    expect(section.slice(0, section.indexOf("may help")).length).toBeLessThanOrEqual(6000);
    // The search the section points at works: skill_read with words of the task names the skill.
    const tool = provider.requests[1]!.messages.find((m) => m.role === "tool");
    expect(JSON.stringify(tool)).toContain("invoice-reconciler");
    const events: KeelEvent[] = await session.events();
    expect(events.filter((e) => e.type === "diagnostic")).toEqual([]);
  });
});
