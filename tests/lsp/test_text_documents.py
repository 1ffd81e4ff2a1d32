"""Text documents: push diagnostics with version, codes, links, data; incremental sync;
stale versions dropped; pull diagnostics with real result ids."""

from __future__ import annotations

import pytest
from lsp_helpers import change, codes, fixes_of, initialize, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOAD = 'import torch\nstate = torch.load("x", weights_only=True)\n'


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_open_publishes_tdr602_with_version_and_link(client: LanguageClient) -> None:
    uri = "file:///tmp/td_text/a.py"
    open_doc(client, uri, LOAD, version=3)
    params = await published(client, uri, version=3)
    [d] = [d for d in params.diagnostics if d.code == "TDR602"]
    assert d.source == "torchdoctor"
    assert d.range == types.Range(types.Position(1, 8), types.Position(1, 42))
    assert d.code_description is not None and "TDR602" in d.code_description.href
    assert d.severity == types.DiagnosticSeverity.Warning
    assert d.message.startswith("`torch.load` without `map_location`")
    # Its fix is built when a code action asks, on the version the diagnostic belongs to.
    assert d.data == {"code": "TDR602", "version": 3, "noqaLine": 1, "fixesOnRequest": True}
    [(action, version, edits)] = await fixes_of(client, uri, d)
    assert action.title == 'Add `map_location="cpu"`' and action.is_preferred  # a safe fix
    assert version == 3
    assert edits == [
        types.TextEdit(
            types.Range(types.Position(1, 41), types.Position(1, 41)), ', map_location="cpu"'
        )
    ]


async def test_columns_are_utf16(client: LanguageClient) -> None:
    uri = "file:///tmp/td_text/utf16.py"
    # "𝕩" is one code point but two UTF-16 units; "é" is one of each.
    open_doc(client, uri, 'import torch\ns = "é𝕩"; state = torch.load("x", weights_only=True)\n')
    params = await published(client, uri)
    [d] = [d for d in params.diagnostics if d.code == "TDR602"]
    assert d.range.start == types.Position(1, 19)
    [(_action, _version, [edit])] = await fixes_of(client, uri, d)
    assert edit.range.start == edit.range.end == types.Position(1, 52)


async def test_incremental_edits_update_findings(client: LanguageClient) -> None:
    uri = "file:///tmp/td_text/edit.py"
    open_doc(client, uri, LOAD)
    first = await published(client, uri, version=1)
    assert codes(first.diagnostics) == ["TDR602"]
    # Type the fix by hand: the finding goes away in version 2.
    change(client, uri, 2, (1, 22), (1, 22), ', map_location="cpu"')
    second = await published(client, uri, version=2)
    assert codes(second.diagnostics) == []
    # Add a second load on a new line: found at the right place in version 3.
    change(client, uri, 3, (2, 0), (2, 0), 'other = torch.load("y", weights_only=True)\n')
    third = await published(client, uri, version=3)
    assert [d.range.start.line for d in third.diagnostics if d.code == "TDR602"] == [2]


async def test_burst_of_edits_publishes_only_the_latest_version(client: LanguageClient) -> None:
    uri = "file:///tmp/td_text/burst.py"
    open_doc(client, uri, LOAD)
    await published(client, uri, version=1)
    start = len(client.published)
    for v in range(2, 12):
        change(client, uri, v, (2, 0), (2, 0), "#")
    last = await published(client, uri, version=11, after=start)
    assert codes(last.diagnostics) == ["TDR602"]
    versions = [p.version for p in client.published[start:] if p.uri == uri]
    assert versions == sorted(versions)  # never an older version after a newer one
    assert versions[-1] == 11


async def test_file_without_torch_has_no_findings(client: LanguageClient) -> None:
    uri = "file:///tmp/td_text/plain.py"
    open_doc(client, uri, "import numpy as np\nx = np.load('a.npy')\n")
    params = await published(client, uri)
    assert params.diagnostics == []


