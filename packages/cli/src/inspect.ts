/** `keel inspect`: the plugin-load tree and the phase map. */
import type { Agent } from "@keel/agent";

/** The phase map as text: plugins, then every phase with its subscriptions in run order. */
export function formatInspect(agent: Agent, filepath: string): string {
  const lines = [
    `agent "${agent.name}" (${filepath})`,
    `kernel ${agent.registry.kernelVersion}, model ${agent.options.provider.id}`,
    "plugins:",
  ];
  const plugins = agent.registry.plugins;
  if (!plugins.length) lines.push("  (none)");
  for (const p of plugins) {
    const deps = Object.entries(p.dependencies).map(([n, r]) => `${n}@${r}`);
    lines.push(`  ${p.name}@${p.version}${deps.length ? ` (needs ${deps.join(", ")})` : ""}`);
  }
  lines.push("phases:");
  for (const row of agent.inspect()) {
    lines.push(`  ${row.phase} [${row.kind}; accepts ${row.accepts.join(", ")}]`);
    if (!row.subscriptions.length) lines.push("    (no subscriptions)");
    row.subscriptions.forEach((s, i) => {
      const last = i === row.subscriptions.length - 1;
      const order = [
        s.stage !== "normal" ? s.stage : "",
        s.priority ? `priority ${s.priority}` : "",
        s.after.length ? `after ${s.after.join(",")}` : "",
        s.before.length ? `before ${s.before.join(",")}` : "",
      ]
        .filter(Boolean)
        .join(", ");
      lines.push(
        `    ${last ? "└─" : "├─"} ${s.plugin}${s.id !== `${s.plugin}:${row.phase}` ? ` #${s.id}` : ""}  ${s.await} ${s.timeoutMs} ms, ${s.failure}${order ? `, ${order}` : ""}`,
      );
    });
  }
  return `${lines.join("\n")}\n`;
}

/** The phase map as JSON (`keel inspect --json`). */
export function inspectJson(agent: Agent, filepath: string): string {
  return `${JSON.stringify({ agent: agent.name, config: filepath, kernel: agent.registry.kernelVersion, model: agent.options.provider.id, plugins: agent.registry.plugins.map((p) => ({ name: p.name, version: p.version, dependencies: p.dependencies })), phases: agent.inspect() }, null, 2)}\n`;
}
