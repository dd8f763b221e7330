#!/usr/bin/env node
// The keel command. `@keel/cli/main` is the published build (dist) or, in the repository, the
// TypeScript sources (Node strips types); `node --conditions=keel-dist` picks built files there too.
// First, with syntax any Node parses: an older Node gets one line saying what to do, not a
// stack trace about node:sqlite or type stripping (the import below is where those would come from).
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 13)) {
  process.stderr.write(`keel: this is Node ${process.versions.node}; keel needs Node 22.13 or newer (for node:sqlite). Install one (nvm install 24, then nvm use 24) or run through npx: npx -y -p node@24 -c "keel …"\n`);
  process.exit(2);
}
// Node keeps the compiled code of every module on disk (Node 22.1+): a later start skips most of
// the parsing and compiling of Keel, its dependencies and the SDKs. The cache is the user's own
// (KEEL_CACHE_DIR, else $XDG_CACHE_HOME/keel, else ~/.cache/keel; folders made private), never the
// shared tmp folder: it holds the config's compiled code too. KEEL_NO_COMPILE_CACHE=1 turns it off.
if (!process.env.KEEL_NO_COMPILE_CACHE) {
  try {
    const [{ enableCompileCache }, { homedir }, { isAbsolute, join }, { mkdirSync }] = await Promise.all([import("node:module"), import("node:os"), import("node:path"), import("node:fs")]);
    const abs = (p) => (p && isAbsolute(p) ? p : undefined);
    const parent = abs(process.env.XDG_CACHE_HOME) ?? join(homedir(), ".cache");
    const base = abs(process.env.KEEL_CACHE_DIR) ?? join(parent, "keel");
    const dir = join(base, "node-compile-cache");
    for (const d of abs(process.env.KEEL_CACHE_DIR) ? [base, dir] : [parent, base, dir]) {
      try {
        mkdirSync(d, { mode: 0o700 });
      } catch {
        // It exists (or cannot be made: then enableCompileCache reports failure, and keel starts without it).
      }
    }
    enableCompileCache?.(dir);
  } catch {
    // No cache: start without it.
  }
}
const { main, processIo, exitWhenDone } = await import("@keel/cli/main");
const io = processIo();
const code = await main(process.argv.slice(2), io);
// Whatever a plugin or tool left running (a timer, a socket), the process ends now, once output is flushed.
exitWhenDone(code, io.err);
