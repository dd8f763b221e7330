/**
 * A Keel project outside this repository, as a user gets one: the packages packed into
 * tarballs (`pnpm pack:all`), `keel init` from the checkout, then `npm install` from the
 * tarballs (saved: package.json names each by its tarball, so later installs keep them). Everything lives under one temp folder; the tests share one packing and one install.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

export const REPO = resolve(import.meta.dirname, "..", "..", "..");
/** The checkout's keel command: what a user runs before any install. */
export const CHECKOUT_KEEL = join(REPO, "packages", "cli", "bin", "keel.js");

/** How a command ended and what it printed. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of a user's shell: this Node first on PATH (npm and npx run on it), no provider
 * keys (offline), nothing inherited from the pnpm or vitest running the tests (npm_* settings).
 */
export function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_|pnpm_|VITEST|NODE_OPTIONS$|KEEL_)/i.test(k)) continue;
    if (/_API_KEY$|_BASE_URL$/.test(k)) continue;
    env[k] = v;
  }
  env.PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ""}`;
  return { ...env, KEEL_EXIT_GRACE_MS: "1000", ...extra };
}

const live = new Set<ChildProcess>();

/**
 * Start `cmd args` in `cwd`; the child, for servers a test talks to (`keel serve …`). It leads
 * its own process group, so stopping it stops what npx started under it too.
 */
export function start(cmd: string, args: string[], cwd: string, env = userEnv()): ChildProcess {
  const child = spawn(cmd, args, { cwd, env, stdio: ["pipe", "pipe", "pipe"], detached: true });
  live.add(child);
  child.on("close", () => live.delete(child));
  return child;
}

/** Send `signal` to the process group `start` began with `child`; resolves when the child is gone. */
export function stop(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  return new Promise<void>((done) => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return done();
    child.once("close", () => done());
    try {
      process.kill(-child.pid, signal);
    } catch {
      done();
    }
  });
}

/** SIGKILL every process group `start` began that is still running (afterAll). */
export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((c) => stop(c, "SIGKILL")));
}

/** Resolves with the first match of `pattern` in what `child` writes to `stream`; rejects if it ends first. */
export function printed(
  child: ChildProcess,
  pattern: RegExp,
  stream: "stdout" | "stderr" = "stderr",
): Promise<RegExpExecArray> {
  return new Promise((done, fail) => {
    let text = "";
    const onData = (d: Buffer) => {
      text += d;
      const m = pattern.exec(text);
      if (m) {
        child[stream]?.off("data", onData);
        done(m);
      }
    };
    child[stream]?.on("data", onData);
    child.once("close", (code) => fail(new Error(`exited ${code} before printing ${pattern}:\n${text}`)));
  });
}

/** Run `cmd args` in `cwd` to the end (stdin closed). */
export function run(cmd: string, args: string[], cwd: string, env = userEnv()): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = start(cmd, args, cwd, env);
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => {
      stdout += d;
    });
    child.stderr?.on("data", (d: Buffer) => {
      stderr += d;
    });
    child.stdin?.end();
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

/** `pnpm pack:all` into `out` (the repository's packs/ stays untouched). Returns the tarballs. */
export async function packInto(out: string): Promise<{ ran: Ran; tarballs: string[] }> {
  const ran = await run(process.execPath, [join(REPO, "scripts", "pack.ts"), "--out", out], REPO, {
    ...process.env,
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
  });
  const tarballs = existsSync(out)
    ? readdirSync(out)
        .filter((f) => f.endsWith(".tgz"))
        .map((f) => join(out, f))
    : [];
  return { ran, tarballs };
}

/** A project folder and the commands a user types in it. */
export interface OutsideProject {
  dir: string;
  /** The checkout's keel (before install): `node <repo>/packages/cli/bin/keel.js …`. */
  checkoutKeel(args: string[]): Promise<Ran>;
  /** `npx --no keel …`: the project's installed keel, never one fetched from the registry. */
  npxKeel(args: string[]): Promise<Ran>;
  /** `npm install <tarballs>`: every Keel package from the tarballs (saved as `file:` specs), third-party ones from the registry (or npm's cache). */
  installFrom(tarballs: string[]): Promise<Ran>;
  /** `npm install <specs>`: what a user adds later (a model provider from the registry). */
  npmInstall(specs: string[]): Promise<Ran>;
  /** A long-running `npx --no keel …` (a server), for tests that talk to it. */
  startKeel(args: string[]): ChildProcess;
}

/** The project in `dir` (an empty folder outside the repository). */
export function outsideProject(dir: string): OutsideProject {
  return {
    dir,
    checkoutKeel: (args) => run(process.execPath, [CHECKOUT_KEEL, ...args], dir),
    npxKeel: (args) => run("npx", ["--no", "keel", ...args], dir),
    installFrom: (tarballs) => run("npm", ["install", ...tarballs], dir),
    npmInstall: (specs) => run("npm", ["install", ...specs], dir),
    startKeel: (args) => start("npx", ["--no", "keel", ...args], dir),
  };
}
