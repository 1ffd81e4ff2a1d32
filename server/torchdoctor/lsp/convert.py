"""Pure conversions between engine results and LSP types.

Engine positions are 1-based rows and 0-based columns in code points; LSP positions are 0-based
lines and columns in the negotiated encoding (UTF-16 unless the client asked otherwise).
Nothing here talks to a client or keeps state.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import attrs
from lsprotocol import types

from ..core.model import Applicability, Finding, Fix, Pos, Range, Severity, is_chinese
from ..core.noqa import find_noqa
from ..core.source import split_rows
from ..rules.docs import rule_url

SOURCE = "torchdoctor"
UTF16 = "utf-16"

SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}
TAGS = {
    "deprecated": types.DiagnosticTag.Deprecated,
    "unnecessary": types.DiagnosticTag.Unnecessary,
}
_NEWLINE = re.compile(r"\r\n|\r|\n")
_SURROGATE = re.compile("[\ud800-\udfff]")


# ---- columns ------------------------------------------------------------------------------
def units(text: str, encoding: str = UTF16) -> int:
    """Length of ``text`` in the client's position units."""
    if text.isascii() or encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def to_client_col(line: str, col: int, encoding: str = UTF16) -> int:
    """Code-point column ``col`` of ``line`` in client units."""
    if line.isascii():
        return col
    return units(line[:col], encoding)


def from_client_col(line: str, col: int, encoding: str = UTF16) -> int:
    """Client-unit column ``col`` of ``line`` (without its line ending) as a code-point column;
    a column past the end of the line is its end (LSP)."""
    if line.isascii() or encoding == "utf-32":
        return min(max(col, 0), len(line))
    count = 0
    for i, ch in enumerate(line):
        if count >= col:
            return i
        count += units(ch, encoding)
    return len(line)


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (an editor's UTF-16 text may hold one; Python cannot
    encode it, so cannot parse the text) replaced by U+FFFD. Both are one code point and one
    UTF-16 unit: every position stays where it was."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def split_lines(text: str) -> list[str]:
    """Lines as LSP and the engine count them (with their line endings): only ``\\n``,
    ``\\r\\n`` and ``\\r`` end a line, not the other breaks of ``str.splitlines``; the
    last line may be empty."""
    lines = split_rows(text)
    if not lines or lines[-1].endswith(("\n", "\r")):
        lines.append("")
    return lines


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def line_offset(
    lines: Sequence[str], starts: Sequence[int], pos: types.Position, encoding: str
) -> int:
    """The code-point offset in the text of ``lines`` (with their endings; ``starts``: the
    offset of each) of the client position ``pos``: a column past the end of its line is the
    line's end, a line past the last is the end of the text (LSP)."""
    if pos.line >= len(lines):
        return starts[-1] + len(lines[-1]) if lines else 0
    line = max(pos.line, 0)
    return starts[line] + from_client_col(_strip_eol(lines[line]), pos.character, encoding)


class Locator(Protocol):
    """Maps an engine range to the document that shows it (a file, or a notebook cell)."""

    def locate(self, rng: Range) -> tuple[str, types.Range]: ...


class TextLocator:
    """Ranges of one text document."""

    def __init__(self, uri: str, text: str, encoding: str = UTF16) -> None:
        self.uri = uri
        self.lines = split_lines(text)
        self.encoding = encoding

    def position(self, row: int, col: int) -> types.Position:
        line = self.lines[row - 1] if 0 < row <= len(self.lines) else ""
        return types.Position(row - 1, to_client_col(_strip_eol(line), col, self.encoding))

    def locate(self, rng: Range) -> tuple[str, types.Range]:
        return self.uri, types.Range(
            self.position(rng.start.row, rng.start.col), self.position(rng.end.row, rng.end.col)
        )


