"""Where a text document's fixes are: built when a code action asks (editors), or in the
diagnostics' data for torchdoctor's JupyterLab extension, which shows them from there."""

from __future__ import annotations

import pytest
from lsp_helpers import capabilities, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOAD = 'import torch\nstate = torch.load("x", weights_only=True)\n'


@lsp_client(scope="module")
async def jupyterlab(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities(),
            client_info=types.ClientInfo(name="jupyterlab-torchdoctor", version="0.1.0"),
            initialization_options={"debounceMs": 0},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_the_jupyterlab_extension_gets_fixes_in_data(jupyterlab: LanguageClient) -> None:
    uri = "file:///tmp/td_fixes_in_data/a.py"
    open_doc(jupyterlab, uri, LOAD)
    [d] = (await published(jupyterlab, uri)).diagnostics
    assert "fixesOnRequest" not in d.data
    [fix] = d.data["fixes"]
    assert fix["applicability"] == "safe"
    assert fix["edits"] == [{"range": [1, 41, 1, 41], "newText": ', map_location="cpu"'}]
