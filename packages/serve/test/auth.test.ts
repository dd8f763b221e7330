import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import { ScriptedProvider } from "@keel/testkit";
import { authorize, openOwned, resolveBind, SessionOwners } from "../src/index.ts";

const TOKEN_A = "a".repeat(24);
const TOKEN_B = "b".repeat(24);

describe("resolveBind", () => {
  it("binds 127.0.0.1 with no token by default", () => {
    expect(resolveBind({}, {})).toEqual({ host: "127.0.0.1", port: 0, tokens: [], loopback: true });
  });

  it("refuses any other address without a token, naming the flag", () => {
    expect(() => resolveBind({ host: "0.0.0.0" }, {})).toThrow(
      expect.objectContaining({ code: "KEEL_SERVE_TOKEN_REQUIRED", location: { path: "--host" } }),
    );
  });

  it("takes tokens from KEEL_SERVE_TOKEN (comma-separated) and refuses short ones", () => {
    expect(resolveBind({ host: "0.0.0.0" }, { KEEL_SERVE_TOKEN: `${TOKEN_A}, ${TOKEN_B}` }).tokens).toEqual([
      TOKEN_A,
      TOKEN_B,
    ]);
    expect(() => resolveBind({ token: "short" }, {})).toThrow(
      expect.objectContaining({ location: { path: "--token" } }),
    );
  });
});

describe("authorize", () => {
  const local = resolveBind({}, {});
  const guarded = resolveBind({ host: "0.0.0.0", token: [TOKEN_A, TOKEN_B] }, {});

  it("refuses a foreign Host on loopback (DNS rebinding)", () => {
    expect(authorize(local, 4000, { host: "evil.example:4000" })).toMatchObject({ ok: false, status: 421 });
    expect(authorize(local, 4000, { host: "127.0.0.1:4001" })).toMatchObject({ ok: false, status: 421 });
    expect(authorize(local, 4000, { host: "localhost:4000" }, "conn-1")).toEqual({ ok: true, principal: "conn-1" });
  });

  it("requires one of the tokens, and each token is its own principal", () => {
    expect(authorize(guarded, 4000, { host: "x" })).toMatchObject({ ok: false, status: 401 });
    expect(authorize(guarded, 4000, { host: "x", authorization: `Bearer ${TOKEN_A}x` })).toMatchObject({ ok: false });
    const a = authorize(guarded, 4000, { host: "x", authorization: `Bearer ${TOKEN_A}` });
    const b = authorize(guarded, 4000, { host: "x", authorization: `bearer ${TOKEN_B}` });
    expect(a.ok && b.ok && a.principal !== b.principal).toBe(true);
    expect(JSON.stringify(a)).not.toContain(TOKEN_A);
  });
});

describe("session ownership", () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("opens a caller's own sessions only, and remembers owners across restarts", async () => {
    dir = mkdtempSync(join(tmpdir(), "keel-serve-"));
    const agent = await createAgent({ name: "t", provider: new ScriptedProvider([]), home: dir });
    let owners = new SessionOwners(join(dir, "owners.sqlite"));
    const mine = await openOwned(agent, owners, "alice");
    owners.close();
    owners = new SessionOwners(join(dir, "owners.sqlite"));
    expect((await openOwned(agent, owners, "alice", mine.id)).id).toBe(mine.id);
    await expect(openOwned(agent, owners, "bob", mine.id)).rejects.toMatchObject({ code: "KEEL_SESSION_NOT_FOUND" });
    await expect(openOwned(agent, owners, "alice", "nope")).rejects.toMatchObject({ code: "KEEL_SESSION_NOT_FOUND" });
    owners.close();
    await agent.close();
  });
});
