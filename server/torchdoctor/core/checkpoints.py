"""Facts about checkpoints, the ``torch.save`` and ``torch.load`` calls of a file.

- What a checkpoint holds: which saves write a dict literal (``saved_dicts``), whose state a
  ``.state_dict()`` call reads (``state_dict_owner``), which saves write only CPU data
  (``writes_cpu``, ``saves_only_cpu``).
- Which file a call reads or writes: path expressions compared by structure (``path_keys``:
  equal literals, the same format string, a name bound to the same value, ``os.path.join`` of
  equal parts, a parameter by the arguments its callers pass), so that ``saves_writing`` tells
  which saves of this file write the path a load reads (``loads_reading`` the reverse,
  ``same_path_loads`` the other loads of it), ``written_here`` whether anything of the file
  (also a save helper or a checkpoint handler) writes it, ``downloaded`` whether the file
  downloads it, and ``round_trip`` which save or load is half of a round trip within one
  function or block.
- What a load's value becomes: used as a module (``module_use``) or as another object a state
  dict is not (``object_use``), only copied into existing tensors by ``load_state_dict``
  (``only_copied``), resuming training (``restores_training``), numpy data
  (``read_as_numpy``); and how the code loads a state dict into an object such as a DDP
  wrapper (``wrapper_reads``, ``state_loading``, ``resumes_from``).
- What a save puts into its file (``writes``: the objects ``weights_only=True`` refuses, such
  as an ``argparse.Namespace``, and the keys of the checkpoint dict), and which saves of the
  project write the file a load reads (``writers_of``: this file's, and other scripts' of its
  folder).
- Where the code runs: whether it needs CUDA with no CPU fallback (``needs_cuda``), and which
  device variable is certainly bound at a point (``device_name``).

All of it is read from ``Semantic`` facts; the per-file indexes are built once in ``sem.memo``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice, product
from typing import Any

from . import arguments, kinds, summaries, training
from .kinds import Kind
from .semantic import FUNCTION_NODES, Binding, Semantic, argument, dotted, keyword

SAVES = ("torch.save",)
_SAVED_DICTS = "saved-dicts"  # key of ``saved_dicts`` in ``sem.memo``
LOADS = ("torch.load", "torch.serialization.load")
# Keys of the per-file caches in ``sem.memo``.
_KEYS = "checkpoint-path-keys"
_INDEX = "checkpoint-path-index"
_CPU_FILE = "checkpoint-cpu-file"
_NEEDS_CUDA = "checkpoint-needs-cuda"
_SAVED_OWNERS = "checkpoint-saved-owners"
_WRITERS = "checkpoint-writers"

# A path expression's structural key: nested tuples of strings and ints.
Key = tuple[object, ...]
_MAX_KEYS = 12  # keys kept per expression (a product of alternatives is cut there)
_MAX_DEPTH = 6
_JOINS = frozenset({"os.path.join", "posixpath.join", "ntpath.join"})
# Calls whose result names the same file as their one argument.
_SAME_PATH = frozenset(
    {
        "pathlib.Path",
        "pathlib.PurePath",
        "pathlib.PosixPath",
        "os.fspath",
        "os.path.abspath",
        "os.path.expanduser",
        "os.path.normpath",
        "os.path.realpath",
    }
)
_SAME_PATH_METHODS = frozenset({"as_posix", "resolve", "absolute", "expanduser"})
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")
_BRACES = re.compile(r"\{[^{}]*\}")


# ------------------------------------------------------------------ what is saved --------
def saved_object(call: ast.Call) -> ast.expr | None:
    """The object a ``torch.save`` call writes."""
    return arguments.value(call, arguments.SAVE, "obj")


def saved_dicts(sem: Semantic) -> list[tuple[ast.Call, ast.Dict]]:
    """``torch.save`` calls whose object is a dict literal (directly, or through a name bound
    to one), with that dict: the checkpoints a script writes. Also calls of a saving helper of
    another project module (``save_checkpoint(state, path)`` whose ``state`` it saves), with the
    dict they hand over. Computed once per file."""
    known = sem.memo.get(_SAVED_DICTS)
    if isinstance(known, list):
        return known
    out: list[tuple[ast.Call, ast.Dict]] = []
    sem.memo[_SAVED_DICTS] = out
    for call in sem.calls_to(*SAVES):
        obj = _dict_value(sem, saved_object(call))
        if obj is not None:
            out.append((call, obj))
    if sem.project is not None:
        for call in sem.calls:
            if not isinstance(call.func, ast.Name | ast.Attribute) or not call.args:
                continue
            helper = summaries.summary(sem, call.func)
            if helper is None or helper.sem is sem or not helper.saved_params:
                continue
            obj = _dict_value(sem, helper.saved_argument(call))
            if obj is not None:
                out.append((call, obj))
    return out


def _dict_value(sem: Semantic, obj: ast.expr | None) -> ast.Dict | None:
    if isinstance(obj, ast.Name):
        binding = sem.lookup(obj.id, obj)
        obj = (
            binding.value
            if binding is not None and binding.how == "assign" and binding.index is None
            else None
        )
    return obj if isinstance(obj, ast.Dict) else None


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


# ------------------------------------------------------------------ which file -----------
def path_argument(sem: Semantic, call: ast.Call) -> ast.expr | None:
    """The file argument of a ``torch.save`` (second) or ``torch.load`` (first) call."""
    api = arguments.SAVE if sem.qualname(call.func) in SAVES else arguments.LOAD
    return arguments.value(call, api, "f")


def path_keys(sem: Semantic, expr: ast.expr | None) -> frozenset[Key]:
    """Structural keys of a path expression: two expressions that share a key name the same
    file. Literals compare by value; a format string (``%``, ``.format``, an f-string) by its
    text with the placeholders blanked; ``os.path.join``, ``/`` and ``+`` by their parts; a
    name by the value bound to it (``with open(p, "wb") as f`` binds ``p``; a loop variable
    over a literal list, each item); ``self.x`` by the attribute; a parameter by what the
    file's calls of its function pass (and its default). Two parameters of the same name in
    different functions are not the same path."""
    if expr is None:
        return frozenset()
    return _keys(sem, expr, 0)


def _keys(sem: Semantic, expr: ast.expr, depth: int) -> frozenset[Key]:
    cache: dict[int, frozenset[Key]] = sem.memo.setdefault(_KEYS, {})  # type: ignore[assignment]
    found = cache.get(id(expr))
    if found is not None:
        return found
    cache[id(expr)] = frozenset({("node", id(expr))})  # recursion guard
    result = (
        _node_keys(sem, expr, depth) if depth <= _MAX_DEPTH else frozenset({("node", id(expr))})
    )
    cache[id(expr)] = result
    return result


def _node_keys(sem: Semantic, expr: ast.expr, depth: int) -> frozenset[Key]:
    own: Key = ("node", id(expr))
    if isinstance(expr, ast.Constant):
        return frozenset({("text", str(expr.value))})
    if isinstance(expr, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in expr.values]
        return _format(own, "".join(str(p) for p in parts))
    if isinstance(expr, ast.BinOp):
        left, right = expr.left, expr.right
        if isinstance(expr.op, ast.Mod) and isinstance(left, ast.Constant):
            return _format(own, _PERCENT.sub("{}", str(left.value)).replace("%%", "%"))
        if isinstance(expr.op, ast.Div):
            return _joined(sem, [left, right], depth)
        if isinstance(expr.op, ast.Add):
            return _combine(("+",), [_keys(sem, left, depth + 1), _keys(sem, right, depth + 1)])
    if isinstance(expr, ast.Call):
        return _call_keys(sem, expr, depth)
    if isinstance(expr, ast.Name):
        return _name_keys(sem, expr, depth)
    if isinstance(expr, ast.Attribute):
        if isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = sem.enclosing_class(expr)
            return frozenset({("self", id(cls), expr.attr)})
        return frozenset(("attr", key, expr.attr) for key in _keys(sem, expr.value, depth + 1))
    if isinstance(expr, ast.Subscript):
        return _combine(
            ("[]",), [_keys(sem, expr.value, depth + 1), _keys(sem, expr.slice, depth + 1)]
        )
    return frozenset({("dump", ast.dump(expr))})


def _format(own: Key, text: str) -> frozenset[Key]:
    """A format string's key: its text with placeholders blanked, when that text still says
    something (``"{}"`` or ``"{}/{}"`` alone would match any other)."""
    if not any(c.isalnum() for c in text.replace("{}", "")):
        return frozenset({own})
    return frozenset({("text", text)})


def _combine(head: Key, parts: list[frozenset[Key]]) -> frozenset[Key]:
    return frozenset(islice(((*head, *combo) for combo in product(*parts)), _MAX_KEYS))


def _joined(sem: Semantic, parts: list[ast.expr], depth: int) -> frozenset[Key]:
    """``os.path.join(a, b)``, ``a / b``: a join of the parts' keys (one part: its keys)."""
    if len(parts) == 1:
        return _keys(sem, parts[0], depth + 1)
    return _combine(("join",), [_keys(sem, part, depth + 1) for part in parts])


def _call_keys(sem: Semantic, call: ast.Call, depth: int) -> frozenset[Key]:
    func = call.func
    plain = not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)
    qual = sem.qualname(func)
    if plain and qual in _JOINS and call.args:
        return _joined(sem, list(call.args), depth)
    if plain and len(call.args) == 1 and (qual in _SAME_PATH or _is_builtin(sem, func, "str")):
        return _keys(sem, call.args[0], depth + 1)
    if isinstance(func, ast.Attribute):
        receiver = func.value
        if func.attr == "format" and isinstance(receiver, ast.Constant):
            return _format(("node", id(call)), _BRACES.sub("{}", str(receiver.value)))
        if func.attr in _SAME_PATH_METHODS and not call.args:
            return _keys(sem, receiver, depth + 1)
        if func.attr == "joinpath" and plain and call.args:
            return _joined(sem, [receiver, *call.args], depth)
    return frozenset({("dump", ast.dump(call))})


def _is_builtin(sem: Semantic, func: ast.expr, name: str) -> bool:
    return isinstance(func, ast.Name) and func.id == name and sem.lookup(name, func) is None


def _name_keys(sem: Semantic, name: ast.Name, depth: int) -> frozenset[Key]:
    binding = sem.lookup(name.id, name)
    if binding is None:
        return frozenset({("name", name.id)})
    own = frozenset({("bind", id(binding.node))})
    value = binding.value
    if binding.how == "assign" and binding.index is None and value is not None:
        return own | _keys(sem, value, depth + 1)
    if binding.how == "with" and isinstance(value, ast.Call) and _is_open(sem, value):
        return own | _keys(sem, value.args[0], depth + 1)
    if binding.how == "param":
        return own | _argument_keys(sem, binding.node, depth)
    loop = sem.parent(binding.node)
    if binding.how == "loop" and isinstance(loop, ast.For) and loop.target is binding.node:
        items = loop.iter
        if isinstance(items, ast.Name):
            bound = sem.lookup(items.id, items)
            items = bound.value if bound is not None and bound.how == "assign" else None  # type: ignore[assignment]
        if isinstance(items, ast.List | ast.Tuple):
            keys = [_keys(sem, e, depth + 1) for e in items.elts]
            return own | frozenset(islice((k for ks in keys for k in ks), _MAX_KEYS))
    return own


