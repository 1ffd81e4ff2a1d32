import { describe, expect, it } from 'vitest';

import { DEFAULT_SETTINGS, initializeParams, serverSettings } from '../src/client';
import { countFixable, findingsByCell } from '../src/findings';
import { Diagnostic } from '../src/lsp';

function d(line: number, code: string, applicability?: string, source = 'torchdoctor'): Diagnostic {
  return {
    range: { start: { line, character: 0 }, end: { line, character: 1 } },
    message: code,
    code,
    source,
    data: applicability
      ? { fixes: [{ title: 't', applicability, edits: [{ range: [line, 0, line, 1], newText: 'x' }] }] }
      : {}
  };
}

describe('findingsByCell', () => {
  it('groups by cell in notebook order, sorted by position, ours only', () => {
    const cells = [
      { id: 'a', uri: 'ua', index: 0 },
      { id: 'b', uri: 'ub', index: 2 }
    ];
    const byUri: Record<string, Diagnostic[]> = {
      ua: [],
      ub: [d(3, 'TDR602', 'safe'), d(1, 'TDR101', 'unsafe'), d(0, 'E501', undefined, 'pylsp')]
    };
    const groups = findingsByCell(cells, uri => byUri[uri] ?? []);
    expect(groups.map(g => g.cell.id)).toEqual(['b']);
    expect(groups[0]!.findings.map(f => f.code)).toEqual(['TDR101', 'TDR602']);
    expect(countFixable(groups, false)).toBe(1);
    expect(countFixable(groups, true)).toBe(2);
  });
});

describe('client settings and handshake', () => {
  it('sends only the settings the user set', () => {
    expect(serverSettings(DEFAULT_SETTINGS)).toEqual({ enable: true, bridge: true });
    expect(
      serverSettings({ ...DEFAULT_SETTINGS, unsafeFixes: true, select: ['TDR6'], ignore: ['TDR602'] })
    ).toEqual({ enable: true, bridge: true, unsafeFixes: true, select: ['TDR6'], ignore: ['TDR602'] });
  });

  it('declares notebook sync, resolvable code actions and the locale', () => {
    const p: any = initializeParams('file:///w', 'zh-CN', DEFAULT_SETTINGS, '0.1.0');
    expect(p.locale).toBe('zh-CN');
    expect(p.capabilities.notebookDocument.synchronization).toBeDefined();
    expect(p.capabilities.textDocument.codeAction.resolveSupport.properties).toEqual(['edit']);
    expect(p.capabilities.textDocument.diagnostic).toBeUndefined(); // push diagnostics
    expect(p.workspaceFolders).toEqual([{ uri: 'file:///w', name: 'jupyter' }]);
  });
});
