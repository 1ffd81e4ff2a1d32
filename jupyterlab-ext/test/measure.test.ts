import { describe, expect, it } from 'vitest';

import { measureCode, reportsUri, shellQuote } from '../src/measure';

describe('measureCode', () => {
  it('runs the cell under %%torchdoctor run with the notebook path, as Python string literals', () => {
    const code = measureCode('for b in batches:\n    outs.append(model(b))  # "x" \\ y', '/home/me/nb.ipynb');
    expect(code.split('\n')).toEqual([
      "get_ipython().run_line_magic('load_ext', 'torchdoctor.bridge.run_magic')",
      'get_ipython().run_cell_magic(\'torchdoctor\', "run --notebook /home/me/nb.ipynb", ' +
        '"for b in batches:\\n    outs.append(model(b))  # \\"x\\" \\\\ y")'
    ]);
  });

  it('quotes a path the magic splits like a shell', () => {
    expect(shellQuote('/a/b c/it\'s.ipynb')).toBe(`'/a/b c/it'"'"'s.ipynb'`);
    expect(shellQuote('/a/b.ipynb')).toBe('/a/b.ipynb');
  });

  it('names a report next to the notebook', () => {
    expect(reportsUri('file:///home/me/nbs/eval.ipynb')).toBe('file:///home/me/nbs/.torchdoctor_cache/runs/measured.json');
  });
});
