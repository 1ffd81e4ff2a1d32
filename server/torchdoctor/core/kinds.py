"""What a value is: a module, a loss, a DataLoader, a dataset, a sampler, an optimizer, a
learning-rate scheduler, a gradient scaler or a device (``Kind``).

A kind is read from the call that made the value (``torch.optim.SGD(...)``, ``nn.Linear(...)``,
a class of the file whose bases are torch classes, ``torch.compile(model)``), followed through
aliases, tuple unpacking, ``self.attr`` assignments, the returns of local functions and the call
sites of local functions' parameters; failing that, from how a name is used (``m.eval()``,
``m.parameters()``, ``m.state_dict()``, ``torch.compile(m)``). ``constructions`` and
``constructor_call`` give the calls a value may come from; ``is_loader``, ``is_optimizer`` and
``is_scheduler`` fall back on a value's name when its kind is unknown. Kinds are cached per file
in ``sem.memo``. All of it is read from ``Semantic`` facts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from enum import Enum

from . import arguments
from .semantic import (
    FUNCTION_NODES,
    Binding,
    Semantic,
    has_star_kwargs,
    is_none,
    terminal_name,
)


class Kind(str, Enum):
    MODULE = "module"
    LOSS = "loss"
    LOADER = "loader"
    DATASET = "dataset"
    SAMPLER = "sampler"
    OPTIMIZER = "optimizer"
    SCHEDULER = "scheduler"
    SCALER = "scaler"
    DEVICE = "device"


SAMPLERS = frozenset(
    "torch.utils.data." + n
    for n in (
        "Sampler",
        "DistributedSampler",
        "RandomSampler",
        "SequentialSampler",
        "SubsetRandomSampler",
        "WeightedRandomSampler",
        "BatchSampler",
    )
)
SCALERS = frozenset(
    {"torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.cpu.amp.GradScaler"}
)
MODEL_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel"})
# Calls whose first argument is a model (evidence that a name holds a module).
MODEL_TAKERS = frozenset(
    {
        "torch.compile",
        "torch.nn.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.export.export",
        "torch.onnx.export",
        "torch.jit.trace",
        "torch.jit.script",
    }
)
# Methods that return the module itself.
MODULE_SELF_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "eval",
        "train",
        "half",
        "float",
        "double",
        "bfloat16",
        "requires_grad_",
        "to_empty",
        "xpu",
        "mps",
    }
)
# Functions that return the module they are given, its layers converted in place.
MODULE_CONVERTERS = frozenset({"torch.nn.SyncBatchNorm.convert_sync_batchnorm"})
MODULE_ONLY_METHODS = frozenset({"parameters", "named_parameters", "eval", "train", "modules"})
_NOT_A_MODULE_NAME = re.compile(r"optim|sched|scaler|^opt$|_opt$|^opt_|dataset|loader", re.I)
_OPTIMIZER_NAME = re.compile(r"(^|_)(opt|optim|optimizer)(_|\d|$)|optimizer", re.I)
_SCHEDULER_NAME = re.compile(r"sched|(^|_)lr(_|$)|warm", re.I)
_LOADER_NAME = re.compile(r"loader|(^|_)dl$", re.I)
_NON_MODEL_NN = frozenset(
    {"Parameter", "ParameterList", "ParameterDict", "Buffer", "UninitializedParameter"}
)
# Methods whose result is plain data (a dict, a number, a list), never a module.
_DATA_METHODS = frozenset(
    {"state_dict", "item", "tolist", "numpy", "keys", "values", "items", "copy", "detach"}
)
# Keys of the per-file caches in ``sem.memo``.
_KINDS = "kinds"
_EVIDENCE = "kind-evidence"


# ------------------------------------------------------------------ kinds ---------------
def kind(sem: Semantic, expr: ast.AST | None, _depth: int = 0) -> Kind | None:
    """What a name or expression holds: a module, a DataLoader, an optimizer...

    Decided from constructors, aliases, tuple unpacking, local functions' return values and
    the methods called on a name (``.eval()``, ``.parameters()``).
    """
    if expr is None or _depth > 12:
        return None
    sem = sem.owner(expr)  # a node of another project module is read with that module's facts
    cache: dict[ast.AST, Kind | None] | None = sem.memo.get(_KINDS)  # type: ignore[assignment]
    if cache is None:
        cache = sem.memo[_KINDS] = {}
    if expr in cache:
        return cache[expr]
    cache[expr] = None  # recursion guard
    result = _kind(sem, expr, _depth)
    cache[expr] = result
    return result


def _kind(sem: Semantic, expr: ast.AST, depth: int) -> Kind | None:
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None:
            return None
        found = binding_kind(sem, binding, depth)
        if found is None:  # a value bound in another branch of an `if` before the use
            others = {binding_kind(sem, b, depth) for b in sem.reaching(expr.id, expr)[1:]}
            others.discard(None)
            if len(others) == 1:
                found = others.pop()
        return found
    if isinstance(expr, ast.Attribute):
        if isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = sem.enclosing_class(expr)
            if cls is not None:
                values = sem.self_attr_values.get((cls, expr.attr), ())
                if any(_plain_data(v) and not is_none(v) for v in values):
                    return None
                kinds = {kind(sem, v, depth + 1) for v in values}
                known = kinds - {None}
                if len(known) == 1:
                    return known.pop()
                if not known:  # ``self.model = model`` of a parameter: how it is used
                    return _use_evidence(sem).get((cls, "self." + expr.attr))
        return None
    if isinstance(expr, ast.Call):
        return _call_kind(sem, expr, depth)
    if isinstance(expr, ast.Subscript):
        return _item_kind(sem, expr, depth)
    if isinstance(expr, ast.IfExp):
        a, b = kind(sem, expr.body, depth + 1), kind(sem, expr.orelse, depth + 1)
        return a if a == b else None
    if isinstance(expr, ast.NamedExpr):
        return kind(sem, expr.value, depth + 1)
    return None


def _item_kind(sem: Semantic, expr: ast.Subscript, depth: int) -> Kind | None:
    """The kind of an item of a dict, list or tuple written in this file: ``loaders["train"]``
    after ``loaders = {"train": DataLoader(...), ...}`` (or ``loaders["train"] = ...``), a
    comprehension's value, ``loaders[phase]`` when every item is of one kind."""
    base = expr.value
    values: list[ast.expr] = []
    if isinstance(base, ast.Name):
        binding = sem.lookup(base.id, base)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return None
        if binding.value is not None:
            values.append(binding.value)
    elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
        cls = sem.enclosing_class(base) if base.value.id == "self" else None
        if cls is None:
            return None
        values.extend(sem.self_attr_values.get((cls, base.attr), ()))
    key = expr.slice.value if isinstance(expr.slice, ast.Constant) else _ANY_KEY
    items: list[ast.expr] = []
    for value in values:
        if isinstance(value, ast.DictComp | ast.ListComp):
            items.append(value.value if isinstance(value, ast.DictComp) else value.elt)
        elif isinstance(value, ast.Dict):
            pairs = list(zip(value.keys, value.values, strict=True))
            if isinstance(base, ast.Name):
                pairs += _items_set(sem, base.id, sem.lookup(base.id, base))
            for k, v in pairs:
                if k is None:
                    return None  # ``{**other}``
                if key is _ANY_KEY or not isinstance(k, ast.Constant) or k.value == key:
                    items.append(v)
        elif isinstance(value, ast.List | ast.Tuple):
            if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(value.elts):
                items.append(value.elts[key])
            elif key is _ANY_KEY:
                items.extend(value.elts)
            else:
                return None
        else:
            return None
    found = {kind(sem, item, depth + 1) for item in items}
    return found.pop() if len(found) == 1 else None


