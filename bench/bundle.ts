/**
 * The smallest Keel agent as a browser bundle: `pnpm bench bundle` bundles
 * bench/entries/smallest-agent.ts with esbuild (ESM, minified, platform browser, bundled), prints
 * its minified and gzip -9 bytes against the goal (64 KiB gzip) and what each package puts in
 * the output, so a regression shows which package grew. A build error (e.g. a `node:` import,
 * which a browser does not have) is printed with the file that imports the module and the chain
 * of imports from the entry to it, and exits 1.
 *
 * Environment:
 *   KEEL_BUNDLE_ENTRY     another entry (path from the repository root, or absolute)
 *   KEEL_BUNDLE_PLATFORM  `node` to see the table when the browser build fails (not a browser
 *                         figure: node builtins stay outside the bundle)
 *
 * Comparable with the peers: the options are those of /work/shared/bench-peers/bundle.sh
 * (`esbuild --bundle --minify --format=esm --platform=browser`, esbuild 0.28, gzip -9), which
 * measures pi-agent-core's agentLoop and the AI SDK's generateText with a zod tool. From the
 * repository root, to get all three in one table:
 *   KEEL_ENTRY=bench/entries/smallest-agent.ts bash ../shared/bench-peers/bundle.sh
 * The minified bytes are the same there, byte for byte. The gzip figures are not: node:zlib at
 * level 9 comes out about 0.5% above GNU gzip -9 on the same bytes (pi-agent-core 66,386 here,
 * 66,046 there; the AI SDK 159,309 here, 158,597 there), so hold Keel against the peers in
 * bundle.sh's one table, and use this script for Keel's own goal and trend.
 */
import { gzipSync } from "node:zlib";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, version } from "esbuild";
import type { BuildFailure, BuildOptions, Message, Metafile } from "esbuild";

/** The goal: what a browser or Worker downloads for the smallest agent, gzip -9. */
const GOAL_GZIP_BYTES = 64 * 1024;

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const entry = resolve(root, process.env.KEEL_BUNDLE_ENTRY ?? "bench/entries/smallest-agent.ts");
const platform = process.env.KEEL_BUNDLE_PLATFORM ?? "browser";
if (platform !== "browser" && platform !== "node") {
  console.error(`KEEL_BUNDLE_PLATFORM is "browser" (the default) or "node", not "${platform}"`);
  process.exit(2);
}

/** bundle.sh's options; the rest only keep the output in memory and name the paths. */
const options = {
  entryPoints: [entry],
  bundle: true,
  minify: true,
  format: "esm",
  platform,
  metafile: true,
  write: false,
  outfile: "bundle.js",
  absWorkingDir: root,
  logLevel: "silent",
} satisfies BuildOptions;

const shown = (path: string) => relative(root, path) || path;
const n = (bytes: number) => bytes.toLocaleString("en-US");

console.log(`${shown(entry)}: esbuild ${version}, ESM, minified, platform ${platform}`);
const result = await build(options).catch(async (err: unknown) => {
  const errors = (err as Partial<BuildFailure>).errors;
  if (!errors?.length) throw err;
  await explain(errors);
  process.exit(1);
});

const [output] = Object.values(result.metafile.outputs);
const bytes = result.outputFiles[0]!.contents;
const gzip = gzipSync(bytes, { level: 9 }).length;
const margin = GOAL_GZIP_BYTES - gzip;
console.log(`minified: ${n(bytes.length)} bytes`);
console.log(`gzip -9:  ${n(gzip)} bytes`);
console.log(
  `goal:     ≤ ${n(GOAL_GZIP_BYTES)} bytes gzip (64 KiB): ${margin >= 0 ? `met, ${n(margin)} bytes to spare` : `NOT met, ${n(-margin)} bytes over`}${platform === "browser" ? "" : " (platform node: node builtins are not in the bundle, so this is not the browser figure)"}`,
);

