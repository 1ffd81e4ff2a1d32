"""Reading ``[tool.torchdoctor]`` from disk happens off the event loop: while a large
``pyproject.toml`` is read for a hover, the server answers other requests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsp_helpers import initialize, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio


@lsp_client()
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_a_slow_configuration_read_does_not_stall_the_server(
    client: LanguageClient, tmp_path: Path
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    # About a second to read and parse.
    padding = ("# " + "x" * 98 + "\n") * 300_000
    pyproject.write_text(f"[tool.torchdoctor]\nunsafe-fixes = false\n{padding}")
    await initialize(client, root_uri=tmp_path.as_uri())
    uri = (tmp_path / "train.py").as_uri()
    open_doc(client, uri, 'import torch\nstate = torch.load("x", weights_only=True)\n')
    await published(client, uri, version=1)
    # Forget what was read: the next request that needs the settings reads the file again.
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)]
        )
    )
    done: list[str] = []

    async def hover() -> None:
        await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(1, 12))
        )
        done.append("hover")

    async def debug_info() -> None:
        await asyncio.sleep(0.05)  # sent after the hover
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="torchdoctor.debugInfo", arguments=[])
        )
        done.append("debugInfo")

    await asyncio.wait_for(asyncio.gather(hover(), debug_info()), 60)
    assert done == ["debugInfo", "hover"]
