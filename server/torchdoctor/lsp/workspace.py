"""Configuration: reading the editor's settings (``workspace/configuration``), and reloading
them and ``[tool.torchdoctor]`` when settings, workspace folders or a ``pyproject.toml`` change.

The settings themselves are parsed in ``settings.py``; ``[tool.torchdoctor]`` is read (and
cached) by ``diagnostics.SettingsResolver``.
"""

from __future__ import annotations

import asyncio
import os

from lsprotocol import types
from pygls.uris import to_fs_path

from .measured import is_report
from .settings import ClientSettings
from .state import WAIT_TIMEOUT_S, Doctor


async def fetch_configuration(doctor: Doctor) -> bool:
    """Ask the client for ``torchdoctor`` settings (global and per folder); True on change."""
    server = doctor.server
    ws = server.client_capabilities.workspace
    if not (ws and ws.configuration):
        return False
    folders = list(server.workspace.folders.values())
    items = [types.ConfigurationItem(section="torchdoctor")]
    items += [types.ConfigurationItem(scope_uri=f.uri, section="torchdoctor") for f in folders]
    try:
        values = await asyncio.wait_for(
            server.workspace_configuration_async(types.ConfigurationParams(items=items)),
            WAIT_TIMEOUT_S,
        )
    except Exception as exc:
        doctor.log("warning", f"could not read the editor settings: {exc!r}")
        return False

    def state() -> tuple[ClientSettings, dict[str, ClientSettings]]:
        # A folder with nothing set is the same as no folder entry at all.
        return doctor.global_settings, {k: v for k, v in doctor.folder_settings.items() if v.given}

    before = state()
    doctor.set_settings("", values[0] if values else None, "workspace/configuration")
    doctor.folder_settings = {}
    for folder, value in zip(folders, list(values)[1:], strict=False):
        path = to_fs_path(folder.uri) or folder.uri
        doctor.set_settings(path, value, f"workspace/configuration ({folder.name})")
    return state() != before


def reload_configuration(doctor: Doctor) -> None:
    """Forget the ``[tool.torchdoctor]`` read so far and the problems reported; analyse again."""
    doctor.resolver.reset()
    doctor.reported.clear()
    doctor.log("info", "configuration reloaded")
    doctor.reanalyse_all()


async def did_change_configuration(
    doctor: Doctor, params: types.DidChangeConfigurationParams
) -> None:
    """Read the editor's settings again; reload only when they changed (VS Code sends this
    as soon as the server registers for it, with nothing changed)."""
    ws = doctor.server.client_capabilities.workspace
    if ws and ws.configuration:
        if not await fetch_configuration(doctor):
            return
    else:
        settings = params.settings
        if not (isinstance(settings, dict) and isinstance(settings.get("torchdoctor"), dict)):
            return
        doctor.set_settings("", settings["torchdoctor"], "didChangeConfiguration")
    reload_configuration(doctor)


def note_workspace_folders(doctor: Doctor) -> None:
    """Where ``torchdoctor run``'s reports are looked for besides the folders above a document:
    the workspace folders."""
    ws = doctor.server.workspace
    roots = [to_fs_path(f.uri) for f in ws.folders.values()] + [ws.root_path]
    doctor.measured.roots = tuple(dict.fromkeys(os.path.abspath(r) for r in roots if r))


async def did_change_workspace_folders(
    doctor: Doctor, params: types.DidChangeWorkspaceFoldersParams
) -> None:
    note_workspace_folders(doctor)
    await fetch_configuration(doctor)
    reload_configuration(doctor)


def did_change_watched_files(doctor: Doctor, params: types.DidChangeWatchedFilesParams) -> None:
    if any(change.uri.endswith("pyproject.toml") for change in params.changes):
        reload_configuration(doctor)
    elif any(is_report(change.uri) for change in params.changes):
        doctor.reports_changed()
    python = [c for c in params.changes if c.uri.endswith(".py")]
    if any(c.type != types.FileChangeType.Changed for c in python):
        doctor.project_changed(None)  # a module came or went: imports may resolve elsewhere
    else:
        for change in python:
            doctor.project_changed(os.path.abspath(doctor.path_of(change.uri)))
