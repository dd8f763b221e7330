/**
 * Promises of issue 20 (retrieval, round two), each driven through the real `keel` binary
 * against the wire server (official Anthropic SDK), with its own KEEL_HOME:
 * MCP curation survives a new process (also while a server holding kept tools is still
 * starting there), MCP errors name their true cause, a key glued after an
 * underscore is never persisted, and a hostile tool output cannot stall compaction.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect } from "vitest";
import { ok, scenario, secrets, sessionOf } from "./support/secrets.ts";
import { wellFormedDeep } from "./support/unicode.ts";
import { defaultTokenCounter } from "../../packages/tokens/src/index.ts";
import { leavesFenceOpen } from "../../packages/plugin-compaction/test/support.ts";

const S = secrets();

const toolNames = (body: unknown) =>
  ((body as { tools?: Array<{ name: string }> }).tools ?? []).map((t) => t.name).filter((n) => n.startsWith("mcp__"));
/** The events a `--json` run printed. */
const eventsOf = (stdout: string) =>
  stdout.split("\n").flatMap((line) => {
    try {
      const e = JSON.parse(line) as { type?: string; ts?: number };
      return typeof e.type === "string" ? [e as { type: string; ts: number }] : [];
    } catch {
      return [];
    }
  });
const toolResults = (body: { messages?: Array<{ content?: unknown }> }) =>
  JSON.stringify(
    (body.messages ?? []).flatMap((m) =>
      Array.isArray(m.content) ? m.content.filter((b: { type?: string }) => b.type === "tool_result") : [],
    ),
  );

