import { describe, expect, it } from "vitest";
import {
  containsSecret,
  isHighEntropyToken,
  isPlaceholder,
  isWordPath,
  redactDeep,
  redactSecrets,
  scanSecrets,
  secretlintRuleNames,
  shannonEntropy,
} from "../src/index.ts";
import { secretlintFindings } from "../src/secretlint.ts";
import { corpus } from "./corpus.ts";

/** Sample-level precision and recall; a positive counts only when its secret is gone after redaction. */
function measure(seed: number, scan: (t: string) => { text: string; found: boolean }) {
  let tp = 0,
    fp = 0,
    fn = 0,
    tn = 0;
  const misses: string[] = [];
  for (const s of corpus(seed)) {
    const r = scan(s.text);
    if (s.secret !== undefined) {
      if (r.found && !r.text.includes(s.secret)) tp++;
      else fn++, misses.push(`missed: ${s.label}`);
    } else if (r.found) fp++, misses.push(`false alarm: ${s.label}: ${r.text.slice(0, 120)}`);
    else tn++;
  }
  return { tp, fp, fn, tn, precision: tp / (tp + fp || 1), recall: tp / (tp + fn || 1), misses };
}

describe("scanner on the labelled corpus", () => {
  it("keeps precision and recall at or above 0.95 over three seeds (42 keys of 30+ providers, 36 ordinary texts each)", () => {
    for (const seed of [12, 7, 99]) {
      const m = measure(seed, (t) => {
        const r = redactSecrets(t);
        return { text: r.text, found: r.findings.length > 0 };
      });
      console.log(
        `[secrets] seed ${seed}: precision ${m.precision.toFixed(3)} recall ${m.recall.toFixed(3)} (tp ${m.tp} fp ${m.fp} fn ${m.fn} tn ${m.tn})`,
      );
      expect(m.misses).toEqual([]);
      expect(m.precision).toBeGreaterThanOrEqual(0.95);
      expect(m.recall).toBeGreaterThanOrEqual(0.95);
    }
  });

  it("needs its own rules and entropy beyond secretlint's preset (ablation: secretlint alone misses prose secrets)", () => {
    const alone = measure(12, (t) => {
      const f = secretlintFindings(t);
      let out = t;
      for (const x of [...f].sort((a, b) => b.start - a.start))
        out = out.slice(0, x.start) + "#".repeat(x.end - x.start) + out.slice(x.end);
      return { text: out, found: f.length > 0 };
    });
    console.log(
      `[secrets] secretlint preset alone: precision ${alone.precision.toFixed(3)} recall ${alone.recall.toFixed(3)}`,
    );
    expect(alone.misses.some((m) => m.includes("aws secret in prose"))).toBe(true);
    expect(secretlintRuleNames()).toContain("aws");
    expect(secretlintRuleNames()).not.toContain("filter-comments");
  });
});

describe("scanSecrets / redactSecrets", () => {
  const awsProse = "Remember my aws key with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for deploys";

  it("catches an AWS secret key given in prose ('with secret wJalr…'), the case that leaked into memory", () => {
    const r = redactSecrets(awsProse);
    expect(r.text).toBe("Remember my aws key with secret [REDACTED:high_entropy] for deploys");
    expect(r.findings).toEqual([{ kind: "high_entropy", rule: "entropy:near-key", start: 32, end: 72 }]);
  });

  it("is idempotent: redacted text scans clean", () => {
    for (const s of corpus(5)) {
      const once = redactSecrets(s.text).text;
      expect(scanSecrets(once)).toEqual([]);
      expect(redactSecrets(once).text).toBe(once);
    }
  });

  it("never splits a surrogate pair and keeps text outside findings as it is", () => {
    const t = `😀 token: ${"aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI"}😀 ok é`;
    const r = redactSecrets(t);
    expect(r.text).toBe("😀 token: [REDACTED:high_entropy]😀 ok é");
    expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(r.text)).toBe(false);
  });

  it("reports spans, never the secret itself", () => {
    const f = scanSecrets(awsProse);
    expect(JSON.stringify(f)).not.toContain("wJalr");
  });

  it("redactDeep copies a frozen JSON value with every string redacted and keys kept", () => {
    const v = Object.freeze({
      args: Object.freeze({
        note: awsProse,
        n: 3,
        list: Object.freeze(["ok", "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI2kL4"]),
      }),
    });
    const out = redactDeep(v);
    expect(JSON.stringify(out)).not.toMatch(/wJalr|ghp_/);
    expect(out.args.n).toBe(3);
    expect(out.args.list[0]).toBe("ok");
    expect(v.args.note).toBe(awsProse);
  });

  it("containsSecret agrees with scanSecrets and ignores short and non-string input", () => {
    expect(containsSecret(awsProse)).toBe(true);
    expect(containsSecret("hello")).toBe(false);
    expect(scanSecrets(undefined as unknown as string)).toEqual([]);
  });
});

