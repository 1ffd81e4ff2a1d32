"""The server finds a notebook's kernel after the user already ran its cells (a loaded machine,
or a kernel started before the notebook was opened in this editor): the live findings come
from the kernel's facts at that moment, without waiting for another run."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import wait_until
from test_kernel_bridge import Kernel, live, open_cells, start_server, stop_server

pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")
pytest.importorskip("torch")

CELLS = ["import torch\nx = torch.randn(4, 6)", "y = x.t()", "flat = y.view(-1)"]


@pytest.mark.asyncio
async def test_cells_run_before_the_kernel_is_found(tmp_path: Path) -> None:
    notebook = tmp_path / "late.ipynb"
    kernel = Kernel(tmp_path, notebook)
    try:
        kernel.run(CELLS[0])
        kernel.run(CELLS[1])
        client = await start_server(tmp_path)
        try:
            uris = open_cells(client, notebook, CELLS)
            [finding] = await wait_until(lambda: live(client, uris[2]))
            assert finding.code == "TDR901"
        finally:
            await stop_server(client)
    finally:
        kernel.close()


@pytest.mark.asyncio
async def test_kernel_started_and_run_after_the_notebook_opened(tmp_path: Path) -> None:
    notebook = tmp_path / "late.ipynb"
    client = await start_server(tmp_path)
    try:
        uris = open_cells(client, notebook, CELLS)
        await wait_until(lambda: uris[2] in client.diagnostics)
        kernel = Kernel(tmp_path, notebook)
        try:
            kernel.run(CELLS[0])
            kernel.run(CELLS[1])
            [finding] = await wait_until(lambda: live(client, uris[2]))
            assert finding.code == "TDR901"
        finally:
            kernel.close()
    finally:
        await stop_server(client)