async def test_unknown_document_gets_no_actions(client: LanguageClient) -> None:
    # A code action for a document the server never saw, with junk data: no popup, no crash.
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri="file:///tmp/td_text/unknown.py"),
            range=types.Range(types.Position(0, 0), types.Position(0, 0)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert result == []
    uri = "file:///tmp/td_text/after_error.py"
    open_doc(client, uri, LOAD)
    assert codes((await published(client, uri)).diagnostics) == ["TDR602"]
    assert client.messages == []


@lsp_client(scope="module")
async def pull_client(lsp_client: LanguageClient):
    await initialize(lsp_client, pull=True)
    yield
    await lsp_client.shutdown_session()


async def test_pull_diagnostics_with_result_ids(pull_client: LanguageClient) -> None:
    client = pull_client
    uri = "file:///tmp/td_pull/a.py"
    open_doc(client, uri, LOAD)
    ident = types.TextDocumentIdentifier(uri=uri)
    full = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=ident)
    )
    assert isinstance(full, types.RelatedFullDocumentDiagnosticReport)
    assert codes(full.items) == ["TDR602"]
    assert full.result_id
    same = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=ident, previous_result_id=full.result_id)
    )
    assert isinstance(same, types.RelatedUnchangedDocumentDiagnosticReport)
    assert same.result_id == full.result_id
    # Typing below the finding changes nothing: the report says so.
    change(client, uri, 2, (2, 0), (2, 0), "x = 1\n")
    below = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=ident, previous_result_id=full.result_id)
    )
    assert isinstance(below, types.RelatedUnchangedDocumentDiagnosticReport)
    change(client, uri, 3, (1, 22), (1, 22), ', map_location="cpu"')
    fixed = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=ident, previous_result_id=full.result_id)
    )
    assert isinstance(fixed, types.RelatedFullDocumentDiagnosticReport)
    assert fixed.items == []
    assert fixed.result_id != full.result_id
    # Pull clients get no pushed findings.
    assert all(not p.diagnostics for p in client.published if p.uri == uri)


EVAL = (
    "import torch\n"
    "def evaluate(model, val_loader):\n"
    "    model.eval()\n"
    "    correct = 0\n"
    "    for x, y in val_loader:\n"
    "        correct += (model(x).argmax(1) == y).sum().item()\n"
    "    return correct\n"
)


async def test_related_information_and_tags(client: LanguageClient) -> None:
    uri = "file:///tmp/td_text/related.py"
    open_doc(client, uri, EVAL + "scaler = torch.cuda.amp.GradScaler()\n")
    params = await published(client, uri)
    by_code = {d.code: d for d in params.diagnostics}
    related = by_code["TDR105"].related_information
    assert related and related[0].location.uri == uri
    assert related[0].location.range.start.line == 2  # the model.eval() call
    assert by_code["TDR401"].tags == [types.DiagnosticTag.Deprecated]


async def test_handler_exception_is_logged_and_the_server_goes_on(client: LanguageClient) -> None:
    uri = "file:///tmp/td_text/junk.py"
    open_doc(client, uri, LOAD)
    await published(client, uri)
    junk = types.Diagnostic(
        range=types.Range(types.Position(0, 0), types.Position(0, 1)),
        message="junk",
        code="TDR602",
        source="torchdoctor",
        data={"fixes": "not a list", "noqaLine": "nowhere"},
    )
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=junk.range,
            context=types.CodeActionContext(diagnostics=[junk]),
        )
    )
    assert result == []
    errors = [m for m in client.log_messages if m.type == types.MessageType.Error]
    assert any("code_action failed" in m.message for m in errors)
    assert client.messages == []  # logged, never popped up
    change(client, uri, 2, (1, 22), (1, 22), ', map_location="cpu"')
    assert (await published(client, uri, version=2)).diagnostics == []
