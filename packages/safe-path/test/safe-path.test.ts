import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { kernelFsOf, makeDirs, privateDirProblem, readRegularFile } from "../src/index.ts";

const root = mkdtempSync(join(tmpdir(), "keel-safe-path-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const linux = process.platform === "linux";
const fifo = (name: string) => {
  const p = join(root, name);
  execFileSync("mkfifo", [p]);
  return p;
};

describe("kernelFsOf", () => {
  it.runIf(linux)("names /proc, /sys and /dev, links resolved, and nothing else", () => {
    expect(kernelFsOf("/proc/self/x/y")).toBe("/proc");
    expect(kernelFsOf("/sys/kernel")).toBe("/sys");
    expect(kernelFsOf("/dev/zero/cache")).toBe("/dev");
    const link = join(root, "to-proc");
    symlinkSync("/proc/self", link);
    expect(kernelFsOf(join(link, "cache"))).toBe("/proc");
    expect(kernelFsOf(join(root, "procfs-lookalike", "proc"))).toBeUndefined();
    expect(kernelFsOf("/devices")).toBeUndefined();
    // /dev/shm is storage (a tmpfs), as any folder on a disk.
    expect(kernelFsOf("/dev/shm/keel-home")).toBeUndefined();
    expect(kernelFsOf(root)).toBeUndefined();
  });
});

describe("makeDirs", () => {
  it("creates missing levels one at a time, mode as asked, and accepts a folder that is there", () => {
    const dir = join(root, "a", "b", "c");
    makeDirs(dir, { mode: 0o700 });
    expect(statSync(dir).isDirectory()).toBe(true);
    if (linux) expect(statSync(dir).mode & 0o777).toBe(0o700);
    makeDirs(dir);
  });

  it("stops at maxNew levels and when a file is in the way (ENOTDIR), instead of creating around it", () => {
    expect(() => makeDirs(join(root, "m1", "m2", "m3"), { maxNew: 2 })).toThrow(
      expect.objectContaining({ code: "ENOENT" }),
    );
    expect(existsSync(join(root, "m1"))).toBe(false);
    writeFileSync(join(root, "file"), "x");
    expect(() => makeDirs(join(root, "file"))).toThrow(expect.objectContaining({ code: "ENOTDIR" }));
  });

  it.runIf(linux)("under /proc it fails at once (Node's recursive mkdir spins there forever)", () => {
    const t0 = performance.now();
    expect(() => makeDirs("/proc/self/keel-x/y")).toThrow();
    expect(performance.now() - t0).toBeLessThan(5_000);
  });
});

describe("privateDirProblem", () => {
  it("accepts a fresh folder of ours (made 0700) and says why anything else is refused", () => {
    const ok = join(root, "cache", "keel");
    expect(privateDirProblem(ok)).toBeUndefined();
    if (linux) expect(statSync(ok).mode & 0o777).toBe(0o700);
    expect(privateDirProblem("relative/cache")).toBe("is not an absolute path");
    if (!linux) return;
    expect(privateDirProblem("/proc/self")).toMatch(/^is in \/proc, a kernel file system/);
    expect(privateDirProblem("/dev/zero/node-compile-cache")).toMatch(/^is in \/dev/);
    expect(privateDirProblem(join(fifo("cache-fifo"), "node-compile-cache"))).toBe(
      "is not a folder (or a file is in its way)",
    );
    expect(privateDirProblem(fifo("cache-fifo-2"))).toBe("is not a folder (or a file is in its way)");
    const shared = join(root, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    expect(privateDirProblem(shared)).toBe("may be written by other users (mode 777)");
    expect(privateDirProblem(join(root, "deep", "a", "b", "c"), { maxNew: 2 })).toBe("cannot be created (ENOENT)");
  });

  it.runIf(linux && process.getuid?.() === 0)(
    "refuses a folder of another user, and one in a folder others may write to without the sticky bit",
    () => {
      const theirs = join(root, "theirs");
      mkdirSync(theirs, { mode: 0o700 });
      chownSync(theirs, 65534, 65534);
      expect(privateDirProblem(theirs)).toBe("belongs to another user (uid 65534)");
      const open = join(root, "open");
      mkdirSync(open);
      chownSync(open, 65534, 65534);
      chmodSync(open, 0o777);
      expect(privateDirProblem(join(open, "mine"))).toBe(`is in a folder other users may write to (${open})`);
      chmodSync(open, 0o1777);
      expect(privateDirProblem(join(open, "mine-sticky"))).toBeUndefined();
    },
  );
});

describe("readRegularFile", () => {
  it("reads a regular file", () => {
    writeFileSync(join(root, "r.json"), '{"a":1}');
    expect(readRegularFile(join(root, "r.json")).toString("utf8")).toBe('{"a":1}');
  });

  it.runIf(linux)(
    "refuses a FIFO, a device, a folder and a file over the limit without waiting or reading it whole",
    () => {
      const t0 = performance.now();
      expect(() => readRegularFile(fifo("script.json"))).toThrow(/is not a regular file \(a FIFO\)/);
      expect(() => readRegularFile("/dev/zero")).toThrow(/is not a regular file \(a device\)/);
      expect(() => readRegularFile(root)).toThrow(/is not a regular file \(a folder\)/);
      writeFileSync(join(root, "big"), "x".repeat(2048));
      expect(() => readRegularFile(join(root, "big"), 1024)).toThrow(expect.objectContaining({ code: "EFBIG" }));
      expect(() => readRegularFile(join(root, "missing"))).toThrow(expect.objectContaining({ code: "ENOENT" }));
      expect(performance.now() - t0).toBeLessThan(5_000);
    },
  );
});
