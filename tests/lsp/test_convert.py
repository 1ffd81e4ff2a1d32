"""The pure pieces of the server: UTF-16 columns, moving ranges through edits, line diffs,
noqa edits and editor settings."""

from __future__ import annotations

from lsprotocol import types

from torchdoctor.core.fixes import apply_edits
from torchdoctor.core.model import Edit, Pos, Range
from torchdoctor.lsp.convert import (
    TextLocator,
    diff_edits,
    from_client_col,
    noqa_edit,
    shift_range,
    to_client_col,
)
from torchdoctor.lsp.settings import ClientSettings, parse_settings


def rng(a: int, b: int, c: int, d: int) -> types.Range:
    return types.Range(types.Position(a, b), types.Position(c, d))


def test_columns_round_trip_through_utf16() -> None:
    line = 'x = "😋é" + y'
    assert to_client_col(line, 9) == 10  # the emoji takes two UTF-16 units
    assert from_client_col(line, 10) == 9
    assert to_client_col(line, 9, "utf-8") == 13
    assert TextLocator("u", "a\n" + line).locate(Range(Pos(2, 9), Pos(2, 10)))[1] == rng(
        1, 10, 1, 11
    )


def test_shift_range() -> None:
    finding = rng(2, 4, 2, 10)
    # An edit on an earlier line moves it down.
    assert shift_range(finding, rng(0, 0, 0, 0), "a\nb\n") == rng(4, 4, 4, 10)
    # Typing before it on its line moves it right; after it, nothing moves.
    assert shift_range(finding, rng(2, 0, 2, 0), "  ") == rng(2, 6, 2, 12)
    assert shift_range(finding, rng(2, 12, 2, 12), "xyz") == finding
    # Typing inside it stretches it; joining its line to the previous one moves it up.
    assert shift_range(finding, rng(2, 6, 2, 6), "ab") == rng(2, 4, 2, 12)
    assert shift_range(finding, rng(1, 3, 2, 0), "") == rng(1, 7, 1, 13)
    # An edit across its start drops it.
    assert shift_range(finding, rng(2, 2, 2, 6), "") is None
    # UTF-16: an astral character counts two.
    assert shift_range(finding, rng(2, 0, 2, 0), "😋") == rng(2, 6, 2, 12)


def test_diff_edits_apply_back() -> None:
    for old, new in [
        ("a\nb\nc", "a\nB\nc\nd\n"),
        ("a\nb\n", "x\na\nb\n"),
        ("import torch\nx = 1\ny = 2", "import torch\ny = 2"),
        ("", "a"),
    ]:
        assert _apply_back(old, diff_edits(old, new)) == new
    assert diff_edits("same", "same") == []
    # Only the changed line is touched.
    assert diff_edits("a\nb\nc\n", "a\nB\nc\n") == [types.TextEdit(rng(1, 0, 2, 0), "B\n")]


def _apply_back(old: str, edits: list[types.TextEdit]) -> str:
    return apply_edits(
        old,
        [
            Edit(
                Pos(e.range.start.line + 1, e.range.start.character),
                Pos(e.range.end.line + 1, e.range.end.character),
                e.new_text,
            )
            for e in edits
        ],
    )


def test_diff_edits_of_fixes_spread_over_a_long_repetitive_file() -> None:
    # 3,000 blocks of the same rows but for one (a file of many classes alike); a fix in every
    # third block. The edits are each fix's row alone, found without comparing every pair of
    # equal rows (seconds for difflib's matcher on such a file; not a timing assert).
    block = "class Block{i}:\n    def forward(self, x):\n        y = x\n        return y\n\n"
    old = "".join(block.format(i=i) for i in range(3000))
    new = "".join(
        block.format(i=i).replace("y = x", "y = x.detach()" if i % 3 == 0 else "y = x")
        for i in range(3000)
    )
    edits = diff_edits(old, new)
    assert len(edits) == 1000
    assert all(e.range.end.line == e.range.start.line + 1 for e in edits)
    assert _apply_back(old, edits) == new


def test_diff_edits_apply_back_when_split_at_unique_rows(monkeypatch) -> None:
    import random

    from torchdoctor.lsp import convert

    monkeypatch.setattr(convert, "_DIRECT_DIFF_PAIRS", 0)  # always look for anchors
    pick = random.Random(15)
    rows = ["a\n", "b\n", "\n", "x = 1\n", "def f():\n", "    pass\n"]
    for _ in range(300):
        old_rows = [pick.choice(rows) for _ in range(pick.randint(0, 60))]
        new_rows = list(old_rows)
        for _ in range(pick.randint(0, 8)):
            at = pick.randint(0, len(new_rows))
            if pick.random() < 0.5:
                new_rows.insert(at, pick.choice([*rows, f"u{pick.randint(0, 9)}\n"]))
            elif new_rows:
                del new_rows[min(at, len(new_rows) - 1)]
        old, new = "".join(old_rows), "".join(new_rows)
        assert _apply_back(old, diff_edits(old, new)) == new


def test_noqa_edit() -> None:
    assert noqa_edit("x = f()\n", 3, "TDR602") == types.TextEdit(
        rng(3, 7, 3, 7), "  # noqa: TDR602"
    )
    assert noqa_edit("x = f()  # noqa: TDR101\n", 0, "TDR602") == types.TextEdit(
        rng(0, 23, 0, 23), ", TDR602"
    )
    assert noqa_edit("x = f()  # noqa: TDR602\n", 0, "TDR602") is None
    assert noqa_edit("x = f()  # noqa\n", 0, "TDR602") is None


def test_settings_fall_back_per_key_and_layer() -> None:
    settings, problems = parse_settings(
        {"debounceMs": -1, "unsafe-fixes": True, "select": [], "logLevel": "WARN", "x": 1}, "test"
    )
    assert settings.debounce_ms == 100
    assert settings.unsafe_fixes is True
    assert settings.select is None  # empty means not set
    assert settings.log_level == "warning"
    assert len(problems) == 1 and "debounceMs" in problems[0]
    wrapped, _ = parse_settings({"torchdoctor": {"ignore": "TDR602, TDR101"}}, "test")
    assert wrapped.ignore == ("TDR602", "TDR101")
    layered = ClientSettings().overlay(settings).overlay(wrapped)
    assert layered.unsafe_fixes is True and layered.ignore == ("TDR602", "TDR101")
    from torchdoctor.core.config import Settings

    assert layered.apply(Settings()).ignore == ["TDR602", "TDR101"]
