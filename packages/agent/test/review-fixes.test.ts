import { describe, expect, it } from "vitest";
import { freezeDeep, type Message } from "../../kernel/src/messages.ts";
import { createAgent, defineTool } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { takeLease } from "../../store-kit/src/index.ts";
import { TokenCounter } from "../../tokens/src/index.ts";

// Regressions for what the adversarial review of the latency changes found.
describe("latency changes, review regressions", () => {
  it("a renewal whose reply is handled late (the process stalled after the store committed it) does not make the lease look fresh: confirm() asks the store and sees the takeover", async () => {
    const store = new MemorySessionStore();
    store.createSession({ id: "s", agent: "a", createdAt: Date.now() });
    const realRenew = store.renewLease.bind(store);
    let stall = false;
    store.renewLease = (sessionId: string, owner: string, ttlMs: number) => {
      const held = realRenew(sessionId, owner, ttlMs);
      if (stall) {
        stall = false;
        const until = Date.now() + 450; // past the 300 ms TTL, after the commit
        while (Date.now() < until);
      }
      return held;
    };
    const lease = (await takeLease(store, "s", { ttlMs: 300, waitMs: 0, kind: "turn" }))!;
    stall = true;
    await new Promise((r) => setTimeout(r, 150)); // the heartbeat (every 100 ms) renews, then stalls
    expect(stall).toBe(false);
    // The lease ran out during the stall: another holder takes it.
    const other = store.acquireLease("s", { owner: "other", pid: process.pid + 1, host: "elsewhere", ttlMs: 60_000 });
    expect(other.acquired).toBe(true);
    await expect(lease.confirm()).rejects.toMatchObject({ code: "KEEL_SESSION_BUSY" });
    await lease.stop();
  });

  it("a TokenCounter subclass keeps its own counts: a plain counter never sees them, nor they its", () => {
    class ByChars extends TokenCounter {
      override countText(t: string): number {
        return t.length;
      }
    }
    const m: Message = freezeDeep({ role: "user", content: [{ type: "text", text: "hello world, ".repeat(50) }] });
    const custom = new ByChars().countMessage(m);
    const plain = new TokenCounter().countMessage(m);
    expect(custom).toBeGreaterThan(600);
    expect(plain).toBeLessThan(200);
    expect(new ByChars().countMessage(m)).toBe(custom);
  });

  it("a tool schema that cannot be cloned is sent as it is and never frozen (it is the host's object)", async () => {
    const parameters: Record<string, unknown> = {
      type: "object",
      properties: { q: { type: "string" } },
      "x-hook": () => "meta",
    };
    const tool = defineTool({ name: "t", description: "t", parameters: parameters as never, execute: () => "ok" });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "done" }]),
      store: new MemorySessionStore(),
      tools: [tool],
    });
    const s = await agent.session();
    expect((await s.run("go")).verdict.status).toBe("completed");
    await agent.close();
    expect(Object.isFrozen(parameters)).toBe(false);
    (parameters.properties as Record<string, unknown>).limit = { type: "number" };
    expect(Object.keys(parameters.properties as object)).toContain("limit");
  });
});
