// The turn every entry runs, and how it is timed. One turn = a fresh conversation:
//   user "check the weather in three cities" → model: three parallel get_weather calls →
//   the tool runs three times → model: "Done." (no tools). The scripted models do no I/O
//   and decide the round from the last message, so what is timed is the framework's loop.
// Each entry prints one JSON line: median and p90 µs per turn, retained heap per turn.
export const USER = "check the weather in three cities";
export const CITIES = ["Paris", "Oslo", "Lima"];
export const FINAL = "Done.";
export const TOOL = {
  name: "get_weather",
  description: "Get the current weather for a city",
  schema: {
    type: "object",
    properties: { city: { type: "string", description: "City name" } },
    required: ["city"],
    additionalProperties: false,
  },
};

const calls = [];
/** The tool every entry wraps: records its argument, answers at once. */
export async function weather({ city }) {
  calls.push(city);
  return `${city}: ${city.length + 10}C`;
}

/** Time `turn` (200 warm-up + 2,000 measured by default) and check every turn's outcome. */
export async function measure(
  name,
  turn,
  { warmup = Number(process.env.BENCH_WARMUP ?? 200), turns = Number(process.env.BENCH_TURNS ?? 2000) } = {},
) {
  const check = (text) => {
    const got = calls.splice(0).sort().join(",");
    if (text !== FINAL || got !== [...CITIES].sort().join(","))
      throw new Error(`${name}: turn answered ${JSON.stringify(text)} after tool calls ${got}`);
  };
  for (let i = 0; i < warmup; i++) check(await turn());
  globalThis.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const times = new Float64Array(turns);
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < turns; i++) {
    const t0 = process.hrtime.bigint();
    const text = await turn();
    times[i] = Number(process.hrtime.bigint() - t0) / 1000;
    check(text);
  }
  const cpu = process.cpuUsage(cpu0);
  // Let pending timers and immediates run, then count what the measured turns left behind.
  await new Promise((r) => setTimeout(r, 20));
  globalThis.gc?.();
  const retained = (process.memoryUsage().heapUsed - heap0) / turns;
  times.sort();
  const q = (p) => Math.round(times[Math.min(turns - 1, Math.ceil(p * turns) - 1)] * 10) / 10;
  // CPU time per turn (user + system): steadier than wall time on a busy machine (another process's load does not count).
  const cpu_us = Math.round(((cpu.user + cpu.system) / turns) * 10) / 10;
  console.log(
    JSON.stringify({ name, median_us: q(0.5), p90_us: q(0.9), cpu_us, retained_bytes_per_turn: Math.round(retained) }),
  );
}
