/**
 * @keel/cli — the `keel` command and the pieces it is built from, for hosts that load
 * `agent.config.*` themselves.
 */
export { main, EXIT } from "./main.ts";
export type { CliEnv } from "./main.ts";
export { loadConfig, configJiti, SEARCH_PLACES } from "./load-config.ts";
export type { LoadedConfig } from "./load-config.ts";
export { buildAgent, validateConfig, formatPath, missingCredential } from "./build-agent.ts";
export type { BuildOptions, BuiltAgent } from "./build-agent.ts";
export { ConfigSchema, configJsonSchema } from "./config-schema.ts";
export { resolvePlugins } from "./plugins.ts";
export { echoProvider } from "./echo-provider.ts";