def offset_position(
    lines: Sequence[str], starts: Sequence[int], offset: int, encoding: str
) -> types.Position:
    """The client position of code-point ``offset`` in the text of ``lines`` (``starts``: the
    offset of each line)."""
    if not lines:
        return types.Position(0, 0)
    line = bisect_right(starts, offset) - 1
    body = _strip_eol(lines[line])
    col = offset - starts[line]
    if col > len(body):  # past the line's end: the start of the next line
        return types.Position(line + 1, 0)
    return types.Position(line, to_client_col(body, col, encoding))


# ---- diagnostics --------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def doc_link(code: str, base: str | None, locale: str | None) -> str:
    """The rule's page (cached: it looks for the installed docs on disk)."""
    return rule_url(code, base, locale)


def fix_title(fix: Fix, locale: str | None) -> str:
    """The fix's title, saying so when it is unsafe."""
    title = fix.title.get(locale)
    if fix.applicability is Applicability.UNSAFE:
        title += "（不安全）" if is_chinese(locale) else " (unsafe)"
    return title


def _range_list(r: types.Range) -> list[int]:
    return [r.start.line, r.start.character, r.end.line, r.end.character]


def range_key(r: types.Range) -> tuple[int, int, int, int]:
    return r.start.line, r.start.character, r.end.line, r.end.character


def range_from_list(value: Sequence[int]) -> types.Range:
    a, b, c, d = (int(v) for v in value)
    return types.Range(types.Position(a, b), types.Position(c, d))


def finding_data(
    finding: Finding, locator: Locator, uri: str, version: int | None, locale: str | None
) -> dict[str, Any]:
    """What code actions need from a finding, stored in ``Diagnostic.data``.

    Edits are in LSP coordinates; an edit in another document (another notebook cell) names
    its ``uri``. A finding whose fixes were not built has ``fixesOnRequest`` instead of
    ``fixes``: the server builds them when a code action or a hover asks.
    """
    row = finding.noqa_row or finding.range.start.row
    _noqa_uri, noqa_rng = locator.locate(Range(Pos(row, 0), Pos(row, 0)))
    noqa_line = noqa_rng.start.line
    if finding.fixes_deferred:
        return {
            "code": finding.code,
            "version": version,
            "noqaLine": noqa_line,
            "fixesOnRequest": True,
        }
    fixes = []
    for fix in finding.fixes:
        edits = []
        for edit in fix.edits:
            edit_uri, rng = locator.locate(Range(edit.start, edit.end))
            item: dict[str, Any] = {"range": _range_list(rng), "newText": edit.content}
            if edit_uri != uri:
                item["uri"] = edit_uri
            edits.append(item)
        fixes.append(
            {
                "title": fix_title(fix, locale),
                "applicability": fix.applicability.value,
                "edits": edits,
            }
        )
    return {"code": finding.code, "version": version, "noqaLine": noqa_line, "fixes": fixes}


def to_diagnostic(
    finding: Finding,
    locator: Locator,
    *,
    version: int | None,
    locale: str | None,
    docs_base: str | None,
) -> tuple[str, types.Diagnostic]:
    """The diagnostic for a finding, and the URI of the document it belongs to."""
    uri, rng = locator.locate(finding.range)
    related = []
    for item in finding.related:
        r_uri, r_rng = locator.locate(item.range)
        related.append(
            types.DiagnosticRelatedInformation(
                types.Location(r_uri, r_rng), item.message.get(locale)
            )
        )
    tags = [TAGS[t] for t in finding.tags if t in TAGS]
    return uri, types.Diagnostic(
        range=rng,
        message=finding.message.get(locale),
        severity=SEVERITY.get(finding.severity, types.DiagnosticSeverity.Warning),
        code=finding.code,
        code_description=types.CodeDescription(doc_link(finding.code, docs_base, locale)),
        source=SOURCE,
        tags=tags or None,
        related_information=related or None,
        data=finding_data(finding, locator, uri, version, locale),
    )


