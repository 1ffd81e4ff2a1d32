"""Printing findings: text, JSON (Ruff-compatible), SARIF 2.1.0 and GitHub annotations."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..core.model import Edit, FileError, Finding, Fix, Pos, Range
from ..linter.registry import get_rule
from ..rules.docs import DEFAULT_DOCS_URL, rule_url


def _loc(pos: Pos) -> dict[str, int]:
    return {"row": pos.row, "column": pos.col + 1}


def public_url(code: str, docs_base: str | None, locale: str) -> str:
    """A rule's page on the site (or under ``docs-base-url``), never a path on this machine:
    reports are read elsewhere."""
    base = docs_base or os.environ.get("TORCHDOCTOR_DOCS_URL") or DEFAULT_DOCS_URL
    return rule_url(code, base, locale)


def shown_fix(finding: Finding, unsafe: bool) -> Fix | None:
    """The fix every output format reports: the one ``--fix`` applies under this safety setting,
    else the preferred one (which ``--fix`` does not apply)."""
    return finding.bulk_fix(unsafe) or finding.fix


def merged_edits(fix: Fix) -> list[Edit]:
    """A fix's edits in the order they apply, inserts at the same place joined into one."""
    out: list[Edit] = []
    for edit in sorted(fix.edits, key=lambda e: (e.start, e.end)):
        last = out[-1] if out else None
        if last is not None and last.start == last.end == edit.start == edit.end:
            out[-1] = Edit(last.start, last.end, last.content + edit.content)
        else:
            out.append(edit)
    return out


def _local(finding: Finding, notebook_rows: dict[int, int] | None, pos: Pos) -> Pos:
    """Turn a concatenated-notebook position into a cell-relative one."""
    if finding.cell is None or notebook_rows is None:
        return pos
    start = notebook_rows.get(finding.cell, 1)
    return Pos(pos.row - start + 1, pos.col)


def ruff_json(
    finding: Finding,
    filename: str,
    locale: str,
    unsafe: bool,
    docs_base: str | None = None,
    cell_rows: dict[int, int] | None = None,
) -> dict[str, Any]:
    rng = finding.cell_range or finding.range
    fix = shown_fix(finding, unsafe)
    fix_json = None
    if fix is not None:
        fix_json = {
            "applicability": fix.applicability.ruff_name,
            "message": fix.title.get(locale),
            "edits": [
                {
                    "content": e.content,
                    "location": _loc(_local(finding, cell_rows, e.start)),
                    "end_location": _loc(_local(finding, cell_rows, e.end)),
                }
                for e in merged_edits(fix)
            ],
        }
    noqa_row = finding.noqa_row
    if finding.cell is not None and cell_rows is not None:
        noqa_row = _local(finding, cell_rows, Pos(noqa_row, 0)).row
    return {
        "cell": finding.cell,
        "code": finding.code,
        "name": finding.name,
        "message": finding.message.get(locale),
        # Absolute, as in Ruff's JSON (code read from stdin keeps the name it was given).
        "filename": filename if filename == "-" or not filename else os.path.abspath(filename),
        "location": _loc(rng.start),
        "end_location": _loc(rng.end),
        "fix": fix_json,
        "url": public_url(finding.code, docs_base, locale),
        "noqa_row": noqa_row,
        "severity": finding.severity.value,
    }


def text_line(finding: Finding, filename: str, locale: str, unsafe: bool) -> str:
    rng: Range = finding.cell_range or finding.range
    where = filename
    if finding.cell is not None:
        where += f":cell {finding.cell}"
    fixable = finding.bulk_fix(unsafe) is not None
    mark = " [*]" if fixable else ""
    return (
        f"{where}:{rng.start.row}:{rng.start.col + 1}: {finding.code}{mark} "
        f"{finding.message.get(locale)}"
    )


def summary(
    findings: Sequence[Finding], unsafe: bool, fixed: int, zh: bool, unchecked: int = 0
) -> str:
    """The last line of the text output; ``unchecked`` counts files that could not be checked."""
    total = len(findings)
    fixable = sum(1 for f in findings if f.bulk_fix(unsafe))
    hidden = sum(1 for f in findings if not f.bulk_fix(unsafe) and f.bulk_fix(True))
    parts = []
    if zh:
        if fixed:
            parts.append(f"已修复 {fixed} 处。")
        if total:
            parts.append(f"发现 {total} 个问题。")
        elif unchecked:
            parts.append(f"未发现问题，但有 {unchecked} 个文件无法检查。")
        else:
            parts.append("未发现问题。")
        if fixable:
            parts.append(f"[*] 其中 {fixable} 个可用 `--fix` 修复。")
        if hidden:
            parts.append(f"另有 {hidden} 个可用 `--unsafe-fixes` 启用的修复。")
        return " ".join(parts)
    if fixed:
        parts.append(f"Fixed {fixed} {'finding' if fixed == 1 else 'findings'}.")
    if total:
        parts.append(f"Found {total} {'finding' if total == 1 else 'findings'}.")
    elif unchecked:
        parts.append(
            f"No findings, but {unchecked} {'file' if unchecked == 1 else 'files'} could not be checked."
        )
    else:
        parts.append("All checks passed!")
    if fixable:
        parts.append(f"[*] {fixable} fixable with the `--fix` option.")
    if hidden:
        fixes = "fix" if hidden == 1 else "fixes"
        parts.append(f"({hidden} hidden {fixes} can be enabled with the `--unsafe-fixes` option.)")
    return " ".join(parts)


