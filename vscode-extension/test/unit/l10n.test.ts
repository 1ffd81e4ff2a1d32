import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { format, setTranslator, t } from "../../src/l10n";
import { ACTION_TITLES, probeFailureMessage } from "../../src/messages";
import { STATE_WORDS, statusView } from "../../src/status";

const SRC = path.join(__dirname, "..", "..", "src");
const bundle = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "l10n", "bundle.l10n.zh-cn.json"), "utf8")) as Record<string, string>;

/** Every template the sources pass to `t` as a literal, plus the tables translated by key. */
function templates(): string[] {
  const found = new Set<string>([...Object.values(ACTION_TITLES), ...Object.values(STATE_WORDS)]);
  for (const file of fs.readdirSync(SRC).filter((f) => f.endsWith(".ts"))) {
    const text = fs.readFileSync(path.join(SRC, file), "utf8");
    for (const m of text.matchAll(/\bt\(\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')/g)) {
      found.add(m[1] ?? m[2] ?? "");
    }
  }
  return [...found];
}

afterEach(() => {
  setTranslator(format);
});

describe("localisation", () => {
  it("formats templates in English by default", () => {
    expect(t("into {0}", "/usr/bin/python3")).toBe("into /usr/bin/python3");
    expect(format("{0} and {1}; {2}", "a", 1)).toBe("a and 1; {2}");
  });

  it("has a Simplified Chinese translation, with the same placeholders, for every template", () => {
    const all = templates();
    expect(all.length).toBeGreaterThan(20);
    for (const template of all) {
      const zh = bundle[template];
      expect(zh, template).toEqual(expect.stringMatching(/\S/));
      const placeholders = (s: string): string[] => (s.match(/\{\d+\}/g) ?? []).sort();
      expect(placeholders(zh ?? ""), template).toEqual(placeholders(template));
    }
    expect(Object.keys(bundle).filter((k) => !all.includes(k)), "no stale entries").toEqual([]);
  });

  it("routes user-facing messages through the installed translator", () => {
    setTranslator((template, ...args) => format(bundle[template] ?? template, ...args));
    expect(probeFailureMessage("notInstalled", "/usr/bin/python3", "").text).toBe(
      "/usr/bin/python3 中没有安装 torchdoctor。要安装到这里以获得 PyTorch 诊断吗？",
    );
    expect(statusView({ state: "running", python: "/p/bin/python", source: "path" }).tooltip).toContain("解释器：/p/bin/python（来自PATH）");
  });
});