def result_id(diagnostics: Sequence[types.Diagnostic]) -> str:
    """A stable id of a diagnostics list: equal lists give equal ids (for pull diagnostics).

    The document version inside ``data`` is left out: an edit that changes no finding (typing
    below them, say) gets an "unchanged" report. Code actions look up the current data anyway.
    """
    digest = hashlib.sha256()
    for d in diagnostics:
        data = d.data
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "version"}
        digest.update(
            json.dumps(
                [_range_list(d.range), d.code, d.message, d.severity, d.tags, data],
                sort_keys=True,
                default=str,
            ).encode()
        )
    return digest.hexdigest()[:20]


def fixes_on_request(diagnostic: types.Diagnostic) -> bool:
    """Whether a diagnostic's fixes are built when asked for (not in its ``data``)."""
    data = diagnostic.data
    return isinstance(data, dict) and data.get("fixesOnRequest") is True


def diagnostic_fixes(diagnostic: types.Diagnostic) -> list[dict[str, Any]]:
    data = diagnostic.data
    if not isinstance(data, dict):
        return []
    fixes = data.get("fixes")
    return [f for f in fixes if isinstance(f, dict)] if isinstance(fixes, list) else []


def fix_edits(fix: dict[str, Any], uri: str) -> dict[str, list[types.TextEdit]]:
    """A fix from ``Diagnostic.data`` as text edits per document."""
    out: dict[str, list[types.TextEdit]] = {}
    for edit in fix.get("edits") or []:
        target = edit.get("uri") or uri
        out.setdefault(target, []).append(
            types.TextEdit(range_from_list(edit["range"]), str(edit.get("newText", "")))
        )
    return out


def may_bulk_fix(diagnostic: types.Diagnostic, unsafe: bool) -> bool:
    """Whether fix-all may change something for a diagnostic: it has a fix that applies in bulk,
    or its fixes are built on request and its rule offers fixes that may (a rule declares its
    riskiest fix: one that declares unsafe fixes may offer safe ones)."""
    if not fixes_on_request(diagnostic):
        return is_bulk_fixable(diagnostic, unsafe)
    from ..linter.registry import get_rule

    rule = get_rule(str(diagnostic.code))
    safety = rule.fix_safety if rule is not None else None
    return safety in (Applicability.SAFE, Applicability.UNSAFE)


def is_bulk_fixable(diagnostic: types.Diagnostic, unsafe: bool) -> bool:
    for fix in diagnostic_fixes(diagnostic):
        applicability = fix.get("applicability")
        if applicability == Applicability.SAFE.value or (
            unsafe and applicability == Applicability.UNSAFE.value
        ):
            return True
    return False


# ---- noqa ---------------------------------------------------------------------------------
def noqa_edit(line: str, line_no: int, code: str, encoding: str = UTF16) -> types.TextEdit | None:
    """The edit that silences ``code`` on a line: adds it to the line's ``# noqa:`` list, or
    appends ``  # noqa: CODE``. None when the line is already silenced."""
    body = _strip_eol(line)
    comment = find_noqa([body]).get(1)
    if comment is not None:
        if comment.codes is None or code in comment.codes:
            return None
        last = comment.code_spans[-1][2]
        pos = types.Position(line_no, to_client_col(body, last, encoding))
        return types.TextEdit(types.Range(pos, pos), f", {code}")
    pos = types.Position(line_no, units(body, encoding))
    sep = "  " if body.strip() else ""
    return types.TextEdit(types.Range(pos, pos), f"{sep}# noqa: {code}")


# ---- text diffs ---------------------------------------------------------------------------
def diff_edits(old: str, new: str, encoding: str = UTF16) -> list[types.TextEdit]:
    """Line-level edits that turn ``old`` into ``new`` (few and small, so cursors stay put)."""
    if old == new:
        return []
    a = split_rows(old)
    b = split_rows(new)

    def pos(index: int) -> types.Position:
        if index < len(a):
            return types.Position(index, 0)
        if a and not a[-1].endswith(("\n", "\r")):
            return types.Position(len(a) - 1, units(a[-1], encoding))
        return types.Position(len(a), 0)

    return [
        types.TextEdit(types.Range(pos(i1), pos(i2)), "".join(b[j1:j2]))
        for i1, i2, j1, j2 in _changed_rows(a, 0, len(a), b, 0, len(b))
    ]


