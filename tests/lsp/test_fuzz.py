"""A bounded, seeded fuzz of text sync: bursts of random incremental edits (line breaks LSP does
not count as such, emoji, CRLF and lone CR, columns past a line's end). After each burst the
published findings are those of a fresh analysis of the editor's text, and every range (of a
finding and of its fixes) lies inside the document."""

from __future__ import annotations

import ast
import random

import pytest
from lsp_helpers import (
    apply_editor_edits,
    editor_lines,
    initialize,
    lsp_client,
    open_doc,
    published,
    utf16_len,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

from torchdoctor.core.config import Settings
from torchdoctor.linter.runner import check_text

pytestmark = pytest.mark.asyncio(loop_scope="module")

START = (
    "import torch\r\n"
    "# 😀 checkpoints\n"
    'state = torch.load("a.pt")\n'
    "\n"
    "def load(path):\r\n"
    '    s = "é😀"\n'
    "    return torch.load(path)\n"
)
ODD = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "😀", "é"]
EOLS = ["\n", "\r\n", "\r"]
BURSTS = 8
EDITS_PER_BURST = 6


@lsp_client(scope="module")
async def client(lsp_client: LanguageClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


def random_edit(rng: random.Random, text: str) -> types.TextEdit:
    lines = editor_lines(text)
    line = rng.randrange(len(lines))
    end_col = utf16_len(lines[line])
    kind = rng.randrange(5)
    if kind == 0:  # a comment of odd characters at (or past) the end of a line
        pos = types.Position(line, end_col + rng.choice([0, 0, 1, 5]))
        comment = "  # " + "".join(rng.choice(ODD) for _ in range(rng.randint(1, 4)))
        return types.TextEdit(types.Range(pos, pos), comment)
    if kind == 1:  # a new statement before a line, with any line ending
        pos = types.Position(line, 0)
        new = f'x{rng.randrange(100)} = torch.load("p")  # {rng.choice(ODD)}{rng.choice(EOLS)}'
        return types.TextEdit(types.Range(pos, pos), new)
    if kind == 2 and line + 1 < len(lines):  # a whole line deleted
        return types.TextEdit(types.Range(types.Position(line, 0), types.Position(line + 1, 0)), "")
    if kind == 3:  # a line ending swapped for another
        pos = types.Position(line, end_col)
        nxt = types.Position(line + 1, 0) if line + 1 < len(lines) else pos
        return types.TextEdit(types.Range(pos, nxt), rng.choice(EOLS))
    # A few characters typed somewhere (outside a surrogate pair: editors keep pairs whole).
    body = lines[line]
    col = rng.randint(0, len(body))
    start = types.Position(line, utf16_len(body[:col]))
    end = types.Position(line, utf16_len(body[: min(len(body), col + rng.randint(0, 2))]))
    return types.TextEdit(types.Range(start, end), rng.choice([*ODD, " ", "(", "1"]))


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def position_at(text: str, offset: int) -> types.Position:
    lines = editor_lines(text[:offset])
    return types.Position(len(lines) - 1, utf16_len(lines[-1]))


def next_edit(rng: random.Random, text: str) -> types.TextEdit:
    """A random edit; mostly one after which the code still parses, sometimes one that breaks
    it (undone at the end of the burst, most of the time)."""
    for _ in range(20):
        edit = random_edit(rng, text)
        if rng.random() < 0.2 or parses(apply_editor_edits(text, [edit])):
            return edit
    return edit


def expected(text: str) -> list[tuple[str, int, int, int, int]] | None:
    """The findings of a fresh analysis in the editor's positions (None: it does not parse)."""
    if not parses(text):
        return None
    result = check_text(text, "/tmp/td_fuzz/expected.py", Settings())
    lines = editor_lines(text)

    def col(row: int, c: int) -> int:
        return utf16_len(lines[row - 1][:c])

    return sorted(
        (
            f.code,
            f.range.start.row - 1,
            col(f.range.start.row, f.range.start.col),
            f.range.end.row - 1,
            col(f.range.end.row, f.range.end.col),
        )
        for f in result.findings
    )


def assert_inside(text: str, rng: types.Range | list[int], what: str) -> None:
    lines = editor_lines(text)
    points = (
        [(rng.start.line, rng.start.character), (rng.end.line, rng.end.character)]
        if isinstance(rng, types.Range)
        else [(rng[0], rng[1]), (rng[2], rng[3])]
    )
    for line, char in points:
        assert 0 <= line < len(lines), (what, line, len(lines))
        assert 0 <= char <= utf16_len(lines[line]), (what, line, char, lines[line])


def send(client: LanguageClient, uri: str, version: int, edit: types.TextEdit) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)
            ],
        )
    )


@pytest.mark.parametrize("seed", range(1, 7))
async def test_random_edits_keep_the_servers_text_the_editors(
    client: LanguageClient, seed: int
) -> None:
    rng = random.Random(seed)
    uri = f"file:///tmp/td_fuzz/seed{seed}.py"
    text, version = START, 1
    open_doc(client, uri, text)
    await published(client, uri, version=1)
    compared = 0
    good = text  # the last text that parsed
    for burst in range(BURSTS):
        for _ in range(EDITS_PER_BURST):
            edit = next_edit(rng, text)
            version += 1
            send(client, uri, version, edit)
            text = apply_editor_edits(text, [edit])
            good = text if parses(text) else good
        if not parses(text) and rng.random() < 0.8:  # undo, back to the last text that parsed
            everything = types.Range(types.Position(0, 0), position_at(text, len(text)))
            version += 1
            send(client, uri, version, types.TextEdit(everything, good))
            text = good
        params = await published(client, uri, version=version)
        for d in params.diagnostics:
            assert_inside(text, d.range, f"{d.code} (burst {burst})")
            for fix in (d.data or {}).get("fixes", []):
                for e in fix["edits"]:
                    assert_inside(text, e["range"], f"fix of {d.code} (burst {burst})")
        want = expected(text)
        if want is None:
            continue  # does not parse: the last good findings are kept, moved with the edits
        compared += 1
        got = sorted(
            (
                str(d.code),
                d.range.start.line,
                d.range.start.character,
                d.range.end.line,
                d.range.end.character,
            )
            for d in params.diagnostics
        )
        assert got == want, (burst, text)
    assert compared >= BURSTS // 2
