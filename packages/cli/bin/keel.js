#!/usr/bin/env node
// The keel command. `@keel/cli/main` is the published build (dist) or, in the repository, the
// TypeScript sources (Node strips types); `node --conditions=keel-dist` picks built files there too.
const { main, processIo, exitWhenDone } = await import("@keel/cli/main");
const io = processIo();
const code = await main(process.argv.slice(2), io);
// Whatever a plugin or tool left running (a timer, a socket), the process ends now, once output is flushed.
exitWhenDone(code, io.err);
