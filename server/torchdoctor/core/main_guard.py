"""Moving a script's module-level code under ``if __name__ == "__main__":``.

A script's *trailing run* is its module-level statements after the last top-level import,
``def`` or ``class``: the code that runs when the file is executed. ``main_edits`` moves it into
``def main():`` called under the guard (names it assigns and code above reads are declared
``global`` in ``main``); ``guard_edits`` indents it under the guard. Both give None when the
move cannot be written safely as text (the run does not start or end a line, a star import or
a ``global`` inside it, a ``main`` already bound, the guard already there).
"""

from __future__ import annotations

import ast

from . import fixes
from .model import Edit, Pos
from .semantic import FUNCTION_NODES, Semantic, is_main_guard
from .source import Source

GUARD = 'if __name__ == "__main__"'


def trailing_run(tree: ast.Module) -> list[ast.stmt]:
    """The module-level statements after the last top-level import, def or class."""
    body = tree.body
    last = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.ClassDef, *FUNCTION_NODES)):
            last = i
    return body[last + 1 :]


def movable(source: Source, trailing: list[ast.stmt]) -> bool:
    """Whether the trailing run can be moved as whole lines, and has no guard yet."""
    return (
        bool(trailing)
        and not any(is_main_guard(s) for s in trailing)
        and fixes.starts_line(source, trailing[0])
        and fixes.ends_line(source, trailing[-1])
    )


def guard_edits(source: Source, trailing: list[ast.stmt]) -> list[Edit] | None:
    """Indent the trailing run under the guard."""
    return fixes.wrap_statements(source, trailing, GUARD)


def main_edits(sem: Semantic, source: Source, trailing: list[ast.stmt]) -> list[Edit] | None:
    """Move the trailing run into ``def main():`` and call it under the guard."""
    module = sem.scopes[sem.tree]
    if "main" in module.bindings:
        return None
    first, last = fixes.block_rows(trailing)
    for stmt in trailing:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return None
            if isinstance(node, ast.Global | ast.Nonlocal):
                return None
    unit = "\t" if any(source.line(r).startswith("\t") for r in range(first, last + 1)) else "    "
    body = fixes.reindent_rows(source, first, last, add=unit)
    if body is None:
        return None
    nl = source.newline
    # Names the moved code assigns and code elsewhere (functions above) reads stay global.
    assigned = {
        b.name
        for bindings in module.bindings.values()
        for b in bindings
        if first <= b.pos[0] <= last
    }
    read_elsewhere = sorted(
        name
        for name in assigned
        if any(
            not first <= n.lineno <= last and _module_binding(sem, n)
            for n in sem.names.get(name, ())
        )
    )
    header = f"def main():{nl}"
    if read_elsewhere:
        header += f"{unit}global {', '.join(read_elsewhere)}{nl}"
    guard = f"{GUARD}:{nl}{unit}main()"
    line = source.line(last)
    if line.endswith(("\n", "\r")):
        tail = fixes.insert(Pos(last + 1, 0), f"{nl}{nl}{guard}{nl}")
    else:
        tail = fixes.insert(Pos(last, len(line)), f"{nl}{nl}{nl}{guard}")
    return [fixes.insert(Pos(first, 0), header), *body, tail]


def _module_binding(sem: Semantic, name: ast.Name) -> bool:
    """Whether a read of ``name`` refers to a module-level (global) binding."""
    binding = sem.lookup(name.id, name)
    return binding is not None and binding.scope is sem.tree
