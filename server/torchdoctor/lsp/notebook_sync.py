"""Notebooks as editors send them (LSP 3.17 notebook sync): code cells checked as one module so
facts flow across cells, findings mapped back to the cell that shows them, and fix-all through
the engine's fix loop."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from lsprotocol import types

from ..core.config import Settings
from ..core.incremental import IncrementalParser
from ..core.live_facts import LiveFacts
from ..core.model import FileError, Pos, Range
from ..core.notebook import Notebook
from ..linter.projects import Projects
from ..linter.runner import FileResult, check_text, fix_any
from .convert import UTF16, split_lines, to_client_col


@dataclass(frozen=True)
class CellDoc:
    """One code cell: its URI as the client spells it, its text and version."""

    uri: str
    text: str
    version: int | None = None


class NotebookLocator:
    """Maps ranges of the concatenated module to (cell URI, range inside that cell)."""

    def __init__(self, notebook: Notebook, cells: list[CellDoc], encoding: str = UTF16) -> None:
        self.notebook = notebook
        self.cells = cells
        self.encoding = encoding
        self._lines: dict[int, list[str]] = {}

    def _line(self, index: int, row: int) -> str:
        lines = self._lines.get(index)
        if lines is None:
            lines = self._lines[index] = split_lines(self.cells[index - 1].text)
        return lines[row - 1].rstrip("\r\n") if 0 < row <= len(lines) else ""

    def _position(self, index: int, pos: Pos) -> types.Position:
        return types.Position(
            pos.row - 1, to_client_col(self._line(index, pos.row), pos.col, self.encoding)
        )

    def locate(self, rng: Range) -> tuple[str, types.Range]:
        index, start = self.notebook.to_cell(rng.start)
        end_index, end = self.notebook.to_cell(rng.end)
        if end_index != index:  # a range running on into the next cell: stop at this one's end
            cell = self.notebook.cells[index - 1]
            end = Pos(cell.rows, len(cell.masked.split("\n")[-1]))
        return self.cells[index - 1].uri, types.Range(
            self._position(index, start), self._position(index, end)
        )


def notebook_path(path: str) -> str:
    """The path the engine sees: notebooks are told apart by their suffix."""
    return path if path.endswith(".ipynb") else path + ".ipynb"


def check_cells(
    cells: list[CellDoc],
    path: str,
    settings: Settings,
    parser: IncrementalParser | None = None,
    stop: Callable[[], bool] | None = None,
    *,
    live: LiveFacts | None = None,
    probe: bool = False,
    projects: Projects | None = None,
) -> tuple[FileResult, Notebook | None]:
    """Check code cells as one module (magics masked, rows kept); with the kernel's last facts
    (``live``) for the live rules, and what to probe it for next (``probe``), from the same
    analysis."""
    if not cells:
        return FileResult(notebook_path(path)), None
    notebook = Notebook.from_cells([c.text for c in cells])
    result = check_text(
        notebook.text,
        notebook_path(path),
        settings,
        notebook=notebook,
        parser=parser,
        stop=stop,
        live=live,
        probe=probe,
        projects=projects,
    )
    return result, notebook


def to_json(sources: list[str]) -> str:
    """A minimal notebook holding the given code cells (what the engine's fix loop reads)."""
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": source,
                }
                for source in sources
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def fix_cells(
    cells: list[CellDoc],
    path: str,
    settings: Settings,
    *,
    unsafe: bool,
    codes: frozenset[str] | None = None,
) -> tuple[dict[str, str], dict[str, int], FileError | None]:
    """Bulk fixes of a notebook through the engine's fix loop: {cell URI: new text} for the
    cells that change, the count of fixes per rule, and the error that stopped fixing (if any)."""
    if not cells:
        return {}, {}, None
    outcome = fix_any(
        to_json([c.text for c in cells]),
        notebook_path(path),
        settings,
        unsafe=unsafe,
        codes=codes,
    )
    if not outcome.applied:
        return {}, {}, outcome.error
    new_cells = json.loads(outcome.text)["cells"]
    changed = {}
    for cell, new in zip(cells, new_cells, strict=True):
        source = new["source"]
        text = "".join(source) if isinstance(source, list) else str(source)
        if text != cell.text:
            changed[cell.uri] = text
    return changed, outcome.applied, outcome.error
