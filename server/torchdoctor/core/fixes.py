"""Helpers that build text edits from ``ast`` nodes, and ``apply_edits``. Every fix is plain
text edits, and nothing here checks the code they make: the fix loop (``linter.runner.fix_any``)
applies the chosen fixes of a round together, checks the result again, and stops with the text
from before that round when the result no longer parses."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .imports import plan_imports
from .model import Edit, Pos
from .semantic import Semantic, canonical
from .source import Source

if TYPE_CHECKING:
    from .notebook import Notebook


def replace(source: Source, node: ast.AST, text: str) -> Edit:
    return Edit(source.start(node), source.end(node), text)


def insert(pos: Pos, text: str) -> Edit:
    return Edit(pos, pos, text)


def delete_range(start: Pos, end: Pos) -> Edit:
    return Edit(start, end, "")


def _arguments_in_order(call: ast.Call) -> list[ast.AST]:
    items: list[ast.AST] = [*call.args, *call.keywords]
    return sorted(items, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


def add_keyword(source: Source, call: ast.Call, text: str) -> Edit:
    """Append ``name=value`` as the call's last argument; on a line of its own when the call
    puts each argument on its own line."""
    items = _arguments_in_order(call)
    if items:
        start, end = source.start(items[-1]), source.end(items[-1])
        before = source.line(start.row)[: start.col]
        after = source.line(end.row)[end.col :].strip()
        if start.row != call.lineno and not before.strip() and after in ("", ","):
            return insert(end, f",{source.newline}{before}{text}")
        return insert(end, f", {text}")
    end = source.end(call)
    return insert(Pos(end.row, end.col - 1), text)


def remove_argument(source: Source, call: ast.Call, item: ast.AST) -> Edit:
    """Remove one argument (positional or keyword) and the comma that joins it to its neighbour."""
    items = _arguments_in_order(call)
    index = next(i for i, it in enumerate(items) if it is item)
    if index > 0:
        return delete_range(source.end(items[index - 1]), source.end(item))
    if len(items) > 1:
        return delete_range(source.start(item), source.start(items[1]))
    end = source.end(call)
    return delete_range(source.start(item), Pos(end.row, end.col - 1))


def starts_line(source: Source, stmt: ast.stmt) -> bool:
    """Whether ``stmt`` is the first thing on its line (so lines can be inserted before it)."""
    start = source.start(stmt)
    return source.line(start.row)[: start.col].strip() == ""


def ends_line(source: Source, stmt: ast.stmt) -> bool:
    end = source.end(stmt)
    rest = source.line(end.row)[end.col :].strip()
    return rest == "" or rest.startswith("#")


def insert_statement_before(source: Source, stmt: ast.stmt, code: str) -> Edit | None:
    """Insert ``code`` (one or more lines, no indentation) before ``stmt`` at its indentation."""
    if not starts_line(source, stmt):
        return None
    indent = source.indent_of(stmt.lineno)
    nl = source.newline
    text = "".join(f"{indent}{line}{nl}" if line else nl for line in code.splitlines())
    return insert(Pos(stmt.lineno, 0), text)


def insert_statement_after(source: Source, stmt: ast.stmt, code: str) -> Edit | None:
    """Insert ``code`` after ``stmt`` (and any comment on its last line) at its indentation."""
    if not starts_line(source, stmt) or not ends_line(source, stmt):
        return None
    indent = source.indent_of(stmt.lineno)
    nl = source.newline
    row = stmt.end_lineno or stmt.lineno
    text = "".join(f"{indent}{line}{nl}" if line else nl for line in code.splitlines())
    if row >= len(source.lines) or not source.line(row).endswith(("\n", "\r")):
        return insert(Pos(row, len(source.line(row))), nl + text.rstrip("\r\n"))
    return insert(Pos(row + 1, 0), text)


def reindent_rows(
    source: Source, first: int, last: int, *, add: str = "", remove: int = 0
) -> list[Edit] | None:
    """Indent (``add``) or dedent (``remove`` columns) rows ``first``..``last``.

    Rows inside multi-line strings and blank rows are left alone; None when a row has less
    indentation than ``remove``.
    """
    edits: list[Edit] = []
    skip = source.string_continuation_rows
    for row in range(first, last + 1):
        if row in skip:
            continue
        line = source.line(row)
        if not line.strip():
            continue
        if add:
            edits.append(insert(Pos(row, 0), add))
        if remove:
            lead = len(line) - len(line.lstrip(" \t"))
            if lead < remove or "\t" in line[:remove]:
                return None
            edits.append(delete_range(Pos(row, 0), Pos(row, remove)))
    return edits


def block_rows(stmts: list[ast.stmt]) -> tuple[int, int]:
    """First and last row covered by a run of statements (decorators included)."""
    first = stmts[0]
    start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", []))])
    return start, stmts[-1].end_lineno or stmts[-1].lineno


def wrap_statements(source: Source, stmts: list[ast.stmt], header: str) -> list[Edit] | None:
    """Wrap a run of statements of one block in ``header:`` (e.g. ``with torch.no_grad()``)."""
    if not stmts or not starts_line(source, stmts[0]) or not ends_line(source, stmts[-1]):
        return None
    first, last = block_rows(stmts)
    indent = source.indent_of(first)
    unit = "    " if "\t" not in indent else "\t"
    body = reindent_rows(source, first, last, add=unit)
    if body is None:
        return None
    return [insert(Pos(first, 0), f"{indent}{header}:{source.newline}"), *body]


def module_ref(
    sem: Semantic, source: Source, module: str = "torch", notebook: Notebook | None = None
) -> tuple[str, list[Edit]] | None:
    """How to spell ``module`` in new code: its alias if imported (``T`` after ``import torch as
    T``), else ``torch`` plus the edits that add ``import torch`` (``import_edits``). None when
    the name is taken."""
    scope = sem.scopes[sem.tree]
    for name, bindings in scope.bindings.items():
        if bindings and all(b.how == "import" and b.qualname == module for b in bindings):
            return name, []
    if module in scope.bindings:
        return None
    # A name used in any scope without a module binding would also be captured: stay away.
    if any(module in s.bindings for s in sem.scopes.values()):
        return None
    return module, import_edits(sem, source, [f"import {module}"], notebook)


def import_header(sem: Semantic) -> list[ast.stmt]:
    """The module's first run of top-level imports (with the docstring when the run follows
    it, or the docstring alone when other code follows it), in order; empty when there is
    neither. ``header_edits`` inserts code right after the last of them; ``import_edits`` adds
    imports to that run."""
    body = sem.tree.body
    run: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom) or (
            not run
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
            and stmt is body[0]
        ):
            run.append(stmt)
        elif run:
            break
    return run


def header_module_ref(sem: Semantic, module: str) -> tuple[str, str | None] | None:
    """How code that ``header_edits`` inserts after the import header spells the top-level
    ``module`` so that the name is bound when that code runs: the name an import of the header
    binds to it (``np`` after ``import numpy as np``) and no import line, else ``module`` and
    the line that imports it (``"import random"``), to give to ``header_edits`` with the code.
    A module imported only further down the file (after other code, in a later cell) is
    imported again in the header.
    None when the header binds ``module`` to something else, or when any scope of the file
    binds that name to anything but the module."""
    bound: dict[str, str | None] = {}
    for stmt in import_header(sem):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    bound[alias.asname] = canonical(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    bound[top] = top
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module if not stmt.level else None
            for alias in stmt.names:
                bound[alias.asname or alias.name] = (
                    canonical(f"{base}.{alias.name}") if base else None
                )
    for name, qual in bound.items():
        if qual == module:
            return name, None
    if module in bound:
        return None
    for scope in sem.scopes.values():
        for binding in scope.bindings.get(module, ()):
            if binding.how != "import" or binding.qualname != module:
                return None
    return module, f"import {module}"


def _import_run(sem: Semantic) -> list[ast.Import | ast.ImportFrom]:
    return [s for s in import_header(sem) if isinstance(s, ast.Import | ast.ImportFrom)]


def import_edits(
    sem: Semantic, source: Source, lines: list[str], notebook: Notebook | None = None
) -> list[Edit]:
    """Edits that add the import ``lines`` (``"import os"``, ``"from m import a"``) to the
    module's import block where Ruff's isort rules would put them (see ``core.imports``): in
    the first run of top-level imports (in a notebook, the part of it in the cell where it
    starts), or in a new block after the docstring and leading comments when there is none.
    Nothing for an import the block already has."""
    return plan_imports(sem.tree, source, _import_run(sem), lines, notebook)


def header_edits(
    sem: Semantic,
    source: Source,
    imports: list[str],
    code: str,
    notebook: Notebook | None = None,
) -> list[Edit]:
    """``import_edits`` for ``imports``, and ``code`` that must run right after the import
    header: after its last statement, a blank row between them, in the same file or cell (in
    a notebook whose header ends a cell, at the end of that cell rather than at the top of
    the next one, which may be a cell that does not parse, left out of the checked text);
    with no header, after the new imports."""
    header = import_header(sem)
    run = _import_run(sem)
    after = (header[-1].end_lineno or header[-1].lineno) if run else None
    return plan_imports(sem.tree, source, run, imports, notebook, code=code, code_after=after)


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Apply non-overlapping edits to ``text`` (positions refer to ``text``)."""
    source = Source(text)
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    out: list[str] = []
    cursor = 0
    for edit in ordered:
        start, end = source.offset(edit.start), source.offset(edit.end)
        if start < cursor:
            raise ValueError("overlapping edits")
        out.append(text[cursor:start])
        out.append(edit.content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def delete_statement(source: Source, stmt: ast.stmt) -> Edit | None:
    """Delete the rows of a statement that is alone on them (a trailing comment goes too).
    None when it shares a row with other code."""
    if not starts_line(source, stmt) or not ends_line(source, stmt):
        return None
    first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
    if source.line(last).endswith(("\n", "\r")):
        return delete_range(Pos(first, 0), Pos(last + 1, 0))
    if first == 1:
        return delete_range(Pos(1, 0), Pos(last, len(source.line(last))))
    prev = source.line(first - 1)
    return delete_range(Pos(first - 1, len(prev.rstrip("\r\n"))), Pos(last, len(source.line(last))))
