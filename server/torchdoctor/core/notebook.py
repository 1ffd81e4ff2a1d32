"""Jupyter notebooks: code cells checked as one module, magics masked, findings mapped back to
cells, and fixes written back into the cell sources with the rest of the JSON byte-identical. A
cell that does not parse is left out of the checked text (and reported on its own), so that one
broken cell never hides the findings of the others."""

from __future__ import annotations

import ast
import bisect
import copy
import functools
import json
import re
import warnings
from dataclasses import dataclass

from .model import Edit, Pos

# Cell magics whose body is still Python.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
_EOL = re.compile(r"\r\n|\r|\n")  # what ends a row for Python and LSP
_LINE_MAGIC = re.compile(r"^(\s*)([%!]|\?)")
_ASSIGN_MAGIC = re.compile(r"^(\s*[\w.\[\], ]+?\s*=\s*)[%!]")
# ``obj?``, ``obj??`` and wildcard searches such as ``torch.*Tensor?``.
_HELP_SUFFIX = re.compile(r"^(\s*)[\w.*]+\?{1,2}\s*$")


class _OpenBrackets:
    """Tracks whether a line starts inside an open bracket or a triple-quoted string."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None  # an open triple quote

    @property
    def open(self) -> bool:
        return self.depth > 0 or self.quote is not None

    def reset(self) -> None:
        self.depth, self.quote = 0, None

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if self.quote is not None:
                if line.startswith(self.quote, i):
                    i += 3
                    self.quote = None
                    continue
                i += 2 if ch == "\\" else 1
                continue
            if ch == "#":
                return
            if line.startswith(('"""', "'''"), i):
                self.quote = line[i : i + 3]
                i += 3
                continue
            if ch in "\"'":
                j = i + 1
                while j < n and line[j] != ch:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if ch in "([{":
                self.depth += 1
            elif ch in ")]}":
                self.depth = max(0, self.depth - 1)
            i += 1


class NotebookError(ValueError):
    """The notebook's JSON cannot be read."""


@dataclass
class Cell:
    index: int  # 1-based among all cells
    source: str  # original text (magics intact)
    masked: str  # what the checker sees
    start_row: int  # first row in the concatenated module
    rows: int
    span: tuple[int, int]  # where the source value lies in the raw JSON
    as_list: bool


def mask_magics(source: str) -> str:
    """Replace IPython-only lines with ``pass`` of the same indentation (rows are kept; rows end
    at ``\\n``, ``\\r\\n`` or ``\\r``, as for Python, and end at ``\\n`` in the result).

    A notebook is masked again on every keystroke, one cell of it edited: the results for
    cells of ordinary size are kept (the 2,048 last used)."""
    if len(source) > _MASK_CACHE_CHARS:
        return _mask_magics(source)
    return _mask_magics_cached(source)


_MASK_CACHE_CHARS = 20_000  # longer cells are masked every time


@functools.lru_cache(maxsize=2048)
def _mask_magics_cached(source: str) -> str:
    return _mask_magics(source)


def _mask_magics(source: str) -> str:
    lines = _EOL.split(source)
    first = lines[0].lstrip() if lines else ""
    if first.startswith("%%"):
        name = first[2:].split(None, 1)[0] if len(first) > 2 else ""
        if name in _PYTHON_CELL_MAGICS:
            lines[0] = "pass"
        else:
            return "\n".join("" if i else "pass" for i, _ in enumerate(lines))
    out = []
    continuation = False  # the previous masked line ended with a backslash
    scanner = _OpenBrackets()
    for line in lines:
        stripped = line.lstrip()
        if continuation:
            out.append("")
            continuation = line.rstrip().endswith("\\")
            continue
        inside = scanner.open  # a line inside (...), [...], {...} or a string is never a magic
        scanner.feed(line)
        match = _LINE_MAGIC.match(line)
        if inside:
            out.append(line)
        elif match and not stripped.startswith(("%=", "!=")):
            out.append(match.group(1) + "pass")
            continuation = line.rstrip().endswith("\\")
            scanner.reset()
        elif _ASSIGN_MAGIC.match(line):
            assign = _ASSIGN_MAGIC.match(line)
            assert assign is not None
            out.append(assign.group(1) + "None")
            scanner.reset()
        elif _HELP_SUFFIX.match(line):
            out.append(_HELP_SUFFIX.match(line).group(1) + "pass")  # type: ignore[union-attr]
            scanner.reset()
        else:
            out.append(line)
    return "\n".join(out)


