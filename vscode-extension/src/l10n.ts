/**
 * Translation of user-facing text. Templates are English with `{0}`-style placeholders; the
 * extension installs VS Code's `l10n.t` (bundles in l10n/), elsewhere (unit tests) they are
 * formatted as they are. Log lines stay in English.
 */
export type Translate = (template: string, ...args: (string | number | boolean)[]) => string;

export function format(template: string, ...args: (string | number | boolean)[]): string {
  return template.replace(/\{(\d+)\}/g, (match, index: string) => {
    const value = args[Number(index)];
    return value === undefined ? match : String(value);
  });
}

let translate: Translate = format;

export function setTranslator(fn: Translate): void {
  translate = fn;
}

export function t(template: string, ...args: (string | number | boolean)[]): string {
  return translate(template, ...args);
}
