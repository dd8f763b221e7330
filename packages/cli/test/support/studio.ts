/** `keel studio` in a child process, for tests. */
import { spawn, type ChildProcess } from "node:child_process";
import { KEEL_BIN } from "./run-keel.ts";

/** A running studio: its URL (with the token), origin and stderr so far. */
export interface StudioProcess {
  url: string;
  origin: string;
  token: string;
  child: ChildProcess;
  stderr: () => string;
  stop: () => void;
}

/** Spawn `keel studio args…`; resolves once it prints its URL. */
export function startStudioProcess(
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<StudioProcess> {
  const child = spawn(process.execPath, [KEEL_BIN, "studio", ...args], {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const url = /^(http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+)\n/m.exec(out)?.[1];
      if (url)
        resolve({
          url,
          origin: new URL(url).origin,
          token: new URL(url).searchParams.get("token")!,
          child,
          stderr: () => err,
          stop: () => void (child.exitCode === null && child.kill("SIGINT")),
        });
    });
    child.on("exit", (code) => reject(new Error(`keel studio exited ${code}: ${err}`)));
  });
}