_ANY_KEY = object()  # a subscript whose key is not a literal


def _items_set(
    sem: Semantic, name: str, binding: Binding | None
) -> list[tuple[ast.expr | None, ast.expr]]:
    """``(key, value)`` of the items set by ``name[key] = value`` where ``name`` holds the dict
    of ``binding`` (in the same scope)."""
    out: list[tuple[ast.expr | None, ast.expr]] = []
    for node in sem.assigns:
        target = node.targets[0] if len(node.targets) == 1 else None
        if (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and target.value.id == name
            and sem.lookup(name, target.value) is binding
        ):
            out.append((target.slice, node.value))
    return out


def binding_kind(sem: Semantic, binding: Binding, _depth: int = 0) -> Kind | None:
    """The kind of value a binding holds (from its value, else from how the name is used)."""
    found = _binding_value_kind(sem, binding, _depth)
    if found is None and not (binding.index is None and _plain_data(binding.value)):
        found = _use_evidence(sem).get((binding.scope, binding.name))
    return found


def argument_kind(sem: Semantic, binding: Binding) -> Kind | None:
    """The kind of a parameter of a function defined in this file, from its call sites:
    ``net`` is a module in ``def evaluate(net, loader)`` when every call
    ``evaluate(model, ...)`` passes a module. None when a call passes something else or
    unknown, or when the function is never called by name."""
    func = binding.scope
    if binding.how != "param" or not isinstance(func, FUNCTION_NODES):
        return None
    signature = arguments.signature_of(func)
    kinds: set[Kind | None] = set()
    for call in sem.calls_by_name.get(func.name, ()):
        if sem.local_function(call.func) is not func:
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or has_star_kwargs(call):
            return None
        value = arguments.bind(call, signature).value(binding.name)
        if value is None:
            return None
        kinds.add(kind(sem, value))
    return kinds.pop() if len(kinds) == 1 else None


