/**
 * redactForStorage, what every session store runs on an event before writing it. That the SQLite store
 * writes its output is tested in packages/store-sqlite/test/redaction.test.ts (store-kit does not
 * depend on a store).
 */
import { describe, expect, it } from "vitest";
import { redactForStorage } from "@keel/store-kit";

const KEY = `ghp_${"Yt5k".repeat(9)}`;

describe("the session store persists no secret", () => {
  it("redactForStorage survives a throwing getter and a cycle", () => {
    const bad: Record<string, unknown> = { ok: `token ${KEY}` };
    Object.defineProperty(bad, "boom", {
      enumerable: true,
      get: () => {
        throw new Error("boom");
      },
    });
    bad.self = bad;
    const out = redactForStorage(bad) as Record<string, unknown>;
    expect(out.ok).toBe("token [REDACTED:github_token]");
    expect(out.boom).toBe("[unreadable]");
  });

  it("redactForStorage copies: the input is untouched", () => {
    const input = Object.freeze({
      text: `token ${KEY}`,
      image: Object.freeze({ type: "image", mediaType: "image/png", data: KEY }),
    });
    const out = redactForStorage(input) as typeof input;
    expect(out.text).toBe("token [REDACTED:github_token]");
    expect(out.image.data).toBe(KEY);
    expect(input.text).toBe(`token ${KEY}`);
  });
});
