"""Code actions: quick fixes of a diagnostic (its own fixes, "fix all of this rule in the file",
a ``# noqa`` for the line, the rule's guide) and the fix-all source actions, with their edits
computed when the client resolves them (or at once, for a client that cannot resolve edits).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from lsprotocol import types

from ..core.model import is_chinese
from . import convert
from .commands import CMD_OPEN_GUIDE
from .state import Doctor, norm_uri

FIX_ALL_KIND = "source.fixAll.torchdoctor"
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.torchdoctor"
OPTIONS = types.CodeActionOptions(
    code_action_kinds=[
        types.CodeActionKind.QuickFix,
        types.CodeActionKind.SourceFixAll,
        FIX_ALL_KIND,
        NOTEBOOK_FIX_ALL_KIND,
    ],
    resolve_provider=True,
)


async def code_action(doctor: Doctor, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    unit = doctor.unit_for(uri)
    if unit is None:
        return []
    path = doctor.path_of(unit.uri)
    client = doctor.client_settings(path)
    if not client.enable:
        return []
    only = params.context.only
    zh = is_chinese(doctor.locale)
    actions: list[types.CodeAction] = []
    quick = _kind_matches(types.CodeActionKind.QuickFix, only)
    # The fixes these actions show, built now where the analysis left them to be built: those of
    # the rules of the diagnostics sent (their quick fixes, and "fix all of this rule").
    codes = {
        str(d.code) for d in params.context.diagnostics if d.source == convert.SOURCE and quick
    }
    current = await doctor.with_fixes(unit, codes)
    everything = [d for items in current.values() for d in items]
    if quick:
        items = current.get(unit.spelled(uri) or uri, [])
        actions += _quick_fixes(doctor, uri, params.context.diagnostics, everything, items, zh)
    unsafe = bool((await doctor.settings_for(path))[0].unsafe_fixes)
    # Whether to offer fix-all unasked: its edits are computed when it is resolved, so a
    # diagnostic whose fixes are not built yet counts when its rule offers fixes that apply in
    # bulk (building every rule's fixes for each request would cost more than the check).
    any_fixable = any(convert.may_bulk_fix(d, unsafe) for d in everything)
    actions += _fix_all_actions(uri, unit.notebook, only, any_fixable, zh)
    if not doctor.resolve_support:
        actions = [await resolve(doctor, a) for a in actions]
    return actions


def _kind_matches(kind: str, only: Sequence[str] | None) -> bool:
    if only is None:
        return True
    return any(kind == k or kind.startswith(k + ".") or not k for k in only)


# ---- quick fixes --------------------------------------------------------------------------
def _quick_fixes(
    doctor: Doctor,
    uri: str,
    diagnostics: Sequence[types.Diagnostic],
    everything: list[types.Diagnostic],
    items: list[types.Diagnostic],
    zh: bool,
) -> list[types.CodeAction]:
    """For each of our diagnostics the client sent: its fixes, then (once per rule or line)
    fixing the rule in the whole file, a ``# noqa`` for the line, and the rule's guide.
    ``items``: the current diagnostics of the document, with the fixes of those sent."""
    actions: list[types.CodeAction] = []
    seen: set[tuple[Any, ...]] = set()
    for diagnostic in diagnostics:
        if diagnostic.source != convert.SOURCE or not isinstance(diagnostic.code, str):
            continue
        code = diagnostic.code
        data = _fresh_data(doctor, uri, diagnostic, items)
        fixes = (data.get("fixes") or []) if data is not None else []
        for i, fix in enumerate(fixes):
            actions.append(
                types.CodeAction(
                    title=str(fix.get("title")),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=i == 0 and fix.get("applicability") == "safe",
                    edit=doctor.workspace_edit(
                        convert.fix_edits(fix, uri), {uri: (data or {}).get("version")}
                    ),
                )
            )
        if ("rule", code) not in seen:
            rule_action = _fix_rule_action(uri, code, everything, zh)
            if rule_action is not None:
                seen.add(("rule", code))
                actions.append(rule_action)
        if data is not None and ("noqa", code, data.get("noqaLine")) not in seen:
            seen.add(("noqa", code, data.get("noqaLine")))
            edit = _noqa_action_edit(doctor, uri, code, data)
            if edit is not None:
                actions.append(
                    types.CodeAction(
                        title=f"在此行禁用 {code}" if zh else f"Disable {code} for this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=doctor.workspace_edit({uri: [edit]}),
                    )
                )
        if ("guide", code) not in seen:
            seen.add(("guide", code))
            actions.append(_guide_action(uri, code, diagnostic, zh))
    return actions


def _fresh_data(
    doctor: Doctor, uri: str, diagnostic: types.Diagnostic, items: list[types.Diagnostic]
) -> dict[str, Any] | None:
    """The current ``data`` of a diagnostic the client sent back, from ``items`` (the
    document's current diagnostics); None: out of date."""
    for d in items:
        if d.code == diagnostic.code and d.range == diagnostic.range:
            return d.data if isinstance(d.data, dict) else None
    data = diagnostic.data
    if isinstance(data, dict) and data.get("version") in (None, doctor.doc_version(uri)):
        return data
    return None


def _fix_rule_action(
    uri: str, code: str, everything: list[types.Diagnostic], zh: bool
) -> types.CodeAction | None:
    """The action "Fix all CODE in this file", where two or more of its diagnostics have a fix."""
    fixable = [d for d in everything if d.code == code and convert.is_bulk_fixable(d, True)]
    if len(fixable) < 2:
        return None
    unsafe = not all(convert.is_bulk_fixable(d, False) for d in fixable)
    title = f"修复此文件中所有 {code}" if zh else f"Fix all {code} in this file"
    if unsafe:
        title += "（不安全）" if zh else " (unsafe)"
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[d for d in everything if d.code == code],
        data={"action": "fixRule", "uri": uri, "code": code, "unsafe": unsafe},
    )


