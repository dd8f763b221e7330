/**
 * Likely mistakes in a `plugins` entry, each named with what to write instead: a factory not
 * called, a Promise from an async factory, a class, a module namespace, a nested list.
 */
import { types } from "node:util";
import { attempt } from "./guard.ts";

/**
 * What is wrong with the plugins entry `v` at `at` (e.g. `plugins[1]`), when it is a known
 * mistake. Contract: never throws; undefined when `v` is not one of the known mistakes.
 */
export function pluginEntryHint(v: unknown, at: string): string | undefined {
  if (v === true)
    return `${at} is true: write \`condition && plugin()\`, not \`condition || plugin()\` (false, null, undefined, 0 and "" are skipped)`;
  if (typeof v === "function") {
    const name = attempt(() => String((v as { name?: unknown }).name ?? ""), "") || "factory";
    if (attempt(() => /^class\b/.test(Function.prototype.toString.call(v)), false))
      return `${at} is the class ${name}; a plugin is an object: create one, e.g. new ${name}(...)`;
    if (types.isAsyncFunction(v))
      return `${at}: this is the plugin factory itself, and it is async; call it and await it: await ${name}()`;
    return `${at}: this is the plugin factory itself; call it: ${name}()`;
  }
  if (!v || typeof v !== "object") return undefined;
  if (types.isPromise(v) || attempt(() => typeof (v as { then?: unknown }).then === "function", false)) {
    return `${at} is a Promise: await the factory (plugins: [await factory()]) or make it synchronous`;
  }
  if (Array.isArray(v)) {
    const first = attempt(() => v[0], undefined);
    if (typeof first === "function" && v.length <= 2)
      return `${at} is [factory, options]; call the factory with its options instead: factory(options)`;
    if (v.length && typeof first !== "string")
      return `${at} is a list nested in plugins; spread it into the list (plugins: [...list]); a nested array is only ["package-name", options]`;
    return undefined;
  }
  const namespace = types.isModuleNamespaceObject(v);
  const keys = attempt(() => Object.keys(v), [] as string[]);
  if (namespace || (keys.includes("default") && !keys.includes("setup"))) {
    const d = attempt(() => (v as { default?: unknown }).default, undefined);
    const use =
      typeof d === "function"
        ? 'import the default export and call it: import plugin from "…"; plugins: [plugin()]'
        : 'import the default export: import plugin from "…"; plugins: [plugin]';
    return `${at} is a module namespace (import * as …), not a plugin; ${use}`;
  }
  return undefined;
}
