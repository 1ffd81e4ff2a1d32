"""Notebooks (LSP 3.17 notebook sync): facts flow across cells, findings are published per cell
with the client's own cell URIs, and cell insertions, deletions and moves are followed."""

from __future__ import annotations

import pytest
from lsp_helpers import codes, initialize, lsp_client, open_notebook, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

NB = "file:///tmp/td_nb/train.ipynb"


def cell_uri(frag: str) -> str:
    # VS Code spells cell URIs with an escaped fragment: publish must keep this spelling.
    return f"vscode-notebook-cell:/tmp/td_nb/train.ipynb#{frag}%3D%3D"


def notebook_change(
    client: LanguageClient, uri: str, version: int, cells: types.NotebookDocumentCellChanges
) -> None:
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=version, uri=uri),
            change=types.NotebookDocumentChangeEvent(cells=cells),
        )
    )


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_import_in_one_cell_finding_in_another(client: LanguageClient) -> None:
    a, b, c = cell_uri("W0sZmlsZQ"), cell_uri("W1sZmlsZQ"), cell_uri("W2sZmlsZQ")
    open_notebook(
        client,
        NB,
        [
            (a, "%matplotlib inline\nimport torch as T"),
            (b, "x = 1"),
            (c, 'sd = T.load("m.pt", weights_only=True)'),
        ],
    )
    found = await published(client, c)
    [d] = found.diagnostics
    assert d.code == "TDR602"
    assert d.range == types.Range(types.Position(0, 5), types.Position(0, 38))
    assert d.data["fixes"][0]["edits"] == [
        {"range": [0, 37, 0, 37], "newText": ', map_location="cpu"'}
    ]
    # The other cells are published too (empty), each under the client's spelling.
    assert (await published(client, a)).diagnostics == []
    assert (await published(client, b)).diagnostics == []


async def test_cell_insert_edit_move_and_delete(client: LanguageClient) -> None:
    nb = "file:///tmp/td_nb/moves.ipynb"
    a = "vscode-notebook-cell:/tmp/td_nb/moves.ipynb#A%3D%3D"
    b = "vscode-notebook-cell:/tmp/td_nb/moves.ipynb#B%3D%3D"
    new = "vscode-notebook-cell:/tmp/td_nb/moves.ipynb#N%3D%3D"
    open_notebook(client, nb, [(a, "import torch"), (b, "y = 2\nz = 3")])
    assert (await published(client, b)).diagnostics == []

    # Insert a cell at the end that loads a checkpoint.
    start = len(client.published)
    notebook_change(
        client,
        nb,
        2,
        types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(
                    start=2,
                    delete_count=0,
                    cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=new)],
                ),
                did_open=[
                    types.TextDocumentItem(
                        uri=new,
                        language_id="python",
                        version=1,
                        text='m = torch.load("x", weights_only=True)',
                    )
                ],
            )
        ),
    )
    assert codes((await published(client, new, after=start)).diagnostics) == ["TDR602"]

    # Move the new cell to the top (cells run in any order in a notebook, so the import still
    # counts): the finding stays with its cell, at the same place inside it.
    start = len(client.published)
    notebook_change(
        client,
        nb,
        3,
        types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(
                    start=0,
                    delete_count=3,
                    cells=[
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=new),
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=a),
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=b),
                    ],
                ),
            )
        ),
    )
    top = await published(client, new, after=start)
    assert [(d.code, d.range.start.line, d.range.start.character) for d in top.diagnostics] == [
        ("TDR602", 0, 4)
    ]
    assert (await published(client, b, after=start)).diagnostics == []

    # Move it back after the import, then edit its text: the finding follows the edit.
    start = len(client.published)
    notebook_change(
        client,
        nb,
        4,
        types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(
                    start=0,
                    delete_count=3,
                    cells=[
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=a),
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=new),
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=b),
                    ],
                ),
            ),
            text_content=[
                types.NotebookDocumentCellContentChanges(
                    document=types.VersionedTextDocumentIdentifier(uri=new, version=2),
                    changes=[
                        types.TextDocumentContentChangePartial(
                            range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                            text="\n\n",
                        )
                    ],
                )
            ],
        ),
    )
    moved = await published(client, new, version=2, after=start)
    assert [d.range.start.line for d in moved.diagnostics] == [2]

    # Delete the cell: its findings are cleared.
    start = len(client.published)
    notebook_change(
        client,
        nb,
        5,
        types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=1, delete_count=1),
                did_close=[types.TextDocumentIdentifier(uri=new)],
            )
        ),
    )
    assert (await published(client, new, after=start)).diagnostics == []


async def test_markdown_cells_are_skipped(client: LanguageClient) -> None:
    nb = "file:///tmp/td_nb/md.ipynb"
    md = "vscode-notebook-cell:/tmp/td_nb/md.ipynb#M%3D%3D"
    code = "vscode-notebook-cell:/tmp/td_nb/md.ipynb#C%3D%3D"
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=nb,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(kind=types.NotebookCellKind.Markup, document=md),
                    types.NotebookCell(kind=types.NotebookCellKind.Code, document=code),
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(
                    uri=md, language_id="markdown", version=1, text="# torch.load(x) is bad"
                ),
                types.TextDocumentItem(
                    uri=code,
                    language_id="python",
                    version=1,
                    text='import torch\ntorch.load("a", weights_only=True)',
                ),
            ],
        )
    )
    assert codes((await published(client, code)).diagnostics) == ["TDR602"]
    assert all(p.uri != md or not p.diagnostics for p in client.published)


async def test_notebook_close_clears_every_cell(client: LanguageClient) -> None:
    nb = "file:///tmp/td_nb/close.ipynb"
    a = "vscode-notebook-cell:/tmp/td_nb/close.ipynb#A%3D%3D"
    open_notebook(client, nb, [(a, 'import torch\ntorch.load("a", weights_only=True)')])
    assert codes((await published(client, a)).diagnostics) == ["TDR602"]
    start = len(client.published)
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=nb),
            cell_text_documents=[types.TextDocumentIdentifier(uri=a)],
        )
    )
    assert (await published(client, a, after=start)).diagnostics == []


@lsp_client(scope="module")
async def pull_client(lsp_client: LanguageClient):
    await initialize(lsp_client, pull=True)
    yield
    await lsp_client.shutdown_session()


async def test_cells_answer_pull_requests(pull_client: LanguageClient) -> None:
    nb = "file:///tmp/td_nb/pull.ipynb"
    a = "vscode-notebook-cell:/tmp/td_nb/pull.ipynb#A%3D%3D"
    b = "vscode-notebook-cell:/tmp/td_nb/pull.ipynb#B%3D%3D"
    open_notebook(
        pull_client, nb, [(a, "import torch"), (b, 'torch.load("m.pt", weights_only=True)')]
    )
    reports = {}
    for cell in (a, b):
        reports[cell] = await pull_client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=cell))
        )
    assert isinstance(reports[b], types.RelatedFullDocumentDiagnosticReport)
    assert codes(reports[b].items) == ["TDR602"]
    assert isinstance(reports[a], types.RelatedFullDocumentDiagnosticReport)
    assert reports[a].items == []
