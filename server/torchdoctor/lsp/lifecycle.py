"""Lifecycle handlers: ``initialize`` (what the client can do, its first settings),
``initialized`` (the editor's settings, file watchers) and ``shutdown``."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from .. import __version__
from .documents import use_editor_documents
from .kernels import workspace_trusted
from .measured import WATCH_GLOB
from .state import WAIT_TIMEOUT_S, Doctor
from .workspace import fetch_configuration, note_workspace_folders

# Clients that read fixes from ``Diagnostic.data`` instead of asking with code actions.
FIXES_IN_DATA_CLIENTS = frozenset({"jupyterlab-torchdoctor"})


def initialize(doctor: Doctor, params: types.InitializeParams) -> None:
    use_editor_documents(doctor)
    doctor.client_logs = True
    doctor.locale = params.locale
    doctor.set_settings(None, params.initialization_options, "initializationOptions")
    doctor.live.trusted = workspace_trusted(params.initialization_options)
    caps = params.capabilities
    text = caps.text_document
    doctor.pull = bool(text and text.diagnostic)
    action = text.code_action if text else None
    props = action.resolve_support.properties if action and action.resolve_support else []
    doctor.resolve_support = "edit" in props
    # torchdoctor's JupyterLab extension shows the fixes of a file's findings from their
    # diagnostics' data (as it does for notebooks, whose fixes are always there).
    client = params.client_info.name if params.client_info else None
    doctor.fixes_in_data = client in FIXES_IN_DATA_CLIENTS
    ws = caps.workspace
    doctor.document_changes = bool(ws and ws.workspace_edit and ws.workspace_edit.document_changes)
    doctor.refresh_support = bool(ws and ws.diagnostics and ws.diagnostics.refresh_support)
    if not (ws and ws.configuration):
        doctor.config_ready.set()


async def initialized(doctor: Doctor, params: types.InitializedParams) -> None:
    server = doctor.server
    note_workspace_folders(doctor)
    try:
        # Settings first: documents opened meanwhile wait for them (no flash of findings
        # under the wrong settings).
        if await fetch_configuration(doctor):
            doctor.reanalyse_all()
    finally:
        doctor.config_ready.set()
    registrations = _registrations(server.client_capabilities.workspace)
    if registrations:
        try:
            await asyncio.wait_for(
                server.client_register_capability_async(
                    types.RegistrationParams(registrations=registrations)
                ),
                WAIT_TIMEOUT_S,
            )
        except Exception as exc:
            doctor.log("warning", f"could not register file watchers: {exc!r}")
    doctor.log("info", f"torchdoctor {__version__} ready")


def _registrations(ws: types.WorkspaceClientCapabilities | None) -> list[types.Registration]:
    """What to be told of, where the client registers it dynamically: changes of any
    ``pyproject.toml``, of the project's modules and of ``torchdoctor run``'s reports, and of
    the ``torchdoctor`` settings."""
    registrations = []
    if ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration:
        registrations.append(
            types.Registration(
                id="torchdoctor-pyproject",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[
                        types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                        # the project's modules, whose facts files that import them use
                        types.FileSystemWatcher(glob_pattern="**/*.py"),
                        # what ``torchdoctor run`` measured, shown with the findings
                        types.FileSystemWatcher(glob_pattern=WATCH_GLOB),
                    ]
                ),
            )
        )
    if ws and ws.did_change_configuration and ws.did_change_configuration.dynamic_registration:
        registrations.append(
            types.Registration(
                id="torchdoctor-configuration",
                method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                register_options=types.DidChangeConfigurationRegistrationOptions(
                    section="torchdoctor"
                ),
            )
        )
    return registrations


async def shutdown(doctor: Doctor, params: None) -> None:
    doctor.shut_down = True
    for unit in list(doctor.units.values()):
        doctor.stop_work(unit)
    await doctor.live.shutdown()
