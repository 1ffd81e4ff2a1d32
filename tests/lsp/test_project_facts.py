"""One project, not one file: a finding in train.py that rests on a fact of data.py (the
DistributedSampler it builds) says where the fact comes from, and follows data.py as it is
edited in the editor, saved, or changed on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import change, codes, initialize, lsp_client, open_doc, published, wait_until
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio

DATA = (
    "from torch.utils.data import DataLoader, DistributedSampler\n"
    "\n"
    "def build_loader(ds):\n"
    "    sampler = DistributedSampler(ds)\n"
    "    return DataLoader(ds, sampler=sampler), sampler\n"
)
TRAIN = (
    "import torch\n"
    "from data import build_loader\n"
    "\n"
    "loader, sampler = build_loader(None)\n"
    "for epoch in range(3):\n"
    "    for batch in loader:\n"
    "        pass\n"
)


@lsp_client()
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def _project(tmp_path: Path) -> tuple[str, str, str]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "data.py").write_text(DATA)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path.as_uri(), (tmp_path / "train.py").as_uri(), (tmp_path / "data.py").as_uri()


async def test_a_fact_of_another_module_is_used_and_its_origin_named(
    client: LanguageClient, tmp_path: Path
) -> None:
    root, train, _data = _project(tmp_path)
    await initialize(client, root_uri=root)
    open_doc(client, train, TRAIN)
    diagnostics = (await published(client, train)).diagnostics
    assert codes(diagnostics) == ["TDR502"]
    assert diagnostics[0].range.start.line == 4
    assert "created in data.py:4" in diagnostics[0].message
    # The hover of the finding says where the fact comes from, in the client's language too.
    found = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=train),
            position=types.Position(4, 6),
        )
    )
    assert found is not None
    assert isinstance(found.contents, types.MarkupContent)
    assert "`DistributedSampler` created in data.py:4" in found.contents.value


async def test_editing_the_imported_module_updates_the_importer(
    client: LanguageClient, tmp_path: Path
) -> None:
    root, train, data = _project(tmp_path)
    await initialize(client, root_uri=root)
    open_doc(client, train, TRAIN)
    assert codes((await published(client, train)).diagnostics) == ["TDR502"]
    # Typed in data.py (not saved): the sampler no longer shuffles, so there is nothing to seed.
    open_doc(client, data, DATA)
    await published(client, data)
    start = len(client.published)  # type: ignore[attr-defined]
    change(client, data, 2, (3, 35), (3, 35), ", shuffle=False")
    assert codes((await published(client, train, after=start)).diagnostics) == []
    # Closed without saving: the file on disk shuffles again.
    start = len(client.published)  # type: ignore[attr-defined]
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=data))
    )
    assert codes((await published(client, train, after=start)).diagnostics) == ["TDR502"]


async def test_a_change_on_disk_reaches_the_importer_through_watched_files(
    client: LanguageClient, tmp_path: Path
) -> None:
    root, train, data = _project(tmp_path)
    await initialize(client, root_uri=root)
    await wait_until(lambda: client.registrations)
    watchers = [
        r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    ]
    patterns = [w["globPattern"] for w in watchers[0].register_options["watchers"]]
    assert "**/*.py" in patterns
    open_doc(client, train, TRAIN)
    assert codes((await published(client, train)).diagnostics) == ["TDR502"]
    (tmp_path / "data.py").write_text(DATA.replace("(ds)\n", "(ds, shuffle=False)\n", 1))
    start = len(client.published)  # type: ignore[attr-defined]
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=data, type=types.FileChangeType.Changed)]
        )
    )
    assert codes((await published(client, train, after=start)).diagnostics) == []