class Notebook:
    def __init__(self, raw: str) -> None:
        self.raw = raw
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"invalid notebook JSON: {exc.msg} (line {exc.lineno})") from exc
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise NotebookError("invalid notebook: no 'cells' list")
        self.language = ((data.get("metadata") or {}).get("language_info") or {}).get(
            "name"
        ) or "python"
        spans = _source_spans(raw)
        self.bad_sources: dict[int, str] = {}  # cell index -> why its source cannot be read
        self.cells: list[Cell] = []
        row = 1
        chunks: list[str] = []
        for i, cell in enumerate(data["cells"]):
            if not isinstance(cell, dict):
                raise NotebookError(f"invalid notebook: cell {i + 1} is not an object")
            if cell.get("cell_type") != "code":
                continue
            src = cell.get("source", "")
            as_list = isinstance(src, list)
            if as_list and all(isinstance(line, str) for line in src):
                text = "".join(src)
            elif isinstance(src, str):
                text = src
            else:  # reported by unparsable_cells; its rows stay, empty
                kind = "a list with items that are not text" if as_list else type(src).__name__
                self.bad_sources[i + 1] = f"cannot read: its source is not text ({kind})"
                text = ""
            masked = mask_magics(text)
            rows = masked.count("\n") + 1
            span = spans.get(i, (-1, -1))
            self.cells.append(Cell(i + 1, text, masked, row, rows, span, as_list))
            chunks.append(masked)
            row += rows
        self.text = "\n".join(chunks)

    @classmethod
    def from_cells(cls, sources: list[str], language: str = "python") -> Notebook:
        """A notebook made of code cell sources as an editor holds them (no JSON).

        Cell ``index`` is the 1-based position in ``sources``. ``raw`` is empty, so ``apply``
        is unavailable; the concatenated masked text and the row map are the same as for JSON.
        """
        nb = cls.__new__(cls)
        nb.raw = ""
        nb.language = language
        nb.bad_sources = {}
        nb.cells = []
        row = 1
        chunks: list[str] = []
        for i, text in enumerate(sources):
            masked = mask_magics(text)
            rows = masked.count("\n") + 1
            nb.cells.append(Cell(i + 1, text, masked, row, rows, (-1, -1), False))
            chunks.append(masked)
            row += rows
        nb.text = "\n".join(chunks)
        return nb

    def unparsable_cells(self) -> list[tuple[Cell, str, int | None]]:
        """The code cells that do not parse on their own (an exercise left blank, a cell of
        another language, text no Python source can hold), with the reason and the row in the
        cell."""
        out: list[tuple[Cell, str, int | None]] = []
        for cell in self.cells:
            if cell.index in self.bad_sources:
                out.append((cell, self.bad_sources[cell.index], None))
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ast.parse(cell.masked)
            except SyntaxError as exc:
                out.append((cell, f"syntax error: {exc.msg}", exc.lineno))
            except ValueError as exc:  # a lone surrogate, a NUL character
                out.append((cell, f"cannot parse: {exc}", None))
        return out

    def without(self, indices: set[int]) -> Notebook:
        """The same notebook, with the code of the given cells left out of the checked text
        (their rows stay, empty, so positions of every other cell are unchanged)."""
        nb = copy.copy(self)
        nb.text = "\n".join(
            "\n" * (cell.rows - 1) if cell.index in indices else cell.masked for cell in self.cells
        )
        return nb

    def cell_at(self, row: int) -> Cell | None:
        """The cell holding ``row`` of the concatenated text (a binary search over the cells'
        first rows: every finding of a large notebook is located so)."""
        starts = self.__dict__.get("_starts")
        if starts is None or len(starts) != len(self.cells):
            starts = self.__dict__["_starts"] = [cell.start_row for cell in self.cells]
        at = bisect.bisect_right(starts, row) - 1
        if at >= 0:
            cell = self.cells[at]
            if cell.start_row <= row < cell.start_row + cell.rows:
                return cell
        return None

    def to_cell(self, pos: Pos) -> tuple[int, Pos]:
        cell = self.cell_at(pos.row)
        if cell is None:  # end of the last cell
            cell = self.cells[-1]
            return cell.index, Pos(cell.rows, len(cell.masked.split("\n")[-1]))
        return cell.index, Pos(pos.row - cell.start_row + 1, pos.col)

    def apply(self, edits: list[Edit]) -> str:
        """Apply edits given in concatenated coordinates; returns the new notebook JSON."""
        from .fixes import apply_edits

        by_cell: dict[int, list[Edit]] = {}
        for edit in edits:
            cell = self.cell_at(edit.start.row)
            end_cell = self.cell_at(edit.end.row) if edit.end.row != edit.start.row else cell
            if cell is None or end_cell is not cell:
                raise ValueError("an edit crosses a cell boundary")
            off = cell.start_row - 1
            by_cell.setdefault(cell.index, []).append(
                Edit(
                    Pos(edit.start.row - off, edit.start.col),
                    Pos(edit.end.row - off, edit.end.col),
                    edit.content,
                )
            )
        raw = self.raw
        replacements = []
        for cell in self.cells:
            if cell.index not in by_cell:
                continue
            if cell.span[0] < 0:
                raise ValueError("cell source not found in the notebook JSON")
            new_source = apply_edits(cell.source, by_cell[cell.index])
            if new_source == cell.source:
                continue
            old = raw[cell.span[0] : cell.span[1]]
            replacements.append((cell.span, _serialise_like(old, new_source, cell.as_list, raw)))
        for (start, end), text in sorted(replacements, reverse=True):
            raw = raw[:start] + text + raw[end:]
        return raw


