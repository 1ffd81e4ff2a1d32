"""Facts about DataLoaders, Datasets and the batches they yield, shared by the TDR3xx rules.

Which ``DataLoader(...)`` call made the loader a loop iterates (through names, ``self.attr``,
parameters of local functions and local builder functions), whether a loader uses worker
processes, whether an expression is a batch that loop yields, whether a ``.to(...)`` call
moves it to a CUDA device, and which classes of the file are torch Datasets. All of it is read
from ``Semantic`` facts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from . import arguments, kinds, training
from .kinds import Kind
from .semantic import (
    FUNCTION_NODES,
    Binding,
    Semantic,
    argument,
    has_star_kwargs,
    keyword,
    terminal_name,
)

DATALOADER = arguments.DATALOADER
_MAX_DEPTH = 6
# Device strings that are not CUDA (pinning does not help copies to them).
_HOST_DEVICES = frozenset({"cpu", "meta", "mps"})


def loader_argument(call: ast.Call, name: str) -> ast.expr | None:
    """The value a ``DataLoader(...)`` call passes for parameter ``name`` (keyword or
    positional, bound to DataLoader's signature)."""
    return arguments.value(call, DATALOADER, name)


def passes(call: ast.Call, name: str) -> bool:
    """Whether a ``DataLoader(...)`` call may set ``name``: given explicitly, or through
    ``**kwargs`` / ``*args`` that could hold it."""
    return arguments.bind(call, DATALOADER).may_pass(name)


def uses_workers(call: ast.Call) -> bool:
    """A DataLoader call whose ``num_workers`` is given and not literally 0."""
    value = loader_argument(call, "num_workers")
    if value is None:
        return False
    return not (isinstance(value, ast.Constant) and value.value == 0)


def loader_values(sem: Semantic, call: ast.Call, name: str) -> list[ast.expr]:
    """What a ``DataLoader(...)`` call may pass for ``name``: the argument it gives, or else
    the value each dict spread by ``**kwargs`` gives it (``kw = {"num_workers": 2} if cuda
    else {}``, ``kw = dict(num_workers=2)``: any branch may be the one that runs)."""
    given = loader_argument(call, name)
    if given is not None:
        return [given]
    out: list[ast.expr] = []
    for kw in call.keywords:
        if kw.arg is None:
            for spread in sources(sem, kw.value)[0]:
                value = _dict_value(spread, name)
                if value is not None:
                    out.append(value)
    return out


def _dict_value(expr: ast.expr, key: str) -> ast.expr | None:
    """The value a dict display or a ``dict(...)`` call gives ``key``."""
    if isinstance(expr, ast.Dict):
        for k, v in zip(expr.keys, expr.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
        for kw in expr.keywords:
            if kw.arg == key:
                return kw.value
    return None


def is_literal(expr: ast.AST | None, value: object) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is value


# ------------------------------------------------------------------ where values come from --
def param_values(sem: Semantic, binding: Binding) -> list[ast.expr] | None:
    """The values passed for a parameter of a function defined in this file, one per call
    site that calls it by name; None when a call site passes it through ``*args``/``**kw``,
    leaves it out, or the function is never called by name."""
    func = binding.scope
    if binding.how != "param" or not isinstance(func, FUNCTION_NODES):
        return None
    signature = arguments.signature_of(func)
    values: list[ast.expr] = []
    for call in sem.calls_by_name.get(func.name, ()):
        if sem.local_function(call.func) is not func:
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or has_star_kwargs(call):
            return None
        value = arguments.bind(call, signature).value(binding.name)
        if value is None:
            return None
        values.append(value)
    return values or None


def sources(sem: Semantic, expr: ast.AST | None, _depth: int = 0) -> tuple[list[ast.expr], bool]:
    """The expressions a value may come from: through names bound once or several times by
    assignment, ``self.attr`` assignments of the class, parameters of local functions (their
    call sites), the returns of local functions, and both branches of ``a if c else b``.
    The second item says whether the value may also come from somewhere unknown."""
    if expr is None or _depth > _MAX_DEPTH:
        return [], True
    if isinstance(expr, ast.IfExp):
        a, ua = sources(sem, expr.body, _depth + 1)
        b, ub = sources(sem, expr.orelse, _depth + 1)
        return a + b, ua or ub
    if isinstance(expr, ast.NamedExpr):
        return sources(sem, expr.value, _depth + 1)
    values: list[ast.expr] | None = None
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None:
            return [], True
        if binding.how == "param":
            values = param_values(sem, binding)
        else:
            # In the scope that binds it, a name holds its latest value (a loader rebuilt
            # later for another purpose is not this one); read from a function, any of them.
            scope = sem.scopes.get(binding.scope)
            same = scope.bindings.get(expr.id, []) if scope is not None else [binding]
            key: tuple[object, ...] | None = None
            if sem.scope_of(expr).node is binding.scope:
                same = [binding]
            elif _depth == 0:  # the same for every read from another scope: worked out once
                key = ("data-sources-any", binding.scope, expr.id)
                known = sem.memo.get(key)
                if isinstance(known, tuple):
                    return known[0][:], known[1]
            if all(b.how == "assign" and b.index is None and b.value is not None for b in same):
                values = [b.value for b in same if b.value is not None]
            if key is not None:
                result = _sources_of(sem, values, _depth)
                sem.memo[key] = result
                return result[0][:], result[1]
    elif (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        cls = sem.enclosing_class(expr)
        if cls is not None:
            values = list(sem.self_attr_values.get((cls, expr.attr), [])) or None
    elif isinstance(expr, ast.Call):
        func = sem.local_function(expr.func)
        if func is None:
            return [expr], False
        values = sem.returns(func) or None
    elif isinstance(expr, ast.expr):
        return [expr], False
    else:
        return [], True
    return _sources_of(sem, values, _depth)


def _sources_of(
    sem: Semantic, values: list[ast.expr] | None, _depth: int
) -> tuple[list[ast.expr], bool]:
    if values is None:
        return [], True
    found: list[ast.expr] = []
    unknown = False
    for value in values:
        more, maybe = sources(sem, value, _depth + 1)
        found += more
        unknown = unknown or maybe
    return found, unknown


def loader_calls(sem: Semantic, expr: ast.AST | None) -> tuple[list[ast.Call], bool]:
    """The ``torch.utils.data.DataLoader(...)`` calls a loader expression may hold, and whether
    it may also hold something else."""
    found, unknown = sources(sem, expr)
    calls: list[ast.Call] = []
    for value in found:
        if isinstance(value, ast.Call) and sem.qualname(value.func) == DATALOADER:
            if all(c is not value for c in calls):
                calls.append(value)
        else:
            unknown = True
    return calls, unknown


def loader_constructions(sem: Semantic) -> list[ast.Call]:
    """The calls of the file that build a DataLoader: ``DataLoader(...)``, a subclass of it
    (of this file or of the project, ``InfiniteDataLoader(...)``), or a name bound to one of
    those classes in every branch (``loader = DataLoader if weighted else InfiniteDataLoader``
    then ``loader(dataset, ...)``). Calls of such classes that pass no ``num_workers`` (fewer
    than six positional arguments, no ``num_workers=``) are left out: resolving every callee
    of a file would cost too much."""
    key = "data-loader-constructions"
    known = sem.memo.get(key)
    if isinstance(known, list):
        return known
    found = list(sem.calls_to(DATALOADER))
    for call in sem.calls:
        if len(call.args) < 6 and keyword(call, "num_workers") is None:
            continue  # passes no `num_workers` (resolving every callee would cost too much)
        if call not in found and isinstance(call.func, ast.Name | ast.Attribute):
            if _loader_class(sem, call.func, 0):
                found.append(call)
    sem.memo[key] = found
    return found


def _loader_class(sem: Semantic, expr: ast.expr, depth: int) -> bool:
    if depth > 3:
        return False
    if sem.qualname(expr) == DATALOADER:
        return True
    if isinstance(expr, ast.IfExp):
        return _loader_class(sem, expr.body, depth + 1) and _loader_class(
            sem, expr.orelse, depth + 1
        )
    defined = sem.class_def(expr)
    if defined is not None:
        return DATALOADER in defined[0].class_bases(defined[1])
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is not None and binding.how == "assign" and binding.index is None:
            return binding.value is not None and _loader_class(sem, binding.value, depth + 1)
    return False


# ------------------------------------------------------------------ batches and devices -----
def batch_loader(sem: Semantic, expr: ast.AST, _depth: int = 0) -> ast.expr | None:
    """The DataLoader expression whose batch ``expr`` is, or is taken from: ``x`` in
    ``for x, y in loader`` (also under ``enumerate``/``tqdm``, and the matching loader of
    ``zip(a, b)``), ``batch["image"]``, ``v`` in ``{k: v for k, v in batch.items()}``, a name
    assigned from one of those."""
    if _depth > _MAX_DEPTH:
        return None
    while True:
        if isinstance(expr, ast.Subscript | ast.Attribute | ast.Starred):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            break
    if not isinstance(expr, ast.Name):
        return None
    binding = sem.lookup(expr.id, expr)
    if binding is None:
        return None
    if binding.how == "assign" and binding.value is not None:
        return batch_loader(sem, binding.value, _depth + 1)
    if binding.how != "loop":
        return None
    for anc in sem.ancestors(binding.node):
        if isinstance(anc, ast.comprehension):
            return batch_loader(sem, anc.iter, _depth + 1)
        if isinstance(anc, ast.For | ast.AsyncFor):
            iterable = anc.iter
            if not training.loop_info(sem, anc).is_batch_loop:
                wrapped = _wrapped_loader(sem, anc.iter)
                if wrapped is None:
                    return None
                iterable = wrapped
            return _iterated_for(sem, iterable, anc.target, binding.node)
        if isinstance(anc, ast.stmt):
            return None
    return None


_PASS_THROUGH = frozenset({"tqdm", "iter", "track", "islice"})


def _wrapped_loader(sem: Semantic, expr: ast.expr) -> ast.expr | None:
    """The wrapped loader a name iterated by a loop was assigned, once, in its scope:
    ``pbar = tqdm(enumerate(loader)) if verbose else enumerate(loader)`` (either branch)."""
    if not isinstance(expr, ast.Name):
        return None
    binding = sem.lookup(expr.id, expr)
    if binding is None or binding.how != "assign" or binding.index is not None:
        return None
    if len(sem.scopes[binding.scope].bindings.get(expr.id, [])) != 1:
        return None
    value = binding.value
    branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    for branch in branches:
        if branch is not None and any(
            kinds.is_loader(sem, c) for c in training.iterated_candidates(branch)
        ):
            return branch
    return None


def _iterated_for(
    sem: Semantic, iterable: ast.expr, target: ast.expr, bound: ast.AST
) -> ast.expr | None:
    """The loader that yields the part of a loop target holding ``bound``."""
    for _ in range(4):
        if not isinstance(iterable, ast.Call) or not iterable.args:
            break
        name = terminal_name(iterable.func)
        if name == "enumerate":
            # ``i`` in ``for i, batch in enumerate(loader)`` is a counter.
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                return None
            if not _holds(sem, target.elts[1], bound):
                return None
            target = target.elts[1]
        elif name == "zip":
            if not (isinstance(target, ast.Tuple) and len(target.elts) == len(iterable.args)):
                return None
            index = next((i for i, elt in enumerate(target.elts) if _holds(sem, elt, bound)), None)
            if index is None:
                return None
            iterable, target = iterable.args[index], target.elts[index]
            continue
        elif name not in _PASS_THROUGH:
            break
        iterable = iterable.args[0]
    return iterable if kinds.is_loader(sem, iterable) else None


def _holds(sem: Semantic, target: ast.AST, bound: ast.AST) -> bool:
    return target is bound or sem.is_inside(bound, target)


def transfer_device(call: ast.Call) -> ast.expr | None:
    """The device a ``.to(...)`` call moves its receiver to (``x.to(device)``,
    ``x.to(device=d)``); None for other calls and for ``.to(dtype)``-only calls we cannot
    tell apart (``x.to(other_tensor)``)."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr != "to":
        return None
    return argument(call, "device", 0)


def is_cuda_call(call: ast.Call) -> bool:
    """``x.cuda(...)`` (not ``torch.cuda...``)."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "cuda"


def non_blocking(call: ast.Call) -> bool:
    """``non_blocking=True`` in a ``.to(...)``/``.cuda(...)`` call (``x.cuda(dev, True)``
    too)."""
    value = argument(call, "non_blocking", 1 if is_cuda_call(call) else None)
    return is_literal(value, True)


def device_kind(sem: Semantic, expr: ast.AST | None, _depth: int = 0) -> str | None:
    """``"cuda"`` when a device expression names a CUDA device (``"cuda"``, ``"cuda:0"``,
    ``f"cuda:{rank}"``, ``torch.device("cuda", i)``, ``torch.cuda.current_device()``, a name or
    ``self.attr`` assigned one of those, either branch of ``"cuda" if ... else "cpu"``);
    ``"host"`` when it names the CPU (or MPS, meta); None when unknown."""
    if expr is None or _depth > _MAX_DEPTH:
        return None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        name = expr.value.split(":")[0].strip()
        return "cuda" if name == "cuda" else "host" if name in _HOST_DEVICES else None
    if isinstance(expr, ast.JoinedStr):
        first = expr.values[0] if expr.values else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return device_kind(sem, ast.Constant(first.value), _depth + 1)
        return None
    if isinstance(expr, ast.IfExp):
        devices = {
            device_kind(sem, expr.body, _depth + 1),
            device_kind(sem, expr.orelse, _depth + 1),
        }
        if None in devices:
            return None
        # A CUDA device with a CPU fallback for machines without a GPU is a CUDA device.
        return "cuda" if "cuda" in devices else "host"
    if isinstance(expr, ast.Call):
        qual = sem.qualname(expr.func)
        if qual == "torch.device":
            return device_kind(sem, argument(expr, "type", 0), _depth + 1)
        if qual == "torch.cuda.current_device":
            return "cuda"
    found, unknown = sources(sem, expr, _depth + 1)
    if found == [expr] or unknown:
        return None
    devices = {device_kind(sem, value, _depth + 1) for value in found}
    if not devices or None in devices:
        return None
    # As for ``a if c else b``: CUDA with a CPU fallback is CUDA.
    return "cuda" if "cuda" in devices else "host"


def moves_to_cuda(sem: Semantic, call: ast.Call) -> bool:
    """``x.cuda(...)`` or ``x.to(<a CUDA device>)``."""
    if is_cuda_call(call):
        return sem.qualname(call.func) is None
    return device_kind(sem, transfer_device(call)) == "cuda"


def batch_transfers(sem: Semantic) -> Iterator[tuple[ast.Call, ast.expr]]:
    """``.to(...)``/``.cuda(...)`` calls on a batch of a DataLoader loop, with the loader."""
    for attr in ("to", "cuda"):
        for call in sem.calls_by_attr.get(attr, ()):
            assert isinstance(call.func, ast.Attribute)
            loader = batch_loader(sem, call.func.value)
            if loader is not None:
                yield call, loader


def dataset_on_device(sem: Semantic, loader: ast.Call) -> bool:
    """Whether the loader's dataset may hold tensors already on a device: its construction
    (or the values of the names it is given) calls ``.cuda()``/``.to(...)`` or passes
    ``device=``. Pinning such tensors fails."""
    found, _unknown = sources(sem, loader_argument(loader, "dataset"))
    for made in found:
        if not isinstance(made, ast.Call):
            continue
        parts: list[ast.AST] = [made]
        for arg in [*made.args, *(k.value for k in made.keywords)]:
            parts += sources(sem, arg)[0]
        for part in parts:
            for node in ast.walk(part):
                if isinstance(node, ast.Call) and (
                    keyword(node, "device") is not None
                    or (isinstance(node.func, ast.Attribute) and node.func.attr in ("cuda", "to"))
                ):
                    return True
    return False


# ------------------------------------------------------------------ datasets ---------------
_DATASET_CLASSES = "dataset-classes"  # key of the file's dataset classes in ``sem.memo``


def is_dataset_class(sem: Semantic, cls: ast.ClassDef) -> bool:
    """A subclass of ``torch.utils.data.Dataset``/``IterableDataset`` (also through classes of
    this file) or of a ``torchvision.datasets`` class."""
    if kinds.class_kind(sem, cls) is Kind.DATASET:
        return True
    return any(q.startswith("torchvision.datasets.") for q in sem.class_bases(cls))


def dataset_classes(sem: Semantic) -> Iterator[ast.ClassDef]:
    """The dataset classes of the file (worked out once per file)."""
    known = sem.memo.get(_DATASET_CLASSES)
    if known is None:
        known = sem.memo[_DATASET_CLASSES] = [c for c in sem.classes if is_dataset_class(sem, c)]
    yield from known  # type: ignore[misc]


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for stmt in cls.body:
        if isinstance(stmt, FUNCTION_NODES) and stmt.name == name:
            return stmt
    return None


def loaders_of_class(sem: Semantic, cls: ast.ClassDef) -> tuple[list[ast.Call], bool]:
    """The DataLoader calls of this file whose dataset is an instance of ``cls`` (or of a
    subclass defined here), and whether some of them may also get another dataset."""
    out: list[ast.Call] = []
    unknown = False
    for call, found, maybe in _loaders_by_class(sem).get(cls, ()):
        made = [v for v in found if isinstance(v, ast.Call) and _instance_of(sem, v, cls)]
        out.append(call)
        unknown = unknown or maybe or len(made) != len(found)
    return out, unknown


_LOADERS_BY_CLASS = "data-loaders-by-class"


def _loaders_by_class(
    sem: Semantic,
) -> dict[ast.ClassDef, list[tuple[ast.Call, list[ast.expr], bool]]]:
    """{a class of this file: the DataLoader calls whose dataset may be one of its instances
    (or of a subclass defined here), with where their dataset comes from}, worked out once per
    file rather than once per class."""
    known = sem.memo.get(_LOADERS_BY_CLASS)
    if isinstance(known, dict):
        return known
    out: dict[ast.ClassDef, list[tuple[ast.Call, list[ast.expr], bool]]] = {}
    for call in sem.calls_to(DATALOADER):
        found, maybe = sources(sem, loader_argument(call, "dataset"))
        classes: dict[ast.ClassDef, None] = {}
        for value in found:
            made = sem.local_class(value.func) if isinstance(value, ast.Call) else None
            if made is None:
                continue
            classes[made] = None
            for base in made.bases:
                local = sem.local_class(base) if isinstance(base, ast.Name) else None
                if local is not None:
                    classes[local] = None
        for cls in classes:
            out.setdefault(cls, []).append((call, found, maybe))
    sem.memo[_LOADERS_BY_CLASS] = out
    return out


def _instance_of(sem: Semantic, call: ast.Call, cls: ast.ClassDef) -> bool:
    made = sem.local_class(call.func)
    if made is None:
        return False
    if made is cls:
        return True
    return any(sem.local_class(b) is cls for b in made.bases if isinstance(b, ast.Name))


# ------------------------------------------------------------------ reading files ----------
# Calls that read one sample's file (an image, an array, a tensor, a clip) into memory.
SAMPLE_READERS = frozenset(
    {
        "PIL.Image.open",
        "cv2.imread",
        "torch.load",
        "numpy.load",
        "numpy.fromfile",
        "torchvision.io.read_image",
        "torchvision.io.decode_image",
        "torchvision.io.read_file",
        "torchvision.io.read_video",
        "imageio.imread",
        "imageio.v2.imread",
        "imageio.v3.imread",
        "skimage.io.imread",
        "matplotlib.pyplot.imread",
        "torchaudio.load",
        "soundfile.read",
        "librosa.load",
    }
)
# Calls that parse a whole file (a table, a JSON/YAML/pickle document, a tensor or array file).
WHOLE_FILE_READERS = frozenset(
    {
        "pandas.read_csv",
        "pandas.read_table",
        "pandas.read_json",
        "pandas.read_parquet",
        "pandas.read_excel",
        "pandas.read_feather",
        "pandas.read_pickle",
        "json.load",
        "pickle.load",
        "yaml.load",
        "yaml.safe_load",
        "yaml.full_load",
        "torch.load",
        "numpy.load",
        "numpy.loadtxt",
        "numpy.genfromtxt",
    }
)
_READ_METHODS = frozenset({"read", "readlines"})
_PATH_READ_METHODS = frozenset({"read_text", "read_bytes"})


def opened_file(sem: Semantic, expr: ast.AST) -> ast.Call | None:
    """The ``open(...)`` call a file object comes from: ``open(p)`` itself, or ``f`` after
    ``with open(p) as f:``."""
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None or binding.how != "with" or binding.index is not None:
            return None
        expr = binding.value if binding.value is not None else expr
    if isinstance(expr, ast.Call) and (
        sem.qualname(expr.func) == "io.open"
        or (
            isinstance(expr.func, ast.Name)
            and expr.func.id == "open"
            and sem.lookup("open", expr.func) is None
        )
    ):
        return expr
    return None


def file_read(sem: Semantic, call: ast.Call, readers: frozenset[str]) -> ast.expr | None:
    """When ``call`` reads a file, the expression naming that file: the first argument of one
    of ``readers`` (or of the ``open(...)`` it is given), the path of ``open(p).read()``,
    ``f.read()`` after ``with open(p) as f``, or ``Path(p).read_text()``. None otherwise."""
    func = call.func
    if sem.qualname(func) in readers:
        first = call.args[0] if call.args else (call.keywords[0].value if call.keywords else None)
        if first is None:
            return None
        opened = opened_file(sem, first)
        return argument(opened, "file", 0) if opened is not None else first
    if isinstance(func, ast.Attribute):
        if func.attr in _READ_METHODS:
            opened = opened_file(sem, func.value)
            return argument(opened, "file", 0) if opened is not None else None
        if func.attr in _PATH_READ_METHODS:
            owner = func.value
            if isinstance(owner, ast.Call) and sem.qualname(owner.func) in (
                "pathlib.Path",
                "pathlib.PurePath",
            ):
                return owner.args[0] if owner.args else None
            return owner
    return None


def self_attribute(target: ast.AST) -> str | None:
    """``x`` for a ``self.x`` target."""
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return target.attr
    return None