# Above this many row pairs, a diff is split at rows found once in each text first: difflib's
# matcher compares every pair of equal rows, and fixes spread over a long file with repeated
# rows took it seconds.
_DIRECT_DIFF_PAIRS = 40_000


def _changed_rows(
    a: Sequence[str], a1: int, a2: int, b: Sequence[str], b1: int, b2: int
) -> Iterable[tuple[int, int, int, int]]:
    """The runs of rows ``a[i1:i2]`` that become ``b[j1:j2]``, turning ``a[a1:a2]`` into
    ``b[b1:b2]``: the rows both share at the ends are kept; in a long middle, the rows found
    exactly once in each text, in the same order (a patience diff's anchors), are kept too and
    the runs between them diffed on their own."""
    while a1 < a2 and b1 < b2 and a[a1] == b[b1]:
        a1, b1 = a1 + 1, b1 + 1
    while a1 < a2 and b1 < b2 and a[a2 - 1] == b[b2 - 1]:
        a2, b2 = a2 - 1, b2 - 1
    if a1 == a2 or b1 == b2:
        if a1 < a2 or b1 < b2:
            yield a1, a2, b1, b2
        return
    anchors = []
    if (a2 - a1) * (b2 - b1) > _DIRECT_DIFF_PAIRS:
        anchors = _unique_anchors(a, a1, a2, b, b1, b2)
    if not anchors:
        matcher = difflib.SequenceMatcher(None, a[a1:a2], b[b1:b2], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                yield a1 + i1, a1 + i2, b1 + j1, b1 + j2
        return
    for i, j in [*anchors, (a2, b2)]:
        yield from _changed_rows(a, a1, i, b, b1, j)
        a1, b1 = i + 1, j + 1


def _unique_anchors(
    a: Sequence[str], a1: int, a2: int, b: Sequence[str], b1: int, b2: int
) -> list[tuple[int, int]]:
    """Pairs (i, j) with ``a[i] == b[j]`` the only such row in ``a[a1:a2]`` and in ``b[b1:b2]``,
    the longest run of them in the same order in both."""
    count_a: dict[str, int] = {}
    for i in range(a1, a2):
        count_a[a[i]] = count_a.get(a[i], 0) + 1
    count_b: dict[str, int] = {}
    where_b: dict[str, int] = {}
    for j in range(b1, b2):
        count_b[b[j]] = count_b.get(b[j], 0) + 1
        where_b[b[j]] = j
    pairs = [
        (i, where_b[a[i]]) for i in range(a1, a2) if count_a[a[i]] == 1 and count_b.get(a[i]) == 1
    ]
    # The longest run of pairs increasing in ``j`` (patience sorting): ``tails[n]`` is the pair
    # that ends the best run of n + 1 pairs so far, ``ends[n]`` its ``j``.
    tails: list[int] = []
    ends: list[int] = []
    before: list[int] = [-1] * len(pairs)
    for k, (_i, j) in enumerate(pairs):
        n = bisect_left(ends, j)
        if n > 0:
            before[k] = tails[n - 1]
        if n == len(tails):
            tails.append(k)
            ends.append(j)
        else:
            tails[n], ends[n] = k, j
    run: list[tuple[int, int]] = []
    k = tails[-1] if tails else -1
    while k >= 0:
        run.append(pairs[k])
        k = before[k]
    return run[::-1]


# ---- moving diagnostics through edits -------------------------------------------------------
def as_partial(old: str, new: str) -> types.TextDocumentContentChangePartial:
    """A whole-document change from ``old`` to ``new`` as the one partial change that replaces
    the lines between those they share at the start and at the end."""
    a, b = split_rows(old), split_rows(new)
    limit = min(len(a), len(b))
    head = 0
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(head, 0), types.Position(len(a) - tail, 0)),
        text="".join(b[head : len(b) - tail]),
    )


def _end_of_insert(start: types.Position, text: str, encoding: str) -> types.Position:
    parts = _NEWLINE.split(text)
    if len(parts) == 1:
        return types.Position(start.line, start.character + units(text, encoding))
    return types.Position(start.line + len(parts) - 1, units(parts[-1], encoding))


