/**
 * Redaction scans free text and never an identifier: every event type, its identifiers filled
 * with ids of the shapes real providers and stores use (Anthropic `toolu_01…` of 30 and 32
 * characters and `toolu_vrtx_01…`, OpenAI `call_…` and `fc_…`, UUIDs, the wire server's own),
 * must come back from the store byte for byte, while a key in any of its free-text fields is gone.
 * The sample table is typed against the event union, so a new event type fails to compile here
 * until it has a sample.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { KeelEvent, KeelEventData, KeelEventType } from "@keel/kernel";
import { seededRandom } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { redactEvent } from "@keel/store-kit";

const rnd = seededRandom(30);
const B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const HEX = "0123456789abcdef";
const pick = (alphabet: string, n: number) =>
  Array.from({ length: n }, () => alphabet[Math.floor(rnd() * alphabet.length)]).join("");
const uuid = () => `${pick(HEX, 8)}-${pick(HEX, 4)}-4${pick(HEX, 3)}-a${pick(HEX, 3)}-${pick(HEX, 12)}`;

/** Id makers of the shapes the issue lists, plus plugin-made names and keys. */
const SHAPES: Record<string, () => string> = {
  "anthropic 30": () => `toolu_01${pick(B62, 22)}`,
  "anthropic 32": () => `toolu_01${pick(B62, 24)}`,
  "anthropic vertex": () => `toolu_vrtx_01${pick(B62, 22)}`,
  "openai call": () => `call_${pick(B62, 24)}`,
  "openai responses": () => `fc_${pick(B62, 40)}`,
  uuid,
  "wire server": () => `call_${pick(B62, 27)}`,
  "random name": () => `${pick(B62, 36)}`,
};

const SECRET = `ghp_${pick(B62, 36)}`;
const BARE_KEY = pick(B62, 44);

type Sample<T extends KeelEventType> = (id: () => string, text: () => string) => Extract<KeelEventData, { type: T }>;
const usage = { inputTokens: 1, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 };

