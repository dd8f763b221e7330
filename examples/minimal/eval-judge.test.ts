/**
 * The LLM judge, end to end: `keel eval evals/judged.jsonl` with the wire server (a local server
 * speaking Anthropic's wire format) as the model. The agent answers each case, then the judge
 * (the agent's side model; here the same model) is asked for a structured verdict on it.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWireServer } from "@keel/wire-server";
import type { RecordedRequest, WireReply, WireServer } from "@keel/wire-server";
import { offlineEnv, runKeel } from "../../packages/cli/test/support/run-keel.ts";

const here = dirname(fileURLToPath(import.meta.url));
const home = mkdtempSync(join(tmpdir(), "keel-minimal-judge-"));
let server: WireServer;

const text = (v: unknown) => JSON.stringify(v);
const isJudge = (r: RecordedRequest) => text(r.body.system).includes("You grade an AI assistant's answer");

/** The model: answers the user, and as the judge grades what it is shown. */
function model(r: RecordedRequest): WireReply {
  const asked = text(r.body.messages);
  if (isJudge(r)) {
    if (asked.includes("Phase table")) return { text: '{"pass": false, "score": 0, "reason": "lists a done item"}' };
    if (asked.includes("Hello team"))
      return { text: 'Verdict:\n```json\n{"score": 0.6, "reason": "friendly, but two sentences"}\n```' };
    // As a real Anthropic model answers structured output: the forced tool's input.
    return { toolCalls: [{ name: "verdict", args: { pass: true, score: 0.9, reason: "only the open items" } }] };
  }
  if (asked.includes("still open")) return { text: "Open: the provider adapters, the keel CLI, and the plugins." };
  return { text: "Hello team! Great to work with you." };
}

beforeAll(async () => {
  server = await startWireServer({ onEmpty: model });
});
afterAll(async () => {
  await server.close();
  rmSync(home, { recursive: true, force: true });
});

describe("examples/minimal: keel eval with the LLM judge on the wire server", () => {
  it("asks the judge with the rubric and the answer, and scores its verdict against the threshold", async () => {
    const r = await runKeel(["eval", "evals/judged.jsonl", "--concurrency", "1", "--json", join(home, "report.json")], {
      cwd: here,
      env: offlineEnv({
        KEEL_HOME: home,
        ANTHROPIC_API_KEY: "sk-test",
        ANTHROPIC_BASE_URL: server.anthropicBaseURL,
        KEEL_EXIT_GRACE_MS: "500",
      }),
    });
    // One case fails its judge (0.6 under the case's threshold 0.7): the gate fails, exit 3.
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toContain("keel: model anthropic:claude-sonnet-4-6");
    const report = JSON.parse(readFileSync(join(home, "report.json"), "utf8"));
    const [open, tone] = report.cases as Array<{ status: string; scores: Array<Record<string, unknown>> }>;
    expect(open!.status).toBe("passed");
    expect(open!.scores).toContainEqual({ scorer: "judge", pass: true, score: 0.9, reason: "only the open items" });
    expect(tone!.status).toBe("failed");
    expect(tone!.scores).toContainEqual({
      scorer: "judge",
      pass: false,
      score: 0.6,
      reason: "friendly, but two sentences",
    });
    expect(r.stdout).toContain("judge: friendly, but two sentences");

    const judged = server.requests.filter(isJudge);
    expect(judged).toHaveLength(2);
    const first = text(judged[0]!.body.messages);
    for (const part of [
      "<rubric>",
      "lists only the open items of TODO.md",
      "<input>",
      "still open?",
      "<answer>",
      "the keel CLI",
    ])
      expect(first).toContain(part);
    // The judge is offered no tool of the agent: only the verdict's schema, as Anthropic's structured output (a forced tool).
    expect(judged[0]!.body.tools.map((t: { name: string }) => t.name)).toEqual(["verdict"]);
    expect(judged[0]!.body.tool_choice).toEqual({ type: "tool", name: "verdict" });
    expect(judged[0]!.body.tools[0].input_schema.required).toEqual(["pass", "score", "reason"]);
  }, 60_000);
});
