"""``workspace/executeCommand``: apply bulk fixes to a document, report what the server runs
with (debug info), and open a rule's guide in the browser."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from typing import Any

from lsprotocol import types

from .. import __version__
from ..linter.registry import all_rules
from ..linter.selection import enabled_codes
from ..rules.docs import rule_url
from .state import Doctor

CMD_APPLY_FIXES = "torchdoctor.applyFixes"
CMD_DEBUG_INFO = "torchdoctor.debugInfo"
CMD_OPEN_GUIDE = "torchdoctor.openGuide"


async def apply_fixes(doctor: Doctor, *args: Any) -> dict[str, Any]:
    """Arguments: a document URI, or ``{"uri": ..., "unsafe": bool, "code": "TDR602"}``."""
    options: dict[str, Any] = {}
    if args and isinstance(args[0], dict):
        options = args[0]
    elif args:
        options = {"uri": args[0]}
    uri = str(options.get("uri", ""))
    unit = doctor.unit_for(uri)
    if unit is None:
        return {"applied": False, "reason": f"not an open document: {uri}"}
    code = options.get("code")
    unsafe = options.get("unsafe")
    edits, applied, versions = await doctor.fix_all(
        unit,
        unsafe=bool(unsafe) if unsafe is not None else None,
        codes=frozenset({str(code).upper()}) if code else None,
    )
    if not edits:
        return {"applied": True, "fixed": {}}
    result = await doctor.server.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(
            edit=doctor.workspace_edit(edits, versions), label="torchdoctor: fix all"
        )
    )
    return {"applied": bool(result.applied), "fixed": applied if result.applied else {}}


async def debug_info(doctor: Doctor, *args: Any) -> dict[str, Any]:
    """Arguments: optionally a document URI, to add the settings that document is checked with."""
    uri = str(args[0]) if args and isinstance(args[0], str) else None
    info: dict[str, Any] = {
        "torchdoctor": __version__,
        "python": platform.python_version(),
        "executable": sys.executable,
        "pygls": _dist_version("pygls"),
        "lsprotocol": _dist_version("lsprotocol"),
        "torch": _dist_version("torch"),
        "torchImported": "torch" in sys.modules,  # the server never imports it
        "locale": doctor.locale,
        "positionEncoding": doctor.encoding,
        "diagnostics": "pull" if doctor.pull else "push",
        "openDocuments": len(doctor.units),
        "clientSettings": doctor.client_settings(None).as_dict(),
        "kernelBridge": doctor.live.info(),
    }
    if uri:
        path = doctor.path_of(uri)
        settings, problems = await doctor.settings_for(path)
        info["document"] = {
            "uri": uri,
            "path": path,
            "root": str(settings.root) if settings.root else None,
            "enabled": sorted(enabled_codes(settings, path)),
            "unsafeFixes": settings.unsafe_fixes,
            "problems": problems,
        }
    doctor.log("info", f"debug info: {info}")
    return info


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


async def open_guide(doctor: Doctor, *args: Any) -> dict[str, Any]:
    """Arguments: a rule code, and optionally the URI of the document it was found in."""
    code = str(args[0]).strip().upper() if args else ""
    uri = str(args[1]) if len(args) > 1 else ""
    if code not in {rule.code for rule in all_rules()}:
        doctor.log("warning", f"torchdoctor.openGuide: {str(args[0])[:80]!r} is not a rule code")
        return {"shown": False, "error": f"not a rule code: {str(args[0])[:80]!r}"}
    url = rule_url(code, await doctor.docs_base(uri) if uri else None, doctor.locale)
    result = await doctor.server.window_show_document_async(
        types.ShowDocumentParams(uri=url, external=True)
    )
    return {"shown": bool(result and result.success), "uri": url}