describe("retrieval promises (issue 20)", () => {
  scenario(
    "a tool revealed by tool_search in one process is still sent when the session goes on in a new process",
    { mcp: true, mcpTopK: 2 },
    async (w) => {
      w.script.main.push(
        { toolCalls: [{ name: "tool_search", args: { query: "adds a tool and announces the change" } }] },
        { text: "Found it." },
      );
      const first = await ok(w.run("echo some text back", { json: true }));
      const revealed = "mcp__fx__add_tool";
      expect(toolResults(w.mainRequests()[1]!.body)).toContain(revealed);
      expect(toolNames(w.mainRequests()[0]!.body)).not.toContain(revealed);
      // A new keel process, the same session: the revealed tool is sent from its first request on.
      await ok(w.run("zzz qqq", { session: sessionOf(first) }));
      expect(toolNames(w.mainRequests().at(-1)!.body)).toContain(revealed);
      // Another session of the same home does not get it.
      await ok(w.run("zzz qqq"));
      expect(toolNames(w.mainRequests().at(-1)!.body)).not.toContain(revealed);
    },
  );

  scenario(
    "a session going on in a new process while a server holding its revealed tool is still starting waits for it: the first request sends the same tools",
    { mcp: true, mcpSlow: true, mcpTopK: 2 },
    async (w) => {
      w.script.main.push(
        { toolCalls: [{ name: "tool_search", args: { query: "look up a record by its key" } }] },
        { text: "Found it." },
      );
      const first = await ok(w.run("echo some text back", { json: true }));
      const revealed = "mcp__slow__slow_lookup";
      expect(toolResults(w.mainRequests()[1]!.body)).toContain(revealed);
      const sameProcess = toolNames(w.mainRequests()[1]!.body);
      expect(sameProcess).toContain(revealed);
      // A new keel process, the same session, the slow server still starting (past startGraceMs)
      // until its gate opens: once the turn has started and its request has not left.
      const gate = join(w.dir, "slow.release");
      const before = w.mainRequests().length;
      let out = "";
      let held: number | undefined;
      const second = w.run("zzz qqq", {
        session: sessionOf(first),
        json: true,
        env: { FAULT_MCP_RELEASE: gate },
        onStdout: (chunk) => {
          out += chunk;
          if (held !== undefined || !out.includes('"turn.started"')) return;
          held = w.mainRequests().length - before;
          writeFileSync(gate, "");
        },
      });
      await ok(second);
      expect(held).toBe(0);
      expect(w.mainRequests().length).toBeGreaterThan(before);
      expect(toolNames(w.mainRequests().at(-1)!.body)).toEqual(sameProcess);
    },
  );

  scenario(
    "an MCP server that cannot reach its upstream: the model is told so, not to fix its arguments",
    { mcp: true },
    async (w) => {
      w.script.main.push(
        { toolCalls: [{ name: "mcp__fx__fail", args: { text: "upstream" } }] },
        { text: "The service is unreachable." },
      );
      await ok(w.run("fetch the page"));
      const result = toolResults(w.mainRequests()[1]!.body);
      expect(result).toContain("KEEL_MCP_UPSTREAM_UNREACHABLE");
      expect(result).toContain("ENOTFOUND");
      expect(result).not.toContain("Fix the arguments");
    },
  );

  scenario(
    "a Slack token glued after an underscore in an MCP error is stored redacted; no file holds it",
    { mcp: true },
    async (w) => {
      w.script.main.push(
        { toolCalls: [{ name: "mcp__fx__fail", args: { text: `SLACK_BOT_${S.slack}` } }] },
        { text: "The call failed." },
      );
      await ok(w.run("Call the failing tool"));
      const db = new DatabaseSync(join(w.home, "mcp-audit.sqlite"), { readOnly: true });
      const audit = db.prepare("SELECT error FROM mcp_calls").all() as Array<{ error: string }>;
      db.close();
      expect(audit[0]!.error).toContain("SLACK_BOT_[REDACTED:slack_token]");
      expect(w.filesContaining([S.slack])).toEqual([]);
    },
  );

  scenario(
    "a tool output of 100 KB of 'a-a-a-…' (identifier extraction was quadratic: ~45 s) does not stall the turn",
    { bigTool: "a-".repeat(50_000) },
    async (w) => {
      w.script.main.push({ toolCalls: [{ name: "dump_config", args: {} }] }, { text: "Done." });
      const run = await ok(w.run("Dump the service configuration", { json: true }));
      // The turn's own time, by its events' clock (not the wait for a free keel slot, nor keel's start).
      const ts = (type: string) => eventsOf(run.stdout).find((e) => e.type === type)?.ts;
      expect(ts("turn.completed")! - ts("turn.started")!).toBeLessThan(30_000);
    },
  );

  // Assistant texts that open with a fence in every form (CRLF, tildes, a 4-backtick fence holding
  // ```, astral and combining characters at the first sentence), streamed with surrogate pairs
  // split across events; a tool output cut inside a code block (TACO digests it).
  const code = Array.from({ length: 30 }, (_, i) => `    result_${i} = compute_value(${i})  # step ${i}`);
  const body = "The reasoning goes on about the plan, weighing one option against another at length. ".repeat(6);
  const fencedTexts = [
    `\`\`\`python\n${code.join("\n")}\n\`\`\`\n${body}`,
    `~~~\r\n${code.join("\r\n")}\r\n~~~\r\n${body}`,
    `\`\`\`\`md\n\`\`\`\ninner\n\`\`\`\n\`\`\`\`\n${body}`,
    `Here is the fix 😀\u0301 \`\`\`python\n${code.join("\n")}\n\`\`\`\n${body}`,
    `\`\`\`~~~ odd info\n${code.join("\n")}\n\`\`\`\n${body}`,
  ];
  const cutOutput = [
    "# Service configuration",
    "```yaml",
    ...Array.from({ length: 150 }, (_, i) => `setting_${i}: value_${i}  # 🚀 entry ${i}`),
  ].join("\n");
  scenario(
    "a compacted request never leaves a code fence open in a shortened text, a digest or a summary, keeps each stub's identifier index within half of what it replaces, and is well-formed UTF-16",
    {
      bigTool: cutOutput,
      compaction:
        "{ model: false, window: 12_000, soft: 0.25, hard: 0.45, target: 0.2, taco: { threshold: 200 }, protectedTail: { tokens: 0, messages: 2, share: 0.15 }, minMaskTokens: 40 }",
    },
    async (w) => {
      // A text made mostly of identifiers found nowhere else: its shortened form indexes them, within budget.
      const paths = Array.from({ length: 160 }, (_, i) => `/srv/app/module_${i}/handler_${(i * 7919) % 1000}.py`);
      w.script.main.push({
        text: `I read every handler. ${paths.join(" then ")}.`,
        toolCalls: [{ name: "dump_config", args: {} }],
      });
      for (const text of fencedTexts)
        w.script.main.push({ text, splitPairs: true, toolCalls: [{ name: "dump_config", args: {} }] });
      w.script.main.push({ text: "Done." });
      await ok(w.run("Dump the service configuration, five times"));
      const marks = ["[rest of this message shortened", "[digest of tool output", "[summary of earlier conversation"];
      const seen = new Set<string>();
      let stubs = 0;
      for (const r of w.mainRequests()) {
        expect(wellFormedDeep(r.body)).toBe(true);
        for (const m of (r.body as { messages?: Array<{ content?: unknown }> }).messages ?? []) {
          const blocks = Array.isArray(m.content)
            ? (m.content as Array<{ type?: string; text?: string; content?: unknown }>)
            : [];
          const texts = blocks.flatMap((b) =>
            b.type === "text"
              ? [b.text ?? ""]
              : b.type === "tool_result"
                ? typeof b.content === "string"
                  ? [b.content]
                  : Array.isArray(b.content)
                    ? (b.content as Array<{ text?: string }>).map((c) => c.text ?? "")
                    : []
                : [],
          );
          for (const t of texts) {
            const mark = marks.find((k) => t.includes(k));
            if (!mark) continue;
            seen.add(mark);
            if (process.env.FAULT_DEBUG) console.log(JSON.stringify(t.slice(0, 200)));
            expect(leavesFenceOpen(t), t).toBe(false);
          }
          // A stub's identifier index costs at most stubIndexShare (half) of the tokens the stub stands for.
          for (const t of texts) {
            for (const [, tokens, index] of t.matchAll(
              /(?:shortened:|masked tool output: [^,\]]*,) (\d+) tokens[^\]]*? Identifiers: ([^\]]*)\]/g,
            )) {
              stubs++;
              expect(defaultTokenCounter().countText(index!), t).toBeLessThanOrEqual(Number(tokens) / 2);
            }
          }
        }
      }
      if (process.env.FAULT_DEBUG)
        console.log(
          w.mainRequests().map((r) => JSON.stringify(r.body).length),
          [...seen],
        );
      expect([...seen].sort()).toEqual([...marks].sort());
      expect(stubs).toBeGreaterThan(0);
    },
  );
});
