/**
 * One canonical JSON text of a value, for "is this the same call": object keys sorted, strings
 * exactly as given (whitespace can matter), BigInt as `<n>n`, a repeated reference as "[cycle]".
 */

/**
 * Contract: equal for values equal up to key order; throws for a value that cannot be read
 * (a throwing getter, a revoked Proxy) or nests deeper than 64 levels: callers decide.
 */
export function canonicalJson(value: unknown): string {
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "bigint") return `${v}n`;
    if (v === null || typeof v !== "object") return typeof v === "number" && !Number.isFinite(v) ? String(v) : v;
    if (seen.has(v)) return "[cycle]";
    if (depth > 64) throw new Error("nested deeper than 64 levels");
    seen.add(v);
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = walk((v as Record<string, unknown>)[k], depth + 1);
    return out;
  };
  return JSON.stringify(walk(value, 0)) ?? "undefined";
}
