/** JSON as a store writes it. */

/**
 * JSON of an event's data that never throws: BigInts become strings, cycles become
 * "[Circular]", so one odd value (a plugin's diagnostic, a tool's transformed arguments)
 * cannot fail a whole batch of events.
 */
export function toJson(data: unknown): string {
  try {
    // Without a replacer first (several times faster): only a BigInt or a cycle throws here.
    return JSON.stringify(data);
  } catch {
    const seen = new WeakSet<object>();
    return JSON.stringify(data, (_k, v: unknown) => {
      if (typeof v === "bigint") return v.toString();
      if (v !== null && typeof v === "object") {
        if (seen.has(v)) return "[Circular]";
        seen.add(v);
      }
      return v;
    });
  }
}
