"""Hover: the rule behind a diagnostic (or a code in a ``# noqa:`` comment) under the cursor,
with what ``torchdoctor run`` measured there, and, in a notebook with a running kernel, facts
about the live tensor or module there."""

from __future__ import annotations

from lsprotocol import types

from . import convert
from .measured import hover_line
from .state import Doctor, Unit, norm_uri


async def hover(doctor: Doctor, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    unit = doctor.unit_for(uri)
    if unit is None:
        return None
    pos = params.position
    docs_base = await doctor.docs_base(uri)
    under = [d for d in unit.items(uri) if convert.contains(d.range, pos)]
    if any(convert.fixes_on_request(d) for d in under):
        # The hover names the first fix: build those of the rules under the cursor.
        current = await doctor.with_fixes(unit, {str(d.code) for d in under})
        under = [
            d for d in current.get(unit.spelled(uri) or uri, []) if convert.contains(d.range, pos)
        ]
    parts, hit = _diagnostic_hovers(doctor, under, pos, docs_base)
    if not parts:
        found = _noqa_hover(doctor, uri, pos, docs_base)
        if found is not None:
            parts.append(found[0])
            hit = found[1]
    live = await _live_hover(doctor, unit, uri, pos)
    if live:
        parts.append(live)
    if not parts:
        return None
    return types.Hover(
        contents=types.MarkupContent(types.MarkupKind.Markdown, "\n\n---\n\n".join(parts)),
        range=hit,
    )


def _diagnostic_hovers(
    doctor: Doctor, under: list[types.Diagnostic], pos: types.Position, docs_base: str | None
) -> tuple[list[str], types.Range | None]:
    """The rules of the diagnostics under the cursor (``under``), and the range of the first."""
    parts = []
    hit: types.Range | None = None
    for d in under:
        if not convert.contains(d.range, pos) or not isinstance(d.code, str):
            continue
        fixes = convert.diagnostic_fixes(d)
        measured = d.data.get("measured") if isinstance(d.data, dict) else None
        line = hover_line(measured, doctor.locale) if isinstance(measured, dict) else None
        text = convert.rule_hover(
            d.code,
            doctor.locale,
            docs_base,
            message=d.message,
            fix=str(fixes[0].get("title")) if fixes else None,
            measured=line,
        )
        if text is None and line is not None:  # a measured code no rule has
            text = f"**{d.code}**: {d.message}\n\n{line}"
        if text:
            parts.append(text)
            hit = hit or d.range
    return parts, hit


def _noqa_hover(
    doctor: Doctor, uri: str, pos: types.Position, docs_base: str | None
) -> tuple[str, types.Range] | None:
    """The rule whose code is under the cursor in a ``# noqa:`` comment, and that code's range."""
    doc = doctor.server.workspace.text_documents.get(norm_uri(uri))
    lines = doc.lines if doc else []
    if pos.line >= len(lines):
        return None
    line = lines[pos.line]
    col = convert.from_client_col(line, pos.character, doctor.encoding)
    found = convert.noqa_code_at(line, col)
    if not found:
        return None
    code, start, end = found
    text = convert.rule_hover(code, doctor.locale, docs_base)
    if not text:
        return None
    return text, types.Range(
        types.Position(pos.line, convert.to_client_col(line, start, doctor.encoding)),
        types.Position(pos.line, convert.to_client_col(line, end, doctor.encoding)),
    )


async def _live_hover(doctor: Doctor, unit: Unit, uri: str, pos: types.Position) -> str | None:
    """Facts about the live tensor or module under the cursor (notebooks with a kernel)."""
    doc = doctor.server.workspace.text_documents.get(norm_uri(uri))
    if doc is None or pos.line >= len(doc.lines):
        return None
    line = doc.lines[pos.line].rstrip("\r\n")
    col = convert.from_client_col(line, pos.character, doctor.encoding)
    client = doctor.client_settings(doctor.path_of(unit.uri))
    return await doctor.live.hover(unit.key, unit.in_kernel, client, line, col, doctor.locale)
