"""Edits re-parse only what they touch: after every kind of edit, the diagnostics equal those of
the same text opened afresh."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lsp_helpers import change, initialize, lsp_client, open_doc, published, wait_until
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

SOURCE = '''"""Training helpers."""
import torch
from torch.utils.data import DataLoader


def load(path):
    return torch.load(path)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    return [model(x) for x, _ in loader]


def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


checkpoint = torch.load("model.pt")
'''

OPEN_STRING = "    " + "'" * 3 + "\n"
# (text to replace, replacement), applied one after another at the first occurrence.
EDITS = [
    ("torch.load(path)", 'torch.load(path, map_location="cpu")'),  # inside a function
    ("    return torch.load(path", "    state = torch.load(path)\n    return torch.load(path"),
    ('"""Training helpers."""', 'import os\n"""Training helpers."""'),  # a row at the top
    ("@torch.no_grad()", "def extra():\n    return torch.load('a.pt')\n\n\n@torch.no_grad()"),
    ("@torch.no_grad()\n", ""),  # a decorator removed
    ("    model.eval()\n", "    model.eval()\n  (\n"),  # code that does not parse...
    ("  (\n", ""),  # ...and parses again
    ("\n\ncheckpoint", "\n\nx = 1; y = torch.load('b.pt')\ncheckpoint"),  # two on one row
    ("def load(path):\n", "def load(path):\n" + OPEN_STRING),  # a string left open...
    (OPEN_STRING, ""),  # ...and closed
    ("def extra():\n    return torch.load('a.pt')\n", ""),  # a function deleted
]
BROKEN = ("  (\n", OPEN_STRING)


def locate(text: str, old: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The (row, column) range of the first ``old`` in ``text``."""
    offset = text.index(old)

    def position(at: int) -> tuple[int, int]:
        before = text[:at]
        return before.count("\n"), at - (before.rfind("\n") + 1)

    return position(offset), position(offset + len(old))


def summary(params: Any) -> list[tuple[str, int, int, int, int, str]]:
    return sorted(
        (
            str(d.code),
            d.range.start.line,
            d.range.start.character,
            d.range.end.line,
            d.range.end.character,
            d.message,
        )
        for d in params.diagnostics
    )


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_edits_give_the_findings_of_a_fresh_parse(client: LanguageClient) -> None:
    uri = "file:///tmp/td_incremental/edited.py"
    text = SOURCE
    open_doc(client, uri, text)
    await published(client, uri, version=1)
    checked = 0
    for version, (old, new) in enumerate(EDITS, start=2):
        start, end = locate(text, old)
        text = text.replace(old, new, 1)
        mark = len(client.published)  # type: ignore[attr-defined]
        change(client, uri, version, start, end, new)
        edited = await published(client, uri, version=version, after=mark)
        fresh_uri = f"file:///tmp/td_incremental/fresh{version}.py"
        open_doc(client, fresh_uri, text)
        fresh = await published(client, fresh_uri, version=1)
        if any(piece in text for piece in BROKEN):
            # Code that does not parse keeps the last good findings; a fresh document has none.
            assert summary(fresh) == [] and summary(edited) != []
            continue
        assert summary(edited) == summary(fresh), (version, text)
        assert any(d.code == "TDR602" for d in edited.diagnostics)
        checked += 1
    assert checked == len(EDITS) - 2


BLOCK = """
def evaluate_{i}(model, loader):
    model.eval()
    return [model(x) for x, _ in loader], torch.load("m{i}.pt")
"""


@lsp_client(scope="module")
async def chatty(lsp_client: LanguageClient):
    await initialize(lsp_client, options={"logLevel": "debug"})
    yield
    await lsp_client.shutdown_session()


async def test_a_newer_version_stops_the_check_of_an_older_one(chatty: LanguageClient) -> None:
    """Edits sent faster than a large file can be checked: checks of versions already
    superseded stop early (between rules), and the last version gets its diagnostics."""
    uri = "file:///tmp/td_incremental/large.py"
    text = "import torch\n" + "".join(BLOCK.format(i=i) for i in range(1500))
    open_doc(chatty, uri, text)
    await published(chatty, uri, version=1)
    mark = len(chatty.published)  # type: ignore[attr-defined]
    for version in range(2, 7):
        change(chatty, uri, version, (0, 12), (0, 12), "  #")
        await asyncio.sleep(0.02)  # long enough for a check to start, too short for it to end
    last = await published(chatty, uri, version=6, after=mark)
    assert sum(d.code == "TDR602" for d in last.diagnostics) == 1500
    stopped = [m.message for m in chatty.log_messages if "stopped: superseded" in m.message]
    assert stopped, "no check was stopped"
    versions = [p.version for p in chatty.published[mark:] if p.uri == uri]  # type: ignore[attr-defined]
    assert versions[-1] == 6 and 6 not in [int(m.split("version ")[1].split()[0]) for m in stopped]


async def test_the_cycle_collector_runs_when_the_server_is_idle(chatty: LanguageClient) -> None:
    uri = "file:///tmp/td_incremental/idle.py"
    mark = len(chatty.log_messages)
    open_doc(chatty, uri, SOURCE)
    await published(chatty, uri, version=1)

    def collected() -> list[str]:
        return [
            m.message for m in chatty.log_messages[mark:] if m.message.startswith("cycle collector")
        ]

    await wait_until(collected)
    assert "objects freed" in collected()[0]