/** One event of every type: `id()` where the kernel keeps an identifier, `text()` where free text goes. */
const SAMPLES: { [T in KeelEventType]: Sample<T> } = {
  "session.created": (id) => ({
    type: "session.created",
    agent: id(),
    parent: { sessionId: id(), turnId: id(), callId: id(), name: id(), depth: 1 },
  }),
  "child.started": (id) => ({ type: "child.started", callId: id(), name: id(), childSessionId: id() }),
  "session.mode": () => ({ type: "session.mode", mode: "chat" }),
  "session.resumed": (id) => ({
    type: "session.resumed",
    agent: id(),
    interruptedTurn: id(),
    leaseTakenOver: { pid: 1, host: id(), reason: "expired" },
  }),
  "turn.started": (_id, text) => ({
    type: "turn.started",
    input: text(),
    trigger: "user",
    metadata: { note: text() },
    content: [{ type: "text", text: text() }],
  }),
  "message.appended": (id, text) => ({
    type: "message.appended",
    message: {
      role: "assistant",
      content: [
        { type: "text", text: text() },
        { type: "tool_call", id: id(), name: id(), args: { order: id(), note: text() } },
      ],
    },
  }),
  "message.queued": (id, text) => ({ type: "message.queued", queue: "steering", queueId: id(), text: text() }),
  "message.dequeued": (id) => ({ type: "message.dequeued", queue: "follow_up", queueId: id() }),
  "context.edited": (id, text) => ({
    type: "context.edited",
    plugin: id(),
    reason: text(),
    edits: [
      { op: "mask_tool_result", toolCallId: id(), text: text() },
      {
        op: "replace",
        start: 0,
        end: 1,
        messages: [
          { role: "tool", toolCallId: id(), toolName: id(), isError: false, content: [{ type: "text", text: text() }] },
        ],
      },
    ],
    before: 2,
    after: 2,
  }),
  "context.repaired": (id) => ({ type: "context.repaired", synthesizedResults: [id(), id()], droppedResults: [id()] }),
  "phase.completed": (id, text) => ({
    type: "phase.completed",
    phase: "turn.pre_policy",
    durationMs: 1,
    handlers: [{ plugin: id(), subscription: id(), status: "threw", durationMs: 1, contributions: 0, error: text() }],
    contributions: [{ plugin: id(), kind: "policy", id: id(), status: "rejected", reason: text() }],
  }),
  "phase.background": (id, text) => ({
    type: "phase.background",
    phase: "turn.post_turn",
    handler: { plugin: id(), subscription: id(), status: "threw", durationMs: 1, contributions: 0, error: text() },
    contributions: [{ plugin: id(), kind: "diagnostic", id: id(), status: "applied" }],
  }),
  "contributions.merged": (id, text) => ({
    type: "contributions.merged",
    phase: "turn.pre_prompt_context",
    contributions: [{ plugin: id(), kind: "prompt_context", id: id(), status: "omitted", reason: text() }],
  }),
  "prompt.compiled": (id, text) => ({
    type: "prompt.compiled",
    manifest: {
      round: 1,
      sections: [{ sectionId: id(), title: text(), chars: 3, plugins: [id()] }],
      context: [{ id: id(), domain: id(), chars: 1, plugin: id() }],
      tools: [{ name: id(), source: id() }],
      hiddenTools: [{ name: id(), source: id() }],
      messageCount: 1,
      systemChars: 1,
      tokenEstimate: { exact: true, system: 1, tools: 1, messages: 1, total: 3 },
      options: { metadata: { note: text() } },
      finalRound: false,
    },
  }),
  "model.responded": (id) => ({
    type: "model.responded",
    round: 1,
    stopReason: "end_turn",
    usage,
    durationMs: 1,
    attempt: 1,
    provider: id(),
    model: id(),
  }),
  "model.failed": (_id, text) => ({ type: "model.failed", round: 1, errorClass: "network", message: text() }),
  "round.answered": (id, text) => ({ type: "round.answered", round: 1, plugin: id(), reason: text(), calls: 1 }),
  "model.notice": (id, text) => ({
    type: "model.notice",
    round: 1,
    kind: "retry",
    message: text(),
    provider: id(),
    data: { note: text() },
  }),
  "tool.started": (id, text) => ({
    type: "tool.started",
    round: 1,
    callId: id(),
    name: id(),
    args: { ref: id(), note: text() },
  }),
  "tool.completed": (id) => ({
    type: "tool.completed",
    round: 1,
    callId: id(),
    name: id(),
    status: "ok",
    durationMs: 1,
    rewrittenBy: [id()],
  }),
  "preflight.completed": (id, text) => ({
    type: "preflight.completed",
    status: "ok",
    revealed: [id()],
    ignored: [id()],
    plan: text(),
    durationMs: 1,
    usage,
    error: text(),
  }),
  "tools.revealed": (id) => ({ type: "tools.revealed", by: id(), names: [id(), id()] }),
  "guard.tripped": () => ({ type: "guard.tripped", guard: "max_rounds", limit: 1, value: 2 }),
  "approval.requested": (id, text) => ({
    type: "approval.requested",
    round: 1,
    callId: id(),
    name: id(),
    args: { order: id(), note: text() },
    reason: text(),
    plugin: id(),
    via: { callId: id(), sessionId: id(), child: id(), childCallId: id(), ordinal: 1 },
  }),
  "approval.resolved": (id, text) => ({
    type: "approval.resolved",
    callId: id(),
    name: id(),
    approved: true,
    always: true,
    reason: text(),
    by: "host",
  }),
  "turn.resumed": (id) => ({ type: "turn.resumed", answered: [id(), id()] }),
  diagnostic: (id, text) => ({
    type: "diagnostic",
    level: "warn",
    code: "KEEL_HANDLER_THREW",
    message: text(),
    plugin: id(),
    phase: "turn.pre_policy",
    data: { note: text() },
  }),
  "job.pending": (id) => ({
    type: "job.pending",
    plugin: id(),
    name: id(),
    idempotencyKey: id(),
    payload: { namespace: id(), turnId: id() },
    attempts: 3,
    timeoutMs: 1,
    retryDelayMs: 1,
    origin: { sessionId: id(), turnId: id() },
  }),
  "job.started": (id) => ({
    type: "job.started",
    plugin: id(),
    name: id(),
    idempotencyKey: id(),
    attempt: 1,
    pid: 1,
    host: id(),
    instance: id(),
  }),
  "job.deferred": (id, text) => ({
    type: "job.deferred",
    plugin: id(),
    name: id(),
    idempotencyKey: id(),
    attempts: 1,
    reason: text(),
  }),
  fault: (id, text) => ({
    type: "fault",
    code: "KEEL_PROCESS_FAULT",
    source: "uncaughtException",
    message: text(),
    plugin: id(),
  }),
  "job.completed": (id, text) => ({
    type: "job.completed",
    plugin: id(),
    name: id(),
    idempotencyKey: id(),
    status: "failed",
    durationMs: 1,
    error: text(),
  }),
  "turn.completed": () => ({
    type: "turn.completed",
    verdict: { status: "completed", reason: "end_turn" },
    usage,
    rounds: 1,
    toolCalls: 0,
    timings: { phases: {}, plugins: {} },
  }),
  "turn.failed": (id, text) => ({
    type: "turn.failed",
    verdict: { status: "failed", reason: "provider_error", code: "KEEL_PROVIDER_ERROR", message: text(), plugin: id() },
    usage,
    rounds: 1,
    toolCalls: 0,
  }),
  "turn.interrupted": () => ({
    type: "turn.interrupted",
    verdict: { status: "interrupted", reason: "aborted" },
    usage,
    rounds: 1,
    toolCalls: 0,
  }),
  "turn.paused": (id) => ({
    type: "turn.paused",
    verdict: { status: "paused", reason: "approval", pending: [id(), id(), id()] },
    usage,
    rounds: 1,
    toolCalls: 2,
  }),
};

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("storage keeps identifiers and redacts free text, for every event type", () => {
  for (const [shape, make] of Object.entries(SHAPES)) {
    it(`ids of shape "${shape}" survive every structural field, through a real SQLite file`, () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-ids-"));
      dirs.push(dir);
      const store = new SqliteSessionStore({ path: join(dir, "s.sqlite") });
      store.createSession({ id: "s", agent: "a", createdAt: 1 });
      const ids: string[] = [];
      const id = () => {
        const v = make();
        ids.push(v);
        return v;
      };
      const texts = [`my key is ${SECRET} ok`, `token ${BARE_KEY}`, `standalone ${BARE_KEY} in prose`];
      let t = 0;
      const text = () => texts[t++ % texts.length]!;
      const events = (Object.keys(SAMPLES) as KeelEventType[]).map(
        (type, i) =>
          ({
            ...(SAMPLES[type] as Sample<typeof type>)(id, text),
            sessionId: "s",
            seq: i + 1,
            ts: 1,
            turnId: "t",
          }) as KeelEvent,
      );
      store.appendMany(events, { durable: true });
      const back = JSON.stringify(store.events("s"));
      store.close();
      const lost = ids.filter((v) => !back.includes(JSON.stringify(v)));
      expect(lost, `ids lost: ${lost.join(", ")}`).toEqual([]);
      const raw = readFileSync(join(dir, "s.sqlite")).toString("latin1");
      expect(back).not.toContain(SECRET);
      expect(back).not.toContain(BARE_KEY);
      expect(raw).not.toContain(SECRET);
    });
  }

  it("a free-text field holding nothing but a random key is redacted (prose), the same key as a tool argument under a neutral name is kept as an identifier, and under a key-named field it is redacted", () => {
    const out = redactEvent({
      type: "tool.started",
      round: 1,
      callId: "c",
      name: "n",
      args: { order: BARE_KEY, apiKey: BARE_KEY, header: `Bearer ${BARE_KEY}` },
    }) as { args: Record<string, string> };
    expect(out.args.order).toBe(BARE_KEY);
    expect(out.args.apiKey).toBe("[REDACTED:high_entropy]");
    expect(out.args.header).not.toContain(BARE_KEY);
    const q = redactEvent({ type: "message.queued", queue: "steering", queueId: "q", text: BARE_KEY }) as {
      text: string;
    };
    expect(q.text).toBe("[REDACTED:high_entropy]");
  });

  it("an event type the kernel does not know is stored as caller data: a known key format goes, an identifier stays", () => {
    const out = redactEvent({
      type: "plugin.custom",
      ref: "toolu_01AbCdEfGhIjKlMnOpQrStUvWx",
      token: SECRET,
    } as unknown as KeelEventData) as Record<string, string>;
    expect(out.ref).toBe("toolu_01AbCdEfGhIjKlMnOpQrStUvWx");
    expect(out.token).toBe("[REDACTED:github_token]");
  });
});
