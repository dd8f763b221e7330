/**
 * @keel/tokens: token counting with o200k_base for the kernel's context ceiling and for
 * plugins that budget text. Imports nothing of Keel's kernel: it counts any message of the
 * kernel's shape. The vocabulary loads on first exact count, from a checked cache file.
 */
export {
  defaultTokenCounter,
  estimateTokens,
  fileTokens,
  IMAGE_TOKENS,
  MESSAGE_OVERHEAD_TOKENS,
  TokenCounter,
  utf8Length,
} from "./counter.ts";
export type { Message as CountedMessage, RequestTokenCount, ToolSchema as CountedTool } from "./counter.ts";
export { loadO200k } from "./bpe.ts";
export type { BpeVocabulary } from "./bpe.ts";
