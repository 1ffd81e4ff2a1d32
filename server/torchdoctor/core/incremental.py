"""Incremental parsing: after an edit, re-parse only the top-level statements it touched.

An editor re-checks a file on every keystroke. Parsing is a large share of that work, yet an edit
rarely reaches past one function or class. ``IncrementalParser`` keeps the last tree of one
document, split into *chunks*: runs of top-level statements with the rows they cover (comments
and blank lines after a statement belong to its chunk). After an edit, the chunks the edited rows
touch are re-parsed on their own, the chunks above are reused as they are and those below are
reused with their rows shifted by the number of rows the edit added or removed.

This gives the same tree as parsing the whole text. A chunk boundary is a row where a top-level
statement begins at column 0 with no bracket, string or line continuation open, so the rows above
an unchanged boundary parse the same way whatever follows them; and when the re-parsed rows parse
on their own, they end in the same clean state, so the rows below them parse as before too. When
they do not parse on their own (an edit that opens a string or a bracket, an indented row moved to
the top level...), the whole text is parsed, which also reports the syntax error where Python
would.

The nodes of reused chunks are shared between successive trees, and shifting rows changes them
in place, so a tree must not be read after a later parse of the same document: ``session`` hands
the tree out and takes it back when the caller is done. A parse that starts while another one is
still out (the check of an older version, told to stop) waits for it a little, then works on a
whole parse of its own.
"""

from __future__ import annotations

import ast
import re
import threading
import warnings
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .model import ErrorKind, FileError
from .source import split_rows

# How long a session waits for the last parse while an older one still holds it.
WAIT_FOR_STATE_S = 0.5
# Features that change how later code parses: such files are always parsed whole.
_WHOLE_FILE_MARKERS = ("__future__",)


@dataclass
class _Chunk:
    first_row: int  # 1-based
    body: list[ast.stmt]
    # What ``Semantic.from_chunks`` collected for it; its ``nodes``, when present, lists every
    # node of the chunk.
    facts: object = None


@dataclass
class Parsed:
    """One version of a document: its tree and the chunks that make it up, or why it does not
    parse."""

    tree: ast.Module | None
    error: FileError | None
    chunks: list[_Chunk]


@dataclass
class _State:
    lines: list[str]
    chunks: list[_Chunk]  # may be empty (a file of comments only): every edit parses the whole
    tree: ast.Module


