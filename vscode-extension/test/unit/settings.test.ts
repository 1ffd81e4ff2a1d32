import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULTS, needsRestart, readSettings, ruleDocsUrl, toServerOptions, type Settings } from "../../src/settings";

const from = (values: Record<string, unknown>) => readSettings((key) => values[key]);

describe("readSettings", () => {
  it("uses the defaults when nothing is set", () => {
    const { settings, problems } = from({});
    expect(settings).toEqual(DEFAULTS);
    expect(problems).toEqual([]);
  });

  it("keeps the defaults in step with the settings package.json contributes", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
    const properties = manifest.contributes.configuration.properties as Record<string, { default: unknown; description?: string; markdownDescription?: string }>;
    for (const [key, value] of Object.entries(DEFAULTS)) {
      const contributed = properties[`torchdoctor.${key}`];
      expect(contributed, `torchdoctor.${key} is contributed`).toBeDefined();
      expect(contributed?.default, `default of torchdoctor.${key}`).toEqual(value);
    }
  });

  it("documents every setting and command in English and Chinese", () => {
    const read = (name: string): Record<string, unknown> =>
      JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", name), "utf8")) as Record<string, unknown>;
    const manifest = read("package.json") as {
      contributes: { configuration: { properties: Record<string, Record<string, unknown>> }; commands: { title: string }[] };
    };
    const texts = [
      ...Object.values(manifest.contributes.configuration.properties).map((p) => p.markdownDescription ?? p.description),
      ...manifest.contributes.commands.map((c) => c.title),
    ];
    for (const locale of ["package.nls.json", "package.nls.zh-cn.json"]) {
      const table = read(locale);
      for (const text of texts) {
        const key = /^%(.+)%$/.exec(String(text))?.[1];
        expect(key, `${String(text)} is localised`).toBeDefined();
        expect(table[key ?? ""], `${locale} has ${key ?? ""}`).toEqual(expect.stringMatching(/\S/));
      }
    }
  });

  it("normalises rule selectors: upper case, trimmed, without duplicates or blanks", () => {
    const { settings, problems } = from({ select: [" tdr105", "TDR6", "tdr105", ""], ignore: "TDR1, tdr602", extendSelect: ["all"] });
    expect(settings.select).toEqual(["TDR105", "TDR6"]);
    expect(settings.ignore).toEqual(["TDR1", "TDR602"]);
    expect(settings.extendSelect).toEqual(["ALL"]);
    expect(problems).toEqual([]);
  });

  it("drops selectors that cannot name a rule and says so", () => {
    const { settings, problems } = from({ select: ["TDR105", "not a code", 7], ignore: { TDR1: true } });
    expect(settings.select).toEqual(["TDR105"]);
    expect(settings.ignore).toEqual([]);
    expect(problems).toHaveLength(3);
    expect(problems.join("\n")).toContain('"not a code"');
  });

  it("falls back to the default for values of the wrong type", () => {
    const { settings, problems } = from({ enable: "yes", bridge: 1, logLevel: "loud", debounceMs: "fast", docsBaseUrl: "ftp://x" });
    expect(settings.enable).toBe(true);
    expect(settings.bridge).toBe(true);
    expect(settings.logLevel).toBe("info");
    expect(settings.debounceMs).toBe(100);
    expect(settings.docsBaseUrl).toBe("");
    expect(problems).toHaveLength(5);
  });

  it("clamps the debounce and rounds it to whole milliseconds", () => {
    expect(from({ debounceMs: -5 }).settings.debounceMs).toBe(0);
    expect(from({ debounceMs: 99999 }).settings.debounceMs).toBe(5000);
    expect(from({ debounceMs: 150.4 }).settings.debounceMs).toBe(150);
    expect(from({ debounceMs: 250 }).problems).toEqual([]);
  });

  it("accepts `warn` for the warning log level and adds a slash to the docs URL", () => {
    const { settings } = from({ logLevel: "WARN", docsBaseUrl: "https://docs.example.org/td" });
    expect(settings.logLevel).toBe("warning");
    expect(settings.docsBaseUrl).toBe("https://docs.example.org/td/");
  });

  it("leaves unsafeFixes unset unless it is configured", () => {
    expect(from({}).settings.unsafeFixes).toBeNull();
    expect(from({ unsafeFixes: true }).settings.unsafeFixes).toBe(true);
    expect(from({ unsafeFixes: false }).settings.unsafeFixes).toBe(false);
  });

  it("reads the interpreter as a string or the one-element list other tools use", () => {
    expect(from({ interpreter: " /opt/py/bin/python " }).settings.interpreter).toBe("/opt/py/bin/python");
    expect(from({ interpreter: ["/opt/py/bin/python"] }).settings.interpreter).toBe("/opt/py/bin/python");
    expect(from({ interpreter: 3 }).problems).toEqual([
      "torchdoctor.interpreter must be a path to a Python executable (a string), not a number (3); it is ignored.",
    ]);
    expect(from({ interpreter: ["/a", "/b"] }).problems).toHaveLength(1);
    expect(from({ interpreter: ["/a", "/b"] }).settings.interpreter).toBe("");
  });
});