def _serialise_like(old: str, source: str, as_list: bool, raw: str) -> str:
    ascii_only = not any(ord(ch) > 127 for ch in raw) and "\\u" in raw
    if not as_list:
        return json.dumps(source, ensure_ascii=ascii_only)
    lines = source.splitlines(keepends=True)
    if not lines:
        return "[]"
    items = [json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    inner = old[1:-1]
    if not inner.strip():
        # Guess the usual nbformat layout from the array's own indentation.
        return "[" + ", ".join(items) + "]"
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()) :]
    sep_match = re.search(r'"\s*(,\s*)"', inner)
    sep = sep_match.group(1) if sep_match else ("," + lead if "\n" in lead else ", ")
    return "[" + lead + sep.join(items) + trail + "]"


# ---- a tiny JSON scanner that records where each cell's "source" value lies -----------------
_WS = re.compile(r"\s*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


def _source_spans(raw: str) -> dict[int, tuple[int, int]]:
    """{cell index (0-based): (start, end) of its "source" value} in the raw JSON text."""
    spans: dict[int, tuple[int, int]] = {}

    def skip(i: int) -> int:
        return _WS.match(raw, i).end()  # type: ignore[union-attr]

    def value(i: int, path: tuple[object, ...]) -> int:
        i = skip(i)
        ch = raw[i : i + 1]
        if ch == "{":
            i = skip(i + 1)
            if raw[i : i + 1] == "}":
                return i + 1
            while True:
                m = _STRING.match(raw, skip(i))
                if m is None:
                    raise NotebookError("invalid notebook JSON")
                key = json.loads(m.group(0))
                i = skip(m.end())
                if raw[i : i + 1] != ":":
                    raise NotebookError("invalid notebook JSON")
                start = skip(i + 1)
                i = value(start, (*path, key))
                if len(path) == 2 and path[0] == "cells" and key == "source":
                    spans[int(path[1])] = (start, i)  # type: ignore[call-overload]
                i = skip(i)
                if raw[i : i + 1] == ",":
                    i += 1
                    continue
                if raw[i : i + 1] == "}":
                    return i + 1
                raise NotebookError("invalid notebook JSON")
        if ch == "[":
            i = skip(i + 1)
            if raw[i : i + 1] == "]":
                return i + 1
            n = 0
            while True:
                i = skip(value(i, (*path, n)))
                n += 1
                if raw[i : i + 1] == ",":
                    i += 1
                    continue
                if raw[i : i + 1] == "]":
                    return i + 1
                raise NotebookError("invalid notebook JSON")
        if ch == '"':
            m = _STRING.match(raw, i)
            if m is None:
                raise NotebookError("invalid notebook JSON")
            return m.end()
        m = _SCALAR.match(raw, i)
        if m is None:
            raise NotebookError("invalid notebook JSON")
        return m.end()

    value(0, ())
    return spans
