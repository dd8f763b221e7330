/**
 * One ESM bundle for workerd and for a page (esbuild, platform browser): everything inlined, no
 * Node polyfills, no externals. An import of a `node:` module fails the build; the error says
 * which module, which file imports it and where (esbuild's file:line:column and source line).
 */
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build, formatMessages, type Message, type Plugin } from "esbuild";

/** The repository's root. */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** A bundle that names every `node:` import as an error at the import, instead of esbuild's advice to bundle for node. */
const noNodeModules: Plugin = {
  name: "no-node-modules",
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) => ({
      errors: [
        {
          text: `"${args.path}" is a Node module: code that runs in workerd and in a browser may import none (imported by ${relative(ROOT, args.importer) || args.importer})`,
        },
      ],
    }));
  },
};

/**
 * Bundle `contents` (TypeScript, its imports resolved from `resolveDir`) into one ES module.
 * Contract: resolves with the module's code; rejects with every esbuild error, located.
 */
export async function bundle(contents: string, resolveDir: string, name = "entry.ts"): Promise<string> {
  let errors: Message[];
  try {
    const out = await build({
      stdin: { contents, resolveDir, sourcefile: name, loader: "ts" },
      bundle: true,
      format: "esm",
      platform: "browser",
      write: false,
      logLevel: "silent",
      plugins: [noNodeModules],
    });
    return out.outputFiles[0]!.text;
  } catch (err) {
    if (!(err && typeof err === "object" && "errors" in err && Array.isArray(err.errors))) throw err;
    errors = err.errors as Message[];
  }
  const located = await formatMessages(errors, { kind: "error", color: false });
  throw new Error(
    `esbuild cannot bundle ${name} for workerd and browsers (${errors.length} error${errors.length === 1 ? "" : "s"}):\n\n${located.join("")}`,
  );
}

/**
 * For a message that points into an unminified bundle served as `name` ("at worker.js:1234:19",
 * "at http://127.0.0.1:4100/agent.js:1234:19"): each place, up to five, with the module that
 * esbuild's `// path` comment above it names and the bundle's line there. Empty when none does.
 */
export function placesInBundle(code: string, message: string, name: string): string {
  const lines = code.split("\n");
  const out: string[] = [];
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  for (const m of message.matchAll(new RegExp(`${escaped}:(\\d+):(\\d+)`, "g"))) {
    if (out.length === 5) break;
    const at = Number(m[1]) - 1;
    let module = "?";
    for (let i = at; i >= 0; i--) {
      const named = /^\/\/ (\S+\.[cm]?[jt]sx?)$/.exec(lines[i] ?? "");
      if (named) {
        module = named[1]!;
        break;
      }
    }
    out.push(
      `  ${m[0]} is in ${module}: ${Array.from((lines[at] ?? "").trim())
        .slice(0, 160)
        .join("")}`,
    );
  }
  return out.length ? `\nWhere in the bundle:\n${out.join("\n")}` : "";
}
