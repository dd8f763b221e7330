/**
 * Every way a turn ends reaches the page (fault class 22). A turn stopped by limits.maxCostUsd,
 * through the chat handler and the AI SDK's own DefaultChatTransport and readUIMessageStream,
 * shows the stop and its code in the message (a text part any useChat page renders, and a
 * `data-keel-end` part), for that message and the next; through AG-UI, every event passes
 * @ag-ui/core's schema and the run says the stop in a text message and `metadata.keel`. Then a
 * table over every end kind of the kernel's TurnVerdict, typed so a new kind does not compile
 * without a row: each is said (or, for a normal end and a pause, not), with its code, in both protocols.
 */
import { describe, expect, it } from "vitest";
import { EventSchema } from "@ag-ui/core/schemas";
import { DefaultChatTransport, parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";
import type { UIMessage, UIMessageChunk } from "ai";
import { isWellFormed } from "@keel/kernel";
import type { ModelProvider, TurnVerdict } from "@keel/kernel";
import type { TurnStreamEvent } from "@keel/stream";
import { ScriptedProvider } from "../../testkit/src/index.ts";
import {
  AGUIEventMapper,
  createAGUIHandler,
  createChatHandler,
  toUIMessageStream,
  uiChunksToSSE,
} from "../src/index.ts";
import { drain, scriptedAgent } from "./support.ts";

/** A scripted model with a price: budgets can estimate its requests ($0.06 for the 4,096-token output ceiling). */
function pricedModel(inner = new ScriptedProvider([{ text: "never sent" }])): ModelProvider {
  return {
    id: inner.id,
    contextWindow: inner.contextWindow,
    price: { input: 3, output: 15 },
    stream: (request, options) => inner.stream(request, options),
  };
}

/** SSE bytes as the AI SDK's client reads them: every chunk must pass its schema; then its reader builds the message. */
async function readAsSDK(
  body: ReadableStream<Uint8Array>,
): Promise<{ message: UIMessage | undefined; errors: string[] }> {
  const chunks = parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream<{ success: boolean; value?: UIMessageChunk; error?: unknown }, UIMessageChunk>({
      transform(parsed, controller) {
        if (!parsed.success) throw new Error(`A chunk the SDK rejects: ${String(parsed.error)}`);
        controller.enqueue(parsed.value!);
      },
    }),
  );
  let message: UIMessage | undefined;
  const errors: string[] = [];
  for await (const m of readUIMessageStream({ stream: chunks, onError: (e) => errors.push(String(e)) })) message = m;
  return { message, errors };
}

const texts = (m: UIMessage | undefined) => (m?.parts ?? []).flatMap((p) => (p.type === "text" ? [p.text] : []));
const endPart = (m: UIMessage | undefined) =>
  (m?.parts ?? []).find((p) => p.type === "data-keel-end") as { data: Record<string, unknown> } | undefined;

/** AG-UI SSE events, each validated by @ag-ui/core. */
async function aguiEvents(res: Response): Promise<Array<Record<string, any>>> {
  expect(res.status).toBe(200);
  return (await res.text())
    .split("\n\n")
    .filter((f) => f.startsWith("data: "))
    .map((f) => EventSchema.parse(JSON.parse(f.slice(6))) as Record<string, any>);
}

