"""Document sync handlers: text documents (``textDocument/did*``) and notebooks
(``notebookDocument/did*``).

Opening a document or notebook makes it a unit of the state and analyses it; an edit moves its
published diagnostics with the text and schedules a new analysis (debounced); closing clears
them. Saving a ``pyproject.toml`` reloads the configuration.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from ..core.source import split_rows
from . import convert
from .state import PYTHON_LANGUAGES, Doctor, Unit, norm_uri
from .workspace import reload_configuration


# ---- the editor's text ------------------------------------------------------------------
class EditorDocument(TextDocument):
    """A document whose lines are the editor's: only ``\\n``, ``\\r\\n`` and ``\\r`` end a line
    (pygls splits at every ``str.splitlines`` break, ``\\f`` and ``\\u2028`` included, so its
    lines drift from the editor's), and a change at a column past the end of a line lands at
    the line's end (LSP). The lines are split once per version of the text.

    Each change of the last ``didChange`` is also kept as the partial change it made (see
    :meth:`applied`), for moving the diagnostics with the text."""

    _split: tuple[str, tuple[str, ...], list[int]] | None = None
    # id of a change of the last didChange -> the partial change it made, where that differs
    _applied: dict[int, types.TextDocumentContentChangePartial] | None = None

    def applied(
        self, change: types.TextDocumentContentChangeEvent
    ) -> types.TextDocumentContentChangePartial | None:
        """The change as the partial change it made to the text (once): a whole-document
        change as the lines it replaced; a partial one with its positions past a line's end
        brought back to it, and widened over a ``\\r`` or ``\\n`` it joined to make a
        ``\\r\\n``. None for a whole-document change that was not applied here."""
        made = self._applied.pop(id(change), None) if self._applied else None
        if made is None and isinstance(change, types.TextDocumentContentChangePartial):
            return change
        return made

    def _record(self, change: object, made: types.TextDocumentContentChangePartial) -> None:
        if self._applied is None or len(self._applied) > 8:
            self._applied = {}
        self._applied[id(change)] = made

    def _apply_full_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        self._record(change, convert.as_partial(self.source, change.text))
        super()._apply_full_change(change)

    def _rows(self) -> tuple[tuple[str, ...], list[int]]:
        """The lines (with their endings) and the offset where each starts."""
        source = self.source
        split = self._split
        if split is None or split[0] is not source:
            lines = tuple(split_rows(source))
            starts = list(accumulate((len(line) for line in lines[:-1]), initial=0))
            split = self._split = (source, lines, starts)
        return split[1], split[2]

    @property
    def lines(self) -> tuple[str, ...]:
        return self._rows()[0]

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        lines, starts = self._rows()
        enc = self.position_codec.encoding
        encoding = str(getattr(enc, "value", enc) or convert.UTF16)
        start = convert.line_offset(lines, starts, change.range.start, encoding)
        end = convert.line_offset(lines, starts, change.range.end, encoding)
        source, text = self.source, change.text
        start, end = min(start, end), max(start, end)
        self._source = source[:start] + text + source[end:]
        # A "\r" and a "\n" brought together make one line break: widen the change over the
        # one already there, so that the lines it leaves alone are those it did not touch.
        if start > 0 and source[start - 1] == "\r" and (text or source[end : end + 1])[:1] == "\n":
            start, text = start - 1, "\r" + text
        if source[end : end + 1] == "\n" and (source[:start] + text)[-1:] == "\r":
            end, text = end + 1, text + "\n"
        made = types.Range(
            convert.offset_position(lines, starts, start, encoding),
            convert.offset_position(lines, starts, end, encoding),
        )
        if made != change.range or text != change.text:
            self._record(change, types.TextDocumentContentChangePartial(range=made, text=text))


class EditorWorkspace(Workspace):
    """pygls' workspace, keeping its text documents as :class:`EditorDocument`."""

    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return EditorDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self.position_codec,
        )


def use_editor_documents(doctor: Doctor) -> None:
    """Replace the workspace pygls made at ``initialize`` (still empty) by an
    :class:`EditorWorkspace` with the same root, folders and position encoding."""
    protocol: Any = doctor.server.protocol
    old = doctor.server.workspace
    protocol._workspace = EditorWorkspace(
        old.root_uri,
        old._sync_kind,
        list(old.folders.values()),
        old.position_encoding,
    )