def _binding_value_kind(sem: Semantic, binding: Binding, depth: int) -> Kind | None:
    if binding.how == "import":
        defined = sem.binding_definition(binding)
        if defined is not None and isinstance(defined[1], ast.Name):
            return kind(defined[0], defined[1], depth + 1)  # a module-level value of another module
        return None
    if binding.how not in ("assign", "with") or binding.value is None:
        return None
    value = binding.value
    if binding.index is not None:
        return _element_kind(sem, value, binding.index, depth)
    if binding.how == "with":
        return None
    return kind(sem, value, depth + 1)


def _element_kind(sem: Semantic, value: ast.expr, index: int, depth: int) -> Kind | None:
    if isinstance(value, ast.Tuple | ast.List):
        if index < len(value.elts) and not any(isinstance(e, ast.Starred) for e in value.elts):
            return kind(sem, value.elts[index], depth + 1)
        return None
    if isinstance(value, ast.Call):
        defined = sem.function_def(value.func)
        if defined is not None:
            owner, func = defined
            kinds = set()
            for ret in owner.returns(func):
                if isinstance(ret, ast.Tuple | ast.List):
                    if index < len(ret.elts):
                        kinds.add(kind(owner, ret.elts[index], depth + 1))
                else:
                    kinds.add(None)
            if len(kinds) == 1:
                return kinds.pop()
    return None


def class_kind(sem: Semantic, cls: ast.ClassDef) -> Kind | None:
    """The kind of the instances of a class of this file, from its bases (``nn.Module``,
    ``Dataset``, an optimizer, a ``LightningModule``, local classes that derive from those)."""
    for qual in sem.class_bases(cls):
        found = _constructor_kind(qual)
        if found is Kind.LOSS:
            return Kind.MODULE
        if found is not None:
            return found
        if qual in ("torch.utils.data.Dataset", "torch.utils.data.IterableDataset"):
            return Kind.DATASET
        if qual.endswith(("LightningModule",)):
            return Kind.MODULE
    return None


def _call_kind(sem: Semantic, call: ast.Call, depth: int) -> Kind | None:
    func = call.func
    qual = sem.qualname(func)
    if qual is not None:
        if qual in ("torch.export.export", "torch.onnx.export"):
            return None  # an ExportedProgram / ONNXProgram: it takes a module, is not one
        if qual == "copy.deepcopy":  # a copy is what it copies
            return kind(sem, call.args[0], depth + 1) if call.args else None
        if qual in MODEL_TAKERS and qual not in MODEL_WRAPPERS:
            first = call.args[0] if call.args else None
            return Kind.MODULE if kind(sem, first, depth + 1) is Kind.MODULE else None
        made = _constructor_kind(qual)
        if made is not None or sem.project is None:
            return made
    defined = sem.definition(func) if isinstance(func, ast.Name | ast.Attribute) else None
    if defined is not None:
        owner, node = defined
        if isinstance(node, ast.ClassDef):
            return class_kind(owner, node)
        if isinstance(node, FUNCTION_NODES):
            kinds = {kind(owner, r, depth + 1) for r in owner.returns(node)}
            return kinds.pop() if len(kinds) == 1 else None
    if isinstance(func, ast.Name):
        return None
    if isinstance(func, ast.Attribute):
        if func.attr in MODULE_SELF_METHODS and kind(sem, func.value, depth + 1) is Kind.MODULE:
            return Kind.MODULE
        if func.attr == "from_pretrained":
            maker = sem.qualname(func.value) or ""
            last = maker.rsplit(".", 1)[-1]
            if maker.startswith("transformers.") and last.startswith("AutoModel"):
                return Kind.MODULE
    return None


