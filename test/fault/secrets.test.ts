/**
 * Class 3 of issue 12, secrets and isolation: nothing secret is persisted anywhere under
 * KEEL_HOME (every file's raw bytes are searched, -wal included), nothing secret is recalled
 * into a later prompt, and every retrieval path stays in its session and namespace. Each
 * scenario drives the real `keel` binary against the wire server through the official SDK.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { isMain, secrets, sent, sessionOf, world } from "./support/secrets.ts";
import type { World } from "./support/secrets.ts";

const S = secrets();
let w: World | undefined;
afterEach(async () => {
  await w?.close();
  w = undefined;
});

function rows<T>(file: string, sql: string): T[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

describe("secrets never persisted, never recalled", () => {
  it("memory_remember with an AWS key 'with secret wJalr…': stored redacted, no file holds it, a later session's prompt never sees it", async () => {
    w = await world();
    w.script.main.push(
      { toolCalls: [{ name: "memory_remember", args: { content: `Deploy account uses aws key ${S.awsId} with secret ${S.awsSecret} in eu-west-1` } }] },
      { text: "Noted." },
    );
    const first = await w.run(`Remember: deploy account uses aws key ${S.awsId} with secret ${S.awsSecret} in eu-west-1`);
    expect(first.code, first.stderr).toBe(0);
    const toolResult = sent(w.mainRequests()[1]!);
    expect(toolResult).toMatch(/stored; secret-like parts redacted \(aws_access_key_id, high_entropy\)/);
    const later = await w.run("Which aws key and region does the deploy account use?");
    expect(later.code, later.stderr).toBe(0);
    const last = w.mainRequests().at(-1)!;
    expect(sent(last)).toContain("Deploy account uses aws key [REDACTED:aws_access_key_id] with secret [REDACTED:high_entropy] in eu-west-1");
    expect(sent(last)).not.toContain(S.awsSecret);
    expect(w.filesContaining([S.awsSecret, S.awsId])).toEqual([]);
  });
});
