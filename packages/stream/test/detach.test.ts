/**
 * @keel/stream with a real kernel and a SQLite file: a detached stream (a client that went away
 * with `onDisconnect: "continue"`) no longer holds its turn back; a rejoin from a live id
 * resumes within the deltas of the answer being streamed.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import type { AppendOptions, KeelEvent, ModelProvider } from "@keel/kernel";
import { MemorySessionStore } from "../../testkit/src/index.ts";
import { rejoinTurn, streamTurn, toSSEStream } from "../src/index.ts";
import type { TurnStreamEvent } from "../src/index.ts";

const WORDS = Array.from({ length: 40 }, (_, i) => `w${i} `);

/** Forty deltas, then the answer; after `hold` deltas it waits for `go` (when given). */
function model(hold?: { at: number; go: Promise<void> }): ModelProvider {
  return {
    id: "test:words",
    contextWindow: 32_000,
    async *stream() {
      for (const [i, w] of WORDS.entries()) {
        if (hold && i === hold.at) await hold.go;
        yield { type: "text_delta", text: w };
      }
      yield {
        type: "response",
        message: { role: "assistant", content: [{ type: "text", text: WORDS.join("") }] },
        stopReason: "end_turn",
        usage: { inputTokens: 0, outputTokens: 0 },
      };
    },
  };
}

describe("@keel/stream: detach and rejoin", () => {
  it("a stream whose SSE reader left with onDisconnect continue runs to its end, not held by back-pressure", async () => {
    const agent = await createAgent({ provider: model(), home: mkdtempSync(join(tmpdir(), "keel-stream-")) });
    const session = await agent.session();
    const turn = streamTurn(session, "go", { highWaterMark: 2 });
    const reader = toSSEStream(turn, { onDisconnect: "continue" }).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toMatch(/^id: \d+\nevent: turn.started\n/);
    await reader.cancel();
    const result = await turn.result;
    expect(result.verdict.status).toBe("completed");
    expect(result.text).toBe(WORDS.join(""));
    await agent.close();
  });

  it("a rejoin from a live id gets the deltas after it, then the verdict", async () => {
    let go!: () => void;
    const hold = { at: 10, go: new Promise<void>((r) => (go = r)) };
    const agent = await createAgent({ provider: model(hold), home: mkdtempSync(join(tmpdir(), "keel-stream-")) });
    const session = await agent.session();
    const next = streamTurn(session, "go");
    const it = next[Symbol.asyncIterator]();
    let at: TurnStreamEvent | undefined;
    while (!(at?.type === "text" && at.delta === "w6 ")) at = (await it.next()).value;
    expect(at!.id).toMatch(/^\d+\.7$/);
    // The reader of `next` stops here (it no longer reads); a rejoin from its last id goes on from the 8th delta.
    const rejoined = await rejoinTurn(session, { after: at!.id! });
    go();
    const rest: TurnStreamEvent[] = [];
    for await (const e of rejoined) rest.push(e);
    expect(rest.map((e) => (e.type === "text" ? e.delta : e.type)).join("")).toBe(`${WORDS.slice(7).join("")}verdict`);
    expect(rest.at(-1)).toMatchObject({ type: "verdict", result: { verdict: { status: "completed" } } });
    await it.return?.();
    await agent.close();
  });
});

describe("@keel/stream: a rejoined turn's verdict", () => {
  it("reaches the client only once the store has the terminal event", async () => {
    /** A store whose write of a terminal event takes 300 ms (a slow disk, a busy database). */
    class SlowEnd extends MemorySessionStore {
      override async appendMany(events: readonly KeelEvent[], options?: AppendOptions): Promise<void> {
        if (events.some((e) => e.type === "turn.completed")) await new Promise((r) => setTimeout(r, 300));
        return super.appendMany(events, options);
      }
    }
    const store = new SlowEnd();
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    const agent = await createAgent({ provider: model({ at: 5, go: gate }), store });
    const session = await agent.session();
    const running = session.run("go");
    await new Promise((r) => setTimeout(r, 50));
    const rejoined = await rejoinTurn(session, { after: 0 });
    go();
    let stored: string[] | undefined;
    for await (const e of rejoined)
      if (e.type === "verdict") stored = (await store.events(session.id)).map((x) => x.type);
    expect(stored).toContain("turn.completed");
    await running;
    await agent.close();
  });
});
