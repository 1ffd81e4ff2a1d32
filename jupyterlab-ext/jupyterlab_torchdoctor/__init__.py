"""torchdoctor in JupyterLab: the prebuilt frontend extension (``labextension/``) and a
server extension that runs ``torchdoctor server`` and relays its LSP messages over a
websocket (``/torchdoctor/lsp``), one language server per browser connection."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyterlab-torchdoctor"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "jupyterlab_torchdoctor"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    from .handlers import setup_handlers

    setup_handlers(server_app)
