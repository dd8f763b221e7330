/**
 * Rejoining a turn after a dropped connection, over real sockets and a real SQLite file: the
 * example's servers in this process (two of them on one home for the second instance), the
 * offline model behind a gate the test opens, so a turn is known to be running when it matters.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ModelProvider } from "@keel/kernel";
import { offlineModel } from "./offline-model.ts";
import { startServer } from "./server.ts";
import { frames } from "./sse-frames.ts";
import type { Frame } from "./sse-frames.ts";

const servers: Array<{ close: () => Promise<void> }> = [];

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** The offline model, except that the answer after a tool result waits for open() (or the turn's abort). */
function gatedModel(): { provider: ModelProvider; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const provider: ModelProvider = {
    ...offlineModel,
    async *stream(request, options) {
      if (request.messages.at(-1)?.role === "tool")
        await Promise.race([gate, new Promise((r) => options.signal.addEventListener("abort", r, { once: true }))]);
      yield* offlineModel.stream(request, options);
    },
  };
  return { provider, open };
}

async function serve(home: string, provider: ModelProvider) {
  const s = await startServer({ home, provider, port: 0, stepMs: 5 });
  servers.push(s);
  return s;
}

const post = (url: string, body: unknown, signal?: AbortSignal) =>
  fetch(url, { method: "POST", body: JSON.stringify(body), ...(signal ? { signal } : {}) });

const stored = (es: Frame[]) => es.filter((e) => /^\d+$/.test(e.id)).map((e) => `${e.id} ${e.type}`);
const text = (es: Frame[]) => es.map((e) => (e.type === "text" ? e.delta : "")).join("");
const verdictOf = (es: Frame[]) => {
  const last = es.at(-1);
  if (last?.type !== "verdict") throw new Error(`the stream ended with ${JSON.stringify(last)}`);
  return last.result;
};

/** A session whose deploy of `version` was approved: the resumed turn streams from `url`, read up to its tool.finished, then the client goes. */
async function approvedAndDropped(url: string, server: { server: import("node:http").Server }, version: string) {
  const { id } = (await (await post(`${url}/sessions`, {})).json()) as { id: string };
  const asked = await frames(await post(`${url}/sessions/${id}/turns`, { input: `deploy ${version}` }));
  expect(verdictOf(asked).verdict.status).toBe("paused");
  const callId = (asked.find((e) => e.type === "approval.requested") as { callId: string }).callId;
  const closed = new Promise<void>((resolve) =>
    server.server.on("request", (req, res) => req.url?.endsWith("/approvals") && res.once("close", resolve)),
  );
  const gone = new AbortController();
  const res = await post(`${url}/sessions/${id}/approvals`, { answers: [{ callId, approve: true }] }, gone.signal);
  const seen = await frames(res, (e) => e.type === "tool.finished");
  gone.abort();
  await closed;
  return { id, asked, seen, lastId: seen.at(-1)!.id };
}

/** The resumed turn as the log has it (a rejoin with no Last-Event-ID: the latest turn from its start). */
async function fromLog(url: string, id: string): Promise<Frame[]> {
  return frames(await fetch(`${url}/sessions/${id}/stream`));
}

