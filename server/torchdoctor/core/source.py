"""Source text helpers: rows, columns and node ranges (ast columns are UTF-8 byte offsets)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from array import array
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import overload

from .model import Pos, Range

_NEWLINE = re.compile("\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
# What ``str.splitlines`` also breaks at.
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")

# A string spans rows only between triple quotes or across a backslash at the end of a row.
_MULTI_ROW_STRING_MARKS = ('"""', "'''", "\\\n", "\\\r")


def split_rows(text: str) -> list[str]:
    """Rows with their line endings. Only ``\\n``, ``\\r\\n`` and ``\\r`` end a row for Python
    and LSP (``str.splitlines`` also splits on ``\\f`` and others: used, being faster, on a
    text without those)."""
    if any(ch in text for ch in _OTHER_BREAKS):
        return _LINE.findall(text)
    return text.splitlines(keepends=True)


class Rows(Sequence[str]):
    """The rows of a text, with their line endings, and an empty last row after a final line
    break: each cut from the text when asked (a list of them would hold the text twice)."""

    __slots__ = ("starts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        # Where each row starts, and the text's end.
        self.starts = array("q", [0])
        if "\r" in text or any(ch in text for ch in _OTHER_BREAKS):
            offset = 0
            for row in split_rows(text):
                offset += len(row)
                self.starts.append(offset)
            if text and not text.endswith(("\n", "\r")):
                return
        else:
            self.starts.extend(found.end() for found in _NEWLINE.finditer(text))
        self.starts.append(len(text))

    def __len__(self) -> int:
        return len(self.starts) - 1

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("row out of range")
        return self.text[self.starts[index] : self.starts[index + 1]]

    def __iter__(self) -> Iterator[str]:
        text, starts = self.text, self.starts
        return (text[starts[i] : starts[i + 1]] for i in range(len(starts) - 1))


class Source:
    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def lines(self) -> Rows:
        """The rows, with their line endings, and an empty last row after a final line break
        (split when first asked: a file without findings mostly never asks)."""
        return Rows(self.text)

    # -- positions -------------------------------------------------------------------------
    def line(self, row: int) -> str:
        return self.lines[row - 1] if 0 < row <= len(self.lines) else ""

    def char_col(self, row: int, byte_col: int) -> int:
        line = self.line(row)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def start(self, node: ast.AST) -> Pos:
        row = node.lineno  # type: ignore[attr-defined]
        return Pos(row, self.char_col(row, node.col_offset))  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> Pos:
        row = node.end_lineno  # type: ignore[attr-defined]
        return Pos(row, self.char_col(row, node.end_col_offset))  # type: ignore[attr-defined]

    def range(self, node: ast.AST) -> Range:
        return Range(self.start(node), self.end(node))

    def offset(self, pos: Pos) -> int:
        lines = self.lines
        row = min(max(pos.row, 1), len(lines))
        return lines.starts[row - 1] + pos.col

    def segment(self, node: ast.AST) -> str:
        return self.text[self.offset(self.start(node)) : self.offset(self.end(node))]

    def slice(self, start: Pos, end: Pos) -> str:
        return self.text[self.offset(start) : self.offset(end)]

    def indent_of(self, row: int) -> str:
        line = self.line(row)
        return line[: len(line) - len(line.lstrip(" \t"))]

    @cached_property
    def newline(self) -> str:
        first = self.lines[0] if self.lines else ""
        if first.endswith("\r\n"):
            return "\r\n"
        return "\r" if first.endswith("\r") else "\n"

    @cached_property
    def string_continuation_rows(self) -> frozenset[int]:
        """Rows that lie inside a multi-line string token (after its first row).

        Re-indenting such rows would change the string's value, so fixes leave them alone.
        """
        if not any(mark in self.text for mark in _MULTI_ROW_STRING_MARKS):
            return frozenset()  # no string can span rows: no need to tokenize
        rows: set[int] = set()
        try:
            # newline="": rows end at "\n", "\r\n" and "\r", as for `ast` and `split_rows`.
            readline = io.StringIO(self.text, newline="").readline
            for tok in tokenize.generate_tokens(readline):
                if (tok.type == tokenize.STRING and tok.end[0] > tok.start[0]) or (
                    tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1)
                    and tok.end[0] > tok.start[0]
                ):
                    rows.update(range(tok.start[0] + 1, tok.end[0] + 1))
        except (tokenize.TokenError, SyntaxError):
            pass
        return frozenset(rows)
