"""Code actions after a whole-document change that the analysis has not caught up with yet:
their edits are those of the text the editor holds, stamped with the version they were
computed on."""

from __future__ import annotations

import pytest
from lsp_helpers import apply_editor_edits, initialize, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOAD = 'import torch\nstate = torch.load("x", weights_only=True)\n'
FIXED = 'state = torch.load("x", weights_only=True, map_location="cpu")'


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    # A long debounce: the re-analysis of the new text comes long after the requests below.
    await initialize(lsp_client, options={"debounceMs": 3000})
    yield
    await lsp_client.shutdown_session()


def replace_all(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def quick_actions(
    client: LanguageClient, uri: str, diagnostic: types.Diagnostic
) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic], only=["quickfix"]),
        )
    )
    return [a for a in result or [] if isinstance(a, types.CodeAction) and a.edit is not None]


def versioned_edits(action: types.CodeAction) -> list[tuple[int | None, list[types.TextEdit]]]:
    assert action.edit is not None
    out = []
    for change in action.edit.document_changes or []:
        assert isinstance(change, types.TextDocumentEdit)
        out.append(
            (
                change.text_document.version,
                [e for e in change.edits if isinstance(e, types.TextEdit)],
            )
        )
    return out


async def test_quick_fixes_after_a_whole_document_change(client: LanguageClient) -> None:
    uri = "file:///tmp/td_stale/a.py"
    open_doc(client, uri, LOAD)
    [old] = (await published(client, uri, version=1)).diagnostics
    assert old.range.start.line == 1
    new_text = "# a new first line\n" + LOAD
    replace_all(client, uri, 2, new_text)
    # The editor moved its marker with the text; and one that did not.
    moved = types.Diagnostic(
        range=types.Range(
            types.Position(2, old.range.start.character), types.Position(2, old.range.end.character)
        ),
        message=old.message,
        code=old.code,
        source=old.source,
        data=old.data,
    )
    titles = {}
    for diagnostic in (moved, old):
        found = await quick_actions(client, uri, diagnostic)
        titles[diagnostic.range.start.line] = [a.title for a in found]
        for action in found:
            for version, edits in versioned_edits(action):
                after = apply_editor_edits(new_text, edits)
                # Applied to the text of the version it names, an edit gives sound code.
                assert version == 2, action.title
                compile(after, "a.py", "exec")
                if action.title.startswith("Add"):
                    assert after.splitlines()[2] == FIXED
                else:
                    assert action.title.startswith("Disable")
                    assert after.splitlines()[2].endswith("# noqa: TDR602")
    # The moved marker gets its fix, at its new place.
    assert 'Add `map_location="cpu"`' in titles[2]
