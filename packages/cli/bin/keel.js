#!/usr/bin/env node
// The keel command. `@keel/cli/main` is the published build (dist) or, in the repository, the
// TypeScript sources (Node strips types); `node --conditions=keel-dist` picks built files there too.
// First, with syntax any Node parses: an older Node gets one line saying what to do, not a
// stack trace about node:sqlite or type stripping (the import below is where those would come from).
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 13)) {
  process.stderr.write(
    `keel: this is Node ${process.versions.node}; keel needs Node 22.13 or newer (for node:sqlite). Install one (nvm install 24, then nvm use 24) or run through npx: npx -y -p node@24 -c "keel …"\n`,
  );
  process.exit(2);
}
// Node keeps the compiled code of every module on disk (Node 22.1+): a later start skips most of
// the parsing and compiling of Keel, its dependencies and the SDKs. The cache is the user's own
// (KEEL_CACHE_DIR, else $XDG_CACHE_HOME/keel, else ~/.cache/keel; folders made private), never the
// shared tmp folder: it holds the config's compiled code too. Its folder is checked first (a
// folder of ours that others cannot write to, not in /proc, /sys or /dev, not a FIFO or a file):
// Node creates it with a recursive mkdir that spins forever under /proc, and would run compiled
// code another user put there. KEEL_NO_COMPILE_CACHE=1 turns it off.
if (!process.env.KEEL_NO_COMPILE_CACHE) {
  try {
    const [{ enableCompileCache }, { homedir }, { isAbsolute, join }, { privateDirProblem }] = await Promise.all([
      import("node:module"),
      import("node:os"),
      import("node:path"),
      import("@keel/safe-path"),
    ]);
    const abs = (p) => (p && isAbsolute(p) ? p : undefined);
    const named = abs(process.env.KEEL_CACHE_DIR)
      ? "KEEL_CACHE_DIR"
      : abs(process.env.XDG_CACHE_HOME)
        ? "XDG_CACHE_HOME"
        : undefined;
    const base =
      abs(process.env.KEEL_CACHE_DIR) ?? join(abs(process.env.XDG_CACHE_HOME) ?? join(homedir(), ".cache"), "keel");
    const dir = join(base, "node-compile-cache");
    // Made if missing: the cache folder and keel's folder, and the XDG or ~/.cache folder (never a missing home).
    const problem = privateDirProblem(dir, { maxNew: named === "KEEL_CACHE_DIR" ? 2 : 3 });
    if (problem === undefined) enableCompileCache?.(dir);
    // A folder that cannot be made under the default home (a read-only HOME) costs only speed; anything else is said.
    else if (named || !problem.startsWith("cannot be created"))
      process.stderr.write(
        `keel: compiled code is not cached: ${dir}${named ? ` (from ${named})` : ""} ${problem}. Point KEEL_CACHE_DIR at a folder of yours, or set KEEL_NO_COMPILE_CACHE=1.\n`,
      );
  } catch {
    // No cache: start without it.
  }
}
const { main, processIo, exitWhenDone } = await import("@keel/cli/main");
const io = processIo();
const code = await main(process.argv.slice(2), io);
// Whatever a plugin or tool left running (a timer, a socket), the process ends now, once output is flushed.
exitWhenDone(code, io.err);
