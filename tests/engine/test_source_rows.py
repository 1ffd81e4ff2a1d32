"""``Source.lines`` cuts rows from the text when asked: the rows, with their line endings, and an
empty last row after a final line break, as splitting the text gives them."""

from __future__ import annotations

import random

import pytest

from torchdoctor.core.model import Pos
from torchdoctor.core.source import Source, split_rows

PIECES = ["a", "bc", " ", "\n", "\r", "\r\n", "\x0c", "\u2028", "é"]


def split(text: str) -> list[str]:
    rows = split_rows(text)
    if not rows or rows[-1].endswith(("\n", "\r")):
        rows.append("")
    return rows


def texts() -> list[str]:
    rng = random.Random(7)
    made = ["", "\n", "x", "x\n", "x\r\n", "\r", "a\n\nb"]
    for _ in range(400):
        made.append("".join(rng.choice(PIECES) for _ in range(rng.randrange(12))))
    return made


@pytest.mark.parametrize("text", texts())
def test_rows_are_the_split_text(text: str) -> None:
    source, rows = Source(text), split(text)
    assert list(source.lines) == rows
    assert len(source.lines) == len(rows)
    assert [source.lines[i] for i in range(-len(rows), len(rows))] == rows + rows
    assert source.lines[1:3] == rows[1:3]
    with pytest.raises(IndexError):
        source.lines[len(rows)]
    starts = [sum(len(r) for r in rows[:i]) for i in range(len(rows))]
    assert [source.offset(Pos(row, 0)) for row in range(1, len(rows) + 1)] == starts
    assert [source.line(row) for row in range(len(rows) + 2)] == ["", *rows, ""]
