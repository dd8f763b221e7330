#!/usr/bin/env node
// The keel command. `@keel/cli/main` is the published build (dist) or, in the repository, the
// TypeScript sources (Node strips types); `node --conditions=keel-dist` picks built files there too.
const { main, exitWhenDone } = await import("@keel/cli/main");
const code = await main(process.argv.slice(2), {
  cwd: process.cwd(),
  env: process.env,
  stdin: process.stdin,
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
});
// Whatever a plugin or tool left running (a timer, a socket), the process ends now.
exitWhenDone(code, (t) => process.stderr.write(t));
