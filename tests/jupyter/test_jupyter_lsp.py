"""torchdoctor inside a real Jupyter server through jupyter-lsp, found by its entry point alone.

A ``jupyter server`` subprocess runs with empty, isolated Jupyter directories (so no
``jupyter_server_config.json`` names torchdoctor); the test reads ``/lsp/status`` and then speaks
LSP through ``/lsp/ws/torchdoctor`` the way jupyterlab-lsp does: one bare JSON-RPC message per
websocket frame.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_helpers import JupyterServer, lint_over_websocket, running_jupyter


@pytest.fixture
def jupyter_server(tmp_path: Path) -> Iterator[JupyterServer]:
    with running_jupyter(tmp_path) as server:
        yield server


def test_jupyter_lsp_finds_torchdoctor_by_entry_point(jupyter_server: JupyterServer) -> None:
    status = jupyter_server.get_json("/lsp/status")
    assert "torchdoctor" in status["sessions"], status
    spec = status["sessions"]["torchdoctor"]["spec"]
    # jupyter-lsp hides argv and env in its status; the rest of the spec is reported as given.
    assert spec["display_name"] == "torchdoctor"
    assert spec["languages"] == ["python"]
    assert spec["requires_documents_on_disk"] is False
    assert "text/x-ipython" in spec["mime_types"]
    # No configuration file names the server: the user config directory holds none at all.
    configs = [p for p in jupyter_server.config_dir.rglob("*") if p.suffix in (".json", ".py")]
    assert configs == []

    asyncio.run(_lint_through_websocket(jupyter_server))


async def _lint_through_websocket(server: JupyterServer) -> None:
    diagnostics = await lint_over_websocket(server, "/lsp/ws/torchdoctor")
    found = next(d for d in diagnostics if d["code"] == "TDR602")
    assert found["range"]["start"]["line"] == 1
    assert "map_location" in found["message"]