def _key(p: types.Position) -> tuple[int, int]:
    return p.line, p.character


def _shift(p: types.Position, end: types.Position, new_end: types.Position) -> types.Position:
    """Map a position at or after the replaced range's ``end``."""
    if p.line == end.line:
        return types.Position(new_end.line, new_end.character + p.character - end.character)
    return types.Position(p.line + new_end.line - end.line, p.character)


def shift_range(
    rng: types.Range, change: types.Range, text: str, encoding: str = UTF16
) -> types.Range | None:
    """Where ``rng`` lies after ``change`` was replaced by ``text``; None when the change cuts
    across it (the range no longer means what it did)."""
    s, e = _key(change.start), _key(change.end)
    a, b = _key(rng.start), _key(rng.end)
    new_end = _end_of_insert(change.start, text, encoding)
    if b <= s and not (a == b == s and s != e):
        return rng
    if a >= e:
        return types.Range(
            _shift(rng.start, change.end, new_end), _shift(rng.end, change.end, new_end)
        )
    if a <= s and e <= b:
        return types.Range(rng.start, _shift(rng.end, change.end, new_end))
    return None


def _shift_edits(
    edits: Iterable[dict[str, Any]], uri: str, change: types.Range, text: str, encoding: str
) -> list[dict[str, Any]] | None:
    out = []
    for edit in edits:
        if edit.get("uri") not in (None, uri):
            out.append(edit)
            continue
        moved = shift_range(range_from_list(edit["range"]), change, text, encoding)
        if moved is None:
            return None
        out.append({**edit, "range": _range_list(moved)})
    return out


def shift_diagnostic(
    diagnostic: types.Diagnostic,
    uri: str,
    change: types.Range,
    text: str,
    version: int | None,
    encoding: str = UTF16,
) -> types.Diagnostic | None:
    """A diagnostic of document ``uri`` moved through one incremental change (None: dropped).

    Its fixes, noqa line and related locations in the same document move with it; a fix that
    the change cuts across is dropped.
    """
    rng = shift_range(diagnostic.range, change, text, encoding)
    if rng is None:
        return None
    related = None
    if diagnostic.related_information:
        related = []
        for info in diagnostic.related_information:
            if info.location.uri != uri:
                related.append(info)
                continue
            moved = shift_range(info.location.range, change, text, encoding)
            if moved is not None:
                related.append(attrs.evolve(info, location=types.Location(uri, moved)))
    data = diagnostic.data
    if isinstance(data, dict):
        noqa_line = int(data.get("noqaLine", rng.start.line))
        noqa = shift_range(
            types.Range(types.Position(noqa_line, 0), types.Position(noqa_line, 0)),
            change,
            text,
            encoding,
        )
        data = {**data, "version": version, "noqaLine": noqa.start.line if noqa else rng.start.line}
        if "fixes" in data:
            fixes = []
            for fix in diagnostic_fixes(diagnostic):
                edits = _shift_edits(fix.get("edits") or [], uri, change, text, encoding)
                if edits is not None:
                    fixes.append({**fix, "edits": edits})
            data["fixes"] = fixes
    return attrs.evolve(diagnostic, range=rng, related_information=related or None, data=data)


def shift_diagnostics(
    diagnostics: Sequence[types.Diagnostic],
    uri: str,
    changes: Sequence[types.TextDocumentContentChangeEvent],
    version: int | None,
    encoding: str = UTF16,
) -> list[types.Diagnostic]:
    """Diagnostics moved through a list of incremental changes, applied in order."""
    current = list(diagnostics)
    for change in changes:
        if not isinstance(change, types.TextDocumentContentChangePartial):
            continue  # a whole-document change: nothing to map through; keep them as they are
        moved = []
        for d in current:
            shifted = shift_diagnostic(d, uri, change.range, change.text, version, encoding)
            if shifted is not None:
                moved.append(shifted)
        current = moved
    return current


