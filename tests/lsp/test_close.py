"""Closing a document clears its findings (the client would otherwise keep stale ones)."""

from __future__ import annotations

import asyncio

import pytest
from lsp_helpers import codes, initialize, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client, options={"debounceMs": 300})
    yield
    await lsp_client.shutdown_session()


def close(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri))
    )


async def test_close_publishes_empty_list(client: LanguageClient) -> None:
    uri = "file:///tmp/td_close/a.py"
    open_doc(client, uri, 'import torch\nstate = torch.load("x", weights_only=True)\n')
    assert codes((await published(client, uri)).diagnostics) == ["TDR602"]
    start = len(client.published)
    close(client, uri)
    assert (await published(client, uri, after=start)).diagnostics == []


async def test_close_cancels_pending_analysis(client: LanguageClient) -> None:
    uri = "file:///tmp/td_close/b.py"
    open_doc(client, uri, "import torch\n")
    await published(client, uri, version=1)
    start = len(client.published)
    # An edit that would add a finding after the 300 ms debounce, then close at once.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(1, 0), types.Position(1, 0)),
                    text='s = torch.load("x", weights_only=True)\n',
                )
            ],
        )
    )
    close(client, uri)
    assert (await published(client, uri, after=start)).diagnostics == []
    # Open and edit another document past the 300 ms debounce: the closed one stays clear.
    other = "file:///tmp/td_close/c.py"
    open_doc(client, other, "import torch\n")
    await published(client, other, version=1)
    await asyncio.sleep(0.4)
    open_doc(
        client, other.replace("c.py", "d.py"), 'import torch\ntorch.load("x", weights_only=True)\n'
    )
    await published(client, other.replace("c.py", "d.py"))
    assert [p.diagnostics for p in client.published[start:] if p.uri == uri] == [[]]