describe("toServerOptions", () => {
  it("sends exactly the keys the server reads, with null for 'not set here'", () => {
    const options = toServerOptions(from({}).settings);
    expect(options).toEqual({
      enable: true,
      select: null,
      ignore: [],
      extendSelect: [],
      unsafeFixes: null,
      debounceMs: 100,
      docsBaseUrl: null,
      logLevel: "info",
      bridge: true,
      kernelConnectionFile: null,
    });
  });

  it("passes configured values through", () => {
    const options = toServerOptions(
      from({ enable: false, select: ["TDR1"], ignore: ["TDR105"], extendSelect: ["TDR9"], unsafeFixes: true, debounceMs: 50, docsBaseUrl: "http://localhost:8000", logLevel: "debug", bridge: false, kernelConnectionFile: " kernel-1.json " }).settings,
    );
    expect(options).toEqual({
      enable: false,
      select: ["TDR1"],
      ignore: ["TDR105"],
      extendSelect: ["TDR9"],
      unsafeFixes: true,
      debounceMs: 50,
      docsBaseUrl: "http://localhost:8000/",
      logLevel: "debug",
      bridge: false,
      kernelConnectionFile: "kernel-1.json",
    });
  });

  it("contains no client-only settings", () => {
    const options = toServerOptions(from({ interpreter: "/usr/bin/python3", fixAll: false }).settings) as unknown as Record<string, unknown>;
    expect(options).not.toHaveProperty("interpreter");
    expect(options).not.toHaveProperty("fixAll");
  });
});

describe("needsRestart", () => {
  const base: Settings = from({}).settings;
  it("restarts for server settings and the interpreter", () => {
    expect(needsRestart(base, { ...base, select: ["TDR1"] })).toBe(true);
    expect(needsRestart(base, { ...base, interpreter: "/x/python" })).toBe(true);
    expect(needsRestart(base, { ...base, logLevel: "debug" })).toBe(true);
  });
  it("does not restart for client-only settings or no change", () => {
    expect(needsRestart(base, { ...base })).toBe(false);
    expect(needsRestart(base, { ...base, fixAll: false })).toBe(false);
  });
});

describe("ruleDocsUrl", () => {
  it("builds a rule's page under the base URL", () => {
    expect(ruleDocsUrl("tdr105", "")).toBe("https://torchdoctor.dev/rules/TDR105/");
    expect(ruleDocsUrl("TDR602", "http://localhost:8000/docs")).toBe("http://localhost:8000/docs/rules/TDR602/");
  });
  it("falls back to the rule index for anything that is not a code", () => {
    expect(ruleDocsUrl("", "")).toBe("https://torchdoctor.dev/rules/");
    expect(ruleDocsUrl("../../etc", "")).toBe("https://torchdoctor.dev/rules/");
  });
});