describe("entropy", () => {
  it("measures bits per code point", () => {
    expect(shannonEntropy("")).toBe(0);
    expect(shannonEntropy("aaaa")).toBe(0);
    expect(shannonEntropy("abcd")).toBe(2);
    expect(shannonEntropy("😀😀ab")).toBe(1.5);
  });

  it("never flags hex hashes or UUIDs alone, and needs digits near a key word", () => {
    expect(isHighEntropyToken("3f786850e387550fdab836ed7e6dc881de23001b", false)).toBe(false);
    expect(isHighEntropyToken("123e4567-e89b-12d3-a456-426614174000", true)).toBe(false);
    expect(isHighEntropyToken("getAccessTokenForUserWithRefresh", true)).toBe(false);
    expect(isHighEntropyToken("3f786850e387550fdab836ed7e6dc881", true)).toBe(true);
    expect(isHighEntropyToken("Zk3j8sLq9PwX2vN7mB4cR6tY1uI0oE5aQ8dF3gH2", false)).toBe(true);
  });
});

describe("real developer text (quoted from public agent trajectories) and the shapes that used to slip", () => {
  it("leaves paths, URLs, endpoints, placeholders and code alone", () => {
    for (const t of [
      `File "/home/runner/work/HENDRICS/HENDRICS/.tox/py310-test-devdeps/lib/python3.10/site-packages/hendrics/io.py", line 386, in load_events`,
      "(Current directory: /__home__kimberly__LLM_SUMMER_24__llm_ctf_automation__LLM_CTF_Dataset_Dev__2015__CSAW-Quals__forensics__flash)",
      "http://candicealexander.com/cdn/shop/products/IMG_7269_a49d5af8-c76c-4ecd-ae20-48c08cb11dec.jpg",
      'token_endpoint: "https://slack.com/api/oauth.v2.access"',
      "thinking: budget_tokens=10000, max_tokens=16000",
      'export ANTHROPIC_API_KEY="your-api-key"',
      "export ANTHROPIC_API_KEY=your_api_key_here",
      'mongosh "mongodb://$DB_USER:$DB_PASSWORD@$DB_HOST:$DB_PORT/$DB_NAME"',
      "valid_urls = ['http://user:pass@example.com']",
      "passwd = conn_params.get('password', '')\nif passwd:\n    env['PGPASSWORD'] = str(passwd)",
      "`PGPASSWORD` is not set if password is empty.",
      "The token is short-lived and not auto-refreshed.",
    ])
      expect(scanSecrets(t), t).toEqual([]);
    expect(isWordPath("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")).toBe(false);
    expect(isPlaceholder("Tr0ub4dor&3")).toBe(false);
  });

  it("finds db_password=, *_PASS=, a URL-encoded key and a Google OAuth token", () => {
    const aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    expect(redactSecrets("db_password=Hunter2Hunter2").text).toBe("db_password=[REDACTED:password]");
    expect(redactSecrets("my password is Passw0rd(2024)").text).toBe("my password is [REDACTED:password]");
    expect(redactSecrets("password = self.password").findings).toEqual([]);
    expect(redactSecrets("REDIS_PASS=s3cr3tValue9").text).toBe("REDIS_PASS=[REDACTED:credential]");
    expect(
      redactSecrets(`https://x.example/put?aws_secret_access_key=${encodeURIComponent(aws)}&r=1`).text,
    ).not.toContain("K7MDENG");
    expect(redactSecrets(`ya29.a0AfH6SMB${"x7Kq2".repeat(12)}`).text).toBe("[REDACTED:gcp_oauth_token]");
  });

  it("finds a provider key glued after an underscore (an identifier, a tool name), not only after a word boundary", () => {
    const slack = `xoxb-123456789012-1234567890123-${"Ab9".repeat(8)}`;
    const github = `ghp_${"a1B2c3D4e5".repeat(4)}`;
    const anthropic = `sk-ant-api03-${"Zx9_".repeat(8)}`;
    expect(redactSecrets(`mcp__fx__${slack}`).text).toBe("mcp__fx__[REDACTED:slack_token]");
    expect(redactSecrets(`CONFIG_${github}`).text).toBe("CONFIG_[REDACTED:github_token]");
    expect(redactSecrets(`key_${anthropic}`).text).not.toContain("Zx9_Zx9_");
    // Still not inside a longer word: a prefix must not be the tail of another token.
    expect(
      redactSecrets(`notaxoxb-${"1234567890".repeat(2)}`).findings.filter((f) => f.kind === "slack_token"),
    ).toEqual([]);
  });
});
