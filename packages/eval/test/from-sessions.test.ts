import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { addSessionsToDataset, caseFromSession } from "../src/from-sessions.ts";
import { loadDataset } from "../src/dataset.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-eval-add-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A key of a known format (Anthropic's), long enough for the scanners.
const KEY = `sk-ant-api03-${"Zq8xW3vB7nK2pL5rT9yH4mD6fJ1sA0cE".repeat(3)}-AA`;

async function recorded() {
  const store = new MemorySessionStore();
  const agent = await createAgent({
    name: "recorder",
    store,
    sideModel: false,
    provider: scriptedProvider([
      { when: { lastUserIncludes: "deploy" }, text: `Deployed with ${KEY}.` },
      { when: { lastUserIncludes: "first" }, text: "one" },
      { when: { lastUserIncludes: "second" }, text: "two" },
    ]),
  });
  const a = await agent.session();
  await a.run(`deploy it, the key is ${KEY}`);
  const b = await agent.session();
  await b.run("first");
  await b.run("second");
  const empty = await agent.session();
  await Promise.all([a.close(), b.close()]);
  return { agent, store, ids: { secret: a.id, multi: b.id, empty: empty.id } };
}

describe("datasets from sessions", () => {
  it("a session becomes a case: its user turns, its last answer as the reference, redacted, linked back", async () => {
    const { agent, store, ids } = await recorded();
    const secret = await caseFromSession(store, ids.secret);
    expect(secret).toMatchObject({ id: `session-${ids.secret}`, metadata: { session: ids.secret, agent: "recorder" } });
    expect(JSON.stringify(secret)).not.toContain(KEY);
    expect(secret!.input).toMatch(/^deploy it, the key is /);
    expect(secret!.reference).toMatch(/^Deployed with /);
    const multi = await caseFromSession(store, ids.multi);
    expect(multi).toMatchObject({
      input: ["first", "second"],
      reference: "two",
      metadata: { answers: ["one", "two"] },
    });
    await agent.close();
  });

  it("appends to a JSONL dataset that loads; skips ids it holds, sessions with no turn and sessions that do not exist (listed)", async () => {
    const { agent, store, ids } = await recorded();
    const file = join(dir, "cases.jsonl");
    writeFileSync(file, '{"id": "hand-written", "input": "hi"}'); // no final newline
    const r = await addSessionsToDataset(store, [ids.secret, ids.multi, ids.empty], file);
    expect(r.added).toEqual([`session-${ids.secret}`, `session-${ids.multi}`]);
    expect(r.skipped).toEqual([{ session: ids.empty, why: "it has no user turn" }]);
    expect(loadDataset(file).cases.map((c) => c.id)).toEqual(["hand-written", ...r.added]);
    const again = await addSessionsToDataset(store, [ids.multi], file);
    expect(again.added).toEqual([]);
    expect(again.skipped[0]!.why).toContain("already holds");
    const withMissing = await addSessionsToDataset(store, ["no-such-session", ids.secret], join(dir, "other.jsonl"));
    expect(withMissing).toMatchObject({ added: [`session-${ids.secret}`], missing: ["no-such-session"] });
    const fresh = join(dir, "fresh.jsonl");
    expect((await addSessionsToDataset(store, ["nope"], fresh)).missing).toEqual(["nope"]);
    expect(existsSync(fresh)).toBe(false);
    await expect(caseFromSession(store, "nope")).rejects.toThrow(/KEEL_SESSION_NOT_FOUND.*"nope"/);
    await agent.close();
  });
});
