/**
 * Optional peers (packages.ts): a package is "installed" where Node's import() would find it from
 * the caller's file; Node's not-found error is read for the package it names, whatever the error
 * value throws; the missing package is named with its command, at its name and the caller's place.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { missingPackageOf, packageInstalled, packageMissing } from "../src/index.ts";

const root = mkdtempSync(join(tmpdir(), "keel-packages-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("optional peers", () => {
  it("installed means a node_modules/<pkg>/package.json beside the caller or in a folder above it", () => {
    const from = pathToFileURL(join(root, "app", "lib", "deep", "mod.js")).href;
    mkdirSync(join(root, "app", "lib", "deep"), { recursive: true });
    expect(packageInstalled("@scope/peer", from)).toBe(false);
    mkdirSync(join(root, "app", "node_modules", "@scope", "peer"), { recursive: true });
    writeFileSync(join(root, "app", "node_modules", "@scope", "peer", "package.json"), "{}");
    expect(packageInstalled("@scope/peer", from)).toBe(true);
    // A folder without package.json is not a package.
    mkdirSync(join(root, "app", "node_modules", "half"), { recursive: true });
    expect(packageInstalled("half", from)).toBe(false);
    // Bundled (no file of its own): the import itself will say what is missing.
    expect(packageInstalled("half", undefined)).toBe(true);
  });

  it("reads Node's not-found error for the package it names, and nothing else", () => {
    const esm = Object.assign(new Error("Cannot find package '@a2a-js/sdk' imported from /x/a2a.js"), {
      code: "ERR_MODULE_NOT_FOUND",
    });
    expect(missingPackageOf(esm, ["ai", "@a2a-js/sdk"])).toBe("@a2a-js/sdk");
    // Another package missing (the peer's own dependency) is not the peer missing.
    const other = Object.assign(new Error("Cannot find package 'left-pad' imported from /x"), {
      code: "MODULE_NOT_FOUND",
    });
    expect(missingPackageOf(other, ["@a2a-js/sdk"])).toBeUndefined();
    expect(missingPackageOf(new Error("Cannot find package '@a2a-js/sdk'"), ["@a2a-js/sdk"])).toBeUndefined();
    // A hostile value: getters that throw, null, a string.
    const hostile = new Proxy(
      {},
      {
        get: () => {
          throw new Error("boom");
        },
      },
    );
    expect(missingPackageOf(hostile, ["ai"])).toBeUndefined();
    expect(missingPackageOf(null, ["ai"])).toBeUndefined();
    expect(missingPackageOf("ai", ["ai"])).toBeUndefined();
  });

  it("names the package, the feature and the command, at the package and the caller's place", () => {
    const cause = new Error("not found");
    const e = packageMissing("@modelcontextprotocol/sdk", "MCP servers", { plugin: "@keel/plugin-mcp" }, cause);
    expect(e.code).toBe("KEEL_PACKAGE_MISSING");
    expect(e.location).toEqual({ path: "@modelcontextprotocol/sdk", plugin: "@keel/plugin-mcp" });
    expect(e.message).toContain("MCP servers needs the package @modelcontextprotocol/sdk");
    expect(e.message).toContain("run `npm install @modelcontextprotocol/sdk` where package.json is");
    expect(e.cause).toBeDefined();
  });
});
