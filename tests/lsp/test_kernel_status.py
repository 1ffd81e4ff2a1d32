"""Live findings follow the kernel's state as the editor reports it (``torchdoctor/kernelStatus``,
which the JupyterLab extension sends): after a restart a tensor of the old namespace underlines
nothing, and after a shutdown no live finding is left. A real ipykernel, LSP over stdio."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import wait_until
from pytest_lsp import LanguageClient
from test_kernel_bridge import (
    CELLS,
    SETUP,
    Kernel,
    live,
    open_cells,
    start_server,
    stop_server,
    until_attached,
)

pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")
pytest.importorskip("torch")


def kernel_status(client: LanguageClient, notebook: Path, status: str) -> None:
    client.protocol.notify(
        "torchdoctor/kernelStatus", {"notebook": {"uri": notebook.as_uri()}, "status": status}
    )


@pytest.mark.asyncio
async def test_live_findings_follow_restarts_and_shutdowns(tmp_path: Path) -> None:
    notebook = tmp_path / "restart.ipynb"
    kernel = Kernel(tmp_path, notebook)
    client = await start_server(tmp_path, kernelConnectionFile=kernel.connection_file)
    try:
        _setup, use = open_cells(client, notebook, CELLS)
        await until_attached(client)
        kernel.run(SETUP)
        [finding] = await wait_until(lambda: live(client, use))
        assert finding.code == "TDR901"

        # The user restarts the kernel: `b` is gone, so is its finding (no cell runs).
        kernel.km.restart_kernel(now=True)
        kernel_status(client, notebook, "restarting")
        await wait_until(lambda: not live(client, use))
        kernel.user.wait_for_ready(timeout=60)
        kernel_status(client, notebook, "ready")

        # The new namespace is read: running the first cell again brings the finding back.
        kernel.run(SETUP)
        [again] = await wait_until(lambda: live(client, use))
        assert again.code == "TDR901" and "In [1]" in again.message

        # Shut down: no live finding is left.
        kernel.close()
        kernel_status(client, notebook, "dead")
        await wait_until(lambda: not live(client, use))
        assert [d.code for d in client.diagnostics[use]] == ["TDR101"]
    finally:
        await stop_server(client)
        if kernel.km.is_alive():
            kernel.close()
