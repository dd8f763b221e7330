/** The Keel home folder must be a folder (or creatable as one) before anything opens a store in it. */
import { statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { KeelError } from "@keel/kernel";
import { kernelFsOf } from "@keel/safe-path";

/**
 * Check that `home` is a folder, or that its nearest existing ancestor is one (so it can be
 * created), and that it is not in /proc, /sys or /dev (links resolved), where nothing can be
 * stored and creating a folder can spin forever. `source` says where the value came from
 * (`KEEL_HOME`, `--home`, the config's `home`).
 * Contract: throws KEEL_HOME_INVALID naming the source and the file in the way or the kernel
 * file system; other problems (permissions) are left to the store, which reports them.
 */
export function checkHome(home: string, source: string): void {
  const target = resolve(home);
  const kfs = kernelFsOf(target);
  if (kfs)
    throw new KeelError("KEEL_HOME_INVALID", `${source}: ${target} is in ${kfs}, a kernel file system, not storage.`, {
      path: source.includes(": ") ? "home" : source,
    });
  for (let p = target; ; p = dirname(p)) {
    let isDir: boolean;
    try {
      isDir = statSync(p).isDirectory();
    } catch (err) {
      if ((err as { code?: unknown }).code === "ENOENT" && dirname(p) !== p) continue;
      if ((err as { code?: unknown }).code === "ENOTDIR") continue;
      return;
    }
    if (isDir) return;
    const what = p === target ? `${target} is a file, not a folder` : `${p} is a file, so ${target} cannot be created`;
    throw new KeelError("KEEL_HOME_INVALID", `${source}: ${what}.`, { path: source.includes(": ") ? "home" : source });
  }
}
