/** Tool arguments from their streamed JSON text. Contract: "" is `{}`; invalid JSON is kept as the raw string (the kernel's validation reports it to the model). */
export function parseArgs(json: string): unknown {
  if (!json.trim()) return {};
  try {
    return JSON.parse(json);
  } catch {
    return json;
  }
}
