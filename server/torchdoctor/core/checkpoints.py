"""Facts about checkpoints, the ``torch.save`` and ``torch.load`` calls of a file.

Which saves write a dict literal (``saved_dicts``: what a checkpoint holds), which save or load
is half of a round trip through a temporary file or an in-memory buffer in one function
(``round_trip``, over an index of the file's saves and loads by function, built once per file in
``sem.memo``), and whose state a ``.state_dict()`` call reads (``state_dict_owner``). All of it is
read from ``Semantic`` facts.
"""

from __future__ import annotations

import ast

from .semantic import Semantic, argument, keyword

# Calls by enclosing function (None: module level), each with its ast.dump and file argument.
_Files = dict[ast.AST | None, list[tuple[ast.Call, str, ast.expr]]]
# Key of the per-file index in ``sem.memo``.
_FILES = "files_by_function"


def saved_dicts(sem: Semantic) -> list[tuple[ast.Call, ast.Dict]]:
    """``torch.save`` calls whose object is a dict literal (directly, or through a name bound
    to one), with that dict: the checkpoints a script writes."""
    out = []
    for call in sem.calls_to("torch.save"):
        obj = call.args[0] if call.args else getattr(keyword(call, "obj"), "value", None)
        if isinstance(obj, ast.Name):
            binding = sem.lookup(obj.id, obj)
            obj = (
                binding.value
                if binding is not None and binding.how == "assign" and binding.index is None
                else None
            )
        if isinstance(obj, ast.Dict):
            out.append((call, obj))
    return out


def state_dict_owner(value: ast.AST) -> ast.expr | None:
    """``m`` for ``m.state_dict()`` (also ``m.module.state_dict()``)."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "state_dict"
    ):
        owner = value.func.value
        if isinstance(owner, ast.Attribute) and owner.attr in ("module", "_orig_mod"):
            return owner.value
        return owner
    return None


def round_trip(sem: Semantic, call: ast.Call) -> bool:
    """Whether a ``torch.save`` or ``torch.load`` call is half of a round trip: the same
    function saves to a temporary file or an in-memory buffer (``io.BytesIO``, ``tempfile``)
    and then loads it back, spelled alike (tests of serialisation, per-process files)."""
    saves, loads = _files_by_function(sem)
    scope = sem.enclosing_function(call)
    here = (call.lineno, call.col_offset)
    own = next(((d, t) for c, d, t in saves.get(scope, ()) if c is call), None)
    if own is not None:
        spelled, target = own
        return any(
            d == spelled and here < (load.lineno, load.col_offset)
            for load, d, _ in loads.get(scope, ())
        ) and _temporary(sem, target)
    source = argument(call, "f", 0)
    if source is None:
        return False
    spelled = ast.dump(source)
    return any(
        d == spelled and (save.lineno, save.col_offset) < here and _temporary(sem, target)
        for save, d, target in saves.get(scope, ())
    )


def _files_by_function(sem: Semantic) -> tuple[_Files, _Files]:
    """``torch.save`` and ``torch.load`` calls by enclosing function, each with the file
    argument and its ``ast.dump`` (computed once per file: a file may hold hundreds)."""
    cached = sem.memo.get(_FILES)
    if cached is None:
        saves: _Files = {}
        loads: _Files = {}
        for name, position, into in (("torch.save", 1, saves), ("torch.load", 0, loads)):
            for c in sem.calls_to(name):
                f = argument(c, "f", position)
                if f is not None:
                    into.setdefault(sem.enclosing_function(c), []).append((c, ast.dump(f), f))
        cached = sem.memo[_FILES] = (saves, loads)
    return cached  # type: ignore[return-value]


def _temporary(sem: Semantic, expr: ast.expr) -> bool:
    """``buf`` / ``tmp`` / ``tmp.name`` bound to ``io.BytesIO()`` or a ``tempfile`` object."""
    if isinstance(expr, ast.Attribute) and expr.attr == "name":
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return False
    binding = sem.lookup(expr.id, expr)
    value = binding.value if binding is not None else None
    qual = sem.qualname(value.func) if isinstance(value, ast.Call) else None
    return qual is not None and qual.startswith(("io.BytesIO", "tempfile."))
