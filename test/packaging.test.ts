/**
 * What npm users get: every relative link in a published README points at a file the package
 * ships (its `files`, the kernel's copied docs included), every package that builds on the
 * kernel takes it as a peer, so a project never installs two kernels, and no package makes a
 * project install a provider SDK or a UI protocol library it does not use.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, normalize } from "node:path";
import { describe, expect, it } from "vitest";

const REPO = join(import.meta.dirname, "..");
const packages = readdirSync(join(REPO, "packages")).filter((p) =>
  existsSync(join(REPO, "packages", p, "package.json")),
);
const manifest = (p: string) =>
  JSON.parse(readFileSync(join(REPO, "packages", p, "package.json"), "utf8")) as {
    name: string;
    private?: boolean;
    files?: string[];
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    optionalDependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
    scripts?: Record<string, string>;
  };
const relativeLinks = (md: string) =>
  [...md.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!).filter((l) => !/^[a-z]+:/i.test(l));

describe("published packages", () => {
  it("README links stay inside what the package ships", () => {
    const docs = mkdtempSync(join(tmpdir(), "keel-docs-"));
    try {
      // The kernel's prepack script copies the repository's docs into the package.
      execFileSync(process.execPath, [join(REPO, "packages/kernel/scripts/copy-docs.mjs"), docs]);
      let checked = 0;
      for (const p of packages) {
        const readme = join(REPO, "packages", p, "README.md");
        if (!existsSync(readme)) continue;
        const files = manifest(p).files ?? [];
        for (const link of relativeLinks(readFileSync(readme, "utf8"))) {
          const target = normalize(link);
          checked++;
          expect(target.startsWith(".."), `${p}/README.md links outside its package: ${link}`).toBe(false);
          const top = target.split("/")[0]!;
          expect(
            files.includes(top) || ["README.md", "package.json"].includes(target),
            `${p}/README.md links to ${link}, which "files" does not ship`,
          ).toBe(true);
          const shipped =
            p === "kernel" && top === "docs"
              ? join(docs, target.slice("docs/".length))
              : join(REPO, "packages", p, target);
          expect(existsSync(shipped), `${p}/README.md links to ${link}, which does not exist`).toBe(true);
        }
      }
      expect(checked).toBeGreaterThan(3);
    } finally {
      rmSync(docs, { recursive: true, force: true });
    }
  });

  it("types resolve without `exports` too (moduleResolution node10): top-level main and types, typesVersions for each subpath", () => {
    for (const p of packages) {
      const m = manifest(p) as ReturnType<typeof manifest> & {
        publishConfig?: {
          exports?: Record<string, { types: string; default: string }>;
          main?: string;
          types?: string;
          typesVersions?: Record<string, Record<string, string[]>>;
        };
      };
      if (m.private || !m.publishConfig?.exports) continue;
      const ex = m.publishConfig.exports;
      expect(m.publishConfig.main, m.name).toBe(ex["."]!.default);
      expect(m.publishConfig.types, m.name).toBe(ex["."]!.types);
      for (const [sub, target] of Object.entries(ex)) {
        if (sub === ".") continue;
        expect(m.publishConfig.typesVersions?.["*"]?.[sub.slice(2)], `${m.name} ${sub}`).toEqual([target.types]);
      }
    }
  });

  it("a package's source reaches another package by its name, never by a path into its folder (the build, and npm users, would not find it)", () => {
    const escapes: string[] = [];
    const walk = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
        d.isDirectory() ? walk(join(dir, d.name)) : /\.(ts|mts)$/.test(d.name) ? [join(dir, d.name)] : [],
      );
    for (const p of packages) {
      const src = join(REPO, "packages", p, "src");
      if (!existsSync(src)) continue;
      for (const file of walk(src)) {
        for (const m of readFileSync(file, "utf8").matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)) {
          const target = normalize(join(file, "..", m[1]!));
          if (!target.startsWith(src)) escapes.push(`${file.slice(REPO.length + 1)} imports ${m[1]}`);
        }
      }
    }
    expect(escapes).toEqual([]);
  });

  it("plugins and providers take @keel/kernel as a peer (one kernel per project)", () => {
    for (const p of packages) {
      const m = manifest(p);
      if (p === "kernel" || p === "cli" || m.private) continue;
      const uses = m.dependencies?.["@keel/kernel"] ?? m.peerDependencies?.["@keel/kernel"];
      if (!uses) continue;
      expect(m.dependencies?.["@keel/kernel"], `${m.name} lists @keel/kernel as a dependency`).toBeUndefined();
      expect(m.peerDependencies?.["@keel/kernel"], m.name).toBe("workspace:^");
      expect(m.devDependencies?.["@keel/kernel"], m.name).toBe("workspace:*");
    }
    expect(manifest("kernel").scripts?.prepack).toContain("copy-docs");
  });

  it("packages that build on the host take @keel/agent as a peer (one host per project), and the kernel depends on zod alone", () => {
    for (const p of packages) {
      const m = manifest(p);
      if (p === "agent" || p === "cli" || m.private) continue;
      if (!m.dependencies?.["@keel/agent"] && !m.peerDependencies?.["@keel/agent"]) continue;
      expect(m.dependencies?.["@keel/agent"], `${m.name} lists @keel/agent as a dependency`).toBeUndefined();
      expect(m.peerDependencies?.["@keel/agent"], m.name).toBe("workspace:^");
    }
    expect(Object.keys(manifest("kernel").dependencies ?? {})).toEqual(["zod"]);
  });

  it("no package forces a provider SDK on a project: @anthropic-ai/sdk and openai are optional peers of @keel/providers, a dependency of none", () => {
    const sdks = ["@anthropic-ai/sdk", "openai"];
    for (const p of packages) {
      const m = manifest(p);
      if (m.private) continue;
      for (const sdk of sdks) {
        expect(m.dependencies?.[sdk], `${m.name} depends on ${sdk}`).toBeUndefined();
        expect(m.optionalDependencies?.[sdk], `${m.name} optionally depends on ${sdk}`).toBeUndefined();
        if (m.peerDependencies?.[sdk]) expect(m.peerDependenciesMeta?.[sdk]?.optional, `${m.name}: ${sdk}`).toBe(true);
      }
    }
    const providers = manifest("providers");
    for (const sdk of sdks) {
      expect(providers.peerDependencies?.[sdk], sdk).toMatch(/^\^\d/);
      // The repository's own tests use the real SDKs.
      expect(providers.devDependencies?.[sdk], sdk).toBe(providers.peerDependencies?.[sdk]);
    }
  });

  it("no package forces the UI protocols' libraries on a project: ai, @ag-ui/core and @ag-ui/encoder are optional peers of @keel/ui-stream, a dependency of none", () => {
    const libs = ["ai", "@ag-ui/core", "@ag-ui/encoder"];
    for (const p of packages) {
      const m = manifest(p);
      if (m.private) continue;
      for (const lib of libs) {
        expect(m.dependencies?.[lib], `${m.name} depends on ${lib}`).toBeUndefined();
        expect(m.optionalDependencies?.[lib], `${m.name} optionally depends on ${lib}`).toBeUndefined();
        if (m.peerDependencies?.[lib]) expect(m.peerDependenciesMeta?.[lib]?.optional, `${m.name}: ${lib}`).toBe(true);
      }
    }
    const ui = manifest("ui-stream");
    for (const lib of libs) {
      expect(ui.peerDependencies?.[lib], lib).toMatch(/^\^\d/);
      // The repository's own tests use the real packages.
      expect(ui.devDependencies?.[lib], lib).toBeDefined();
    }
  });
});