def _is_python(doc: types.TextDocumentItem) -> bool:
    return doc.language_id in PYTHON_LANGUAGES or doc.uri.endswith((".py", ".pyi"))


def _shift(
    doctor: Doctor,
    unit: Unit,
    uri: str,
    changes: Sequence[types.TextDocumentContentChangeEvent],
    version: int | None,
) -> None:
    """Move the diagnostics published for ``uri`` through the client's changes. A
    whole-document change moves them as the lines it replaced; when those are not known, the
    diagnostics are dropped until the next analysis (their positions would be the old text's)."""
    target = unit.spelled(uri)
    if target is None:
        return
    doc = doctor.server.workspace.text_documents.get(norm_uri(uri))
    partial: list[types.TextDocumentContentChangeEvent] = []
    for change in changes:
        made = doc.applied(change) if isinstance(doc, EditorDocument) else None
        if made is None:
            unit.diagnostics[target] = []
            doctor.note_changes(unit, target, None, version)
            return
        partial.append(made)
    unit.diagnostics[target] = convert.shift_diagnostics(
        unit.diagnostics[target], target, partial, version, doctor.encoding
    )
    doctor.note_changes(unit, target, partial, version)


# ---- text documents -----------------------------------------------------------------------
def did_open(doctor: Doctor, params: types.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    if norm_uri(doc.uri) in doctor.cell_owner or not _is_python(doc):
        return
    doctor.schedule(doctor.open_unit(doc.uri, notebook=False), 0)


def did_change(doctor: Doctor, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    unit = doctor.unit_for(uri)
    if unit is None:
        return
    _shift(doctor, unit, uri, params.content_changes, params.text_document.version)
    doctor.schedule(unit)
    if not unit.notebook:  # the files that import this one read its new text
        doctor.project_changed(os.path.abspath(doctor.path_of(unit.uri)))


def did_close(doctor: Doctor, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    unit = doctor.units.get(norm_uri(uri))
    if unit is not None and not unit.notebook:
        doctor.close_unit(unit)
        doctor.project_changed(os.path.abspath(doctor.path_of(uri)))  # back to the disk's text
    elif unit is None and norm_uri(uri) not in doctor.cell_owner:
        doctor.publish(uri, [], None)


def did_save(doctor: Doctor, params: types.DidSaveTextDocumentParams) -> None:
    if params.text_document.uri.endswith("pyproject.toml"):
        reload_configuration(doctor)
    elif params.text_document.uri.endswith(".py"):
        doctor.project_changed(os.path.abspath(doctor.path_of(params.text_document.uri)))


# ---- notebooks ----------------------------------------------------------------------------
def notebook_did_open(doctor: Doctor, params: types.DidOpenNotebookDocumentParams) -> None:
    unit = doctor.open_unit(params.notebook_document.uri, notebook=True)
    for cell in params.notebook_document.cells:
        doctor.cell_owner[norm_uri(cell.document)] = unit.key
    doctor.schedule(unit, 0)


def notebook_did_change(doctor: Doctor, params: types.DidChangeNotebookDocumentParams) -> None:
    unit = doctor.units.get(norm_uri(params.notebook_document.uri))
    if unit is None:
        return
    cells = params.change.cells
    if cells is not None:
        if cells.structure is not None:
            _cells_moved(doctor, unit, cells.structure)
        for content in cells.text_content or []:
            _shift(doctor, unit, content.document.uri, content.changes, content.document.version)
    doctor.schedule(unit)


def _cells_moved(
    doctor: Doctor, unit: Unit, structure: types.NotebookDocumentCellChangeStructure
) -> None:
    """Cells added to the notebook join it; the diagnostics of closed cells are cleared."""
    for item in structure.did_open or []:
        doctor.cell_owner[norm_uri(item.uri)] = unit.key
    for cell in structure.array.cells or []:
        doctor.cell_owner[norm_uri(cell.document)] = unit.key
    for closed in structure.did_close or []:
        spelled = unit.spelled(closed.uri) or closed.uri
        unit.diagnostics.pop(spelled, None)
        doctor.cell_owner.pop(norm_uri(closed.uri), None)
        doctor.publish(spelled, [], None)


def notebook_did_close(doctor: Doctor, params: types.DidCloseNotebookDocumentParams) -> None:
    unit = doctor.units.get(norm_uri(params.notebook_document.uri))
    if unit is not None:
        for cell in params.cell_text_documents:
            unit.diagnostics.setdefault(cell.uri, [])
        doctor.close_unit(unit)
