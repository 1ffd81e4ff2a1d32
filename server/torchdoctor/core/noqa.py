"""``# noqa`` comments: bare ``# noqa`` silences every rule on its line, ``# noqa: TDR105, TDR6``
silences the listed codes (TorchFix's ``TOR`` codes count as their TDR equivalents)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

NOQA = re.compile(
    r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?",
    re.IGNORECASE,
)
CODE = re.compile(r"[A-Z]+[0-9]*", re.IGNORECASE)


@dataclass(frozen=True)
class NoqaComment:
    row: int
    start: int  # column of '#'
    end: int
    codes: tuple[str, ...] | None  # None: bare noqa
    code_spans: tuple[tuple[str, int, int], ...] = ()


def find_noqa(lines: Iterable[str]) -> dict[int, NoqaComment]:
    out: dict[int, NoqaComment] = {}
    for row, line in enumerate(lines, start=1):
        if "noqa" not in line and "NOQA" not in line.upper():
            continue
        match = NOQA.search(line)
        if match is None:
            continue
        codes_text = match.group("codes")
        if codes_text:
            base = match.start("codes")
            spans = tuple(
                (m.group(0).upper(), base + m.start(), base + m.end())
                for m in CODE.finditer(codes_text)
            )
            out[row] = NoqaComment(
                row, match.start(), match.end(), tuple(s[0] for s in spans), spans
            )
        else:
            out[row] = NoqaComment(row, match.start(), match.end(), None)
    return out


def suppresses(
    comment: NoqaComment | None, code: str, aliases: Mapping[str, str | tuple[str, ...]]
) -> bool:
    """Whether ``comment`` silences ``code``; an alias may stand for several codes."""
    if comment is None:
        return False
    if comment.codes is None:
        return True
    for listed in comment.codes:
        for target in _targets(listed, aliases):
            if code == target or (len(target) < len(code) and code.startswith(target)):
                return True
    return False


def _targets(listed: str, aliases: Mapping[str, str | tuple[str, ...]]) -> tuple[str, ...]:
    """What a listed code means: itself, the codes its alias names, or (for a prefix of
    aliases such as ``TOR1``) the codes of every alias it starts."""
    value = aliases.get(listed)
    if value is not None:
        return (value,) if isinstance(value, str) else value
    out = [listed]
    if not listed.startswith("TDR"):
        for alias, target in aliases.items():
            if alias.startswith(listed):
                out.extend((target,) if isinstance(target, str) else target)
    return tuple(out)
