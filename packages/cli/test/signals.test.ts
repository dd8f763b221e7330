/** The CLI's one SIGINT/SIGTERM listener (exit.ts), in a child process: no signal is lost between phases. */
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const EXIT_TS = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), "..", "src", "exit.ts")).href;

function child(body: string) {
  const r = spawnSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import { exitWhenDone, onSignal, ownSignals } from ${JSON.stringify(EXIT_TS)};\nownSignals((t) => process.stderr.write(t));\n${body}`,
    ],
    { encoding: "utf8", timeout: 20_000 },
  );
  return { code: r.status, signal: r.signal, out: r.stdout, err: r.stderr };
}

describe("the CLI's signal listener", () => {
  it("a signal caught while one phase was current but read after it ended goes to the next phase (it was dropped with a listener per phase)", () => {
    // The signal is queued for the listener at once and read by the event loop later, after the phases swapped.
    const r = child(`const offTurn = onSignal(() => console.log("turn"));
process.kill(process.pid, "SIGINT");
offTurn();
onSignal((s) => (console.log("closing " + s), process.exit(130)));
setTimeout(() => (console.log("lost"), process.exit(1)), 5_000);`);
    expect(r.out, r.err).toBe("closing SIGINT\n");
    expect(r.code).toBe(130);
  });

  it("a plugin that removed every SIGINT/SIGTERM listener (in its setup) does not take the next phase's signal away", () => {
    const r = child(`process.removeAllListeners("SIGINT");
process.removeAllListeners("SIGTERM");
onSignal((s) => (console.log("turn " + s), process.exit(130)));
process.kill(process.pid, "SIGINT");
setTimeout(() => (console.log("lost"), process.exit(1)), 5_000);`);
    expect([r.out, r.code, r.signal], r.err).toEqual(["turn SIGINT\n", 130, null]);
  });

  it("after main returned (the exit linger), a signal exits at once with its status, not by the signal", () => {
    for (const [signal, code] of [
      ["SIGINT", 130],
      ["SIGTERM", 143],
    ] as const) {
      // Something keeps the process alive past the linger's start; the signal lands during it.
      const r = child(`setInterval(() => {}, 1_000);
exitWhenDone(0, (t) => process.stderr.write(t), 10_000);
process.kill(process.pid, ${JSON.stringify(signal)});`);
      expect([r.code, r.signal], r.err).toEqual([code, null]);
      expect(r.err).toContain("while exiting; exiting now");
    }
  });

  it("with no phase, a signal ends the process by that signal, as if keel did not listen", () => {
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      const r = child(
        `const off = onSignal(() => {});\noff();\nprocess.kill(process.pid, ${JSON.stringify(signal)});\nsetTimeout(() => process.exit(1), 5_000);`,
      );
      expect([r.code, r.signal], r.err).toEqual([null, signal]);
    }
  });
});
