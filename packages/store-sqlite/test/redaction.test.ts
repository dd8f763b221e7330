/**
 * The SQLite store writes redacted events: no secret in the table or the file's bytes, thinking blocks,
 * image data and ids whole. (redactForStorage itself is tested in packages/store-kit/test.)
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { KeelEvent } from "@keel/kernel";
import { SqliteSessionStore } from "@keel/store-sqlite";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const KEY = `ghp_${"Yt5k".repeat(9)}`;
const SIG = `Eq${"Zm9vYmFyYmF6cXV4".repeat(6)}==`;

describe("the session store persists no secret", () => {
  it("redacts every string of an event, in the table and in the file's bytes, and keeps thinking, image data and ids whole", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-redact-"));
    dirs.push(dir);
    const file = path.join(dir, "sessions.sqlite");
    const store = new SqliteSessionStore({ path: file });
    store.createSession({ id: "s1", agent: "a", createdAt: 1 });
    const message = {
      role: "assistant",
      content: [
        { type: "thinking", text: `the user gave ${KEY}`, providerData: { provider: "anthropic", signature: SIG } },
        { type: "text", text: `I will push with ${KEY}.` },
        {
          type: "tool_call",
          id: "toolu_01AbCdEfGhIjKlMnOpQrStUv",
          name: "bash",
          args: { cmd: `git push https://x:${KEY}@github.com/o/r`, env: { GITHUB_TOKEN: KEY } },
        },
      ],
    };
    const event = Object.freeze({
      type: "message.appended",
      sessionId: "s1",
      seq: 1,
      ts: 2,
      turnId: "t1",
      message: Object.freeze(message),
    }) as unknown as KeelEvent;
    store.appendMany([event], { durable: true });
    const [back] = store.events("s1") as Array<KeelEvent & { message: typeof message }>;
    store.close();
    const blocks = back!.message.content as Array<Record<string, unknown>>;
    expect(blocks[0]).toEqual(message.content[0]);
    expect(blocks[1]!.text).toBe("I will push with [REDACTED:github_token].");
    expect(blocks[2]!.id).toBe("toolu_01AbCdEfGhIjKlMnOpQrStUv");
    expect(JSON.stringify(blocks[2]!.args)).not.toContain(KEY);
    // The thinking block keeps it (a provider rejects an edited one); everything else is clean.
    const raw = fs.readFileSync(file);
    let hits = 0;
    for (let i = raw.indexOf(KEY); i >= 0; i = raw.indexOf(KEY, i + 1)) hits++;
    expect(hits).toBe(1);
  });
});
