/** `keel init`: scaffold an agent project, or (`--plugin NAME`) a plugin package. */
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { KeelError, KERNEL_VERSION } from "@keel/kernel";
import { kernelFsOf, makeDirs } from "@keel/safe-path";
import { fileURLToPath } from "node:url";
import { agentProject, installCommand, pluginPackage } from "./init-templates.ts";
import { cliVersion } from "./version.ts";

/** npm's rules for a new package name: lowercase, URL-safe, at most 214 chars, optional @scope/. */
const PACKAGE_NAME = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;

/** What was written, for the summary. */
export interface InitResult {
  dir: string;
  files: string[];
}

/**
 * Write the scaffold into `dir` (created if missing).
 * Contract: refuses (KEEL_INIT_REFUSED, listing them) when any file exists, unless `force`;
 * a plugin name must be a valid new npm package name.
 */
export function init(options: { cwd: string; dir?: string; plugin?: string; force?: boolean }): InitResult {
  const dir = resolve(options.cwd, options.dir ?? (options.plugin ? options.plugin.replace(/^@[^/]+\//, "") : "."));
  const version = cliVersion();
  const packs = checkoutPacks();
  const versions = { cli: version, kernel: KERNEL_VERSION, plugins: version, ...(packs ? { packs } : {}) };
  let files: Record<string, string>;
  if (options.plugin !== undefined) {
    const name = options.plugin;
    if (name.length > 214 || !PACKAGE_NAME.test(name)) {
      throw new KeelError(
        "KEEL_INIT_REFUSED",
        `"${name}" is not a valid npm package name${/[A-Z]/.test(name) ? ` (try "${name.toLowerCase()}")` : ""}.`,
        { path: "--plugin" },
      );
    }
    files = pluginPackage(name, versions);
  } else {
    const name =
      basename(dir)
        .toLowerCase()
        .replace(/[^a-z0-9._~-]+/g, "-")
        .replace(/^[^a-z0-9]+/, "") || "my-agent";
    files = agentProject(name, versions);
  }
  const kfs = kernelFsOf(dir);
  if (kfs)
    throw new KeelError(
      "KEEL_INIT_REFUSED",
      `${dir} is in ${kfs}, a kernel file system: nothing can be created there.`,
      { path: dir },
    );
  const existing = Object.keys(files).filter((f) => existsSync(join(dir, f)));
  if (existing.length && !options.force) {
    throw new KeelError(
      "KEEL_INIT_REFUSED",
      `${relative(options.cwd, dir) || "."} already has ${existing.join(", ")}.`,
      { path: dir },
    );
  }
  // --force overwrites files, never a FIFO (writing to one waits for a reader), a device or a folder.
  const special = existing.filter((f) => !statSync(join(dir, f)).isFile());
  if (special.length)
    throw new KeelError(
      "KEEL_INIT_REFUSED",
      `${relative(options.cwd, dir) || "."} has ${special.join(", ")}, which ${special.length > 1 ? "are not regular files" : "is not a regular file"} (a FIFO, device or folder); remove ${special.length > 1 ? "them" : "it"} first.`,
      { path: dir },
    );
  for (const [file, text] of Object.entries(files)) {
    // One level at a time: Node's recursive mkdir spins forever under /proc.
    makeDirs(dirname(join(dir, file)));
    writeFileSync(join(dir, file), text);
  }
  return { dir, files: Object.keys(files) };
}

/**
 * The `packs/` folder of the Keel checkout this CLI runs from (where `pnpm pack:all` puts the
 * tarballs), or undefined when it runs from an installed package. Contract: never throws.
 */
export function checkoutPacks(): string | undefined {
  try {
    const root = fileURLToPath(new URL("../../../", import.meta.url));
    return existsSync(join(root, "pnpm-workspace.yaml")) && existsSync(join(root, "packages", "cli"))
      ? join(root, "packs")
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What to print after init: the files and the next commands — ones that work today, in order,
 * pasted into the shell `keel init` ran in: from a checkout, keel is that checkout's bin (no
 * `keel` is on PATH yet); the `@keel` packages are not on npm yet, so the install names the
 * tarballs (`installCommand`), after the command that makes them when they are not there; the
 * provider SDKs are the project's own choice, so a real model's SDK is a step of its own.
 * Contract: never names an SDK the scaffold installs (it installs none).
 */
export function initSummary(r: InitResult, cwd: string, plugin: boolean, packs = checkoutPacks()): string {
  const where = relative(cwd, r.dir) || ".";
  const checkout = packs ? dirname(packs) : undefined;
  const comment = (cmd: string, note: string) => `${cmd.padEnd(32)} # ${note}`;
  const steps: string[] = [];
  if (where !== ".") steps.push(`cd ${shellWord(where)}`);
  const keel = checkout ? `node ${shellWord(join(checkout, "packages", "cli", "bin", "keel.js"))}` : "keel";
  if (!plugin) steps.push(comment(`${keel} run "hello"`, "works now, offline, with this keel's own packages"));
  if (packs && checkout && !existsSync(packs))
    steps.push(
      comment(`(cd ${shellWord(checkout)} && npx -y ${pnpmOf(checkout)} pack:all)`, "once: makes Keel's tarballs"),
    );
  steps.push(
    comment(
      installCommand(packs, plugin),
      `${plugin ? "" : "the project's own copies, "}from Keel's tarballs: the @keel packages are not on npm yet`,
    ),
  );
  if (plugin)
    steps.push(
      comment("npm test", "drives the plugin through the scripted provider"),
      comment("npm run build", "dist/ is what npm users get"),
    );
  else
    steps.push(
      comment('npx keel run "hello"', "the project's keel, still offline"),
      comment(
        "npm install @anthropic-ai/sdk",
        "for a real model: then set ANTHROPIC_API_KEY (openai: models: npm install openai)",
      ),
      comment("npx keel chat", "a conversation; -c continues the last one"),
    );
  return `created in ${where}:\n${r.files.map((f) => `  ${f}\n`).join("")}next:\n${steps.map((l) => `  ${l}\n`).join("")}`;
}

/** `pnpm@<version>` as the checkout's package.json pins it (`packageManager`), else `pnpm`. */
function pnpmOf(checkout: string): string {
  try {
    const pinned = JSON.parse(readFileSync(join(checkout, "package.json"), "utf8")).packageManager;
    return typeof pinned === "string" && /^pnpm@[\w.+-]+$/.test(pinned) ? pinned : "pnpm";
  } catch {
    return "pnpm";
  }
}

/** `word` as one shell word. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/u.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