describe("fault class 22: a turn stopped by a spending limit reaches the page", () => {
  it("useChat (DefaultChatTransport, readUIMessageStream): the message says the stop and KEEL_BUDGET_EXCEEDED, and so does the next", async () => {
    const model = new ScriptedProvider([{ text: "never sent" }]);
    const { agent } = await scriptedAgent(pricedModel(model), { limits: { maxCostUsd: 0.01 } });
    const chat = createChatHandler({ agent });
    // The transport useChat uses, posting to the handler itself.
    const transport = new DefaultChatTransport({
      api: "http://localhost/api/chat",
      fetch: async (input, init) => chat(new Request(input as string, init as RequestInit)),
    });
    const messages: UIMessage[] = [];
    for (const [i, text] of ["hello", "and again?"].entries()) {
      messages.push({ id: `u${i}`, role: "user", parts: [{ type: "text", text }] });
      const stream = await transport.sendMessages({
        chatId: "budget-chat",
        messages,
        trigger: "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      });
      const raw = stream.pipeThrough(
        new TransformStream<UIMessageChunk, Uint8Array>({
          transform: (c, ctl) => ctl.enqueue(new TextEncoder().encode(`data: ${JSON.stringify(c)}\n\n`)),
        }),
      );
      const { message, errors } = await readAsSDK(raw);
      // A guard's stop is not an error: useChat stays usable.
      expect(errors).toEqual([]);
      // Not an empty bubble: a text part (what the plainest useChat page renders) says the stop.
      expect(texts(message)).toEqual([
        expect.stringMatching(
          /^Stopped: This turn spent \$0\.0000 of limits\.maxCostUsd \$0\.0100; the next request to .+ is estimated at \$0\.06\d*\..* \(KEEL_BUDGET_EXCEEDED\)$/s,
        ),
      ]);
      expect(endPart(message)?.data).toMatchObject({
        status: "stopped",
        reason: "budget",
        code: "KEEL_BUDGET_EXCEEDED",
      });
      messages.push(message!);
    }
    // Nothing was sent to the model: both stops are the budget's.
    expect(model.requests).toHaveLength(0);
    await agent.close();
  });

  it("AG-UI: every event passes @ag-ui/core; the run says the stop in a text message and RUN_FINISHED's metadata.keel", async () => {
    const { agent } = await scriptedAgent(pricedModel(), { limits: { maxCostUsd: 0.01 } });
    const handler = createAGUIHandler({ agent });
    const res = await handler(
      new Request("http://localhost/api/agui", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          threadId: "t-budget",
          runId: "r1",
          messages: [{ id: "u1", role: "user", content: "hello" }],
          tools: [],
          context: [],
        }),
      }),
    );
    const events = await aguiEvents(res);
    expect(events.map((e) => e.type)).toEqual([
      "RUN_STARTED",
      "TEXT_MESSAGE_START",
      "TEXT_MESSAGE_CONTENT",
      "TEXT_MESSAGE_END",
      "RUN_FINISHED",
    ]);
    expect(events[2]!.delta).toMatch(/^Stopped: This turn spent .* \(KEEL_BUDGET_EXCEEDED\)$/s);
    expect(events.at(-1)).toMatchObject({
      outcome: { type: "success" },
      metadata: { keel: { status: "stopped", reason: "budget", code: "KEEL_BUDGET_EXCEEDED" } },
    });
    await agent.close();
  });
});

type Row<V extends TurnVerdict> = { verdict: V; code?: string; said: boolean };
type Table = {
  [S in TurnVerdict["status"]]: Record<
    Extract<TurnVerdict, { status: S }>["reason"],
    Row<Extract<TurnVerdict, { status: S }>>
  >;
};

/** Every end kind of TurnVerdict: a Record per status over its reasons (a new one is a compile error here). */
const ENDS: Table = {
  completed: {
    end_turn: { verdict: { status: "completed", reason: "end_turn" }, said: false },
    other: { verdict: { status: "completed", reason: "other" }, said: false },
    max_tokens: { verdict: { status: "completed", reason: "max_tokens" }, said: true },
    refusal: { verdict: { status: "completed", reason: "refusal" }, said: true },
  },
  stopped: {
    max_rounds: { verdict: { status: "stopped", reason: "max_rounds" }, code: "KEEL_GUARD_TRIPPED", said: true },
    max_tool_calls: {
      verdict: { status: "stopped", reason: "max_tool_calls" },
      code: "KEEL_GUARD_TRIPPED",
      said: true,
    },
    token_budget: { verdict: { status: "stopped", reason: "token_budget" }, code: "KEEL_GUARD_TRIPPED", said: true },
    wall_time: { verdict: { status: "stopped", reason: "wall_time" }, code: "KEEL_GUARD_TRIPPED", said: true },
    context_ceiling: {
      verdict: { status: "stopped", reason: "context_ceiling" },
      code: "KEEL_GUARD_TRIPPED",
      said: true,
    },
    budget: {
      verdict: { status: "stopped", reason: "budget", detail: "KEEL_BUDGET_EXCEEDED: This session spent $1.0000." },
      code: "KEEL_BUDGET_EXCEEDED",
      said: true,
    },
    plugin_stop: {
      verdict: { status: "stopped", reason: "plugin_stop", detail: "quota for today is used up" },
      code: "KEEL_TURN_STOPPED",
      said: true,
    },
  },
  failed: Object.fromEntries(
    (
      [
        "provider_error",
        "phase_failed",
        "final_round_tool_use",
        "context_overflow",
        "process_fault",
        "output_invalid",
      ] as const
    ).map((reason) => [
      reason,
      {
        verdict: { status: "failed", reason, code: "KEEL_X_TEST", message: `KEEL_X_TEST: it broke (${reason}).` },
        code: "KEEL_X_TEST",
        said: true,
      },
    ]),
  ) as Table["failed"],
  paused: {
    approval: {
      verdict: { status: "paused", reason: "approval", pending: ["c1"] },
      code: "KEEL_APPROVAL_PENDING",
      said: false,
    },
  },
  interrupted: {
    aborted: { verdict: { status: "interrupted", reason: "aborted" }, code: "KEEL_TURN_ABORTED", said: true },
    process_exit: {
      verdict: { status: "interrupted", reason: "process_exit" },
      code: "KEEL_TURN_INTERRUPTED",
      said: true,
    },
    handed_back: {
      verdict: { status: "interrupted", reason: "handed_back" },
      code: "KEEL_TURN_HANDED_BACK",
      said: true,
    },
  },
};