describe("examples/http-server: rejoining a turn (SSE Last-Event-ID)", () => {
  it("a client that drops mid-turn leaves it running; rejoined after it ended, it gets exactly what it missed, then the verdict", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-rejoin-"));
    const gate = gatedModel();
    const a = await serve(home, gate.provider);
    const { id, asked, seen, lastId } = await approvedAndDropped(a.url, a, "v5.0");
    expect(seen[0]).toMatchObject({ type: "turn.started", resumed: true });
    // Ids are the log's: stored events by seq, live ones (progress, deltas) after the last seq.
    expect(seen.map((e) => e.id)).toEqual(
      seen.map((e) =>
        e.type === "tool.progress" ? expect.stringMatching(/^\d+\.\d+$/) : expect.stringMatching(/^\d+$/),
      ),
    );

    // The disconnect reached the server (above); the turn, nobody reading it, runs to its end.
    expect((await fetch(`${a.url}/sessions/${id}/messages`)).status).toBe(200);
    gate.open();
    // Waits for the end: a rejoin's stream ends with the turn's verdict.
    const watched = await frames(
      await fetch(`${a.url}/sessions/${id}/stream`, { headers: { "last-event-id": lastId } }),
    );
    expect(verdictOf(watched).verdict.status).toBe("completed");
    expect(readFileSync(join(home, "deployments.log"), "utf8")).toContain(" v5.0 by ");

    const missed = await frames(
      await fetch(`${a.url}/sessions/${id}/stream`, { headers: { "last-event-id": lastId } }),
    );
    const done = verdictOf(missed);
    expect(done.verdict.status).toBe("completed");
    expect(done.text).toContain("✓ deploy: v5.0 is live");
    // The answer's deltas were never stored: what was missed comes as its whole text.
    expect(missed.map((e) => e.type)).toEqual(["text", "verdict"]);
    expect(text(missed)).toBe(done.text);
    // No duplicate, no gap: what was seen and what was missed are the turn's stored events.
    expect([...stored(seen), ...stored(missed)]).toEqual(stored(await fromLog(a.url, id)));

    // Seen the verdict already: 204 (an EventSource stops reconnecting). From the earlier turn: every turn since.
    const up = await fetch(`${a.url}/sessions/${id}/stream`, { headers: { "last-event-id": missed.at(-1)!.id } });
    expect(up.status).toBe(204);
    const since = await frames(await fetch(`${a.url}/sessions/${id}/stream?after=${asked[0]!.id}`));
    expect(
      since.filter((e) => e.type === "verdict").map((e) => e.type === "verdict" && e.result.verdict.status),
    ).toEqual(["paused", "completed"]);
    expect(stored(since).slice(-stored(missed).length - stored(seen).length)).toEqual([
      ...stored(seen),
      ...stored(missed),
    ]);
  });

  it("rejoined while the turn still runs in the same process: the rest arrives live, to the verdict", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-rejoin-"));
    const gate = gatedModel();
    const a = await serve(home, gate.provider);
    const { id, seen, lastId } = await approvedAndDropped(a.url, a, "v6.0");
    // The answer waits for the gate: the rejoin's headers come while the turn is running.
    const res = await fetch(`${a.url}/sessions/${id}/stream`, { headers: { "last-event-id": lastId } });
    gate.open();
    const rest = await frames(res);
    const done = verdictOf(rest);
    expect(done.verdict.status).toBe("completed");
    expect(done.text).toContain("✓ deploy: v6.0 is live");
    expect(text(rest)).toBe(done.text);
    // The answer's deltas come live (ids after the last stored seq), not as one stored message.
    expect(rest.filter((e) => e.type === "text").every((e) => /^\d+\.\d+$/.test(e.id))).toBe(true);
    expect(rest.every((e) => Number.parseInt(e.id, 10) >= Number(lastId) && e.id !== lastId)).toBe(true);
    expect([...stored(seen), ...stored(rest).filter((s) => !s.endsWith(" text"))]).toEqual(
      stored(await fromLog(a.url, id)).filter((s) => !s.endsWith(" text")),
    );
  });

  it("rejoined on a second instance while the first runs the turn: stored, then polled events, to the verdict", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-rejoin-"));
    const gate = gatedModel();
    const a = await serve(home, gate.provider);
    const b = await serve(home, offlineModel);
    const { id, seen, lastId } = await approvedAndDropped(a.url, a, "v7.0");
    const res = await fetch(`${b.url}/sessions/${id}/stream`, { headers: { "last-event-id": lastId } });
    gate.open();
    const rest = await frames(res);
    const done = verdictOf(rest);
    expect(done.verdict.status).toBe("completed");
    expect(done.text).toContain("✓ deploy: v7.0 is live");
    // The second instance has no live feed of a turn it does not run: all it sends is from the log.
    expect(rest.map((e) => e.type)).toEqual(["text", "verdict"]);
    expect(text(rest)).toBe(done.text);
    expect([...stored(seen), ...stored(rest)]).toEqual(stored(await fromLog(b.url, id)));
    expect(readFileSync(join(home, "deployments.log"), "utf8").match(/ v7\.0 by /g)).toHaveLength(1);
  });

  it("a malformed Last-Event-ID is 400 KEEL_STREAM_POSITION_INVALID; an unknown session is 404", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-rejoin-"));
    const { url } = await serve(home, offlineModel);
    const { id } = (await (await post(`${url}/sessions`, {})).json()) as { id: string };
    for (const bad of ["abc", "-1", "4.x", "1e3", ""]) {
      const res = await fetch(`${url}/sessions/${id}/stream?after=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(await res.json()).toMatchObject({ error: { code: "KEEL_STREAM_POSITION_INVALID" } });
    }
    const header = await fetch(`${url}/sessions/${id}/stream`, { headers: { "last-event-id": "12;drop" } });
    expect(header.status).toBe(400);
    const unknown = await fetch(`${url}/sessions/nope/stream`, { headers: { "last-event-id": "3" } });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: "KEEL_SESSION_NOT_FOUND" } });
    // A session with no turn yet has nothing to send.
    expect((await fetch(`${url}/sessions/${id}/stream`)).status).toBe(204);
  });
});