def _noqa_action_edit(
    doctor: Doctor, uri: str, code: str, data: dict[str, Any]
) -> types.TextEdit | None:
    doc = doctor.server.workspace.text_documents.get(norm_uri(uri))
    if doc is None:
        return None
    line_no = int(data.get("noqaLine", 0))
    lines = doc.lines
    line = lines[line_no] if 0 <= line_no < len(lines) else ""
    return convert.noqa_edit(line, line_no, code, doctor.encoding)


def _guide_action(uri: str, code: str, diagnostic: types.Diagnostic, zh: bool) -> types.CodeAction:
    return types.CodeAction(
        title=f"查看 {code} 的指南" if zh else f"Open the guide for {code}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        command=types.Command(
            title=f"Open the guide for {code}", command=CMD_OPEN_GUIDE, arguments=[code, uri]
        ),
    )


# ---- fix all ------------------------------------------------------------------------------
def _fix_all_actions(
    uri: str, notebook: bool, only: Sequence[str] | None, any_fixable: bool, zh: bool
) -> list[types.CodeAction]:
    """The fix-all source actions the client asked for (``only``), or the file's one when it
    asked for no kind in particular and something can be fixed."""
    actions = []
    kinds = [FIX_ALL_KIND] + ([NOTEBOOK_FIX_ALL_KIND] if notebook else [])
    for kind in kinds:
        explicit = only is not None and any(
            kind == k or kind.startswith(k + ".") for k in only if k
        )
        if explicit or (only is None and any_fixable and kind == FIX_ALL_KIND):
            actions.append(
                types.CodeAction(
                    title="torchdoctor: 修复所有可自动修复的问题"
                    if zh
                    else "torchdoctor: Fix all auto-fixable problems",
                    kind=kind,
                    data={"action": "fixAll", "uri": uri},
                )
            )
    return actions


async def resolve(doctor: Doctor, action: types.CodeAction) -> types.CodeAction:
    """The action with its edits: those of its rule (``fixRule``) or every bulk fix (``fixAll``)."""
    data = action.data
    if action.edit is not None or not isinstance(data, dict) or "action" not in data:
        return action
    unit = doctor.unit_for(str(data.get("uri", "")))
    if unit is None:
        return action
    if data["action"] == "fixRule":
        edits, _applied, versions = await doctor.fix_all(
            unit, unsafe=bool(data.get("unsafe")), codes=frozenset({str(data.get("code"))})
        )
    else:
        edits, _applied, versions = await doctor.fix_all(unit, unsafe=None, codes=None)
    return attrs.evolve(action, edit=doctor.workspace_edit(edits, versions))


async def code_action_resolve(doctor: Doctor, params: types.CodeAction) -> types.CodeAction:
    return await resolve(doctor, params)
