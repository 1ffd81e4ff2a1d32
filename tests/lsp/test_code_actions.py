"""Code actions: quick fixes from diagnostic data, fix-all per rule, source.fixAll (lazy through
codeAction/resolve, or eager for clients without resolve), disable-for-this-line, the guide
command, notebook fix-all, and the applyFixes / debugInfo commands."""

from __future__ import annotations

import pytest
from lsp_helpers import initialize, lsp_client, open_doc, open_notebook, published
from lsprotocol import types
from pytest_lsp import LanguageClient

from torchdoctor.core.fixes import apply_edits
from torchdoctor.core.model import Edit, Pos

pytestmark = pytest.mark.asyncio(loop_scope="module")

TWO_LOADS = 'import torch\na = torch.load("a", weights_only=True)\nb = torch.load("b", weights_only=True)  # noqa: TDR101\n'
CHECKPOINT = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n"


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (ASCII text: columns are the same in every encoding)."""
    return apply_edits(
        text,
        [
            Edit(
                Pos(e.range.start.line + 1, e.range.start.character),
                Pos(e.range.end.line + 1, e.range.end.character),
                e.new_text,
            )
            for e in edits
        ],
    )


def edits_for(edit: types.WorkspaceEdit | None, uri: str) -> list[types.TextEdit]:
    assert edit is not None
    out: list[types.TextEdit] = []
    for change in edit.document_changes or []:
        assert isinstance(change, types.TextDocumentEdit)
        if change.text_document.uri == uri:
            out += [e for e in change.edits if isinstance(e, types.TextEdit)]
    for target, items in (edit.changes or {}).items():
        if target == uri:
            out += list(items)
    return out


async def actions(
    client: LanguageClient,
    uri: str,
    diagnostics: list[types.Diagnostic],
    only: list[str] | None = None,
    line: int = 0,
) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(line, 0), types.Position(line, 0)),
            context=types.CodeActionContext(diagnostics=diagnostics, only=only),
        )
    )
    assert result is not None
    return [a for a in result if isinstance(a, types.CodeAction)]


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_quick_fix_disable_and_guide(client: LanguageClient) -> None:
    uri = "file:///tmp/td_ca/quick.py"
    open_doc(client, uri, TWO_LOADS)
    diags = (await published(client, uri)).diagnostics
    first = next(d for d in diags if d.range.start.line == 1)
    found = await actions(client, uri, [first], line=1)
    titles = [a.title for a in found]

    assert titles == [
        'Add `map_location="cpu"`',
        "Fix all TDR602 in this file",
        "Disable TDR602 for this line",
        "Open the guide for TDR602",
        "torchdoctor: Fix all auto-fixable problems",
    ]
    quick = found[0]
    assert quick.kind == types.CodeActionKind.QuickFix
    assert quick.is_preferred is True
    after = apply_text_edits(TWO_LOADS, edits_for(quick.edit, uri))
    assert 'a = torch.load("a", weights_only=True, map_location="cpu")\n' in after
    disable = found[2]
    assert apply_text_edits(TWO_LOADS, edits_for(disable.edit, uri)).splitlines()[1] == (
        'a = torch.load("a", weights_only=True)  # noqa: TDR602'
    )
    guide = found[3]
    assert guide.command is not None and guide.command.command == "torchdoctor.openGuide"
    shown = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=guide.command.command, arguments=guide.command.arguments)
    )
    assert shown["shown"] is True
    assert "/rules/TDR602/" in client.shown_documents[-1].uri
    assert client.shown_documents[-1].external is True


async def test_disable_extends_an_existing_noqa_list(client: LanguageClient) -> None:
    uri = "file:///tmp/td_ca/noqa.py"
    open_doc(client, uri, TWO_LOADS)
    diags = (await published(client, uri)).diagnostics
    second = next(d for d in diags if d.range.start.line == 2)
    found = await actions(client, uri, [second], line=2)
    disable = next(a for a in found if a.title.startswith("Disable"))
    line = apply_text_edits(TWO_LOADS, edits_for(disable.edit, uri)).splitlines()[2]
    assert line == 'b = torch.load("b", weights_only=True)  # noqa: TDR101, TDR602'


async def test_fix_all_of_one_rule_resolves_lazily(client: LanguageClient) -> None:
    uri = "file:///tmp/td_ca/rule.py"
    open_doc(client, uri, TWO_LOADS)
    diags = (await published(client, uri)).diagnostics
    found = await actions(client, uri, [diags[0]], line=1)
    rule_fix = next(a for a in found if a.title == "Fix all TDR602 in this file")
    assert rule_fix.edit is None and rule_fix.data  # computed on resolve
    resolved = await client.code_action_resolve_async(rule_fix)
    after = apply_text_edits(TWO_LOADS, edits_for(resolved.edit, uri))
    assert after.count('map_location="cpu"') == 2


async def test_fix_all_offered_where_no_finding_is(client: LanguageClient) -> None:
    # The lightbulb's request for a row without a finding: no fix is built for it, and fix-all is
    # offered (the rule offers fixes); resolved, it has the edits of both loads.
    uri = "file:///tmp/td_ca/elsewhere.py"
    open_doc(client, uri, TWO_LOADS)
    diags = (await published(client, uri)).diagnostics
    assert all(d.data["fixesOnRequest"] for d in diags)
    found = await actions(client, uri, [], line=0)
    assert [a.title for a in found] == ["torchdoctor: Fix all auto-fixable problems"]
    resolved = await client.code_action_resolve_async(found[0])
    assert apply_text_edits(TWO_LOADS, edits_for(resolved.edit, uri)).count("map_location") == 2


async def test_source_fix_all_on_request(client: LanguageClient) -> None:
    uri = "file:///tmp/td_ca/source.py"
    text = TWO_LOADS + CHECKPOINT
    open_doc(client, uri, text)
    await published(client, uri)
    found = await actions(client, uri, [], only=["source.fixAll"])
    assert [a.kind for a in found] == ["source.fixAll.torchdoctor"]
    resolved = await client.code_action_resolve_async(found[0])
    after = apply_text_edits(text, edits_for(resolved.edit, uri))
    assert after.count('map_location="cpu"') == 2
    # The checkpoint fix is unsafe: not applied by fix-all unless unsafeFixes is on.
    assert "use_reentrant" not in after


async def test_unsafe_fix_says_so_and_is_not_preferred(client: LanguageClient) -> None:
    uri = "file:///tmp/td_ca/unsafe.py"
    open_doc(client, uri, CHECKPOINT)
    diags = (await published(client, uri)).diagnostics
    [d] = [d for d in diags if d.code == "TDR405"]
    found = await actions(client, uri, [d], line=1)
    fix = found[0]
    assert fix.title.endswith("(unsafe)")
    assert not fix.is_preferred
    assert "use_reentrant=False" in apply_text_edits(CHECKPOINT, edits_for(fix.edit, uri))


async def test_apply_fixes_command_and_debug_info(client: LanguageClient) -> None:
    uri = "file:///tmp/td_ca/command.py"
    open_doc(client, uri, TWO_LOADS)
    await published(client, uri)
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchdoctor.applyFixes", arguments=[uri])
    )
    assert result == {"applied": True, "fixed": {"TDR602": 2}}
    sent = client.applied_edits[-1].edit
    assert apply_text_edits(TWO_LOADS, edits_for(sent, uri)).count('map_location="cpu"') == 2
    info = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchdoctor.debugInfo", arguments=[uri])
    )
    assert info["torchdoctor"]
    assert info["pygls"].startswith("2.1")
    assert "torch" in info  # the installed version, read without importing torch
    assert info["torchImported"] is False
    assert "TDR602" in info["document"]["enabled"]


async def test_notebook_fix_all(client: LanguageClient) -> None:
    nb = "file:///tmp/td_ca/fix.ipynb"
    a = "vscode-notebook-cell:/tmp/td_ca/fix.ipynb#A%3D%3D"
    b = "vscode-notebook-cell:/tmp/td_ca/fix.ipynb#B%3D%3D"
    cells = {
        a: "import torch",
        b: 'x = torch.load("a", weights_only=True)\ny = torch.load("b", weights_only=True)',
    }
    open_notebook(client, nb, list(cells.items()))
    diags = (await published(client, b)).diagnostics
    # Quick fix and noqa on a cell: edits name the cell.
    cell_actions = await actions(client, b, [diags[1]], line=1)
    quick, disable = cell_actions[0], next(a for a in cell_actions if a.title.startswith("Disable"))
    assert apply_text_edits(cells[b], edits_for(quick.edit, b)).splitlines()[1] == (
        'y = torch.load("b", weights_only=True, map_location="cpu")'
    )
    assert apply_text_edits(cells[b], edits_for(disable.edit, b)).splitlines()[1] == (
        'y = torch.load("b", weights_only=True)  # noqa: TDR602'
    )
    found = await actions(client, b, [], only=["notebook.source.fixAll"])
    assert [a.kind for a in found] == ["notebook.source.fixAll.torchdoctor"]
    resolved = await client.code_action_resolve_async(found[0])
    assert edits_for(resolved.edit, a) == []
    after = apply_text_edits(cells[b], edits_for(resolved.edit, b))
    assert (
        after
        == 'x = torch.load("a", weights_only=True, map_location="cpu")\ny = torch.load("b", weights_only=True, map_location="cpu")'
    )


@lsp_client(scope="module")
async def eager_client(lsp_client: LanguageClient):
    await initialize(lsp_client, resolve=False, options={"unsafeFixes": True})
    yield
    await lsp_client.shutdown_session()


async def test_without_resolve_support_edits_come_at_once(eager_client: LanguageClient) -> None:
    client = eager_client
    uri = "file:///tmp/td_ca/eager.py"
    text = TWO_LOADS + CHECKPOINT
    open_doc(client, uri, text)
    await published(client, uri)
    found = await actions(client, uri, [], only=["source.fixAll.torchdoctor"])
    assert found[0].edit is not None
    after = apply_text_edits(text, edits_for(found[0].edit, uri))
    # unsafeFixes is on for this client: the checkpoint fix is applied too.
    assert "use_reentrant=False" in after
    assert after.count('map_location="cpu"') == 2


# jupyterlab-lsp sends a notebook's code cells joined into one Python text document under the
# notebook's own path.
JOINED = (
    "%matplotlib inline\n"
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "\n"
    "\n"
    'state = torch.load("m.pt", weights_only=True)\n'
    "loader = DataLoader(dataset, batch_size=8, num_workers=2)\n"
    "for batch in loader:\n"
    "    pass\n"
)


async def test_notebook_as_one_text_document(client: LanguageClient) -> None:
    uri = "file:///tmp/td_ca/joined.ipynb"
    open_doc(client, uri, JOINED)
    diags = (await published(client, uri)).diagnostics
    # Checked as a notebook: the magic does not break the parse, and TDR301 (a DataLoader with
    # workers outside a __main__ guard) is for scripts only.
    assert [(d.code, d.range.start.line) for d in diags] == [("TDR602", 5)]
    found = await actions(client, uri, [], only=["source.fixAll"])
    resolved = await client.code_action_resolve_async(found[0])
    after = apply_text_edits(JOINED, edits_for(resolved.edit, uri))
    assert after == JOINED.replace(
        "weights_only=True)\n", 'weights_only=True, map_location="cpu")\n'
    )
