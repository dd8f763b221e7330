/**
 * The URLs Keel prints are masked by the one helper (maskCredentials), checked against what the
 * driver itself reads from a URL: whatever password node-postgres would send, none of it is left
 * in describeUrl's text or in the error of a setting that is not a postgres URL.
 */
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { maskCredentials } from "@keel/secrets";
import { describeUrl, maskUrl, selectDatabase, sharedPool } from "../src/index.ts";

const fromPg = createRequire(createRequire(import.meta.url).resolve("pg"));
const { parse } = fromPg("pg-connection-string") as { parse: (url: string) => Record<string, unknown> };

/** A deterministic generator (mulberry32), so a failure names a reproducible case. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = [..."abcXYZ0189-_.~!$&'()*+,;=:@/?#[]% \"\\<>^`{|}é€😀"];

function password(rnd: () => number): string {
  let s = "Q";
  for (let i = 0, n = 6 + Math.floor(rnd() * 10); i < n; i++) s += ALPHABET[Math.floor(rnd() * ALPHABET.length)];
  return `${s}Z`;
}

describe("masking what node-postgres reads as the password", () => {
  it("in the userinfo, ?password= and ?sslpassword=, encoded or not: no password the driver would use is left in the text Keel shows (400 random passwords)", () => {
    const rnd = random(30);
    let checked = 0;
    for (let i = 0; i < 400; i++) {
      const pw = password(rnd);
      const enc = encodeURIComponent(pw);
      const urls = [
        `postgres://keel:${enc}@db.internal:5432/keel`,
        `postgres://keel@db.internal:5432/keel?password=${enc}`,
        `postgres://keel@db.internal:5432/keel?sslmode=disable&sslpassword=${enc}`,
        `postgres://keel:${pw}@db.internal:5432/keel`,
        `postgres://keel@db.internal:5432/keel?application_name=x&password=${pw}`,
      ];
      for (const url of urls) {
        let read: Record<string, unknown>;
        try {
          read = parse(url);
        } catch {
          read = {};
        }
        const secrets = [read.password, read.sslpassword].filter(
          (v): v is string => typeof v === "string" && v.length > 0,
        );
        const shown = describeUrl(url, sharedPool(url));
        for (const s of new Set([...secrets, pw, enc]))
          if (s.length >= 4 && url.includes(s)) expect(shown, `${url} → ${shown}`).not.toContain(s);
        checked += secrets.length;
      }
    }
    // The driver read a password from most of them: the check is about real passwords.
    expect(checked).toBeGreaterThan(1_000);
  });

  it("maskUrl is the same function as maskCredentials (one helper)", () => {
    expect(maskUrl).toBe(maskCredentials);
  });

  it("a setting that is not a postgres URL is quoted masked, then cut (a password right after the scheme is not shown in part)", () => {
    for (const value of ["mysql://a:Hunter22@db/app", "password=Hunter22 host=db", "host=db sslpassword='Hunter22'"]) {
      let message = "";
      try {
        selectDatabase(value, "KEEL_DATABASE_URL", "KEEL_DATABASE_URL", {});
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toContain("KEEL_CONFIG_INVALID");
      expect(message).not.toMatch(/Hu|Hunter/);
    }
  });
});
