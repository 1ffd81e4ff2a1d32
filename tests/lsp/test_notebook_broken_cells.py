"""A notebook cell that does not parse (an exercise left blank) does not hide the findings of the
other cells in the language server, and a later fix of that cell is picked up."""

from __future__ import annotations

import pytest
from lsp_helpers import codes, initialize, lsp_client, open_notebook, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

NB = "file:///tmp/td_nb_broken/exercise.ipynb"


def cell_uri(n: int) -> str:
    return f"vscode-notebook-cell:/tmp/td_nb_broken/exercise.ipynb#W{n}sZmlsZQ%3D%3D"


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_a_cell_that_does_not_parse_leaves_the_others_checked(client: LanguageClient) -> None:
    a, b, c = cell_uri(0), cell_uri(1), cell_uri(2)
    open_notebook(
        client,
        NB,
        [
            (a, "import torch"),
            (b, "lr = \n"),  # the exercise's blank
            (c, "state = torch.load('w.pt', weights_only=True)"),
        ],
    )
    assert codes((await published(client, c)).diagnostics) == ["TDR602"]
    assert (await published(client, b)).diagnostics == []
    # The user fills the blank with code that has a finding of its own: it shows up, and the
    # other cell's finding stays.
    before = len(client.published)  # type: ignore[attr-defined]
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=2, uri=NB),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=b, version=2),
                            changes=[
                                types.TextDocumentContentChangeWholeDocument(
                                    text="lr = 0.1\nsd = torch.load('s.pt', weights_only=True)\n"
                                )
                            ],
                        )
                    ]
                )
            ),
        )
    )
    assert codes((await published(client, b, after=before)).diagnostics) == ["TDR602"]
    # (a cell whose findings did not change is not published again: the client keeps them)
    assert codes(client.diagnostics[c]) == ["TDR602"]
