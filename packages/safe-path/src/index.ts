/**
 * Paths Keel creates or opens at start (its home, caches, files a config names) are checked
 * before anything can wait on them: a kernel file system (/proc, /sys, /dev but /dev/shm)
 * where Node's recursive mkdir spins forever, a FIFO or device where a file or folder should
 * be (an open or read blocks for ever), a folder another user controls. This module imports nothing but
 * node:fs and node:path, so `bin/keel.js` can use it before anything else is loaded.
 */
import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  realpathSync,
  statfsSync,
  statSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve, sep } from "node:path";

/** Kernel file systems by where they are mounted: what is there is not storage, and opening or creating things there can block or spin. */
const KERNEL_FS = ["/proc", "/sys", "/dev"];
/** Storage under /dev: the shared-memory tmpfs. */
const DEV_STORAGE = "/dev/shm";
/**
 * Kernel file systems by type (statfs magic), wherever they are mounted (a container's
 * /host/proc): proc, sysfs, cgroup, cgroup2, debugfs, tracefs, securityfs, devpts, bpf.
 */
const KERNEL_FS_TYPES = new Set([
  0x9fa0, 0x62656572, 0x27e0eb, 0x63677270, 0x64626720, 0x74726163, 0x73636673, 0x1cd1, 0xcafe4a11,
]);

/** `path` with the links of its nearest existing ancestor resolved (the missing rest appended), and that ancestor. */
function realish(path: string): { real: string; existing: string | undefined } {
  let p = resolve(path);
  const rest: string[] = [];
  for (;;) {
    try {
      const real = realpathSync(p);
      return { real: rest.length ? resolve(real, ...rest.reverse()) : real, existing: real };
    } catch {
      const up = dirname(p);
      if (up === p) return { real: resolve(path), existing: undefined };
      rest.push(p.slice(up.length).replace(/^[\\/]+/, ""));
      p = up;
    }
  }
}

/**
 * The kernel file system `path` is in, or undefined: `/proc`, `/sys` or `/dev` (links
 * resolved; `/dev/shm` is storage), or the nearest existing folder when the file system there
 * is one of those types mounted elsewhere. Contract: never throws; never opens `path`.
 */
export function kernelFsOf(path: string): string | undefined {
  if (sep !== "/") return undefined;
  const { real, existing } = realish(path);
  const mount = KERNEL_FS.find((fs) => real === fs || real.startsWith(`${fs}/`));
  if (mount && !(real === DEV_STORAGE || real.startsWith(`${DEV_STORAGE}/`))) return mount;
  try {
    if (existing !== undefined && KERNEL_FS_TYPES.has(Number(statfsSync(existing).type))) return existing;
  } catch {
    // statfs is not available or the folder went away: the path test above is what is known.
  }
  return undefined;
}

/**
 * Create `dir` and its missing parents one level at a time, never with Node's recursive mkdir
 * (which spins forever under /proc). Contract: returns when `dir` exists as a folder; throws
 * the mkdir error otherwise (ENOENT when a parent cannot be made; ENOTDIR when a file is in
 * the way; EMLINK, EACCES…); creates at most `maxNew` levels (default: no limit) and never
 * retries a level it made once.
 */
export function makeDirs(dir: string, options: { mode?: number; maxNew?: number } = {}): void {
  const mode = options.mode ?? 0o777;
  const make = (d: string, budget: number): void => {
    try {
      mkdirSync(d, { mode });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EEXIST") {
        if (!statSync(d).isDirectory())
          throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${d}'`), { code: "ENOTDIR", path: d });
        return;
      }
      const up = dirname(d);
      if (code !== "ENOENT" || up === d || budget <= 1) throw err;
      make(up, budget - 1);
      mkdirSync(d, { mode });
    }
  };
  make(resolve(dir), options.maxNew ?? Number.POSITIVE_INFINITY);
}

/**
 * Why `dir` cannot serve as a private folder of this user (a cache whose files are trusted),
 * or undefined when it can; it is made if missing, with its missing parents (mode 0700, at
 * most `maxNew` levels; no limit by default). Refused: a relative path; a path in /proc, /sys
 * or /dev; anything but a folder (a FIFO, a file, a device; links are followed); a folder of
 * another user or one other users may write to; a folder whose parent other users may write
 * to without the sticky bit (they could swap it). Contract: never throws; changes no mode;
 * the reason is a phrase to follow the path ("is in /proc, …").
 */
export function privateDirProblem(dir: string, options: { maxNew?: number } = {}): string | undefined {
  if (!isAbsolute(dir)) return "is not an absolute path";
  const kfs = kernelFsOf(dir);
  if (kfs) return `is in ${kfs}, a kernel file system, not storage`;
  try {
    makeDirs(dir, { mode: 0o700, ...(options.maxNew !== undefined ? { maxNew: options.maxNew } : {}) });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOTDIR" ? "is not a folder (or a file is in its way)" : `cannot be created (${code ?? "error"})`;
  }
  try {
    const st = statSync(dir);
    if (!st.isDirectory()) return "is not a folder";
    const uid = process.getuid?.();
    if (uid === undefined) return undefined;
    if (st.uid !== uid) return `belongs to another user (uid ${st.uid})`;
    const parent = statSync(dirname(dir));
    if ((parent.mode & 0o022) !== 0 && (parent.mode & 0o1000) === 0 && parent.uid !== uid)
      return `is in a folder other users may write to (${dirname(dir)})`;
    if ((st.mode & 0o022) !== 0) return `may be written by other users (mode ${(st.mode & 0o777).toString(8)})`;
    return undefined;
  } catch (err) {
    return `cannot be checked (${(err as NodeJS.ErrnoException).code ?? "error"})`;
  }
}

/**
 * The bytes of a regular file, read without ever waiting on it: opened non-blocking, and
 * refused unless it is a regular file of at most `maxBytes` (a FIFO, a device such as
 * /dev/zero, a socket or a folder in its place).
 * Contract: throws an Error with `code` ENOENT/EACCES… from the open, or `code` "ENOTREG" /
 * "EFBIG" with a message naming the path and what it is.
 */
export function readRegularFile(path: string, maxBytes = 64 * 1024 * 1024): Buffer {
  const fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  try {
    const st = fstatSync(fd);
    if (!st.isFile())
      throw Object.assign(
        new Error(
          `${path} is not a regular file (${st.isFIFO() ? "a FIFO" : st.isDirectory() ? "a folder" : st.isSocket() ? "a socket" : "a device"}); it is not read`,
        ),
        { code: "ENOTREG", path },
      );
    if (st.size > maxBytes)
      throw Object.assign(
        new Error(`${path} is ${st.size} bytes, more than the ${maxBytes} this file may hold; it is not read`),
        { code: "EFBIG", path },
      );
    const out = Buffer.alloc(st.size);
    let read = 0;
    while (read < st.size) {
      const n = readSync(fd, out, read, st.size - read, read);
      if (n <= 0) break;
      read += n;
    }
    return read === st.size ? out : out.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}

/** Keel's home directory. Contract: `KEEL_HOME` when set and non-empty, else `~/.keel`. */
export function defaultKeelHome(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const home = env["KEEL_HOME"];
  return home ? home : join(homedir(), ".keel");
}