def _constructor_kind(qual: str) -> Kind | None:
    """The kind of what calling ``qual`` (a qualified name) makes."""
    last = qual.rsplit(".", 1)[-1]
    if qual == "torch.utils.data.DataLoader":
        return Kind.LOADER
    if qual in SAMPLERS:
        return Kind.SAMPLER
    if qual in SCALERS:
        return Kind.SCALER
    if qual == "torch.device":
        return Kind.DEVICE
    if qual.startswith("torch.optim.lr_scheduler.") and last[:1].isupper():
        return Kind.SCHEDULER
    if qual.startswith("torch.optim.") and qual.count(".") == 2 and last[:1].isupper():
        return Kind.OPTIMIZER if last != "Optimizer" else None
    if qual in MODEL_WRAPPERS:
        return Kind.MODULE
    if qual.startswith("torch.nn.") and qual.count(".") == 2 and last[:1].isupper():
        if last in _NON_MODEL_NN:
            return None
        return Kind.LOSS if last.endswith("Loss") else Kind.MODULE
    if qual.startswith("torchvision.models.") and last[:1].islower():
        if last in ("get_weight", "get_model_weights", "list_models", "get_model_builder"):
            return None
        return Kind.MODULE
    if qual == "timm.create_model":
        return Kind.MODULE
    if qual in ("torch.utils.data.Dataset", "torch.utils.data.TensorDataset"):
        return Kind.DATASET
    return None


def _use_evidence(sem: Semantic) -> dict[tuple[ast.AST, str], Kind]:
    """Kinds learned from how a name is used: ``m.eval()``, ``torch.compile(m)``... (computed
    once per file)."""
    known = sem.memo.get(_EVIDENCE)
    if known is not None:
        return known  # type: ignore[return-value]
    evidence: dict[tuple[ast.AST, str], Kind] = {}
    sem.memo[_EVIDENCE] = evidence

    def mark(expr: ast.expr) -> None:
        if isinstance(expr, ast.Name):
            if _NOT_A_MODULE_NAME.search(expr.id):
                return
            binding = sem.lookup(expr.id, expr)
            if binding is not None and binding.how in ("assign", "param", "with", "loop"):
                evidence[(binding.scope, binding.name)] = Kind.MODULE
        elif (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
            and not _NOT_A_MODULE_NAME.search(expr.attr)
        ):
            cls = sem.enclosing_class(expr)
            if cls is not None:
                evidence[(cls, "self." + expr.attr)] = Kind.MODULE

    for method in MODULE_ONLY_METHODS:
        for call in sem.calls_by_attr.get(method, ()):
            if method in ("eval", "train") and (call.args or call.keywords):
                if method == "eval" or not (
                    len(call.args) == 1 and isinstance(call.args[0], ast.Constant)
                ):
                    continue
            assert isinstance(call.func, ast.Attribute)
            mark(call.func.value)
    for call in sem.calls_by_attr.get("state_dict", ()):
        assert isinstance(call.func, ast.Attribute)
        mark(call.func.value)
    for call in sem.calls_to(*MODEL_TAKERS):
        if call.args:
            mark(call.args[0])
    return evidence


def _plain_data(value: ast.expr | None) -> bool:
    """A value that cannot be a module: a literal, or a method call returning plain data."""
    if isinstance(value, ast.Constant | ast.Dict | ast.List | ast.Tuple | ast.Set | ast.JoinedStr):
        return True
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _DATA_METHODS
    )