# ---- hover --------------------------------------------------------------------------------
def contains(rng: types.Range, pos: types.Position) -> bool:
    return _key(rng.start) <= _key(pos) <= _key(rng.end)


def _shorten(body: str, max_lines: int = 14) -> str:
    lines = body.strip("\n").split("\n")
    if len(lines) <= max_lines:
        return "\n".join(lines)
    kept = lines[:max_lines]
    if sum(line.count("```") for line in kept) % 2:
        kept.append("...")
        kept.append("```")
    return "\n".join(kept)


# A sentence ends at ".", "!" or "?" before a space or a line break (not "e.g." or "i.e."),
# or at a Chinese full stop.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)[.!?](?=\s)|[。！？]")


def _balanced(text: str) -> bool:
    """No code span or fence left open."""
    return text.count("`") % 2 == 0


def _cut_prose(body: str, max_lines: int, more: str) -> str:
    """``body`` whole when it has at most ``max_lines`` lines; else cut at the end of the last
    paragraph, or failing that the last sentence, that ends within them, followed by ``more``
    (a link to the rest). Never mid-sentence: without a sentence end, the first paragraph is
    kept whole."""
    body = body.strip("\n")
    lines = body.split("\n")
    if len(lines) <= max_lines:
        return body
    head = "\n".join(lines[:max_lines])
    cut = head.rfind("\n\n")
    if cut > 0 and _balanced(head[:cut]):
        return f"{head[:cut]}\n\n{more}"
    ends = [m.end() for m in _SENTENCE_END.finditer(head) if _balanced(head[: m.end()])]
    if ends:
        return f"{head[: ends[-1]]} {more}"
    first = body.split("\n\n", 1)
    return f"{first[0]}\n\n{more}" if len(first) > 1 else body


def rule_hover(
    code: str,
    locale: str | None,
    docs_base: str | None,
    message: str | None = None,
    fix: str | None = None,
    measured: str | None = None,
) -> str | None:
    """Markdown for a rule: what is wrong (and what was measured, when ``measured`` says it),
    why it matters, the fix, before/after, the link."""
    from ..linter.registry import get_rule
    from ..rules.base import DOC_SECTIONS, DOC_SECTIONS_ZH
    from ..rules.docs import rule_doc

    rule = get_rule(code)
    if rule is None:
        return None
    doc = rule_doc(rule, locale)
    names = DOC_SECTIONS_ZH if doc.locale == "zh" else DOC_SECTIONS
    sections = doc.sections
    zh = is_chinese(locale)
    parts = [f"**{rule.code}** `{rule.name}`" + (f": {message}" if message else "")]
    if measured:
        parts.append(measured)
    if not message and doc.summary:
        parts.append(doc.summary)
    url = doc_link(rule.code, docs_base, locale)
    why = sections.get(names[1], "").strip()
    if why:
        more = f"[{'更多' if zh else 'More'}…]({url})"
        title = "为什么不好" if zh else "Why it matters"
        parts.append(f"**{title}**\n\n{_cut_prose(why, 10, more)}")
    if fix:
        parts.append(f"**修复**：{fix}" if zh else f"**Fix**: {fix}")
    example = sections.get(names[2], "").strip()
    instead = sections.get(names[3], "").strip()
    if example:
        parts.append(f"**{'示例' if zh else 'Example'}**\n\n{_shorten(example)}")
    if instead:
        parts.append(f"**{'改为' if zh else 'Use instead'}**\n\n{_shorten(instead)}")
    label = f"查看 {rule.code} 的指南" if zh else f"Open the guide for {rule.code}"
    parts.append(f"[{label}]({url})")
    return "\n\n".join(parts)


def noqa_code_at(line: str, col: int) -> tuple[str, int, int] | None:
    """The code of a ``# noqa:`` list under code-point column ``col``: (code, start, end)."""
    comment = find_noqa([_strip_eol(line)]).get(1)
    if comment is None:
        return None
    for code, start, end in comment.code_spans:
        if start <= col <= end:
            return code, start, end
    return None
