/** Findings of a notebook grouped by cell, in cell order, as the side panel lists them. */

import { codeOf, Diagnostic, Fix, fixesOf, isOurs } from './lsp';

export interface CellRef {
  id: string;
  uri: string;
  /** The cell's position among all cells of the notebook (0-based). */
  index: number;
}

export interface Finding {
  cell: CellRef;
  diagnostic: Diagnostic;
  code: string;
  fixes: Fix[];
}

export interface CellFindings {
  cell: CellRef;
  findings: Finding[];
}

export function findingsByCell(
  cells: readonly CellRef[],
  diagnosticsOf: (uri: string) => readonly Diagnostic[]
): CellFindings[] {
  const out: CellFindings[] = [];
  for (const cell of cells) {
    const findings = diagnosticsOf(cell.uri)
      .filter(isOurs)
      .map(d => ({ cell, diagnostic: d, code: codeOf(d), fixes: fixesOf(d, cell.uri) }))
      .sort(
        (a, b) =>
          a.diagnostic.range.start.line - b.diagnostic.range.start.line ||
          a.diagnostic.range.start.character - b.diagnostic.range.start.character
      );
    if (findings.length > 0) {
      out.push({ cell, findings });
    }
  }
  return out;
}

export function countFixable(groups: readonly CellFindings[], unsafe: boolean): number {
  let n = 0;
  for (const group of groups) {
    for (const finding of group.findings) {
      if (finding.fixes.some(f => f.applicability === 'safe' || (unsafe && f.applicability === 'unsafe'))) {
        n++;
      }
    }
  }
  return n;
}
