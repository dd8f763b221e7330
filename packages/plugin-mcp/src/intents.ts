/**
 * Query processing: cues in a request that name a kind of tool without naming it — a file
 * path, a URL, a relative date, a calculation — become extra query words. A short,
 * domain-neutral lexicon (no per-task terms).
 */
const EXTENSIONS: Record<string, string> = {
  md: "markdown file write",
  markdown: "markdown file write",
  txt: "text file write",
  pdf: "pdf document",
  doc: "word document docx",
  docx: "word document docx",
  xls: "excel spreadsheet sheet",
  xlsx: "excel spreadsheet sheet",
  csv: "csv file write table",
  ppt: "powerpoint presentation slide",
  pptx: "powerpoint presentation slide",
  html: "html web page file write",
  json: "json file write",
  png: "image png",
  jpg: "image picture",
  jpeg: "image picture",
  svg: "svg image",
  mp3: "audio music",
  wav: "audio music",
  ts: "code file write",
  js: "code file write",
  py: "code file write",
};

const RULES: Array<[RegExp, string]> = [
  [/\bhttps?:\/\/\S+|\bwww\.[a-z0-9-]+\.[a-z]{2,}\S*/i, "url fetch web page content"],
  [
    /\b(today|tonight|tomorrow|yesterday|this (week|month|year)|next (week|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|last (24 ?h|week|month|year|quarter)|(past|last) \d+ (hours?|days?|weeks?|months?))\b/i,
    "current date time",
  ],
  [
    /\b(calculate|compute|estimate|how much|total|sum|percentage|percent|average|ratio|bmi|convert \d)/i,
    "calculate math expression",
  ],
  [/(^|\s)(\/|~\/|\.\/)[\w.-]+(\/[\w.-]+)*\/?(\s|$|[,.;:])/, "file directory path"],
  [/\b(save|write|store|export)\b[^.]*\b(to|in|at|as)\b/i, "write file save"],
];

/**
 * Extra query words for the cues in `text`.
 * Contract: deterministic; returns "" when nothing matches; never removes words.
 */
export function intentWords(text: string): string {
  const out: string[] = [];
  for (const m of text.matchAll(/[\w-]+\.([a-z0-9]{1,8})\b/gi)) {
    const words = EXTENSIONS[m[1]!.toLowerCase()];
    if (words && !/^\d+$/.test(m[1]!)) out.push(words);
  }
  for (const [re, words] of RULES) if (re.test(text)) out.push(words);
  return [...new Set(out)].join(" ");
}