# ------------------------------------------------------------------ constructions --------
def constructions(
    sem: Semantic, expr: ast.AST | None, wanted: Callable[[ast.Call], bool], _depth: int = 0
) -> tuple[list[ast.Call], bool]:
    """The calls matching ``wanted`` whose result ``expr`` may hold (inline, through the
    assignments of a name or of ``self.attr`` in this file, either branch of ``a if c else
    b``), and whether ``expr`` may also hold something else (``None``, a parameter...)."""
    if expr is None or _depth > 6:
        return [], True
    sem = sem.owner(expr)
    if isinstance(expr, ast.Call):
        if wanted(expr):
            return [expr], False
        defined = sem.function_def(expr.func)
        if defined is None:
            return [], True
        return _returned_constructions(*defined, None, wanted, _depth)
    if isinstance(expr, ast.IfExp | ast.NamedExpr):
        parts = [expr.body, expr.orelse] if isinstance(expr, ast.IfExp) else [expr.value]
        found: list[ast.Call] = []
        other = False
        for part in parts:
            calls, maybe = constructions(sem, part, wanted, _depth + 1)
            found += calls
            other = other or maybe
        return found, other
    values: list[ast.expr | None] = []
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None:
            return [], True
        scope = sem.scopes.get(binding.scope)
        same = scope.bindings.get(expr.id, []) if scope is not None else [binding]
        found = []
        other = False
        for b in same:
            if b.how == "assign" and b.index is not None and isinstance(b.value, ast.Call):
                defined = sem.function_def(b.value.func)
                if defined is not None:  # a, b = build(...): what build returns at that index
                    calls, maybe = _returned_constructions(*defined, b.index, wanted, _depth)
                    found += calls
                    other = other or maybe
                    continue
            value = b.value if b.how == "assign" and b.index is None else None
            if b.how == "import":
                imported = sem.binding_definition(b)
                if imported is not None and isinstance(imported[1], ast.Name):
                    calls, maybe = constructions(imported[0], imported[1], wanted, _depth + 1)
                    found += calls
                    other = other or maybe
                    continue
            values.append(value)
        if not values:
            return found, other
        return _union(sem, values, wanted, _depth, found, other)
    elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        cls = sem.enclosing_class(expr) if expr.value.id == "self" else None
        if cls is None:
            return [], True
        values = list(sem.self_attr_values.get((cls, expr.attr), [])) or [None]
    else:
        return [], True
    return _union(sem, values, wanted, _depth, [], False)


def _union(
    sem: Semantic,
    values: list[ast.expr | None],
    wanted: Callable[[ast.Call], bool],
    depth: int,
    found: list[ast.Call],
    other: bool,
) -> tuple[list[ast.Call], bool]:
    for value in values:
        calls, maybe = constructions(sem, value, wanted, depth + 1)
        found = found + calls
        other = other or maybe
    return found, other


def _returned_constructions(
    sem: Semantic,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    index: int | None,
    wanted: Callable[[ast.Call], bool],
    depth: int,
) -> tuple[list[ast.Call], bool]:
    """``constructions`` of what a function returns (element ``index`` of a returned tuple)."""
    returned = sem.returns(func)
    if not returned:
        return [], True
    found: list[ast.Call] = []
    other = False
    for value in returned:
        part: ast.expr | None = value
        if index is not None:
            elements = value.elts if isinstance(value, ast.Tuple | ast.List) else []
            part = elements[index] if index < len(elements) else None
        calls, maybe = constructions(sem, part, wanted, depth + 1)
        found += calls
        other = other or maybe
    return found, other


def constructor_call(sem: Semantic, expr: ast.AST) -> ast.Call | None:
    """The one call that made the value of a name (``StepLR(opt, 30)`` for ``sched`` after
    ``sched = StepLR(opt, 30)``), following ``self.x``; None when there is not exactly one."""
    values: list[ast.expr] = []
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is not None and binding.how == "assign" and binding.index is None:
            if binding.value is not None:
                values.append(binding.value)
    elif (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        cls = sem.enclosing_class(expr)
        if cls is not None:
            values.extend(sem.self_attr_values.get((cls, expr.attr), ()))
    elif isinstance(expr, ast.Call):
        values.append(expr)
    calls = [v for v in values if isinstance(v, ast.Call)]
    return calls[0] if len(calls) == 1 and len(values) == 1 else None


# ------------------------------------------------------------------ by kind or by name ---
def is_loader(sem: Semantic, expr: ast.AST) -> bool:
    """A DataLoader by construction, or (when its kind is unknown) by its name."""
    found = kind(sem, expr)
    if found is not None:
        return found is Kind.LOADER
    name = terminal_name(expr)
    return bool(name) and bool(_LOADER_NAME.search(name or ""))


def is_optimizer(sem: Semantic, expr: ast.AST) -> bool:
    """An optimizer by construction, or (kind unknown) by its name (``optimizer``, ``opt``)."""
    found = kind(sem, expr)
    if found is not None:
        return found is Kind.OPTIMIZER
    name = terminal_name(expr) or ""
    return bool(_OPTIMIZER_NAME.search(name)) and not _SCHEDULER_NAME.search(name)


def is_scheduler(sem: Semantic, expr: ast.AST) -> bool:
    """A learning-rate scheduler by construction, or (kind unknown) by its name."""
    found = kind(sem, expr)
    if found is not None:
        return found is Kind.SCHEDULER
    return bool(_SCHEDULER_NAME.search(terminal_name(expr) or ""))
