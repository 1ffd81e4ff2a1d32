"""While a document does not parse, the last good findings stay, moved with the edits."""

from __future__ import annotations

import pytest
from lsp_helpers import change, fixes_of, initialize, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = 'import torch\n\nstate = torch.load("x", weights_only=True)\n'


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


def starts(params: types.PublishDiagnosticsParams) -> list[tuple[str, int, int]]:
    return [(str(d.code), d.range.start.line, d.range.start.character) for d in params.diagnostics]


async def test_findings_survive_a_syntax_error_and_move_with_edits(client: LanguageClient) -> None:
    uri = "file:///tmp/td_broken/a.py"
    open_doc(client, uri, TEXT)
    assert starts(await published(client, uri, version=1)) == [("TDR602", 2, 8)]
    # Start typing a statement on the blank line: `def f(` does not parse.
    change(client, uri, 2, (1, 0), (1, 0), "def f(")
    assert starts(await published(client, uri, version=2)) == [("TDR602", 2, 8)]
    # Insert two lines above and indent the load: the finding moves with the text.
    change(client, uri, 3, (0, 0), (0, 0), "# a\n# b\n")
    change(client, uri, 4, (4, 0), (4, 0), "    ")
    moved = await published(client, uri, version=4)
    assert starts(moved) == [("TDR602", 4, 12)]
    [d] = moved.diagnostics
    assert d.range.end == types.Position(4, 46)
    # Its fix (built now, on the last text that parsed) moves too, and names the version it
    # belongs to.
    assert d.data["version"] == 4
    [(_action, version, [edit])] = await fixes_of(client, uri, d)
    assert edit.range.start == edit.range.end == types.Position(4, 45)
    assert version == 4
    # An edit that cuts across the finding drops it (it no longer means what it did).
    change(client, uri, 5, (4, 4), (4, 14), "")
    assert starts(await published(client, uri, version=5)) == []


async def test_fixed_syntax_brings_fresh_findings(client: LanguageClient) -> None:
    uri = "file:///tmp/td_broken/b.py"
    open_doc(client, uri, TEXT)
    await published(client, uri, version=1)
    change(client, uri, 2, (1, 0), (1, 0), "x = (")
    assert starts(await published(client, uri, version=2)) == [("TDR602", 2, 8)]
    change(client, uri, 3, (1, 5), (1, 5), ")")
    assert starts(await published(client, uri, version=3)) == [("TDR602", 2, 8)]
    change(client, uri, 4, (2, 22), (2, 22), ', map_location="cpu"')
    assert starts(await published(client, uri, version=4)) == []


async def test_broken_from_the_start_shows_nothing(client: LanguageClient) -> None:
    uri = "file:///tmp/td_broken/c.py"
    open_doc(client, uri, 'import torch\nstate = torch.load("x"\n')
    assert (await published(client, uri, version=1)).diagnostics == []