// What each package puts in the output (minified bytes before gzip): the inputs grouped by
// node_modules/<package> or packages/<name>; the rest of the output is esbuild's glue.
const byPackage = new Map<string, number>();
for (const [path, { bytesInOutput }] of Object.entries(output!.inputs)) {
  const key = packageOf(path);
  byPackage.set(key, (byPackage.get(key) ?? 0) + bytesInOutput);
}
const inputs = [...byPackage.values()].reduce((a, b) => a + b, 0);
if (output!.bytes > inputs) byPackage.set("(esbuild runtime and glue)", output!.bytes - inputs);
console.log("\n| package | bytes in output | share |\n|---|---:|---:|");
for (const [name, size] of [...byPackage].sort((a, b) => b[1] - a[1])) {
  console.log(`| ${name} | ${n(size)} | ${((size / output!.bytes) * 100).toFixed(1)}% |`);
}

/** `node_modules/<pkg>` (the last one, for pnpm's .pnpm paths) or `packages/<name>`, else the folder. */
function packageOf(path: string): string {
  const at = path.lastIndexOf("node_modules/");
  if (at >= 0) {
    const parts = path.slice(at + "node_modules/".length).split("/");
    return parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const parts = path.split("/");
  if (parts[0] === "packages" && parts.length > 2) return `packages/${parts[1]}`;
  return parts.length > 1 ? parts.slice(0, -1).join("/") : path;
}

/**
 * Print the errors by the file they are in: each import esbuild could not resolve with its line,
 * and the chain of imports from the entry to that file (found by building again with the
 * unresolved modules left external). Other errors are printed as esbuild words them.
 */
async function explain(errors: Message[]): Promise<void> {
  const byFile = new Map<string, { module: string; at: string; line: string }[]>();
  const other: Message[] = [];
  for (const e of errors) {
    const module = /^Could not resolve "(.+)"$/.exec(e.text)?.[1];
    if (!module || !e.location) {
      other.push(e);
      continue;
    }
    const { file, line, column, lineText } = e.location;
    const list = byFile.get(file) ?? byFile.set(file, []).get(file)!;
    list.push({ module, at: `${line}:${column + 1}`, line: lineText.trim() });
  }
  const unresolved = [...byFile.values()].flat();
  console.log(
    `does not bundle for platform ${platform}: ${unresolved.length} import${unresolved.length === 1 ? "" : "s"} esbuild could not resolve, in ${byFile.size} file${byFile.size === 1 ? "" : "s"}${other.length ? `, and ${other.length} other error${other.length === 1 ? "" : "s"}` : ""}`,
  );
  const graph = byFile.size
    ? await build({ ...options, external: [...new Set(unresolved.map((u) => u.module))] }).then(
        (r) => r.metafile,
        () => undefined,
      )
    : undefined;
  for (const [file, list] of byFile) {
    const chain = graph && importChain(graph, relative(root, entry), file);
    console.log(`\n${file}${chain && chain.length > 1 ? `\n  reached by ${chain.join(" → ")}` : ""}`);
    for (const u of list) {
      const builtin = u.module.startsWith("node:") ? " (built into Node, not into browsers)" : "";
      console.log(`  ${u.at} imports "${u.module}"${builtin}: ${u.line}`);
    }
  }
  for (const e of other) {
    const where = e.location ? `${e.location.file}:${e.location.line}:${e.location.column + 1}: ` : "";
    console.log(`\n${where}${e.text}`);
    for (const note of e.notes) console.log(`  note: ${note.text}`);
  }
}

/** The shortest chain of imports from `from` to `to` (metafile input paths), if any. */
function importChain(graph: Metafile, from: string, to: string): string[] | undefined {
  const previous = new Map<string, string>([[from, ""]]);
  const queue = [from];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i]!;
    if (file === to) {
      const chain = [file];
      for (let at = previous.get(file)!; at; at = previous.get(at)!) chain.unshift(at);
      return chain;
    }
    for (const { path } of graph.inputs[file]?.imports ?? []) {
      if (previous.has(path)) continue;
      previous.set(path, file);
      queue.push(path);
    }
  }
  return undefined;
}