def parse_text(text: str, path: str) -> tuple[ast.Module | None, FileError | None]:
    """``ast.parse`` with every failure turned into a ``FileError``. A long text is parsed in
    pieces (``_parse_in_pieces``): the same tree, in half the memory at the peak."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if len(text) >= PIECES_FROM:
                tree = _parse_in_pieces(text, path)
                if tree is not None:
                    return tree, None
            return ast.parse(text, filename=path), None
    except SyntaxError as exc:
        return None, FileError(path, f"syntax error: {exc.msg}", exc.lineno, kind=ErrorKind.SYNTAX)
    except (RecursionError, MemoryError):
        return None, FileError(
            path, "expression nested too deeply to analyse", kind=ErrorKind.TOO_DEEP
        )
    except ValueError as exc:
        return None, FileError(path, f"cannot parse: {exc}", kind=ErrorKind.SYNTAX)


# The one ``__future__`` import that may change how the code after it parses (``<>``): a text that
# names it is parsed whole (``annotations`` and the others leave the tree as it is).
_CHANGES_PARSING = "barry_as_FLUFL"
# Texts from this many characters are parsed in pieces of about ``_PIECE`` characters.
PIECES_FROM = 1 << 19
_PIECE = 1 << 17
# Tries to end one piece at a later row (the rows after a decorator, ``else:``...) before the
# text is parsed whole.
_PIECE_TRIES = 8
# A row that cannot begin a top-level statement, or continues the one before.
_NOT_A_START = re.compile(r"[ \t\f#\n)\]}]|(?:else|elif|except|finally)\b")


def _parse_in_pieces(text: str, path: str) -> ast.Module | None:
    """The tree of a long text, parsed in pieces that end where a top-level statement begins;
    None where that cannot be done (then the text is parsed whole, which also reports its
    syntax error where Python would).

    Parsing a whole text holds the parser's own tree and Python's at once: about twice the
    memory the final tree takes. A piece's parser tree is freed before the next piece is
    parsed. A piece ends before a row that starts at column 0 and parses on its own, so that
    no bracket, string or line continuation is open there, and what follows parses as it would
    in the whole text (as for ``IncrementalParser``'s chunks); where it does not parse, the
    piece is tried up to a later row. Each piece is parsed after as many empty rows as come
    before it, so that its rows are the text's. The row numbers the nodes hold are shared
    (one ``int`` per row, not one per node and attribute)."""
    if "\r" in text or "\0" in text or text.startswith("\ufeff"):
        return None
    if _CHANGES_PARSING in text:
        return None
    body: list[ast.stmt] = []
    rows: dict[int, int] = {}
    start, row, size = 0, 1, len(text)
    while start < size:
        end, tries = start + _PIECE, 0
        while True:
            end = _piece_end(text, end)
            piece = text[start:end]
            try:
                tree = ast.parse("\n" * (row - 1) + piece, filename=path)
            except SyntaxError:
                tries += 1
                if end >= size or tries > _PIECE_TRIES:
                    return None
                end += 1
                continue
            except Exception:  # nested too deeply, ...: as the whole text reports it
                return None
            break
        _share_rows(tree.body, rows)
        body.extend(tree.body)
        row += piece.count("\n")
        start = end
    return ast.Module(body=body, type_ignores=[])


def _piece_end(text: str, end: int) -> int:
    """The start of the first row from ``end`` on that may begin a top-level statement (not
    after a decorator); the text's end if none."""
    if end >= len(text):
        return len(text)
    newline = text.find("\n", end - 1)
    while newline != -1:
        after = newline + 1
        if after >= len(text):
            break
        before = text.rfind("\n", 0, newline) + 1
        if not _NOT_A_START.match(text, after) and not text.startswith("@", before):
            return after
        newline = text.find("\n", after)
    return len(text)


class _NoItems(list):
    """The one empty list that the nodes of a tree parsed in pieces share (a call's keywords,
    a loop's ``else``...): the tree is read, never changed, and changing it fails loudly."""

    def _read_only(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("the lists of a parsed tree are read-only")

    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only  # type: ignore[assignment]


NO_ITEMS = _NoItems()


def _share_rows(body: list[ast.stmt], rows: dict[int, int]) -> None:
    """Make the nodes under ``body`` hold one ``int`` object per row number (the parser makes
    one per node and attribute: 64 bytes a node past row 256), and one empty list for all
    their empty lists (half the lists of a tree: 56 bytes each). A constant without a
    ``kind`` (``u"..."``) leaves it to its class (None there too): five attributes fit a
    smaller table than six (88 bytes less for each: an eighth of the nodes)."""
    share = rows.setdefault
    stack: list[ast.AST] = list(body)
    pop, extend = stack.pop, stack.extend
    node_type, constant = ast.AST, ast.Constant
    empty = NO_ITEMS
    while stack:
        node = pop()
        fields = node.__dict__
        if type(node) is constant:
            if "kind" in fields and fields["kind"] is None:
                fields = {name: value for name, value in fields.items() if name != "kind"}
                node.__dict__ = fields
        first = fields.get("lineno")
        if first is not None and first > 256:
            fields["lineno"] = share(first, first)
            last = fields["end_lineno"]
            fields["end_lineno"] = share(last, last)
        for name, value in fields.items():
            if type(value) is list:
                if value:
                    extend([child for child in value if isinstance(child, node_type)])
                else:
                    fields[name] = empty
            elif isinstance(value, node_type) and value.__dict__:
                stack.append(value)


def _first_row(stmt: ast.stmt) -> int:
    row = stmt.lineno
    for decorator in getattr(stmt, "decorator_list", ()):
        row = min(row, decorator.lineno)
    return row


def _chunks(body: list[ast.stmt], first_row: int) -> list[_Chunk]:
    """Group statements into chunks; a statement that starts on the row where the previous one
    ends (``a = 1; b = 2``) joins its chunk."""
    chunks: list[_Chunk] = []
    last_row = 0
    for stmt in body:
        start = _first_row(stmt)
        if chunks and start <= last_row:
            chunks[-1].body.append(stmt)
        else:
            chunks.append(_Chunk(start, [stmt]))
        last_row = stmt.end_lineno or stmt.lineno
    if chunks:
        chunks[0].first_row = first_row
    return chunks


def _shift(stmts: list[ast.stmt], rows: int, known: object = None) -> None:
    """Move every node under ``stmts`` down by ``rows`` rows (up when negative). ``known``, when
    a list, already holds every node under them (what the chunk's facts collected)."""
    nodes: list[ast.AST]
    if isinstance(known, list):
        nodes = known
    else:
        nodes = []
        stack: list[ast.AST] = list(stmts)
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
    has_rows = _HAS_ROWS
    for node in nodes:
        kind = type(node)
        positioned = has_rows.get(kind)
        if positioned is None:
            positioned = has_rows[kind] = "end_lineno" in kind._attributes
        if positioned and node.end_lineno is not None:  # type: ignore[attr-defined]
            node.lineno += rows  # type: ignore[attr-defined]
            node.end_lineno += rows  # type: ignore[attr-defined]


_HAS_ROWS: dict[type, bool] = {}


class IncrementalParser:
    """The parse of one document, kept between edits (see the module docstring)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._state: _State | None = None
        self._out = False  # a session holds the state
        self.reused_rows = 0  # rows the last parse did not re-parse (for benchmarks and tests)

    @contextmanager
    def session(self, text: str, path: str) -> Iterator[Parsed]:
        """Parse ``text`` (a new version of the document). The tree may be read until the block
        ends. While another session holds the last parse (a check of an older version that has
        been told to stop), this one waits for it a little, then parses the whole text."""
        with self._changed:
            self._changed.wait_for(lambda: not self._out, WAIT_FOR_STATE_S)
            held = not self._out
            state = self._state if held else None
            if held:
                self._state, self._out = None, True
        lines = split_rows(text)
        new_state: _State | None = None
        try:
            try:
                new_state = self._parse(state, lines, path)
            except BaseException:
                state = None  # it may be half updated: start again from a whole parse
                raise
            if new_state is None:
                self.reused_rows = 0
                tree, error = parse_text(text, path)
                if tree is not None:
                    new_state = _State(lines, _chunks(tree.body, 1), tree)
                yield Parsed(tree, error, new_state.chunks if new_state else [])
            else:
                yield Parsed(new_state.tree, None, new_state.chunks)
        finally:
            with self._changed:
                if held:
                    self._out = False
                if self._state is None and not self._out:
                    # When this version does not parse, keep the last good one for the next edit.
                    self._state = new_state or state
                self._changed.notify_all()

    def _parse(self, state: _State | None, lines: list[str], path: str) -> _State | None:
        """The tree of ``lines`` built from ``state``; None when a whole parse is needed."""
        if state is None or not state.chunks:
            return None
        old = state.lines
        if old == lines:
            self.reused_rows = len(lines)
            return state
        # Rows shared at both ends.
        limit = min(len(old), len(lines))
        head = 0
        while head < limit and old[head] == lines[head]:
            head += 1
        tail = 0
        while tail < limit - head and old[-1 - tail] == lines[-1 - tail]:
            tail += 1
        delta = len(lines) - len(old)
        # Old rows (1-based) the edit replaced, widened by a row each side so that text added at
        # the end of one statement or the start of the next re-parses with both.
        low = max(head, 1)
        high = min(len(old) - tail + 1, len(old))
        chunks = state.chunks
        starts = [c.first_row for c in chunks]
        first = _chunk_at(starts, low)
        last = _chunk_at(starts, high)
        start_row = chunks[first].first_row
        end_row = (chunks[last + 1].first_row - 1 if last + 1 < len(chunks) else len(old)) + delta
        if end_row < start_row - 1:
            return None
        region = "".join(lines[start_row - 1 : end_row])
        if any(marker in region for marker in _WHOLE_FILE_MARKERS):
            return None
        tree, _error = parse_text(region, path)
        if tree is None:
            return None
        if start_row > 1:
            _shift(tree.body, start_row - 1)
        if delta:
            for chunk in chunks[last + 1 :]:
                _shift(chunk.body, delta, getattr(chunk.facts, "nodes", None))
                chunk.first_row += delta
        middle = _chunks(tree.body, start_row)
        merged = [*chunks[:first], *middle, *chunks[last + 1 :]]
        if merged:
            merged[0].first_row = 1
        module = ast.Module(body=[stmt for c in merged for stmt in c.body], type_ignores=[])
        self.reused_rows = len(lines) - (end_row - start_row + 1)
        return _State(lines, merged, module)


def _chunk_at(starts: list[int], row: int) -> int:
    """Index of the chunk covering ``row`` (chunks start at ``starts``, the first at row 1)."""
    return max(bisect_right(starts, row) - 1, 0)
