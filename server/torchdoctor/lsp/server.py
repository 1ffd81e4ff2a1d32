"""The torchdoctor language server (pygls): :func:`create_server` registers each handler over
the server state, and :func:`main` runs it (``torchdoctor server``).

Where things are:

- ``state.py``: the server state (``Doctor``: open documents and notebooks, settings, scheduling
  of analyses, publishing) and the pygls server (``TorchDoctorServer``);
- ``lifecycle.py``: ``initialize``, ``initialized``, ``shutdown``;
- ``documents.py``: text document and notebook document sync;
- ``diagnostics.py``: the analysis job run in worker threads (``Job``, ``analyse``,
  ``compute_fix_all``, ``SettingsResolver``) and pull diagnostics;
- ``actions.py``: code actions (quick fixes, ``# noqa``, fix all) and their resolution;
- ``hover.py``: hover;
- ``commands.py``: ``workspace/executeCommand`` (applyFixes, debugInfo, openGuide);
- ``workspace.py``: the editor's settings (``workspace/configuration``) and reloads;
- ``settings.py``: parsing and layering of the editor's settings;
- ``convert.py``: pure conversions between engine results and LSP types;
- ``notebook_sync.py``: checking and fixing notebook cells as one module;
- ``kernels.py``: live facts from the notebooks' running kernels (the kernel bridge);
- ``measured.py``: what ``torchdoctor run`` measured (its reports), merged into diagnostics;
- ``transport.py``: stdin with a bound on the size of a message.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from . import (
    actions,
    commands,
    diagnostics,
    documents,
    hover,
    kernels,
    lifecycle,
    transport,
    workspace,
)
from .settings import ClientSettings
from .state import TorchDoctorServer, logger


def create_server() -> TorchDoctorServer:
    """A server with every handler registered over its state (``server.doctor``)."""
    server = TorchDoctorServer()
    guard = server.doctor.guard

    def feature(
        method: str, handler: Callable[..., Any], default: Any = None, options: Any = None
    ) -> None:
        server.feature(method, options)(guard(handler, default))

    feature(types.INITIALIZE, lifecycle.initialize)
    feature(types.INITIALIZED, lifecycle.initialized)
    feature(types.TEXT_DOCUMENT_DID_OPEN, documents.did_open)
    feature(types.TEXT_DOCUMENT_DID_CHANGE, documents.did_change)
    feature(types.TEXT_DOCUMENT_DID_CLOSE, documents.did_close)
    feature(types.TEXT_DOCUMENT_DID_SAVE, documents.did_save)
    feature(types.NOTEBOOK_DOCUMENT_DID_OPEN, documents.notebook_did_open)
    feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE, documents.notebook_did_change)
    feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE, documents.notebook_did_close)
    feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        diagnostics.diagnostic,
        types.RelatedFullDocumentDiagnosticReport(items=[]),
        diagnostics.OPTIONS,
    )
    feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION, workspace.did_change_configuration)
    feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, workspace.did_change_workspace_folders)
    feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES, workspace.did_change_watched_files)
    feature(types.TEXT_DOCUMENT_CODE_ACTION, actions.code_action, [], actions.OPTIONS)
    feature(types.CODE_ACTION_RESOLVE, actions.code_action_resolve)
    feature(types.SHUTDOWN, lifecycle.shutdown)
    feature(types.TEXT_DOCUMENT_HOVER, hover.hover)
    feature(transport.REJECTED, transport.rejected)
    feature(kernels.KERNEL_STATUS, kernels.kernel_status)
    server.command(commands.CMD_APPLY_FIXES)(guard(commands.apply_fixes, {"applied": False}))
    server.command(commands.CMD_DEBUG_INFO)(guard(commands.debug_info, {}))
    server.command(commands.CMD_OPEN_GUIDE)(guard(commands.open_guide, {"shown": False}))
    return server


# ---- entry point ----------------------------------------------------------------------------
class _QuietCancels(logging.Filter):
    """Drop pygls' warning about ``$/cancelRequest`` for a request already answered: editors
    cancel requests whose answer is on its way all the time, and it is no problem."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Cancel notification for unknown message id")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchdoctor server", description="Run the torchdoctor language server."
    )
    parser.add_argument("--stdio", action="store_true", help="Talk over stdin/stdout (default).")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="Listen on a TCP socket instead.")
    parser.add_argument(
        "--log-level",
        choices=("error", "warning", "info", "debug"),
        default=None,
        help="What the server logs to stderr and to the editor (default: info).",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = args.log_level or "info"
    logging.basicConfig(
        stream=sys.stderr, level=level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("pygls").setLevel(logging.WARNING)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietCancels())
    server = create_server()
    if args.log_level:
        server.doctor.base_settings = ClientSettings(
            log_level=args.log_level, given=frozenset({"log_level"})
        )
        server.doctor.log_level = args.log_level
    from ..linter.registry import all_rules

    try:
        all_rules()  # import every rule once, before the first keystroke
    except Exception as exc:  # a broken rule module: each analysis reports it in the log
        logger.error("cannot load the rules: %r", exc)
    gc.freeze()  # keep the long-lived objects out of every collection
    gc.disable()  # collections run when the server is idle (Doctor.collect_when_idle)
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        try:
            server.start_tcp(host or "127.0.0.1", int(port))
        except ValueError:
            print(f"torchdoctor server: --tcp expects HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        return 0
    bounded = transport.BoundedInput(sys.stdin.buffer, transport.message_limit())
    server.start_io(stdin=bounded)  # type: ignore[arg-type]  # pygls calls readline and read
    # The protocol's exit code: 0 when `exit` followed `shutdown`, 1 otherwise (`exit` alone, or
    # the editor's end of the pipe closed without either).
    return 0 if server.doctor.shut_down else 1