const ROWS = Object.values(ENDS).flatMap((byReason) => Object.values(byReason) as Row<TurnVerdict>[]);

function turnOf(verdict: TurnVerdict): TurnStreamEvent[] {
  return [
    { type: "turn.started", turnId: "s1/1", resumed: false },
    {
      type: "verdict",
      result: {
        sessionId: "s1",
        turnId: "s1/1",
        verdict,
        text: "",
        usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
        rounds: 1,
        toolCalls: 0,
        ...(verdict.status === "paused" ? { pending: [] } : {}),
      },
    },
  ];
}

async function* each<T>(items: T[]): AsyncGenerator<T> {
  yield* items;
}

describe("fault class 22: every end kind of the kernel's TurnVerdict, in both protocols", () => {
  it("the table covers every status and reason (21 kinds)", () => {
    expect(ROWS).toHaveLength(21);
  });

  it.each(ROWS.map((r) => [`${r.verdict.status}/${r.verdict.reason}`, r] as const))(
    "%s: said on the page with its code (UI stream read by the AI SDK; AG-UI checked by @ag-ui/core)",
    async (_name, row) => {
      // The UI message stream, read by the AI SDK.
      const { message, errors } = await readAsSDK(uiChunksToSSE(toUIMessageStream(each(turnOf(row.verdict)))));
      const said = texts(message);
      if (row.said) {
        expect(said).toHaveLength(1);
        if (row.code) expect(said[0]).toContain(`(${row.code})`);
        expect(endPart(message)?.data).toMatchObject({
          status: row.verdict.status,
          reason: row.verdict.reason,
          ...(row.code ? { code: row.code } : {}),
        });
      } else {
        expect(said).toEqual([]);
        expect(endPart(message)).toBeUndefined();
      }
      // Only a failure is an error for useChat.
      expect(errors.length).toBe(row.verdict.status === "failed" ? 1 : 0);

      // AG-UI, every event through the protocol's schema.
      const mapper = new AGUIEventMapper({ threadId: "t", runId: "r" });
      const events = turnOf(row.verdict)
        .flatMap((e) => mapper.map(e))
        .map((e) => EventSchema.parse(JSON.parse(JSON.stringify(e))) as Record<string, any>);
      const content = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta as string);
      expect(content).toEqual(said);
      const last = events.at(-1)!;
      expect(last.type).toBe(row.verdict.status === "failed" ? "RUN_ERROR" : "RUN_FINISHED");
      expect(last.metadata?.keel).toMatchObject({
        status: row.verdict.status,
        reason: row.verdict.reason,
        ...(row.code ? { code: row.code } : {}),
      });
    },
  );

  it("a stream that fails before its verdict is said too, then the error chunk / RUN_ERROR", async () => {
    const failing: TurnStreamEvent[] = [
      { type: "turn.started", turnId: "s1/1", resumed: false },
      { type: "error", code: "KEEL_STORE_FAILED", message: "KEEL_STORE_FAILED: the disk is full." },
    ];
    const chunks = await drain(toUIMessageStream(each(failing)));
    expect(chunks.map((c) => c.type)).toEqual([
      "start",
      "text-start",
      "text-delta",
      "text-end",
      "data-keel-end",
      "error",
      "finish",
    ]);
    expect(chunks[2]).toMatchObject({ delta: "Failed: the disk is full. (KEEL_STORE_FAILED)" });
    const events = failing.flatMap((e) => new AGUIEventMapper({ threadId: "t", runId: "r" }).map(e));
    expect(events.at(-1)).toMatchObject({ type: "RUN_ERROR", code: "KEEL_STORE_FAILED" });
  });

  it("text from plugin code is masked and cut by code points before it reaches the page", async () => {
    const reason = `stop: postgres://u:hunter2@db/x ${"🦀".repeat(5_000)}`;
    const { message } = await readAsSDK(
      uiChunksToSSE(toUIMessageStream(each(turnOf({ status: "stopped", reason: "plugin_stop", detail: reason })))),
    );
    const [note] = texts(message);
    expect(note).not.toContain("hunter2");
    expect(isWellFormed(note!)).toBe(true);
    expect([...note!].length).toBeLessThan(2_200);
  });
});