def statistics(findings: Sequence[Finding], unsafe: bool, locale: str) -> list[str]:
    counts = Counter(f.code for f in findings)
    fixable = Counter(f.code for f in findings if f.bulk_fix(unsafe))
    lines = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        rule = get_rule(code)
        name = rule.name if rule else ""
        mark = "[*]" if fixable[code] == n else ("[-]" if fixable[code] else "   ")
        lines.append(f"{n:5d}\t{code}\t{mark} {name}")
    return lines


def first_sentence(text: str) -> str:
    """The first sentence of a rule's summary: up to the first full stop (``.`` before a space
    or the end, or ``。``) outside inline code, so ``torch.load(...)`` does not end it."""
    in_code = False
    for i, ch in enumerate(text):
        if ch == "`":
            in_code = not in_code
        elif in_code:
            continue
        elif ch == "。" or (ch == "." and (i + 1 == len(text) or text[i + 1].isspace())):
            return text[: i + 1]
    return text


def sarif(
    items: Sequence[tuple[str, Finding, bool, dict[int, int] | None]],
    errors: Sequence[FileError],
    locale: str,
    docs_base: str | None,
) -> dict[str, Any]:
    """SARIF 2.1.0; ``items`` are (path, finding, unsafe fixes on, the notebook's cell rows)."""
    used = sorted({item[1].code for item in items})
    rules = []
    for code in used:
        rule = get_rule(code)
        if rule is None:
            continue
        rules.append(
            {
                "id": code,
                "name": rule.name,
                # One sentence here, the whole summary in fullDescription (what SARIF viewers
                # show as a title and as the rule's text).
                "shortDescription": {"text": first_sentence(rule.summary(locale))},
                "fullDescription": {"text": rule.summary(locale)},
                "helpUri": public_url(code, docs_base, locale),
                "properties": {"fixSafety": rule.fix_safety.value if rule.fix_safety else None},
            }
        )
    level = {"error": "error", "warning": "warning", "info": "note", "hint": "note"}
    results = []
    for path, f, unsafe, cell_rows in items:
        uri = path.replace("\\", "/")
        result: dict[str, Any] = {
            "ruleId": f.code,
            "level": level[f.severity.value],
            "message": {"text": f.message.get(locale)},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri},
                        "region": _region(f.cell_range or f.range),
                    }
                }
            ],
        }
        properties: dict[str, Any] = {}
        if f.cell is not None:
            properties["cell"] = f.cell
        fix = shown_fix(f, unsafe)
        if fix is not None:
            properties["fixSafety"] = fix.applicability.ruff_name
            replacements = [
                {
                    "deletedRegion": _region(
                        Range(_local(f, cell_rows, e.start), _local(f, cell_rows, e.end))
                    ),
                    "insertedContent": {"text": e.content},
                }
                for e in merged_edits(fix)
            ]
            result["fixes"] = [
                {
                    "description": {"text": fix.title.get(locale)},
                    "artifactChanges": [
                        {"artifactLocation": {"uri": uri}, "replacements": replacements}
                    ],
                }
            ]
        if properties:
            result["properties"] = properties
        results.append(result)
    notifications = [{"level": "error", "message": {"text": e.format()}} for e in errors]
    return sarif_log(
        rules,
        results,
        {"executionSuccessful": not errors, "toolExecutionNotifications": notifications},
    )


def sarif_log(
    rules: list[dict[str, Any]], results: list[dict[str, Any]], invocation: dict[str, Any]
) -> dict[str, Any]:
    """A SARIF 2.1.0 log of one torchdoctor run: its rules, results and invocation."""
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchdoctor",
                        "version": __version__,
                        "informationUri": DEFAULT_DOCS_URL,
                        "rules": rules,
                    }
                },
                "results": results,
                "invocations": [invocation],
            }
        ],
    }


def _region(rng: Range) -> dict[str, int]:
    return {
        "startLine": rng.start.row,
        "startColumn": rng.start.col + 1,
        "endLine": rng.end.row,
        "endColumn": rng.end.col + 1,
    }


def github(path: str, f: Finding, locale: str) -> str:
    rng = f.cell_range or f.range
    level = {"error": "error", "warning": "warning", "info": "notice", "hint": "notice"}[
        f.severity.value
    ]
    # A notebook's rows count from the top of the cell: the title and the message name it.
    title = (
        f"torchdoctor ({f.code}, cell {f.cell})"
        if f.cell is not None
        else f"torchdoctor ({f.code})"
    )
    where = f" (cell {f.cell})" if f.cell is not None else ""
    msg = f"{f.code} {f.message.get(locale)}{where}".replace("%", "%25").replace("\n", "%0A")
    return (
        f"::{level} title={title},file={path},line={rng.start.row},col={rng.start.col + 1},"
        f"endLine={rng.end.row},endColumn={rng.end.col + 1}::{msg}"
    )


def dumps(data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)
