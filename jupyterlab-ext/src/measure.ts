/**
 * "Measure this cell": the code the panel's button runs in the notebook's kernel when the user
 * clicks it. It is the cell's own code, run under `%%torchdoctor run` (the magic of
 * `torchdoctor.bridge.run_magic`), which writes what it measured to the notebook's report; the
 * language server reads that report. torchdoctor never runs code in a kernel on its own.
 */

/** A Python string literal for `text` (JSON's escapes are Python's too). */
export function pythonString(text: string): string {
  return JSON.stringify(text);
}

/** `path` quoted for the magic's options (read with `shlex.split`). */
export function shellQuote(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replace(/'/g, `'"'"'`)}'`;
}

/** The code that runs `source` (a cell's code) under `%%torchdoctor run`, writing the report of
 * the notebook at `notebookPath`. */
export function measureCode(source: string, notebookPath: string): string {
  const options = `run --notebook ${shellQuote(notebookPath)}`;
  return [
    "get_ipython().run_line_magic('load_ext', 'torchdoctor.bridge.run_magic')",
    `get_ipython().run_cell_magic('torchdoctor', ${pythonString(options)}, ${pythonString(source)})`
  ].join('\n');
}

/** A file URI in the notebook's `.torchdoctor_cache/runs/` folder: told to the language server as
 * a changed report, so it reads the reports again. */
export function reportsUri(notebookUri: string): string {
  return new URL('.torchdoctor_cache/runs/measured.json', notebookUri).href;
}