def _is_open(sem: Semantic, call: ast.Call) -> bool:
    """``open(path, ...)``: the file object stands for ``path``."""
    return bool(call.args) and (
        _is_builtin(sem, call.func, "open") or sem.qualname(call.func) == "io.open"
    )


def _argument_keys(sem: Semantic, param: ast.AST, depth: int) -> frozenset[Key]:
    """The keys of what the calls of a function of this file pass for one of its parameters
    (and of its default value)."""
    arguments = sem.parent(param)
    func = sem.parent(arguments) if arguments is not None else None
    if not isinstance(param, ast.arg) or not isinstance(func, FUNCTION_NODES):
        return frozenset()
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    out: set[Key] = set()
    for value in _passed(sem, func, param.arg, positional):
        out |= _keys(sem, value, depth + 1)
    defaults = dict(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    defaults |= {
        a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    }
    if param.arg in defaults:
        out |= _keys(sem, defaults[param.arg], depth + 1)
    return frozenset(islice(out, _MAX_KEYS))


def _passed(
    sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, positional: list[str]
) -> Iterator[ast.expr]:
    """What the calls of ``func`` in this file (by name, or ``self.func(...)`` in its class)
    pass for its parameter ``name``."""
    method = isinstance(sem.parent(func), ast.ClassDef)
    calls = sem.calls_by_attr.get(func.name, ()) if method else sem.calls_by_name.get(func.name, ())
    for call in calls:
        if method:
            receiver = call.func.value  # type: ignore[attr-defined]
            if not (isinstance(receiver, ast.Name) and receiver.id == "self"):
                continue
            if sem.enclosing_class(call) is not sem.parent(func):
                continue
        elif sem.local_function(call.func) is not func:
            continue
        index = positional.index(name) - method if name in positional else -1
        value = argument(call, name, index if index >= 0 else None)
        if value is not None:
            yield value


def _index(sem: Semantic) -> tuple[dict[Key, list[ast.Call]], dict[Key, list[ast.Call]]]:
    """The file's saves and loads by the keys of their path (built once per file)."""
    cached = sem.memo.get(_INDEX)
    if cached is None:
        saves: dict[Key, list[ast.Call]] = {}
        loads: dict[Key, list[ast.Call]] = {}
        for names, api, into in ((SAVES, arguments.SAVE, saves), (LOADS, arguments.LOAD, loads)):
            for call in sem.calls_to(*names):
                for key in path_keys(sem, arguments.value(call, api, "f")):
                    if key[0] != "node":
                        into.setdefault(key, []).append(call)
        cached = sem.memo[_INDEX] = (saves, loads)
    return cached  # type: ignore[return-value]


def same_path_loads(sem: Semantic, load: ast.Call) -> list[ast.Call]:
    """The other ``torch.load`` calls of this file that read the path ``load`` reads."""
    _, loads = _index(sem)
    found: dict[ast.Call, None] = {}
    for key in path_keys(sem, arguments.value(load, arguments.LOAD, "f")):
        found.update(dict.fromkeys(c for c in loads.get(key, ()) if c is not load))
    return list(found)


def saves_writing(sem: Semantic, load: ast.Call) -> list[ast.Call]:
    """The ``torch.save`` calls of this file that write the path ``load`` reads (same path
    expression by structure, see ``path_keys``)."""
    saves, _ = _index(sem)
    found: dict[ast.Call, None] = {}
    for key in path_keys(sem, arguments.value(load, arguments.LOAD, "f")):
        found.update(dict.fromkeys(saves.get(key, ())))
        if key[0] == "text" and not found:
            for pattern, calls in saves.items():
                if pattern[0] == "text" and _instance(str(key[1]), str(pattern[1])):
                    found.update(dict.fromkeys(calls))
    return list(found)


def loads_reading(sem: Semantic, save: ast.Call) -> list[ast.Call]:
    """The ``torch.load`` calls of this file that read the path ``save`` writes."""
    _, loads = _index(sem)
    found: dict[ast.Call, None] = {}
    for key in path_keys(sem, arguments.value(save, arguments.SAVE, "f")):
        found.update(dict.fromkeys(loads.get(key, ())))
    return list(found)


# Downloads: (qualified name, file argument, its position).
_DOWNLOADS = (
    ("urllib.request.urlretrieve", "filename", 1),
    ("torch.hub.download_url_to_file", "dst", 1),
    ("wget.download", "out", 1),
    ("gdown.download", "output", 1),
)
# Checkpoint handlers that write files into a directory: (last part of the name, argument).
_HANDLERS = (
    ("ModelCheckpoint", "dirname"),
    ("DiskSaver", "dirname"),
    ("ModelCheckpoint", "dirpath"),
)


def downloaded(sem: Semantic, load: ast.Call) -> bool:
    """Whether the file downloads the path a load reads (``urlretrieve(url, path)``...): the
    checkpoint was made elsewhere, whatever this file also saves there."""
    return bool(path_keys(sem, arguments.value(load, arguments.LOAD, "f")) & _writers(sem)[0])


def written_here(sem: Semantic, load: ast.Call) -> bool:
    """Whether this file writes the file a load reads: a ``torch.save`` of the same path, a
    save helper given its file name (``save_model(model, "models", "net.pth")``), or a
    checkpoint handler writing into a directory the path is built from
    (``ModelCheckpoint("/tmp/models", ...)``)."""
    if saves_writing(sem, load):
        return True
    source = arguments.value(load, arguments.LOAD, "f")
    if source is None:
        return False
    _, directories, names = _writers(sem)
    texts = {str(n.value) for n in ast.walk(source) if isinstance(n, ast.Constant)}
    texts |= {str(k[1]) for k in path_keys(sem, source) if k[0] == "text"}
    return bool(texts & directories) or any(
        _instance(t.rsplit("/", 1)[-1], name) for t in texts for name in names
    )


def _saving_arguments(sem: Semantic) -> Iterator[ast.expr]:
    """Arguments that name a file some code saves: those of save helpers (``save_model``,
    ``save_checkpoint``; not ``torch.save``), and those passed for a ``save_path``-like
    parameter (``train(..., save_path="model.pt")``, by keyword or by position to a local
    function)."""
    for callee, calls in (*sem.calls_by_name.items(), *sem.calls_by_attr.items()):
        for call in calls:
            if callee.startswith("save"):
                if sem.qualname(call.func) not in SAVES:
                    yield from call.args
                    yield from (kw.value for kw in call.keywords)
                continue
            yield from (kw.value for kw in call.keywords if (kw.arg or "").startswith("save"))
            local = sem.local_function(call.func)
            if local is not None:
                params = [a.arg for a in (*local.args.posonlyargs, *local.args.args)]
                for name, value in zip(params, call.args, strict=False):
                    if name.startswith("save") and not isinstance(value, ast.Starred):
                        yield value


def _instance(text: str, pattern: str) -> bool:
    """``text`` equals ``pattern``, or is an instance of it when it holds placeholders
    (``"ckpt_10.pt"`` of ``"ckpt_{}.pt"``)."""
    if "{}" not in pattern or "{}" in text:
        return text == pattern
    stem = pattern.replace("{}", "").rsplit(".", 1)[0]
    if not any(c.isalnum() for c in stem.rsplit("/", 1)[-1]):
        return False  # "{}.pt", "out/{}.pth": any file would match
    regex = ".+".join(re.escape(part) for part in pattern.split("{}"))
    return re.fullmatch(regex, text) is not None


def _writers(sem: Semantic) -> tuple[frozenset[Key], frozenset[str], frozenset[str]]:
    """What the file writes other than through ``torch.save`` (built once per file): the
    keys of the paths it downloads to, the directories its checkpoint handlers write into,
    and the file names (``*.ext``) it passes to save helpers (``save_model``, ...)."""
    cached = sem.memo.get(_WRITERS)
    if cached is not None:
        return cached  # type: ignore[return-value]
    downloads: set[Key] = set()
    for qual, name, position in _DOWNLOADS:
        for call in sem.calls_to(qual):
            downloads |= path_keys(sem, argument(call, name, position))
    directories: set[str] = set()
    for name, option in _HANDLERS:
        for call in (*sem.calls_by_name.get(name, ()), *sem.calls_by_attr.get(name, ())):
            value = argument(call, option, 0)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                directories.add(value.value)
    names: set[str] = set()
    for value in _saving_arguments(sem):
        for key in path_keys(sem, value):
            if key[0] == "text" and "." in str(key[1]):
                names.add(str(key[1]).rsplit("/", 1)[-1])
    cached = sem.memo[_WRITERS] = (frozenset(downloads), frozenset(directories), frozenset(names))
    return cached


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def round_trip(sem: Semantic, call: ast.Call, *, lasting: bool = False) -> bool:
    """Whether a ``torch.save`` or ``torch.load`` call is half of a round trip: the same
    function saves to a temporary file or an in-memory buffer (``io.BytesIO``, ``tempfile``,
    a path in a temporary directory) and then loads it back (tests of serialisation,
    per-process files). With ``lasting``, any path counts when the load follows the save in
    the same function or the same module-level compound statement (a cache that a function
    writes and reads back at once)."""
    is_save = sem.qualname(call.func) in SAVES
    for other in loads_reading(sem, call) if is_save else saves_writing(sem, call):
        save, load = (call, other) if is_save else (other, call)
        if _pos(save) >= _pos(load):
            continue
        function = sem.enclosing_function(save)
        if function is not sem.enclosing_function(load):
            continue
        if _temporary(sem, arguments.value(save, arguments.SAVE, "f")):
            return True
        if lasting and (function is not None or _same_block(sem, save, load)):
            return True
    return False


def _same_block(sem: Semantic, a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` lie in one compound statement at module level (a ``with`` block...)."""
    top_a, top_b = _top_statement(sem, a), _top_statement(sem, b)
    return top_a is top_b and isinstance(
        top_a, ast.With | ast.AsyncWith | ast.If | ast.For | ast.While | ast.Try
    )


def _top_statement(sem: Semantic, node: ast.AST) -> ast.AST | None:
    for anc in (node, *sem.ancestors(node)):
        if sem.parent(anc) is sem.tree:
            return anc
    return None


def _temporary(sem: Semantic, expr: ast.expr | None) -> bool:
    """A path or buffer that does not outlive the process: a name bound to ``io.BytesIO()`` or
    a ``tempfile`` object (``tmp.name``), or a path built on a temporary directory."""
    if expr is None:
        return False
    for node in ast.walk(expr):
        value: ast.AST | None = node
        if isinstance(node, ast.Name):
            binding = sem.lookup(node.id, node)
            value = binding.value if binding is not None else None
        qual = sem.qualname(value.func) if isinstance(value, ast.Call) else None
        if qual is not None and qual.startswith(("io.BytesIO", "tempfile.")):
            return True
    return False


# ------------------------------------------------------------------ CPU data --------------
_CPU_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
# FSDP / torch.distributed.checkpoint settings that gather a full state dict on the CPU.
_OFFLOAD = {
    "FullStateDictConfig": "offload_to_cpu",
    "FullOptimStateDictConfig": "offload_to_cpu",
    "StateDictOptions": "cpu_offload",
}


def writes_cpu(sem: Semantic, save: ast.Call) -> bool:
    """Whether a ``torch.save`` call writes only CPU data: ``.cpu()`` values, numpy arrays,
    plain values, the state dict of a module moved to the CPU just before, a full state dict
    that FSDP offloads to the CPU (``FullStateDictConfig(offload_to_cpu=True)`` in the file),
    or containers of those."""
    return _cpu_value(sem, saved_object(save), save, 0)


def _cpu_value(sem: Semantic, value: ast.expr | None, at: ast.AST, depth: int) -> bool:
    if value is None or depth > 4:
        return False
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Dict):
        return all(_cpu_value(sem, v, at, depth + 1) for v in value.values)
    if isinstance(value, ast.Tuple | ast.List):
        return all(_cpu_value(sem, v, at, depth + 1) for v in value.elts)
    if isinstance(value, ast.Name):
        binding = sem.lookup(value.id, value)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        return _cpu_value(sem, binding.value, binding.node, depth + 1)
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _CPU_METHODS:
        return True
    if name == "to" and value.args and _names_cpu(value.args[0]):
        return True
    if "state_dict" in name and _offloaded(sem):
        return True
    return (
        name == "state_dict"
        and isinstance(func, ast.Attribute)
        and _moved_to_cpu(sem, func.value, at)
    )


def _names_cpu(expr: ast.expr) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(expr, ast.Call) and expr.args:
        expr = expr.args[0]
    return isinstance(expr, ast.Constant) and expr.value == "cpu"


def _offloaded(sem: Semantic) -> bool:
    for name, option in _OFFLOAD.items():
        for call in (*sem.calls_by_name.get(name, ()), *sem.calls_by_attr.get(name, ())):
            kw = keyword(call, option)
            if kw is not None and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                return True
    return False


def _moved_to_cpu(sem: Semantic, owner: ast.expr, at: ast.AST) -> bool:
    """The latest move of module ``owner`` before ``at`` in the same function is to the CPU:
    ``model.cpu()``, ``model.eval().cpu()``, ``model.to("cpu")``."""
    spelled = dotted(owner)
    if spelled is None:
        return False
    function = sem.enclosing_function(at)
    latest: tuple[tuple[int, int], bool] | None = None
    for method in ("cpu", "cuda", "to"):
        for call in sem.calls_by_attr.get(method, ()):
            receiver = call.func.value  # type: ignore[attr-defined]
            while (
                isinstance(receiver, ast.Call)
                and isinstance(receiver.func, ast.Attribute)
                and receiver.func.attr in kinds.MODULE_SELF_METHODS
            ):
                receiver = receiver.func.value
            if dotted(receiver) != spelled or sem.enclosing_function(call) is not function:
                continue
            if _pos(call) >= _pos(at) or (latest is not None and latest[0] > _pos(call)):
                continue
            cpu = method == "cpu" or (
                method == "to" and bool(call.args) and _names_cpu(call.args[0])
            )
            latest = (_pos(call), cpu)
    return latest is not None and latest[1]


def saves_only_cpu(sem: Semantic) -> bool:
    """The file saves something, and every one of its ``torch.save`` calls writes CPU data."""
    cached = sem.memo.get(_CPU_FILE)
    if cached is None:
        saves = list(sem.calls_to(*SAVES))
        cached = sem.memo[_CPU_FILE] = bool(saves) and all(writes_cpu(sem, s) for s in saves)
    return bool(cached)


# ------------------------------------------------------------------ what a load becomes ---
MODULE_ATTRS = frozenset({"eval", "train", "parameters", "named_parameters", "modules", "forward"})
# Attributes that a tensor, a dict or a list answers: reading them says nothing of the value.
PLAIN_ATTRS = frozenset({
    "shape", "dtype", "device", "size", "numel", "dim", "ndim", "T", "data", "item", "tolist",
    "numpy", "cpu", "cuda", "to", "float", "half", "double", "long", "int", "bool", "clone",
    "detach", "copy_", "contiguous", "view", "reshape", "keys", "values", "items", "get", "pop",
    "update", "copy", "append", "extend", "index", "count", "requires_grad", "is_cuda", "sum",
    "mean", "max", "min", "squeeze", "unsqueeze", "permute", "transpose", "type", "startswith",
})  # fmt: skip
_COPYING = frozenset({Kind.MODULE, Kind.OPTIMIZER, Kind.SCHEDULER, Kind.SCALER})


def loaded_name(sem: Semantic, load: ast.expr) -> ast.Name | None:
    """``ckpt`` in ``ckpt = torch.load(p)``."""
    parent = sem.parent(load)
    if (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return parent.targets[0]
    return None


def value_uses(sem: Semantic, load: ast.expr) -> list[ast.expr] | None:
    """Where the value of a load (or of another expression) is read: the expression itself
    when it is used in place, the reads of the name it is assigned to (in the same scope)
    otherwise; ``[]`` when it is dropped; None when it goes where this cannot follow (tuple
    targets, attributes)."""
    parent = sem.parent(load)
    if isinstance(parent, ast.Expr):
        return []
    if isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
        target = loaded_name(sem, load)
        if target is None:
            return None
        scope = sem.scope_of(parent)
        out: list[ast.expr] = []
        for use in sem.reads(target.id).get(target, ()):
            if sem.scope_of(use) is not scope:
                return None  # read in a nested function: not followed
            out.append(use)
        return out
    return [load]


def module_use(sem: Semantic, load: ast.expr) -> ast.AST | None:
    """Where the value a load returns (or an item of it: ``model = ckpt["model"]``) is used
    as a module: called, or asked for ``.eval()``, ``.parameters()``... (``model =
    torch.load(p)`` then ``model.eval()``, also through ``model = model.cuda()``); None when
    the code does not show it."""
    return _object_use(sem, load, MODULE_ATTRS)


def object_use(sem: Semantic, load: ast.expr) -> ast.AST | None:
    """Like ``module_use``, but any use that a state dict (a dict of tensors) would not
    answer counts: called, or an attribute other than a dict's or a tensor's read on it
    (``best_model.predict(x)``)."""
    return _object_use(sem, load, None)


def _object_use(sem: Semantic, load: ast.expr, attrs: frozenset[str] | None) -> ast.AST | None:
    pending = list(value_uses(sem, load) or ())
    seen = 0
    while pending and seen < 200:
        use = pending.pop(0)
        seen += 1
        outer = sem.parent(use)
        if isinstance(outer, ast.Call) and outer.func is use:
            return use
        if not isinstance(outer, ast.Attribute) or outer.value is not use:
            continue
        if outer.attr in MODULE_ATTRS or (attrs is None and outer.attr not in PLAIN_ATTRS):
            return use
        moved = sem.parent(outer)
        if outer.attr in kinds.MODULE_SELF_METHODS and isinstance(moved, ast.Call):
            if isinstance(sem.parent(moved), ast.Assign):  # model = model.cuda()
                pending.extend(value_uses(sem, moved) or ())
    return None


def state_targets(sem: Semantic, load: ast.Call) -> list[ast.expr] | None:
    """The objects whose ``load_state_dict`` receives what a load returns (or an item of it:
    ``model.load_state_dict(ckpt["model"])``); None when the value (or an item) is read
    anywhere else."""
    targets, elsewhere = _state_uses(sem, load)
    return None if elsewhere else targets


def _state_uses(sem: Semantic, load: ast.Call) -> tuple[list[ast.expr], bool]:
    """The ``load_state_dict`` receivers of a load's value and its items, and whether the
    value is also read elsewhere (or where this cannot follow)."""
    uses = value_uses(sem, load)
    if uses is None:
        return [], True
    out: list[ast.expr] = []
    elsewhere = False
    for use in uses:
        node: ast.expr = use
        outer = sem.parent(node)
        while True:
            if isinstance(outer, ast.Subscript) and outer.value is node:
                node = outer
            elif (
                isinstance(outer, ast.Attribute)
                and outer.value is node
                and outer.attr == "get"
                and isinstance(sem.parent(outer), ast.Call)
            ):
                node = sem.parent(outer)  # type: ignore[assignment]
            else:
                break
            outer = sem.parent(node)
        receiver = _state_receiver(sem, node)
        if receiver is None:
            elsewhere = True
        else:
            out.append(receiver)
    return out, elsewhere


def _state_receiver(sem: Semantic, node: ast.expr) -> ast.expr | None:
    """``m`` when ``node`` is the state dict passed to ``m.load_state_dict(...)``."""
    call = sem.parent(node)
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "load_state_dict"
    ):
        return None
    if arguments.value(call, arguments.LOAD_STATE_DICT, "state_dict") is node:
        return call.func.value
    return None


def only_copied(sem: Semantic, load: ast.Call) -> bool:
    """Whether the tensors a load returns are only copied into existing ones: the value is
    dropped, or it (or its items) goes only to ``load_state_dict`` of modules, optimizers,
    schedulers or scalers, which copy (or cast) to where their own tensors are. Then the
    device the load puts them on cannot be observed."""
    targets = state_targets(sem, load)
    return targets is not None and all(_copies(sem, t) for t in targets)


def _copies(sem: Semantic, receiver: ast.expr) -> bool:
    """Whether ``receiver.load_state_dict(...)`` copies into existing tensors: a module (by
    kind, the ``.module`` of a wrapper, or made by a chain ending in ``.to(...)``,
    ``.eval()``...), an optimizer, scheduler or scaler; not an instance of a class of this
    file that defines its own ``load_state_dict``."""
    if isinstance(receiver, ast.Attribute) and receiver.attr in ("module", "_orig_mod"):
        return _copies(sem, receiver.value)
    made = kinds.constructor_call(sem, receiver)
    chained = made
    while (
        isinstance(chained, ast.Call)
        and isinstance(chained.func, ast.Attribute)
        and chained.func.attr in kinds.MODULE_SELF_METHODS
    ):
        chained = chained.func.value  # type: ignore[assignment]
    known = kinds.kind(sem, receiver)
    if known is None and isinstance(receiver, ast.Name):
        binding = sem.lookup(receiver.id, receiver)
        if binding is not None and binding.how == "param":
            known = kinds.argument_kind(sem, binding)  # what the callers pass
    if known not in _COPYING and chained is made and not _moved(sem, receiver):
        return False
    cls = sem.local_class(chained.func) if isinstance(chained, ast.Call) else None
    return cls is None or not any(
        isinstance(s, FUNCTION_NODES) and s.name == "load_state_dict" for s in cls.body
    )


def _moved(sem: Semantic, owner: ast.expr) -> bool:
    """``owner.to(...)``, ``owner.eval()``... somewhere in the file (the same variable): a
    module's methods (a tensor has no ``load_state_dict``)."""
    known = sem.memo.get(_MOVED)
    moved: set[tuple[object, ...]]
    if isinstance(known, set):
        moved = known
    else:  # the objects such methods are called on, worked out once per file
        moved = set()
        for method in kinds.MODULE_SELF_METHODS:
            for call in sem.calls_by_attr.get(method, ()):
                key = _object_key(sem, call.func.value)  # type: ignore[attr-defined]
                if key is not None:
                    moved.add(key)
        sem.memo[_MOVED] = moved
    key = _object_key(sem, owner)
    return key is not None and key in moved


_MOVED = "checkpoints-moved-objects"


def restores_training(sem: Semantic, load: ast.Call) -> bool:
    """Whether a load resumes training: what it returns restores an optimizer's (or
    scheduler's, scaler's) state, goes to ignite's ``Checkpoint.load_objects``, or restores a
    module that this file also saves or trains (an optimizer over its parameters:
    ``netG.load_state_dict(torch.load(opt.netG))`` then ``Adam(netG.parameters())``)."""
    targets, _ = _state_uses(sem, load)
    for target in targets:
        if (
            kinds.is_optimizer(sem, target)
            or kinds.is_scheduler(sem, target)
            or kinds.kind(sem, target) is Kind.SCALER
            or _trained(sem, target)
            or _saved_owner(sem, target)
        ):
            return True
    for use in value_uses(sem, load) or ():
        outer = sem.parent(use)
        if isinstance(outer, ast.keyword):
            outer = sem.parent(outer)
        if isinstance(outer, ast.Call) and use is not outer.func:
            if (sem.qualname(outer.func) or dotted(outer.func) or "").endswith(
                "Checkpoint.load_objects"
            ):
                return True
        if isinstance(outer, ast.Subscript) and _restores_object(sem, outer):
            return True
    return False


def resumed_weights_snapshot(sem: Semantic, save: ast.Call) -> ast.Call | None:
    """For ``torch.save(model.state_dict(), path)`` (the module's weights alone) inside a loop
    that steps an optimizer, the ``model.load_state_dict(torch.load(...))`` of the same
    variable, earlier in the same function and outside that loop: the run restarts training
    from such a weights file, so the file is a checkpoint for resuming."""
    obj = saved_object(save)
    owner = state_dict_owner(obj) if obj is not None else None
    if owner is None or kinds.kind(sem, owner) is not Kind.MODULE:
        return None
    loop = next(
        (
            info.node
            for info in training.enclosing_loops(sem, save)
            if training.optimizer_steps(sem, info.node)
        ),
        None,
    )
    if loop is None:
        return None
    function = sem.enclosing_function(save)
    for call in sem.calls_by_attr.get("load_state_dict", ()):
        receiver = call.func.value  # type: ignore[attr-defined]
        if (
            sem.enclosing_function(call) is function
            and _pos(call) < _pos(loop)
            and _same_variable(sem, receiver, owner)
            and any(
                isinstance(n, ast.Call) and sem.qualname(n.func) in LOADS
                for arg in call.args[:1]
                for n in ast.walk(arg)
            )
        ):
            return call
    return None


def _same_variable(sem: Semantic, a: ast.expr, b: ast.expr) -> bool:
    """Two reads of one variable, whichever of its assignments each sees (``model =
    model.cuda()`` in between): a name of the same scope, or ``self.x`` in one class."""
    a, b = _unwrapped(a), _unwrapped(b)
    if isinstance(a, ast.Name) and isinstance(b, ast.Name):
        first, second = sem.lookup(a.id, a), sem.lookup(b.id, b)
        return (
            a.id == b.id
            and first is not None
            and second is not None
            and first.scope is second.scope
        )
    return _same_object(sem, a, b)


def held_while_training(sem: Semantic, load: ast.Call) -> ast.Call | None:
    """For a module-level ``ckpt = torch.load(p)`` whose state (the value, an item of it, or
    a name assigned an item: ``hparams, weights = ckpt["hparams"], ckpt["weights"]``) goes to
    ``load_state_dict``, the first optimizer step (or ``backward``) of the module-level code
    after it when nothing deletes the name: the checkpoint's tensors stay referenced by a
    global for the whole run, a second copy of the restored state."""
    if not sem.at_module_level(load):
        return None
    target = loaded_name(sem, load)
    if target is None or _deleted(sem, target.id):
        return None
    restored = False
    for use in _module_reads(sem, target):
        node: ast.expr = use
        outer = sem.parent(node)
        while isinstance(outer, ast.Subscript) and outer.value is node:
            node, outer = outer, sem.parent(outer)
        if _state_receiver(sem, node) is not None:
            restored = True
            continue
        name = _item_name(sem, node)
        if name is not None and not _deleted(sem, name.id):
            restored = restored or any(
                _state_receiver(sem, read) is not None for read in _module_reads(sem, name)
            )
    if not restored:
        return None
    here = _pos(load)
    steps = [
        c
        for c in (*training.all_optimizer_steps(sem), *sem.calls_by_attr.get("backward", ()))
        if _pos(c) > here and sem.at_module_level(c)
    ]
    return min(steps, key=_pos) if steps else None


def _module_reads(sem: Semantic, name: ast.Name) -> list[ast.Name]:
    """The module-level reads of a module-level name after this assignment (the value of
    one branch of an ``if`` reaches them, whatever the other branch assigns)."""
    here = _pos(name)
    return [
        use
        for use in sem.names.get(name.id, ())
        if isinstance(use.ctx, ast.Load) and _pos(use) > here and sem.at_module_level(use)
    ]


def _item_name(sem: Semantic, item: ast.expr) -> ast.Name | None:
    """``w`` when ``item`` is assigned to ``w`` (``w = ckpt["w"]``, or one element of
    ``a, w = ckpt["a"], ckpt["w"]``)."""
    parent = sem.parent(item)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        return target if isinstance(target, ast.Name) and parent.value is item else None
    assign = sem.parent(parent) if isinstance(parent, ast.Tuple) else None
    if (
        isinstance(parent, ast.Tuple)
        and isinstance(assign, ast.Assign)
        and assign.value is parent
        and len(assign.targets) == 1
    ):
        targets = assign.targets[0]
        if isinstance(targets, ast.Tuple) and len(targets.elts) == len(parent.elts):
            element = targets.elts[next(i for i, e in enumerate(parent.elts) if e is item)]
            if isinstance(element, ast.Name):
                return element
    return None


def _deleted(sem: Semantic, name: str) -> bool:
    """Whether some ``del`` of the file removes ``name``."""
    known = sem.memo.get(_DELETED)
    if not isinstance(known, frozenset):
        known = sem.memo[_DELETED] = frozenset(
            t.id
            for node in ast.walk(sem.tree)
            if isinstance(node, ast.Delete)
            for t in node.targets
            if isinstance(t, ast.Name)
        )
    return name in known


_DELETED = "checkpoints-deleted-names"


def _restores_object(sem: Semantic, item: ast.Subscript) -> bool:
    """``optimizer = ckpt["optimizer"]`` where the name otherwise holds an optimizer (or a
    scheduler) built in the same scope."""
    assign = sem.parent(item)
    if not (
        isinstance(assign, ast.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0], ast.Name)
    ):
        return False
    name = assign.targets[0].id
    scope = sem.scopes.get(sem.scope_of(assign).node)
    bindings = scope.bindings.get(name, []) if scope is not None else []
    return any(kinds.binding_kind(sem, b) in (Kind.OPTIMIZER, Kind.SCHEDULER) for b in bindings)


def _trained(sem: Semantic, module: ast.expr) -> bool:
    """An optimizer of this file is built over ``module.parameters()``."""
    known = sem.memo.get(_TRAINED)
    trained: set[tuple[object, ...]]
    if isinstance(known, set):
        trained = known
    else:  # the objects optimizers are built over, worked out once per file
        trained = set()
        for call in sem.calls_by_attr.get("parameters", ()):
            key = _object_key(sem, call.func.value)  # type: ignore[attr-defined]
            if key is None:
                continue
            for depth, anc in enumerate(sem.ancestors(call)):
                if depth > 4 or isinstance(anc, ast.stmt):
                    break
                if isinstance(anc, ast.Call) and kinds.kind(sem, anc) is Kind.OPTIMIZER:
                    trained.add(key)
                    break
        sem.memo[_TRAINED] = trained
    key = _object_key(sem, module)
    return key is not None and key in trained


_TRAINED = "checkpoints-trained-objects"


def _object_key(sem: Semantic, expr: ast.expr) -> tuple[object, ...] | None:
    """What ``_same_object`` compares: the binding a name reads, or ``self.x`` in a class."""
    expr = _unwrapped(expr)
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        return None if binding is None else ("name", binding.node)
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        return ("self", expr.attr, sem.enclosing_class(expr))
    return None


def read_as_numpy(sem: Semantic, load: ast.Call) -> bool:
    """Whether what a load returns is numpy data or turned into numpy at once:
    ``torch.load(p).numpy()``, ``torch.from_numpy(data[3:])``, ``np.mean(data)``."""
    for use in value_uses(sem, load) or ():
        node: ast.AST = use
        outer = sem.parent(node)
        while isinstance(outer, ast.Subscript) and outer.value is node:
            node, outer = outer, sem.parent(outer)
        if isinstance(outer, ast.Attribute) and outer.attr == "numpy":
            return True
        if isinstance(outer, ast.Call) and node is not outer.func:
            qual = sem.qualname(outer.func) or ""
            if qual == "torch.from_numpy" or qual.startswith("numpy."):
                return True
    return False


def _saved_owner(sem: Semantic, target: ast.expr) -> bool:
    """Whether this file's saves write ``target.state_dict()`` (the same variable)."""
    known = sem.memo.get(_SAVED_OWNER_KEYS)
    keys: set[tuple[object, ...]]
    if isinstance(known, set):
        keys = known
    else:
        keys = {k for k in map(partial(_object_key, sem), _saved_owners(sem)) if k is not None}
        sem.memo[_SAVED_OWNER_KEYS] = keys
    key = _object_key(sem, target)
    return key is not None and key in keys


_SAVED_OWNER_KEYS = "checkpoints-saved-owner-keys"


def _saved_owners(sem: Semantic) -> list[ast.expr]:
    """The modules (and other objects) whose ``state_dict()`` this file's saves write."""
    cached = sem.memo.get(_SAVED_OWNERS)
    if cached is None:
        owners: list[ast.expr] = []
        for call in sem.calls_to(*SAVES):
            obj = saved_object(call)
            display = _dict_value(sem, obj)
            values = display.values if display is not None else [obj]
            for value in values:
                if isinstance(value, ast.Name):
                    value = kinds.constructor_call(sem, value)
                owner = state_dict_owner(value) if value is not None else None
                if owner is not None:
                    owners.append(owner)
        cached = sem.memo[_SAVED_OWNERS] = owners
    return cached  # type: ignore[return-value]


def _same_object(sem: Semantic, a: ast.expr, b: ast.expr) -> bool:
    """Two reads of one variable: a name bound by the same statement, or ``self.x`` in one
    class (``m.module`` stands for ``m``)."""
    a, b = _unwrapped(a), _unwrapped(b)
    if isinstance(a, ast.Name) and isinstance(b, ast.Name):
        first, second = sem.lookup(a.id, a), sem.lookup(b.id, b)
        return first is not None and second is not None and first.node is second.node
    if (
        isinstance(a, ast.Attribute)
        and isinstance(b, ast.Attribute)
        and isinstance(a.value, ast.Name)
        and isinstance(b.value, ast.Name)
        and a.value.id == b.value.id == "self"
    ):
        return a.attr == b.attr and sem.enclosing_class(a) is sem.enclosing_class(b)
    return False


def _unwrapped(expr: ast.expr) -> ast.expr:
    if isinstance(expr, ast.Attribute) and expr.attr in ("module", "_orig_mod"):
        return expr.value
    return expr


# ------------------------------------------------------------------ devices --------------
_AVAILABLE = frozenset(
    {
        "torch.cuda.is_available",
        "torch.backends.mps.is_available",
        "torch.accelerator.is_available",
        "torch.xpu.is_available",
    }
)
_CONDITIONAL = (ast.If, ast.IfExp, ast.Match, ast.ExceptHandler, ast.BoolOp, ast.While)
_DEVICE_NAMES = ("device", "DEVICE", "dev")
# Engines that run on CUDA devices only.
_CUDA_ONLY = ("deepspeed.initialize", "deepspeed.init_inference")


def needs_cuda(sem: Semantic, at: ast.AST) -> bool:
    """Whether the code runs only with CUDA wherever ``at`` runs: it moves things to CUDA
    (``.cuda()``, ``device = "cuda"``, ``torch.device("cuda")``, ``device="cuda"`` or
    ``accelerator="cuda"`` arguments, DeepSpeed, 8-bit loading) outside any ``if``, or under
    the same conditions as ``at``, and the file shows no CPU fallback (no
    ``torch.cuda.is_available()`` test outside an ``assert``, no ``"cpu"`` device chosen by an
    assignment, a conditional expression or an option's default)."""
    cached = sem.memo.get(_NEEDS_CUDA)
    if cached is None:
        uses = [] if _cpu_fallback(sem) else [_conditions(sem, u) for u in _cuda_uses(sem)]
        cached = sem.memo[_NEEDS_CUDA] = uses
    if not cached:
        return False
    here = _conditions(sem, at)
    return any(use <= here for use in cached)  # type: ignore[attr-defined]


def _conditions(sem: Semantic, node: ast.AST) -> frozenset[tuple[int, str]]:
    """The branches ``node`` runs in: (conditional statement or expression, branch) pairs; a
    branch is a field (``body``, ``orelse``), or one item of ``values``/``cases``."""
    out = set()
    child = node
    for anc in sem.ancestors(node):
        if isinstance(anc, _CONDITIONAL):
            out.add((id(anc), _branch(anc, child)))
        child = anc
    return frozenset(out)


def _branch(node: ast.AST, child: ast.AST) -> str:
    for name in ("test", "body", "orelse", "values", "cases", "subject"):
        value = getattr(node, name, None)
        if value is child:
            return name
        if isinstance(value, list) and any(c is child for c in value):
            if name in ("values", "cases"):
                return f"{name}{next(i for i, c in enumerate(value) if c is child)}"
            return name
    return "?"


def _is_cuda(sem: Semantic, expr: ast.expr | None) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``."""
    if isinstance(expr, ast.Call) and sem.qualname(expr.func) == "torch.device" and expr.args:
        expr = expr.args[0]
    return (
        isinstance(expr, ast.Constant)
        and isinstance(expr.value, str)
        and expr.value.split(":")[0] == "cuda"
    )


def _cuda_uses(sem: Semantic) -> Iterator[ast.AST]:
    """Code that moves things to CUDA or runs only there."""
    yield from sem.calls_by_attr.get("cuda", ())
    yield from sem.calls_to(*_CUDA_ONLY)
    yield from (a for a in sem.assigns if _is_cuda(sem, a.value))
    for call in sem.calls:
        values = [kw.value for kw in call.keywords if kw.arg in ("device", "accelerator")]
        if isinstance(call.func, ast.Attribute) and call.func.attr == "to":
            values += call.args[:1]
        quantized = [kw.value for kw in call.keywords if kw.arg in ("load_in_8bit", "load_in_4bit")]
        if any(_is_cuda(sem, v) for v in values) or any(
            isinstance(v, ast.Constant) and v.value is True for v in quantized
        ):
            yield call  # bitsandbytes quantization runs on CUDA only


def cpu_fallback(sem: Semantic) -> bool:
    """Whether the file can run without CUDA: it tests ``torch.cuda.is_available()`` outside
    an ``assert``, or chooses a ``"cpu"`` device (an assignment, a conditional expression,
    ``torch.device("cpu")``, an option's default or choices)."""
    cached = sem.memo.get("checkpoint-cpu-fallback")
    if cached is None:
        cached = sem.memo["checkpoint-cpu-fallback"] = _cpu_fallback(sem)
    return bool(cached)


def _cpu_fallback(sem: Semantic) -> bool:
    for call in sem.calls_by_attr.get("is_available", ()):
        if sem.qualname(call.func) in _AVAILABLE and not isinstance(
            sem.statement_of(call), ast.Assert
        ):
            return True
    for assign in sem.assigns:
        for node in ast.walk(assign.value):
            if isinstance(node, ast.Constant) and node.value == "cpu" and _chooses(sem, node):
                return True
    for call in sem.calls_by_attr.get("add_argument", ()):
        for value in (*call.args, *(kw.value for kw in call.keywords)):
            if any(isinstance(n, ast.Constant) and n.value == "cpu" for n in ast.walk(value)):
                return True
    return False


def _chooses(sem: Semantic, constant: ast.Constant) -> bool:
    """A ``"cpu"`` that picks a device: assigned, a branch of ``a if c else b``, or the
    argument of ``torch.device(...)`` (not ``x.to("cpu")``, which only moves a result)."""
    parent = sem.parent(constant)
    if isinstance(parent, ast.Assign | ast.IfExp):
        return True
    return isinstance(parent, ast.Call) and sem.qualname(parent.func) == "torch.device"


def is_device_expr(value: ast.expr | None) -> bool:
    """``"cuda" if ... else "cpu"``, ``"cuda:0"``, ``f"cuda:{rank}"``."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.split(":")[0] in ("cuda", "cpu", "mps", "xpu")
    if isinstance(value, ast.IfExp):
        return is_device_expr(value.body) and is_device_expr(value.orelse)
    if isinstance(value, ast.JoinedStr):
        first = value.values[0] if value.values else None
        return isinstance(first, ast.Constant) and str(first.value).startswith(("cuda", "cpu"))
    return False


def device_name(sem: Semantic, at: ast.AST) -> tuple[str, bool] | None:
    """A device variable bound wherever ``at`` runs, and whether it certainly holds a device
    (a ``torch.device(...)`` or a device string, not just a name): ``self.device`` when the
    class's ``__init__`` assigns it unconditionally (and ``at`` is not in ``__init__`` before
    that), else a parameter ``device``, or an earlier assignment of ``device``/``DEVICE``/
    ``dev`` that runs on every path to ``at`` (at module level before the function holding
    ``at``)."""
    own = _self_device(sem, at)
    if own is not None:
        return own
    for name in _DEVICE_NAMES:
        binding = sem.lookup(name, at)
        if binding is None or not _bound_at(sem, binding, at):
            continue
        if binding.how == "param" and name != "DEVICE":
            holds = _device_parameter(sem, binding)
            if holds is not None:
                return name, holds
        if binding.how == "assign" and binding.index is None:
            device = kinds.binding_kind(sem, binding) is Kind.DEVICE or is_device_expr(
                binding.value
            )
            if device:
                return name, True
    return None


def _device_parameter(sem: Semantic, binding: Binding) -> bool | None:
    """Whether a parameter certainly holds a device: its callers in this file pass devices,
    its default is a device string, or its annotation names ``torch.device``; None when its
    default shows it does not (``device=0``, ``device=None``: ``map_location`` refuses an
    index)."""
    param = binding.node
    func = binding.scope
    if not isinstance(param, ast.arg) or not isinstance(func, FUNCTION_NODES):
        return False
    if param.annotation is not None and (dotted(param.annotation) or "").endswith("device"):
        return True
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    defaults |= {
        a: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    }
    if param in defaults:
        default = defaults[param]
        if is_device_expr(default) or kinds.kind(sem, default) is Kind.DEVICE:
            return True
        if isinstance(default, ast.Constant):
            return None
    return kinds.argument_kind(sem, binding) is Kind.DEVICE


def _bound_at(sem: Semantic, binding: Binding, at: ast.AST) -> bool:
    """Whether ``binding`` has certainly run when ``at`` runs."""
    if binding.how == "param":
        return sem.enclosing_function(at) is binding.scope or sem.is_inside(at, binding.scope)
    if binding.how != "assign" or _pos(binding.node) >= _pos(at):
        return False
    stmt = sem.statement_of(binding.node)
    try:
        block, _ = sem.block_of(stmt)
    except ValueError:
        return False
    # The assignment's block holds ``at`` (so no ``if`` branch skips it), and at module level
    # it comes before the function that holds ``at``.
    return any(sem.in_block(node, block) for node in (at, *sem.ancestors(at)))


def _self_device(sem: Semantic, at: ast.AST) -> tuple[str, bool] | None:
    function = sem.enclosing_function(at)
    cls = sem.enclosing_class(at)
    if function is None or cls is None or sem.parent(function) is not cls:
        return None
    params = function.args.posonlyargs + function.args.args
    if not params or params[0].arg != "self":
        return None
    init = next(
        (s for s in cls.body if isinstance(s, FUNCTION_NODES) and s.name == "__init__"), None
    )
    if init is None:
        return None
    assigned = [
        stmt
        for stmt in init.body
        if isinstance(stmt, ast.Assign)
        and any(
            isinstance(t, ast.Attribute)
            and t.attr == "device"
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            for t in stmt.targets
        )
    ]
    if not assigned or (function is init and _pos(assigned[0]) >= _pos(at)):
        return None
    values = sem.self_attr_values.get((cls, "device"), [])
    device = bool(values) and all(
        kinds.kind(sem, v) is Kind.DEVICE or is_device_expr(v) for v in values
    )
    return "self.device", device


# ------------------------------------------------------------------ loading into objects --
# Calls that take a module without loading a state dict into it.
_HARMLESS = frozenset(
    {"print", "len", "isinstance", "str", "repr", "type", "id", "hasattr", "getattr"}
)
_RANKS = {None: 0, "strict": 1, "unseen": 1, "lenient": 2}


def wrapper_reads(sem: Semantic, wrapper: ast.Call) -> list[ast.expr]:
    """The reads of variables that certainly hold the ``DistributedDataParallel(...)`` /
    ``DataParallel(...)`` result ``wrapper`` (names and ``self.x`` attributes)."""
    from .distributed import wrapper_call

    bound = {
        b.name
        for scope in sem.scopes.values()
        for bindings in scope.bindings.values()
        for b in bindings
        if b.value is wrapper
    }
    out: list[ast.expr] = []
    for name in bound:
        out.extend(n for n in sem.names.get(name, ()) if wrapper_call(sem, n) is wrapper)
    for target, values in sem.self_attr_values.items():
        if any(v is wrapper for v in values):
            out.extend(
                a
                for a in sem.attributes.get(target[1], ())
                if isinstance(a.value, ast.Name)
                and a.value.id == "self"
                and isinstance(a.ctx, ast.Load)
                and wrapper_call(sem, a) is wrapper
            )
    return out


def resumes_from(sem: Semantic, save: ast.Call, reads: list[ast.expr]) -> bool:
    """Whether the code loads what ``save`` writes back into the object read at ``reads``: a
    load of the same path whose value (or an item of it) goes to that object's
    ``load_state_dict``, or a call that receives both the object and that path (a resume
    helper: ``restart_from_checkpoint(path, state_dict=model)``)."""
    ids = {id(r) for r in reads}
    for load in loads_reading(sem, save):
        targets, _ = _state_uses(sem, load)
        if any(id(t) in ids for t in targets):
            return True
    wanted = {
        k for k in path_keys(sem, arguments.value(save, arguments.SAVE, "f")) if k[0] != "node"
    }
    for read in reads:
        call = sem.parent(read)
        if isinstance(call, ast.keyword):
            call = sem.parent(call)
        if not isinstance(call, ast.Call) or call.func is read:
            continue
        for value in (*call.args, *(kw.value for kw in call.keywords)):
            if value is not read and path_keys(sem, value) & wanted:
                return True
    return False


def state_loading(sem: Semantic, reads: Iterable[ast.expr], _depth: int = 0) -> str | None:
    """How the code loads a state dict into the object read at ``reads``: ``"lenient"`` when
    a ``load_state_dict(..., strict=False)`` receives it (directly or in a function of this
    file it is passed to), ``"strict"`` for another ``load_state_dict``, ``"unseen"`` when it
    goes where the analysis cannot follow (a function of another module, a container, a
    return), None when nothing can load into it."""
    found: str | None = None
    for read in reads:
        how = _loading_at(sem, read, _depth)
        if _RANKS[how] > _RANKS[found]:
            found = how
    return found


def _loading_at(sem: Semantic, read: ast.expr, depth: int) -> str | None:
    parent = sem.parent(read)
    if isinstance(parent, ast.Attribute):
        call = sem.parent(parent)
        if parent.attr == "load_state_dict" and isinstance(call, ast.Call) and call.func is parent:
            strict = arguments.value(call, arguments.LOAD_STATE_DICT, "strict")
            return (
                "lenient"
                if isinstance(strict, ast.Constant) and strict.value is False
                else "strict"
            )
        return None
    if isinstance(parent, ast.keyword):
        parent = sem.parent(parent)
        if not isinstance(parent, ast.Call):
            return "unseen"
    if isinstance(parent, ast.Call):
        if parent.func is read:
            return None  # model(x)
        return _passed_to(sem, parent, read, depth)
    if isinstance(parent, ast.Dict | ast.List | ast.Tuple | ast.Set | ast.Starred | ast.Return):
        return "unseen"
    if isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr) and parent.value is read:
        return "unseen"
    return None


def _passed_to(sem: Semantic, call: ast.Call, read: ast.expr, depth: int) -> str | None:
    """What a function does with an object passed to it: looked into when it is defined in
    this file, else nothing for builtins and torch functions, "unseen" for the rest."""
    local = sem.local_function(call.func)
    if local is None:
        qual = sem.qualname(call.func) or ""
        if (
            _is_builtin(sem, call.func, getattr(call.func, "id", ""))
            and getattr(call.func, "id", "") in _HARMLESS
        ):
            return None
        if qual.startswith("torch.") and not qual.startswith("torch.distributed.checkpoint"):
            return None
        return "unseen"
    if depth >= 2:
        return "unseen"
    args = local.args
    positional = [*args.posonlyargs, *args.args]
    param: ast.arg | None = None
    if read in call.args:
        index = call.args.index(read)
        if any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            return "unseen"
        param = positional[index] if index < len(positional) else args.vararg
    else:
        kw = next((k for k in call.keywords if k.value is read), None)
        name = kw.arg if kw is not None else None
        param = next((a for a in (*positional, *args.kwonlyargs) if a.arg == name), args.kwarg)
    if param is None or param in (args.vararg, args.kwarg):
        return "unseen"
    uses = [
        n
        for n in sem.names.get(param.arg, ())
        if sem.is_inside(n, local) and getattr(sem.lookup(param.arg, n), "node", None) is param
    ]
    return state_loading(sem, uses, depth + 1)


# ------------------------------------------------------------------ what a save puts in ---
# Kinds of objects that ``torch.load``'s default ``weights_only=True`` (torch >= 2.6) refuses:
# the whole file fails to load (``UnpicklingError``) whatever key the code reads.
NAMESPACE = "namespace"  # argparse.Namespace
CONFIG = "config"  # yacs CfgNode, omegaconf DictConfig, ml_collections ConfigDict
NUMPY = "numpy"  # numpy arrays and scalars
MODULE = "module"  # a whole nn.Module
DATACLASS = "dataclass"  # an instance of a dataclass (or another class) of the project
OBJECT = "object"  # an optimizer, scheduler or scaler object
_CONFIG_PREFIXES = ("yacs.", "omegaconf.", "ml_collections.", "detectron2.config", "mmcv.Config")
_PLAIN_CONFIG = frozenset({"omegaconf.OmegaConf.to_container", "omegaconf.OmegaConf.to_yaml"})
_PROJECT_SAVES = "checkpoint-project-saves"
_MAX_SCRIPTS = 64  # other scripts of a folder read for what they save


@dataclass(frozen=True)
class Held:
    """An object that a save puts into its file and ``weights_only=True`` refuses."""

    node: ast.AST  # the expression that puts it there
    what: str  # NAMESPACE, CONFIG, NUMPY, MODULE, DATACLASS or OBJECT
    key: str | None  # the checkpoint dict's key it is saved under; None for the whole object


@dataclass(frozen=True)
class Written:
    """A save (``torch.save``, or a call of a helper that hands its arguments to one), what it
    writes and where."""

    sem: Semantic  # the facts of the module the call is in
    call: ast.Call
    obj: ast.expr | None  # the object written
    path: ast.expr | None  # the file written
    held: tuple[Held, ...]  # what in it ``weights_only=True`` refuses
    keys: frozenset[str]  # the keys of the checkpoint dict written (empty: not a dict)


def writes(sem: Semantic) -> list[Written]:
    """Every save of this file: its ``torch.save`` calls and the calls of saving helpers (of
    this file or another project module: ``save_checkpoint(state, path)``,
    ``save_on_master(*args, **kwargs)``), with what each puts into its file. Computed once."""
    known = sem.memo.get(_PROJECT_SAVES + "-own")
    if isinstance(known, list):
        return known
    out: list[Written] = []
    sem.memo[_PROJECT_SAVES + "-own"] = out
    for call in sem.calls_to(*SAVES):
        out.append(_written(sem, call, saved_object(call), argument(call, "f", 1)))
    definable = _definable_names(sem)
    for call in sem.calls:
        if not call.args:
            continue
        root = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        # Only a name bound by a def, a class or an import can name a helper (``definition``).
        if not isinstance(root, ast.Name) or root.id not in definable:
            continue
        if sem.qualname(call.func) in SAVES:
            continue
        handed = _helper_arguments(sem, call)
        if handed is not None:
            out.append(_written(sem, call, *handed))
    return out


def _definable_names(sem: Semantic) -> frozenset[str]:
    """The names some ``def``, ``class`` or import of the file binds (in any scope)."""
    return frozenset(
        name
        for scope in sem.scopes.values()
        for name, bindings in scope.bindings.items()
        if any(b.how in ("def", "class", "import") for b in bindings)
    )


def _written(sem: Semantic, call: ast.Call, obj: ast.expr | None, path: ast.expr | None) -> Written:
    held: list[Held] = []
    keys: set[str] = set()
    for key, value in _entries(sem, obj, call):
        if key is not None:
            keys.add(key)
        what = refused_kind(sem, value)
        if what is not None:
            held.append(Held(value, what, key))
    return Written(sem, call, obj, path, tuple(held), frozenset(keys))


def _helper_arguments(sem: Semantic, call: ast.Call) -> tuple[ast.expr, ast.expr | None] | None:
    """What a call of a saving helper hands to the ``torch.save`` inside it: (object, path),
    when the helper passes its parameters on (by name, or ``*args``)."""
    defined = sem.function_def(call.func)
    if defined is None:
        return None
    owner, func = defined
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    if positional and positional[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    for inner in _saves_in(owner, func):
        star = inner.args[0] if inner.args and isinstance(inner.args[0], ast.Starred) else None
        if (
            star is not None
            and args.vararg is not None
            and isinstance(star.value, ast.Name)
            and star.value.id == args.vararg.arg
        ):
            handed = call.args[len(positional) :]
            if handed and not isinstance(handed[0], ast.Starred):
                path = handed[1] if len(handed) > 1 else None
                return handed[0], path if not isinstance(path, ast.Starred) else None
            continue
        obj, path = saved_object(inner), argument(inner, "f", 1)
        found = [_handed(call, positional, p) for p in (obj, path)]
        if found[0] is not None:
            return found[0], found[1]
    return None


def _saves_in(sem: Semantic, func: ast.AST) -> list[ast.Call]:
    """The ``torch.save`` calls in a function's body (not in nested functions), worked out once
    per function: a helper called many times is not walked again for each call."""
    key = (_SAVES_IN, func)
    known = sem.memo.get(key)
    if isinstance(known, list):
        return known
    found = [
        inner
        for inner in sem.walk(func)
        if isinstance(inner, ast.Call) and sem.qualname(inner.func) in SAVES
    ]
    sem.memo[key] = found
    return found


_SAVES_IN = "checkpoints-saves-in"


def _handed(call: ast.Call, positional: list[str], param: ast.expr | None) -> ast.expr | None:
    """The argument of ``call`` for the parameter ``param`` names."""
    if not isinstance(param, ast.Name):
        return None
    if param.id in positional:
        index = positional.index(param.id)
        if index < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[: index + 1]
        ):
            return call.args[index]
    kw = keyword(call, param.id)
    return kw.value if kw is not None else None


def _entries(
    sem: Semantic, obj: ast.expr | None, at: ast.AST, depth: int = 0
) -> Iterator[tuple[str | None, ast.expr]]:
    """The (key, value) entries of what a save writes: a dict display or ``dict(...)`` call
    (directly, through the name bound to it, with the keys added by ``ckpt["k"] = v`` before
    ``at``, or the values the callers of a function pass for its parameter), else the whole
    object under None."""
    if obj is None or depth > 3:
        return
    if isinstance(obj, ast.Dict):
        for key, value in zip(obj.keys, obj.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield key.value, value
            elif key is None:
                yield from _entries(sem, value, at, depth + 1)  # {**base, ...}
        return
    if isinstance(obj, ast.Call) and _is_builtin(sem, obj.func, "dict"):
        for kw in obj.keywords:
            yield kw.arg, kw.value
        return
    if isinstance(obj, ast.Name):
        binding = sem.lookup(obj.id, obj)
        if binding is None:
            return
        if binding.how == "assign" and binding.index is None and binding.value is not None:
            if isinstance(binding.value, ast.Dict | ast.Call) and _dict_like(sem, binding.value):
                yield from _entries(sem, binding.value, at, depth + 1)
                yield from subscript_entries(sem, binding, at)
                return
        if binding.how == "param":
            func = binding.scope
            if isinstance(func, FUNCTION_NODES) and isinstance(binding.node, ast.arg):
                args = func.args
                positional = [a.arg for a in (*args.posonlyargs, *args.args)]
                for value in islice(_passed(sem, func, obj.id, positional), 8):
                    yield from _entries(sem, value, value, depth + 1)
            return
    yield None, obj


def _dict_like(sem: Semantic, value: ast.expr) -> bool:
    return isinstance(value, ast.Dict) or (
        isinstance(value, ast.Call) and _is_builtin(sem, value.func, "dict")
    )


def subscript_entries(
    sem: Semantic, binding: Binding, before: ast.AST
) -> Iterator[tuple[str, ast.expr]]:
    """The entries ``name["key"] = value`` adds to the dict a binding holds, in the binding's
    scope after it and before ``before``."""
    for sub in sem.reads(binding.name).get(binding.node, ()):
        outer = sem.parent(sub)
        assign = sem.parent(outer) if isinstance(outer, ast.Subscript) else None
        if (
            isinstance(outer, ast.Subscript)
            and outer.value is sub
            and isinstance(outer.ctx, ast.Store)
            and isinstance(assign, ast.Assign)
            and isinstance(outer.slice, ast.Constant)
            and isinstance(outer.slice.value, str)
            and sem.lookup(binding.name, sub) is binding
            and _pos(binding.node) < _pos(sub) < _pos(before)
        ):
            yield outer.slice.value, assign.value


def refused_kind(sem: Semantic, value: ast.expr | None, depth: int = 0) -> str | None:
    """What kind of object ``value`` is, when ``torch.load(weights_only=True)`` refuses it
    (``NAMESPACE``, ``CONFIG``...); None for tensors, state dicts, plain values and what the
    code does not show."""
    if value is None or depth > 4:
        return None
    if isinstance(value, ast.Name):
        binding = sem.lookup(value.id, value)
        if binding is None:
            return None
        if binding.how == "assign" and binding.value is not None:
            bound = binding.value
            if binding.index is not None:
                # args, unknown = parser.parse_known_args()
                if binding.index == 0 and _parses_args(bound):
                    return NAMESPACE
                return None
            found = refused_kind(sem, bound, depth + 1)
            return found if found is not None else _kind_refused(sem, value)
        if binding.how == "param":
            func = binding.scope
            if isinstance(func, FUNCTION_NODES):
                args = func.args
                positional = [a.arg for a in (*args.posonlyargs, *args.args)]
                for passed in islice(_passed(sem, func, value.id, positional), 8):
                    found = refused_kind(sem, passed, depth + 1)
                    if found is not None:
                        return found
            if any(
                _object_attribute(sem, use) for use in sem.reads(value.id).get(binding.node, ())
            ):
                return OBJECT  # def save(args, path): ... args.lr ...
        return _kind_refused(sem, value)
    if isinstance(value, ast.Attribute):
        if isinstance(value.value, ast.Name) and value.value.id == "self":
            cls = sem.enclosing_class(value)
            for bound in sem.self_attr_values.get((cls, value.attr), ())[:8]:  # type: ignore[arg-type]
                found = refused_kind(sem, bound, depth + 1)
                if found is not None:
                    return found
            if any(
                isinstance(other.value, ast.Name)
                and other.value.id == "self"
                and sem.enclosing_class(other) is cls
                and _object_attribute(sem, other)
                for other in sem.attributes.get(value.attr, ())
            ):
                return OBJECT  # self.args.model read in the class: not a plain value
        return _kind_refused(sem, value)
    if isinstance(value, ast.Subscript):
        inner = value.value
        if isinstance(inner, ast.Call) and _parses_args(inner):
            return NAMESPACE  # parser.parse_known_args()[0]
        return None
    if isinstance(value, ast.Call):
        return _call_refused(sem, value, depth)
    return None


# Attributes a tensor or a plain value has that are read without a call (besides PLAIN_ATTRS).
_DATA_ATTRS = frozenset({
    "grad", "is_leaf", "grad_fn", "mT", "H", "real", "imag", "layout", "names", "itemsize",
    "nbytes", "is_sparse",
})  # fmt: skip


def _object_attribute(sem: Semantic, use: ast.expr) -> bool:
    """Whether the code reads an attribute of ``use`` that no tensor, dict, list or plain value
    has, without calling it (``args.lr``, ``self.cfg.model``): the value is an object that
    ``weights_only=True`` refuses (a Namespace, a config, an instance of a class)."""
    outer = sem.parent(use)
    if not isinstance(outer, ast.Attribute) or outer.value is not use:
        return False
    if outer.attr in PLAIN_ATTRS or outer.attr in _DATA_ATTRS or outer.attr.startswith("_"):
        return False
    call = sem.parent(outer)
    return not (isinstance(call, ast.Call) and call.func is outer)


def _parses_args(call: ast.expr) -> bool:
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in ("parse_args", "parse_known_args")
    )


def _call_refused(sem: Semantic, call: ast.Call, depth: int) -> str | None:
    func = call.func
    qual = sem.qualname(func) or ""
    if _parses_args(call) or qual == "argparse.Namespace":
        return NAMESPACE
    if qual.startswith("numpy.") or (isinstance(func, ast.Attribute) and func.attr == "numpy"):
        return NUMPY
    if qual in _PLAIN_CONFIG:
        return None
    if qual.startswith(_CONFIG_PREFIXES) or qual.endswith((".CfgNode", ".ConfigDict")):
        return CONFIG
    if isinstance(func, ast.Attribute):
        if func.attr in ("state_dict", "item", "tolist", "cpu", "detach", "clone") and (
            func.attr != "clone" or refused_kind(sem, func.value, depth + 1) is None
        ):
            return None
        if func.attr == "clone":  # cfg.clone()
            return refused_kind(sem, func.value, depth + 1)
    defined = sem.class_def(func) if isinstance(func, ast.Name | ast.Attribute) else None
    if defined is not None:
        owner, cls = defined
        if kinds.class_kind(owner, cls) is Kind.MODULE:
            return MODULE
        bases = owner.class_bases(cls)
        if any(b in ("dict", "collections.OrderedDict", "str", "int", "float") for b in bases):
            return None
        if kinds.class_kind(owner, cls) in (None, Kind.DATASET):
            return DATACLASS
        return OBJECT
    return _kind_refused(sem, call)


def _kind_refused(sem: Semantic, value: ast.expr) -> str | None:
    found = kinds.kind(sem, value)
    if found is Kind.MODULE:
        return MODULE
    if found in (Kind.OPTIMIZER, Kind.SCHEDULER, Kind.SCALER, Kind.DATASET, Kind.LOADER):
        return OBJECT
    if isinstance(value, ast.Call):
        qual = sem.qualname(value.func) or ""
        if qual.startswith("torch.utils.data.") and qual.rsplit(".", 1)[-1][:1].isupper():
            return OBJECT  # Subset, ConcatDataset, TensorDataset, DataLoader...
    return None


# ------------------------------------------------------------------ what a load reads -----
def keys_read(sem: Semantic, load: ast.Call) -> frozenset[str] | None:
    """The constant keys the code reads from a load's value (``ckpt["model"]``,
    ``ckpt.get("epoch")``, ``"args" in ckpt``); None when the value goes where this cannot
    follow."""
    uses = value_uses(sem, load)
    if uses is None:
        return None
    out: set[str] = set()
    for use in uses:
        outer = sem.parent(use)
        key: ast.expr | None = None
        if isinstance(outer, ast.Subscript) and outer.value is use:
            key = outer.slice
        elif isinstance(outer, ast.Attribute) and outer.attr in ("get", "pop"):
            call = sem.parent(outer)
            key = call.args[0] if isinstance(call, ast.Call) and call.args else None
        elif isinstance(outer, ast.Compare) and use in outer.comparators:
            key = outer.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.add(key.value)
    return frozenset(out)


def writers_of(sem: Semantic, load: ast.Call) -> list[Written]:
    """The saves of the project that write the file a load reads: this file's saves of the
    same path (a save helper's call included), saves of other scripts in the file's folder
    that write the same file name, and saves that write a checkpoint dict holding every key
    the load reads (at least two: the same checkpoint format)."""
    wanted = {k for k in path_keys(sem, argument(load, "f", 0)) if k[0] != "node"}
    names = _file_names(sem, argument(load, "f", 0))
    read = keys_read(sem, load) or frozenset()
    index = _writes_index(sem)
    hits: set[int] = set()
    for key in wanted:  # this file's saves of the same path
        hits.update(index.own_by_key.get(key, ()))
    texts = [str(w[1]) for w in wanted if w[0] == "text"]
    if texts:  # ... or of a pattern the path is an instance of ("ckpt_{}.pt")
        for at, patterns in index.own_patterns:
            if any(_instance(t, p) for p in patterns for t in texts):
                hits.add(at)
    for name in names:  # other scripts' saves of the same file name
        hits.update(index.other_by_name.get(name, ()))
    if len(read) >= 2:  # saves of a dict holding every key the load reads
        holders = [index.by_dict_key.get(k, set()) for k in read]
        hits.update(set.intersection(*holders))
    return [index.writes[at] for at in sorted(hits)]


def format_writers(sem: Semantic, load: ast.Call) -> list[Written]:
    """The saves of the project (any of its modules, not only this folder's scripts) that
    write the checkpoint format a load reads from a path the analysis cannot follow (a
    command-line argument), told by the keys the load reads: the save writes every key the
    load reads without testing for it first (``ckpt["k"]``; keys tested with ``"k" in ckpt``
    or read with ``.get`` may belong to other formats), and shares with it two keys, or one
    that is not weights (not a ``state_dict()`` nor a module at the save, not handed to
    ``load_state_dict`` at the load: a file of weights from anywhere has those). The shared
    keys must tell the format: every save of the project that writes them all puts an object
    into its file that ``weights_only=True`` refuses (a project with a weights-only format
    writing the same keys gives nothing)."""
    read = keys_read(sem, load)
    if not read:
        return []
    required = read - _tested_keys(sem, load)
    saves = [w for w in (*writes(sem), *_project_wide_writes(sem)) if w.keys]
    out: list[Written] = []
    for written in saves:
        shared = read & written.keys
        if not written.held or not shared or not required <= written.keys:
            continue
        if len(shared) < 2:
            (key,) = shared
            if _weights_entry(written, key) or _loaded_as_state(sem, load, key):
                continue
        if all(other.held for other in saves if shared <= other.keys):
            out.append(written)
    return out


def _tested_keys(sem: Semantic, load: ast.Call) -> frozenset[str]:
    """The keys the code tests for (``"k" in ckpt``) or reads with a default (``.get``,
    ``.pop(k, d)``) on a load's value: the file may lack them."""
    out: set[str] = set()
    for use in value_uses(sem, load) or ():
        outer = sem.parent(use)
        key: ast.expr | None = None
        if isinstance(outer, ast.Compare) and use in outer.comparators:
            key = outer.left
        elif isinstance(outer, ast.Attribute) and outer.attr in ("get", "pop"):
            call = sem.parent(outer)
            if (
                isinstance(call, ast.Call)
                and call.args
                and (outer.attr == "get" or len(call.args) > 1)
            ):
                key = call.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.add(key.value)
    return frozenset(out)


def _weights_entry(written: Written, key: str) -> bool:
    """Whether a save writes a state dict or a module under ``key`` (or what it writes there
    is not shown)."""
    sem = written.sem
    for name, value in _entries(sem, written.obj, written.call):
        if name != key:
            continue
        if isinstance(value, ast.Name):
            binding = sem.lookup(value.id, value)
            if binding is not None and binding.how == "assign" and binding.value is not None:
                value = binding.value
        if isinstance(value, ast.Call):
            func = value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if "state_dict" in called:
                return True
        if refused_kind(sem, value) == MODULE or kinds.kind(sem, value) is Kind.MODULE:
            return True
    return False


def _loaded_as_state(sem: Semantic, load: ast.Call, key: str) -> bool:
    """Whether the item ``key`` of a load's value goes into a ``load_state_dict``."""
    items: list[ast.expr] = []
    for use in value_uses(sem, load) or ():
        outer = sem.parent(use)
        if isinstance(outer, ast.Subscript) and outer.value is use:
            if isinstance(outer.slice, ast.Constant) and outer.slice.value == key:
                items.append(outer)
        elif isinstance(outer, ast.Attribute) and outer.attr in ("get", "pop"):
            call = sem.parent(outer)
            if isinstance(call, ast.Call) and call.args:
                first = call.args[0]
                if isinstance(first, ast.Constant) and first.value == key:
                    items.append(call)
    return state_loading(sem, items) in ("strict", "lenient")


_PROJECT_WIDE = "checkpoints-project-wide-saves"
_MAX_SAVING_MODULES = 64  # modules of the project read for the checkpoint formats they save


def _project_wide_writes(sem: Semantic) -> list[Written]:
    """The saves of the project's other modules (those whose text mentions ``save``)."""
    known = sem.memo.get(_PROJECT_WIDE)
    if isinstance(known, list):
        return known
    out: list[Written] = []
    sem.memo[_PROJECT_WIDE] = out
    containing = getattr(sem.project, "containing", None)
    if containing is None or sem.path is None:
        return out
    for other in containing(sem.path, "save", _MAX_SAVING_MODULES):
        if other.sem is not sem:
            out.extend(writes(other.sem))
    return out


@dataclass
class _WritesIndex:
    """``_writes_with_paths`` indexed for ``writers_of``: a load is matched against the saves
    that share a key with it, not against every save of the file (which made a long script
    quadratic)."""

    writes: list[Written]
    own_by_key: dict[Any, list[int]]  # a path key of this file's save -> its saves
    own_patterns: list[tuple[int, list[str]]]  # this file's saves whose path has "{}"
    other_by_name: dict[str, list[int]]  # another script's file name -> its saves
    by_dict_key: dict[str, set[int]]  # a key of the dict saved -> the saves writing it


def _writes_index(sem: Semantic) -> _WritesIndex:
    known = sem.memo.get(_WRITES_INDEX)
    if isinstance(known, _WritesIndex):
        return known
    index = _WritesIndex([], {}, [], {}, {})
    for at, (written, keys) in enumerate(_writes_with_paths(sem)):
        index.writes.append(written)
        for name in written.keys:
            index.by_dict_key.setdefault(name, set()).add(at)
        if written.sem is not sem:
            for name in keys:
                index.other_by_name.setdefault(name, []).append(at)
            continue
        for key in keys:
            index.own_by_key.setdefault(key, []).append(at)
        patterns = [str(k[1]) for k in keys if k[0] == "text" and "{}" in str(k[1])]
        if patterns:
            index.own_patterns.append((at, patterns))
    sem.memo[_WRITES_INDEX] = index
    return index


_WRITES_INDEX = "checkpoints-writes-index"


_WRITES_WITH_PATHS = "checkpoints-writes-with-paths"


def _writes_with_paths(sem: Semantic) -> list[tuple[Written, set[Any]]]:
    """The saves ``writers_of`` compares a load with, each with the keys of its path (this
    file's) or its file names (another script's), worked out once per file."""
    known = sem.memo.get(_WRITES_WITH_PATHS)
    if isinstance(known, list):
        return known
    out: list[tuple[Written, set[Any]]] = []
    for written in (*writes(sem), *_project_writes(sem)):
        if written.sem is sem:
            out.append((written, {k for k in path_keys(sem, written.path) if k[0] != "node"}))
        else:
            out.append((written, _file_names(written.sem, written.path)))
    sem.memo[_WRITES_WITH_PATHS] = out
    return out


def _file_names(sem: Semantic, path: ast.expr | None) -> set[str]:
    """The file names (with an extension, no placeholder) a path expression may name: the
    last part of a literal, or of the last part of a join."""
    out: set[str] = set()
    for key in path_keys(sem, path):
        while key and key[0] == "join" and isinstance(key[-1], tuple):
            key = key[-1]
        if key and key[0] == "text":
            name = str(key[1]).replace("\\", "/").rsplit("/", 1)[-1]
            if "." in name.strip(".") and "{}" not in name:
                out.add(name)
    return out


_PROJECT_SAVE_NAMES = "checkpoints-project-save-names"


def _project_writes(sem: Semantic) -> list[Written]:
    """The saves of the other scripts in this file's folder (read through the project)."""
    known = sem.memo.get(_PROJECT_SAVES)
    if isinstance(known, list):
        return known
    out: list[Written] = []
    sem.memo[_PROJECT_SAVES] = out
    scripts = getattr(sem.project, "scripts_beside", None)
    if scripts is None or sem.path is None:
        return out
    for other in scripts(sem.path, _MAX_SCRIPTS):
        if "save" in other.text:
            out.extend(writes(other.sem))
    return out


def saved_elsewhere(sem: Semantic, load: ast.Call) -> list[Written]:
    """The saves of other scripts of the project (in the file's folder) that write the file
    name a load reads."""
    names = _file_names(sem, argument(load, "f", 0))
    if not names:
        return []
    named = sem.memo.get(_PROJECT_SAVE_NAMES)
    if not isinstance(named, list):  # the file names of each save, worked out once per file
        named = [(w, _file_names(w.sem, w.path)) for w in _project_writes(sem) if w.sem is not sem]
        sem.memo[_PROJECT_SAVE_NAMES] = named
    return [w for w, written in named if names & written]


def written_on_gpu_elsewhere(sem: Semantic, load: ast.Call) -> list[Written]:
    """The saves of other scripts in the file's folder that write the file name a load reads
    with weights that may be on a GPU: not CPU data, by a script that can run on CUDA (it
    moves things there or tests ``torch.cuda.is_available()``)."""
    return [
        w
        for w in saved_elsewhere(sem, load)
        if may_use_cuda(w.sem)
        and w.sem.qualname(w.call.func) in SAVES
        and holds_weights(w.sem, w.call)
        and not writes_cpu(w.sem, w.call)
    ]


def may_use_cuda(sem: Semantic) -> bool:
    """Whether a file can put tensors on a CUDA device: it moves things there, or picks
    CUDA when ``torch.cuda.is_available()``."""
    return next(_cuda_uses(sem), None) is not None or any(
        sem.qualname(call.func) == "torch.cuda.is_available"
        for call in sem.calls_by_attr.get("is_available", ())
    )


def holds_weights(sem: Semantic, save: ast.Call) -> bool:
    """Whether a ``torch.save`` may write model weights (tensors that live on a GPU): a state
    dict, a module, or a value the code does not show; not a dataset or other data built by a
    call, nor plain values."""
    for _key, value in _entries(sem, saved_object(save), save):
        if isinstance(value, ast.Name):
            binding = sem.lookup(value.id, value)
            if binding is None or binding.how != "assign" or binding.value is None:
                return True
            value = binding.value
        if isinstance(value, ast.Constant | ast.JoinedStr):
            continue
        if not isinstance(value, ast.Call):
            return True
        func = value.func
        if isinstance(func, ast.Attribute) and "state_dict" in func.attr:
            return True
        if refused_kind(sem, value) == MODULE or kinds.kind(sem, value) is Kind.MODULE:
            return True
    return False


def added_entries(sem: Semantic, save: ast.Call) -> list[tuple[str, ast.expr]]:
    """The entries ``ckpt["key"] = value`` adds, before ``save``, to the dict a save (or a
    saving helper's call) writes through a name (``torch.save(ckpt, path)``)."""
    obj = saved_object(save) if sem.qualname(save.func) in SAVES else None
    if obj is None and save.args:
        obj = save.args[0]
    if not isinstance(obj, ast.Name):
        return []
    binding = sem.lookup(obj.id, obj)
    if binding is None or binding.how != "assign":
        return []
    return list(subscript_entries(sem, binding, save))
