// The floor: a hand-written loop (message array, Promise.all over the calls).
import { measure, weather, USER, CITIES, FINAL } from "./scenario.mjs";
async function model(messages) {
  const last = messages[messages.length - 1];
  if (last.role !== "tool")
    return { role: "assistant", calls: CITIES.map((city, i) => ({ id: `c${i}`, args: JSON.stringify({ city }) })) };
  return { role: "assistant", text: FINAL, calls: [] };
}
await measure("hand loop", async () => {
  const messages = [{ role: "user", text: USER }];
  for (;;) {
    const reply = await model(messages);
    messages.push(reply);
    if (!reply.calls.length) return reply.text;
    const out = await Promise.all(reply.calls.map((c) => weather(JSON.parse(c.args))));
    for (const [i, c] of reply.calls.entries()) messages.push({ role: "tool", id: c.id, text: out[i] });
  }
});
