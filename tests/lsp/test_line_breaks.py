"""The server's text is the editor's: only ``\\n``, ``\\r\\n`` and ``\\r`` end a line (not the
other characters ``str.splitlines`` breaks at), a column past a line's end is that line's end,
and a lone surrogate in the text does not lose the findings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lsp_helpers import (
    apply_editor_edits,
    change,
    codes,
    editor_lines,
    initialize,
    lsp_client,
    open_doc,
    open_notebook,
    published,
    utf16_len,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

# What str.splitlines() breaks at and LSP does not.
NOT_BREAKS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


def tdr602_lines(params: types.PublishDiagnosticsParams) -> list[int]:
    return sorted(d.range.start.line for d in params.diagnostics if d.code == "TDR602")


@pytest.mark.parametrize("ch", NOT_BREAKS)
async def test_an_edit_below_a_non_break_lands_on_the_editors_line(
    client: LanguageClient, ch: str
) -> None:
    uri = f"file:///tmp/td_breaks/edit_{ord(ch):x}.py"
    text = f'import torch\ns = "a{ch}b"  # x{ch}y\n\n'
    open_doc(client, uri, text)
    await published(client, uri, version=1)
    change(client, uri, 2, (2, 0), (2, 0), 'state = torch.load("x")')
    params = await published(client, uri, version=2)
    assert tdr602_lines(params) == [2]


@pytest.mark.parametrize("ch", NOT_BREAKS)
async def test_columns_are_counted_on_the_editors_line(client: LanguageClient, ch: str) -> None:
    uri = f"file:///tmp/td_breaks/col_{ord(ch):x}.py"
    text = f'import torch\n# a{ch}é\nstate = torch.load("x")\n'
    open_doc(client, uri, text)
    params = await published(client, uri, version=1)
    [d] = [d for d in params.diagnostics if d.code == "TDR602"]
    line = editor_lines(text)[2]
    assert d.range == types.Range(types.Position(2, 8), types.Position(2, utf16_len(line)))


@pytest.mark.parametrize("ch", ["\x0c", "\u2028", "\x85"])
async def test_fix_all_edits_apply_on_the_editors_lines(client: LanguageClient, ch: str) -> None:
    uri = f"file:///tmp/td_breaks/fix_{ord(ch):x}.py"
    text = f'import torch\n# one{ch}two\na = torch.load("a", weights_only=True)\n# é{ch}x\nb = 1\n'
    open_doc(client, uri, text)
    await published(client, uri, version=1)
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchdoctor.applyFixes", arguments=[uri])
    )
    assert result["applied"]
    [applied] = client.applied_edits[-1:]  # type: ignore[attr-defined]
    [doc_edit] = applied.edit.document_changes
    fixed = apply_editor_edits(text, list(doc_edit.edits))
    assert fixed == text.replace("weights_only=True)", 'weights_only=True, map_location="cpu")')


async def test_a_column_past_the_end_of_the_last_line_is_its_end(client: LanguageClient) -> None:
    uri = "file:///tmp/td_breaks/past_last.py"
    open_doc(client, uri, 'import torch\nx = torch.load("x")')
    await published(client, uri, version=1)
    change(client, uri, 2, (1, 99), (1, 99), '\ny = torch.load("y")')
    params = await published(client, uri, version=2)
    assert tdr602_lines(params) == [1, 2]


async def test_a_column_past_the_end_of_a_line_keeps_its_line_break(
    client: LanguageClient,
) -> None:
    uri = "file:///tmp/td_breaks/past_mid.py"
    text = 'import torch\nx = torch.load("x")\n\n'
    open_doc(client, uri, text)
    await published(client, uri, version=1)
    # One past the end of line 1 (just after its "\n" for pygls): the comment goes on line 1.
    end = len('x = torch.load("x")')
    change(client, uri, 2, (1, end + 1), (1, end + 1), "  # noqa: TDR602")
    params = await published(client, uri, version=2)
    assert tdr602_lines(params) == []


async def test_a_lone_surrogate_keeps_the_findings(client: LanguageClient) -> None:
    uri = "file:///tmp/td_breaks/surrogate.py"
    open_doc(client, uri, 'import torch\nstate = torch.load("x")\n')
    first = await published(client, uri, version=1)
    assert codes(first.diagnostics) == ["TDR602"]
    mark = len(client.log_messages)
    change(client, uri, 2, (1, 0), (1, 0), "# \ud83d\n")
    second = await published(client, uri, version=2)
    assert codes(second.diagnostics) == ["TDR602"]
    assert tdr602_lines(second) == [2]
    change(client, uri, 3, (0, 0), (0, 0), "\ud800")
    third = await published(client, uri, version=3)
    assert codes(third.diagnostics) == ["TDR602"]
    errors = [m for m in client.log_messages[mark:] if m.type == types.MessageType.Error]
    assert errors == []


def cell_edit(
    client: LanguageClient, nb: str, cell: str, version: int, at: tuple[int, int], text: str
) -> None:
    pos = types.Position(*at)
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=version, uri=nb),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(
                                uri=cell, version=version
                            ),
                            changes=[
                                types.TextDocumentContentChangePartial(
                                    range=types.Range(pos, pos), text=text
                                )
                            ],
                        )
                    ]
                )
            ),
        )
    )


async def test_a_lone_surrogate_in_a_cell_keeps_the_findings(client: LanguageClient) -> None:
    nb = "file:///tmp/td_breaks/surrogate.ipynb"
    first, second = f"{nb}#c1", f"{nb}#c2"
    open_notebook(client, nb, [(first, "import torch\n"), (second, 'state = torch.load("x")\n')])
    opened = await published(client, second)
    assert codes(opened.diagnostics) == ["TDR602"]
    mark = len(client.log_messages)
    cell_edit(client, nb, second, 2, (0, 0), "# \ud800\n")
    params = await published(client, second, version=2)
    assert tdr602_lines(params) == [1]
    cell_edit(client, nb, second, 3, (1, 20), "\udc00")  # in a string
    params = await published(client, second, version=3)
    assert codes(params.diagnostics) == ["TDR602"]
    errors = [m for m in client.log_messages[mark:] if m.type == types.MessageType.Error]
    assert errors == []


async def test_cells_with_carriage_return_line_endings(client: LanguageClient) -> None:
    nb = "file:///tmp/td_breaks/cr.ipynb"
    first, second = f"{nb}#c1", f"{nb}#c2"
    open_notebook(
        client,
        nb,
        [
            (first, "import torch\r%matplotlib inline\rx = 1\r"),
            (second, 'y = 2\rs = torch.load("x")\r'),
        ],
    )
    params = await published(client, second)
    [d] = [d for d in params.diagnostics if d.code == "TDR602"]
    assert d.range.start == types.Position(1, 4)


async def test_cli_fix_keeps_carriage_return_rows(tmp_path: Path) -> None:
    """The engine's rows are Python's: a file whose lines end in a lone ``\\r`` is fixed with
    ``\\r`` line endings, and rows inside a multi-line string are not re-indented."""
    script = tmp_path / "train.py"
    rows = [
        "import torch",
        "from torch.utils.data import DataLoader, TensorDataset",
        "dataset = TensorDataset(torch.randn(100, 3))",
        "loader = DataLoader(dataset, num_workers=4)",
        'doc = """a',
        '  b"""',
        "for (batch,) in loader:",
        "    print(batch.shape, doc)",
    ]
    script.write_bytes(("\r".join(rows) + "\r").encode())
    subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--fix", "--unsafe-fixes", str(script)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    fixed = script.read_bytes().decode()
    assert "def main():" in fixed
    assert "\n" not in fixed
    assert '\r  b"""\r' in fixed
