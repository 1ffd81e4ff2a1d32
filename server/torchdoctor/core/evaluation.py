"""Facts about evaluation code: which calls are forwards of a model (``forward_calls``),
whether a forward runs again and again (``repeats``), whether statements compute gradients or
manage grad mode (``trains``), and whether turning gradients off around statements changes
nothing but the memory autograd would keep (``safe_to_turn_grad_off``): every call in them is
one the analysis can see needs no autograd (``Seen``), and what they compute from tensors that
require grad reaches no autograd and no code the analysis cannot see (``Flow``). Results are
cached per file in ``sem.memo``.
"""

from __future__ import annotations

import ast
from enum import Enum

from . import kinds, summaries, training
from .context import Context
from .kinds import MODULE_SELF_METHODS, Kind
from .semantic import (
    FUNCTION_NODES,
    Binding,
    Semantic,
    dotted,
    has_star_kwargs,
    is_false,
    keyword,
    terminal_name,
)

_AUTOGRAD_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward", "torch.enable_grad"})


def safe_to_turn_grad_off(ctx: Context, stmts: list[ast.stmt]) -> bool:
    """The precondition of the fix: turning gradients off around ``stmts`` changes nothing but
    the memory autograd would have kept. Every call in them is one the analysis can see needs
    no autograd (``Seen``), they neither suspend (``yield``, ``await``: grad mode would leak
    to the caller) nor turn gradients back on, and nothing they compute from a tensor that
    requires grad reaches autograd or code the analysis cannot see afterwards (``Flow``)."""
    sem = ctx.sem
    if not stmts or trains(ctx, stmts, set()):
        return False
    seen = Seen.of(ctx)
    for node in sem.walk_body(stmts):
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await):
            return False
        if isinstance(node, ast.Call) and not seen.call(node):
            return False
        if isinstance(node, ast.Lambda) and not all(
            seen.call(n) for n in ast.walk(node.body) if isinstance(n, ast.Call)
        ):
            return False
    return Flow(ctx, stmts).outcome() is Outcome.CLEAN


# ---- what the analysis can see ---------------------------------------------------------------
# Libraries whose functions never run autograd on the tensors they are given (the standard
# library, the scientific stack, plotting, progress bars, loggers, tokenizers). torch itself is
# handled apart: everything but its autograd entry points.
_SAFE_LIBRARIES = frozenset(
    {
        "builtins", "math", "cmath", "random", "time", "datetime", "os", "sys", "json", "csv",
        "pickle", "copy", "collections", "itertools", "operator", "string", "re", "logging",
        "warnings", "pprint", "pathlib", "shutil", "glob", "io", "statistics", "textwrap",
        "numpy", "scipy", "pandas", "sklearn", "matplotlib", "seaborn", "PIL", "cv2", "skimage",
        "imageio", "tqdm", "IPython", "torchvision", "torchaudio", "torchtext", "torchmetrics",
        "transformers", "tokenizers", "einops", "wandb", "tensorboardX", "mlflow", "rich",
        "yaml", "h5py", "nltk", "tiktoken", "sentencepiece",
    }
)  # fmt: skip
_SAFE_BUILTINS = frozenset(
    {
        "print", "len", "range", "enumerate", "zip", "sum", "min", "max", "abs", "round",
        "float", "int", "bool", "str", "list", "tuple", "dict", "set", "frozenset", "sorted",
        "reversed", "iter", "next", "isinstance", "issubclass", "hasattr", "getattr", "format",
        "repr", "open", "any", "all", "divmod", "pow", "hash", "id", "type", "slice", "map",
        "filter", "chr", "ord", "callable", "vars", "dir", "super",
    }
)  # fmt: skip
# Tensor methods (none of them differentiates); a method of this name on a value the analysis
# cannot type is taken to be the tensor method.
_TENSOR_METHODS = frozenset(
    {
        "abs", "add", "all", "allclose", "amax", "amin", "any", "argmax", "argmin", "argsort",
        "bfloat16", "bool", "byte", "ceil", "char", "chunk", "clamp", "clamp_", "clip", "clone",
        "contiguous", "copy_", "cos", "cpu", "cuda", "cumsum", "data_ptr", "detach", "detach_",
        "diag", "dim", "div", "double", "eq", "equal", "exp", "expand", "expand_as", "fill_",
        "flatten", "flip", "float", "floor", "gather", "ge", "gt", "half", "index_select",
        "int", "is_contiguous", "isfinite", "isnan", "item", "le", "log", "log_softmax", "long",
        "lt", "masked_fill", "masked_select", "matmul", "max", "mean", "median", "min", "mm",
        "mul", "narrow", "ndimension", "ne", "neg", "nelement", "nonzero", "norm", "numel",
        "numpy", "permute", "pow", "prod", "reshape", "reshape_as", "round", "rsqrt", "scatter",
        "sigmoid", "sign", "sin", "size", "softmax", "sort", "split", "sqrt", "squeeze", "std",
        "sub", "sum", "t", "tanh", "to", "tolist", "topk", "transpose", "type", "type_as",
        "unbind", "unique", "unsqueeze", "var", "view", "view_as", "zero_", "add_", "mul_",
        "sub_", "div_", "float_", "sum_to_size", "repeat", "roll", "where", "logsumexp",
        "exp_", "log_", "squeeze_", "unsqueeze_", "to_dense", "pin_memory", "share_memory_",
        "element_size", "stride", "storage_offset", "is_cuda", "get_device", "new_zeros",
        "new_ones", "new_empty", "new_full", "new_tensor", "cross", "dot", "bmm", "triu",
        "tril", "count_nonzero", "histc", "bincount", "kthvalue", "mode", "cummax", "cummin",
        "eq_", "logical_and", "logical_or", "logical_not", "bitwise_and", "masked_fill_",
        "index_fill_", "index_add_", "scatter_", "scatter_add_", "clamp_min", "clamp_max",
        "float_power", "square", "reciprocal", "frac", "trunc", "erf", "softplus", "relu",
    }
)  # fmt: skip
# Methods of lists, dicts, sets, strings and files.
_CONTAINER_METHODS = frozenset(
    {
        "append", "extend", "insert", "pop", "remove", "clear", "copy", "keys", "values",
        "items", "get", "update", "setdefault", "add", "discard", "sort", "reverse", "index",
        "count", "join", "format", "split", "strip", "rstrip", "lstrip", "replace",
        "startswith", "endswith", "lower", "upper", "write", "writelines", "flush", "close",
        "read", "readline", "readlines", "encode", "decode", "popleft", "appendleft",
    }
)  # fmt: skip
# Methods of a module that are not its forward and never differentiate.
_MODULE_METHODS = frozenset(
    {
        *MODULE_SELF_METHODS, "parameters", "named_parameters", "buffers", "named_buffers",
        "modules", "named_modules", "children", "named_children", "state_dict",
        "load_state_dict", "zero_grad", "apply", "register_buffer", "get_submodule",
    }
)  # fmt: skip
# Methods whose result is a Python value: the tensor they are called on goes no further.
_PYTHON_RESULT_METHODS = frozenset({"item", "tolist", "numpy", "size", "numel", "dim", "format"})
_PYTHON_RESULT_BUILTINS = frozenset(
    {"print", "len", "float", "int", "bool", "str", "repr", "format", "round", "isinstance"}
)
_STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})
_CONTAINER_BUILTINS = frozenset({"list", "dict", "set", "open", "defaultdict", "OrderedDict"})
_LIBRARY_MODELS = (
    "torch.nn.",
    "torchvision.models.",
    "torchaudio.models.",
    "transformers.",
    "timm.",
    "peft.",
)
# Modules whose forward runs the modules they are given.
_CONTAINER_MODULES = frozenset(
    {"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"}
)
_PASS_THROUGH = frozenset(
    {"torch.compile", "torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel",
     "torch.jit.script", "torch.jit.trace"}
)  # fmt: skip
# Attributes of a tensor that tell whether autograd tracked it: the wrap changes them.
_GRAD_STATE_ATTRIBUTES = frozenset({"requires_grad", "grad_fn", "is_leaf", "grad"})
_LIBRARY = "library"  # the origin of a module built by torch, torchvision, timm or transformers


class Seen:
    """Which calls the analysis can see need no autograd: torch functions other than its
    autograd entry points, the libraries and builtins above, tensor and container methods,
    losses, the forward of a model built by torch, torchvision, timm or transformers or by a
    class of this file whose ``forward`` is itself seen, and functions of this file whose body
    is seen. Anything else — a function or model class imported from elsewhere, a model loaded
    from a pickle, a method the analysis cannot resolve — may need autograd."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sem = ctx.sem
        self._functions: dict[ast.AST, bool] = {}
        self._classes: dict[ast.ClassDef, bool] = {}

    @staticmethod
    def of(ctx: Context) -> Seen:
        key = "evaluation-seen"
        found = ctx.sem.memo.get(key)
        if not isinstance(found, Seen) or found.ctx is not ctx:
            found = Seen(ctx)
            ctx.sem.memo[key] = found
        return found

    def call(self, call: ast.Call, depth: int = 0) -> bool:
        if depth > 8 or training.enters_autograd(self.sem, call):
            return False
        if not self._callables_seen(call, depth):
            return False
        func = call.func
        qual = training.torch_qualname(self.sem, func)
        if qual is not None:
            return _library_call(self.sem, call, qual)
        kind = self.ctx.kind(func)
        if kind in (Kind.MODULE, Kind.LOSS) or is_model(self.ctx, func):
            return self.forward(func, depth)
        if isinstance(func, ast.Name):
            binding = self.sem.lookup(func.id, func)
            if binding is None:
                return func.id in _SAFE_BUILTINS
            local = self.sem.local_function(func)
            if local is not None:
                return self.function(local, depth)
            cls = self.sem.local_class(func)
            if cls is not None:
                init = _method(cls, "__init__")
                return init is None or self.function(init, depth)
            # An object made by a safe library (a tokenizer, a pipeline, a metric).
            return _safe_receiver(self.ctx, func) and not isinstance(binding.value, ast.Constant)
        if isinstance(func, ast.Attribute):
            return self._method_call(func, depth)
        if isinstance(func, ast.Subscript | ast.Call):  # self.layers[i](x), nn.Linear(2, 2)(x)
            return self.forward(func, depth)
        return False

    def _callables_seen(self, call: ast.Call, depth: int) -> bool:
        """Functions of this file and models passed to a call (``map(f, xs)``, ``key=f``,
        ``map(model, batches)``) may run in it."""
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Name):
                local = self.sem.local_function(arg)
                if local is not None and not self.function(local, depth + 1):
                    return False
                if local is None and is_model(self.ctx, arg):
                    if training.torch_qualname(self.sem, call.func) is None and not (
                        isinstance(call.func, ast.Name) and call.func.id in _SAFE_BUILTINS
                    ):
                        continue  # handed to a call that is judged on its own
                    if not self.forward(arg, depth + 1):
                        return False
        return True

    def _method_call(self, func: ast.Attribute, depth: int) -> bool:
        attr, receiver = func.attr, func.value
        if (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        ):
            return self._super_method(func, depth)
        kind = self.ctx.kind(receiver)
        if kind in (Kind.MODULE, Kind.LOSS):
            if attr == "forward":
                return self.forward(receiver, depth)
            if attr in _MODULE_METHODS:
                return True
            origins = _origins(self.ctx, receiver)
            if origins is None:
                return False
            for origin in origins:
                if isinstance(origin, ast.ClassDef):
                    method = _method(origin, attr)
                    if method is None or not self.function(method, depth):
                        return False
            return True
        if kind in (Kind.LOADER, Kind.DATASET, Kind.SAMPLER, Kind.DEVICE, Kind.SCHEDULER):
            return True
        if kind is Kind.OPTIMIZER:
            return attr == "zero_grad"
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            cls = self.sem.enclosing_class(func)
            method = _method(cls, attr) if cls is not None else None
            return method is not None and self.function(method, depth)
        if attr in _TENSOR_METHODS:
            return True
        return attr in _CONTAINER_METHODS and _safe_receiver(self.ctx, receiver)

    def _super_method(self, func: ast.Attribute, depth: int) -> bool:
        """``super().method(...)`` in a class of this file: the bases' method."""
        cls = self.sem.enclosing_class(func)
        if cls is None:
            return False
        for base in cls.bases:
            local = self.sem.local_class(base)
            if local is not None:
                method = _method(local, func.attr)
                if method is not None and not self.function(method, depth + 1):
                    return False
            elif not (self.sem.qualname(base) or "").startswith(_LIBRARY_MODELS):
                return False
        return True

    def function(self, func: ast.AST, depth: int = 0) -> bool:
        known = self._functions.get(func)
        if known is not None:
            return known
        if depth > 6 or not isinstance(func, FUNCTION_NODES):
            return False
        self._functions[func] = True  # in progress: a recursive call adds nothing
        body = list(func.body)
        ok = not trains(self.ctx, body, set()) and all(
            self.call(node, depth + 1)
            for node in self.sem.walk_body(body)
            if isinstance(node, ast.Call)
        )
        self._functions[func] = ok
        return ok

    def forward(self, module: ast.expr, depth: int = 0) -> bool:
        """Whether calling ``module`` runs code the analysis can see needs no autograd."""
        origins = _origins(self.ctx, module)
        if origins is None:
            return False
        return all(o == _LIBRARY or self.module_class(o, depth) for o in origins)

    def module_class(self, cls: ast.ClassDef | str, depth: int = 0) -> bool:
        if not isinstance(cls, ast.ClassDef):
            return False
        known = self._classes.get(cls)
        if known is not None:
            return known
        self._classes[cls] = True  # in progress
        forward = _method(cls, "forward") or _method(cls, "__call__")
        if forward is not None:
            ok = self.function(forward, depth + 1)
        else:
            # No forward of its own: the one it inherits, from torch or from a class of the file.
            ok = True
            for base in cls.bases:
                local = self.sem.local_class(base)
                if local is not None:
                    ok = ok and self.module_class(local, depth + 1)
                else:
                    qual = self.sem.qualname(base) or ""
                    ok = ok and qual.startswith(_LIBRARY_MODELS)
        self._classes[cls] = ok
        return ok


def _library_call(sem: Semantic, call: ast.Call, qual: str) -> bool:
    top = qual.split(".", 1)[0]
    if top == "torch":
        if qual in _AUTOGRAD_CALLS or qual.startswith(("torch.autograd.", "torch.func.")):
            return False
        if qual in ("torch.is_grad_enabled", "torch.is_inference_mode_enabled"):
            return False  # its answer is what the wrap changes
        if qual in ("torch.set_grad_enabled", "torch.inference_mode"):
            return training.is_grad_off(sem, call)
        return True
    return top in _SAFE_LIBRARIES


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for stmt in cls.body:
        if isinstance(stmt, FUNCTION_NODES) and stmt.name == name:
            return stmt
    return None


def _safe_receiver(ctx: Context, receiver: ast.expr) -> bool:
    """A string, or a name bound to a list, dict, set, string, file or an object made by one
    of the safe libraries (``csv.writer(f)``, ``plt.subplots()``)."""
    if isinstance(receiver, ast.Constant | ast.JoinedStr):
        return True
    if not isinstance(receiver, ast.Name):
        return False
    binding = ctx.sem.lookup(receiver.id, receiver)
    if binding is None or binding.value is None:
        return False
    value = binding.value
    if binding.index is not None and isinstance(value, ast.Tuple | ast.List):
        if binding.index >= len(value.elts):
            return False
        value = value.elts[binding.index]
    if isinstance(
        value,
        ast.List
        | ast.Dict
        | ast.Set
        | ast.Tuple
        | ast.Constant
        | ast.JoinedStr
        | ast.ListComp
        | ast.DictComp
        | ast.SetComp,
    ):
        return True
    if isinstance(value, ast.Call):
        qual = ctx.qualname(value.func)
        if qual is not None:
            return qual.split(".", 1)[0] in _SAFE_LIBRARIES
        return isinstance(value.func, ast.Name) and (
            value.func.id in _CONTAINER_BUILTINS and ctx.sem.lookup(value.func.id, value) is None
        )
    return False


def _origins(ctx: Context, expr: ast.AST, depth: int = 0) -> set[ast.ClassDef | str] | None:
    """Where the module ``expr`` comes from: ``_LIBRARY`` (built by torch, torchvision, timm or
    transformers) or classes of this file; None when the analysis cannot tell (a model
    unpickled by ``torch.load``, built by an imported factory or class, a parameter some caller
    fills with such a model)."""
    sem = ctx.sem.owner(expr)  # the facts of the module ``expr`` is in (this or a project one)
    if depth > 8:
        return None
    if isinstance(expr, ast.Call):
        func = expr.func
        qual = ctx.qualname(func)
        if qual is not None:
            if qual in _PASS_THROUGH:
                return _origins(ctx, expr.args[0], depth + 1) if expr.args else None
            if qual in _CONTAINER_MODULES:
                return _union(ctx, _elements(expr), depth, empty=set())
            if qual.startswith(_LIBRARY_MODELS):
                return {_LIBRARY}
            defined = sem.definition(func)  # a class or factory of another project module
            if defined is None or defined[0] is sem:
                return None
            module, node = defined
            if isinstance(node, ast.ClassDef):
                return {node}
            if isinstance(node, FUNCTION_NODES):
                return _union(ctx, module.returns(node), depth)
            return None
        if isinstance(func, ast.Attribute):
            if func.attr in MODULE_SELF_METHODS:
                return _origins(ctx, func.value, depth + 1)
            if func.attr == "from_pretrained":
                owner = ctx.qualname(func.value) or ""
                return {_LIBRARY} if owner.startswith(("transformers.", "peft.")) else None
            return None
        cls = sem.local_class(func)
        if cls is not None:
            return {cls}
        local = sem.local_function(func)
        if local is not None:
            return _union(ctx, sem.returns(local), depth)
        return None
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None:
            return None
        if binding.how == "assign" and binding.index is None and binding.value is not None:
            return _origins(ctx, binding.value, depth + 1)
        if binding.how == "param":
            return _union(ctx, _passed_values(sem, binding), depth)
        if binding.how == "loop":  # for layer in self.layers
            loop = sem.parent(binding.node)
            while isinstance(loop, ast.Tuple | ast.List | ast.Starred):
                loop = sem.parent(loop)
            if isinstance(loop, ast.For | ast.AsyncFor | ast.comprehension):
                return _origins(ctx, loop.iter, depth + 1)
        return None
    if isinstance(expr, ast.Subscript):  # self.layers[i]
        return _origins(ctx, expr.value, depth + 1)
    if isinstance(expr, ast.Starred):
        return _origins(ctx, expr.value, depth + 1)
    if isinstance(expr, ast.List | ast.Tuple | ast.ListComp | ast.GeneratorExp):
        return _union(ctx, _elements(expr), depth, empty=set())
    if isinstance(expr, ast.Attribute):
        if isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = sem.enclosing_class(expr)
            values = sem.self_attr_values.get((cls, expr.attr), []) if cls else []
            return _union(ctx, values, depth)
        # A submodule of a library model (`model.encoder`, `resnet.fc`).
        base = _origins(ctx, expr.value, depth + 1)
        return base if base == {_LIBRARY} else None
    return None


def _elements(expr: ast.expr) -> list[ast.expr | None]:
    """The modules a container is built from: ``nn.Sequential(a, b)``, ``nn.ModuleList([a,
    b])``, ``[Block() for _ in range(n)]``, ``nn.ModuleDict({"a": a})``; None for an element the
    analysis cannot list."""
    parts: list[ast.expr] = []
    if isinstance(expr, ast.Call):
        parts = [*expr.args, *(k.value for k in expr.keywords)]
    elif isinstance(expr, ast.List | ast.Tuple):
        parts = list(expr.elts)
    elif isinstance(expr, ast.ListComp | ast.GeneratorExp):
        return [expr.elt]
    out: list[ast.expr | None] = []
    for part in parts:
        if isinstance(part, ast.List | ast.Tuple | ast.ListComp | ast.GeneratorExp):
            out.extend(_elements(part))
        elif isinstance(part, ast.Dict):
            out.extend(part.values)
        else:
            out.append(part)
    return out


def _union(
    ctx: Context, values: list, depth: int, empty: set[ast.ClassDef | str] | None = None
) -> set[ast.ClassDef | str] | None:
    if not values:
        return empty
    out: set[ast.ClassDef | str] = set()
    for value in values:
        if value is None:
            return None
        found = _origins(ctx, value, depth + 1)
        if found is None:
            return None
        out |= found
    return out


def _passed_values(sem: Semantic, binding: Binding) -> list[ast.expr | None]:
    """What the callers of a function of this file pass for one of its parameters (None for
    a call the analysis cannot read); empty when nothing in the file calls it."""
    func = binding.scope
    if not isinstance(func, FUNCTION_NODES):
        return []
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    out: list[ast.expr | None] = []
    for call in sem.calls_by_name.get(func.name, ()):
        if sem.local_function(call.func) is not func:
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or has_star_kwargs(call):
            return [None]
        value: ast.expr | None = None
        if binding.name in positional and positional.index(binding.name) < len(call.args):
            value = call.args[positional.index(binding.name)]
        else:
            kw = keyword(call, binding.name)
            value = kw.value if kw is not None else None
        out.append(value)
    return out


# ---- where the region's results go -----------------------------------------------------------
class Outcome(Enum):
    CLEAN = "clean"  # only into code the analysis can see needs no autograd
    AUTOGRAD = "autograd"  # into a backward pass, an optimizer, requires_grad_...
    UNSEEN = "unseen"  # into code the analysis cannot see (it may differentiate them)


class Flow:
    """Follows what ``stmts`` compute from tensors that require grad — the outputs of the
    models they call, parameters, and names the file marks with ``requires_grad`` — through
    assignments, containers, loops, returns and callers, to where they are used: a call that
    hands them to autograd, a call the analysis cannot see, an attribute (read who knows
    where), or nowhere that matters."""

    _LIMIT = 2000

    def __init__(
        self, ctx: Context, stmts: list[ast.stmt], seeds: frozenset[ast.Call] = frozenset()
    ) -> None:
        self.ctx = ctx
        self.seeds = seeds  # more calls whose results require grad (helpers running a model)
        self.sem = ctx.sem
        self.stmts = stmts
        self.seen = Seen.of(ctx)
        self.tainted: set[ast.AST] = set()  # binding nodes that hold such a value
        self.todo: list[ast.AST] = []
        self.visited: set[ast.AST] = set()
        self.callers_followed: set[ast.AST] = set()

    def outcome(self) -> Outcome:
        """``AUTOGRAD`` as soon as a value reaches autograd; else ``UNSEEN`` when one reached
        code the analysis cannot see; else ``CLEAN``."""
        marked = _requires_grad_names(self.ctx)
        for node in self.sem.walk_body(self.stmts):
            seed = (
                isinstance(node, ast.Call) and (node in self.seeds or self._makes_grad_tensor(node))
            ) or (isinstance(node, ast.Name) and node.id in marked)
            if seed:
                self.todo.append(node)
        result = Outcome.CLEAN
        steps = 0
        while self.todo:
            steps += 1
            if steps > self._LIMIT:
                return Outcome.UNSEEN
            node = self.todo.pop()
            if node in self.visited:
                continue
            self.visited.add(node)
            found = self._climb(node)
            if found is Outcome.AUTOGRAD:
                return found
            if found is Outcome.UNSEEN:
                result = found
        return result

    def _makes_grad_tensor(self, call: ast.Call) -> bool:
        """A model's forward, or its ``parameters()``."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _MODULE_METHODS:
            return func.attr in ("parameters", "named_parameters") and (
                self.ctx.kind(func.value) is Kind.MODULE
            )
        return self.ctx.kind(callee(call)) in (Kind.MODULE, Kind.LOSS)

    def _inside(self, node: ast.AST) -> bool:
        return any(node is s or self.sem.is_inside(node, s) for s in self.stmts)

    def _taint(self, target: ast.AST) -> Outcome:
        """``target`` of an assignment now holds a tainted value."""
        sem = self.sem
        if isinstance(target, ast.Tuple | ast.List | ast.Starred):
            parts = target.elts if not isinstance(target, ast.Starred) else [target.value]
            for part in parts:
                found = self._taint(part)
                if found is not Outcome.CLEAN:
                    return found
            return Outcome.CLEAN
        if isinstance(target, ast.Subscript):
            base = target.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if not isinstance(base, ast.Name):
                return Outcome.UNSEEN
            binding = sem.lookup(base.id, base)
            if binding is None:
                return Outcome.UNSEEN
            return self._taint_binding(binding.node, base.id)
        if isinstance(target, ast.Name):
            return self._taint_binding(target, target.id)
        return Outcome.UNSEEN  # an attribute: read where the analysis does not follow

    def _taint_binding(self, node: ast.AST, name: str) -> Outcome:
        if node in self.tainted:
            return Outcome.CLEAN
        self.tainted.add(node)
        for load in self.sem.names.get(name, ()):
            binding = self.sem.lookup(name, load)
            if binding is not None and binding.node is node:
                self.todo.append(load)
        return Outcome.CLEAN

    def _climb(self, node: ast.AST) -> Outcome:
        sem = self.sem
        child = node
        for parent in sem.ancestors(node):
            if isinstance(parent, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
                return (
                    Outcome.CLEAN
                    if child in getattr(parent, "decorator_list", ())
                    else (Outcome.UNSEEN if isinstance(parent, ast.Lambda) else Outcome.CLEAN)
                )
            if isinstance(parent, ast.Call):
                found = self._through_call(parent, child)
                if found is not None:
                    return found
            elif isinstance(parent, ast.Attribute):
                grand = sem.parent(parent)
                if isinstance(grand, ast.Call) and grand.func is parent:
                    child = parent
                    continue  # a method of the tainted value: decided at the call
                if parent.attr in ("shape", "dtype", "device", "ndim", "is_cuda"):
                    return Outcome.CLEAN
                if parent.attr in _GRAD_STATE_ATTRIBUTES:
                    return Outcome.UNSEEN  # reads what the wrap changes
            elif isinstance(parent, ast.Subscript):
                if child is not parent.value:
                    return Outcome.CLEAN  # an index selects, it carries no gradient
            elif isinstance(parent, ast.FormattedValue | ast.JoinedStr):
                return Outcome.CLEAN
            elif isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                if child is not parent.value or training.is_python_value(parent.value):
                    return Outcome.CLEAN
                targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
                for target in targets:
                    found = self._taint(target)
                    if found is not Outcome.CLEAN:
                        return found
                return Outcome.CLEAN
            elif isinstance(parent, ast.AugAssign):
                if child is not parent.value or training.is_python_value(parent.value):
                    return Outcome.CLEAN
                return self._taint(parent.target)
            elif isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension):
                if child is parent.iter:
                    found = self._taint(parent.target)
                    if found is not Outcome.CLEAN or isinstance(parent, ast.For | ast.AsyncFor):
                        return found
                    continue  # the comprehension's result carries it on
                return Outcome.CLEAN
            elif isinstance(parent, ast.withitem):
                if child is parent.context_expr and parent.optional_vars is not None:
                    return self._taint(parent.optional_vars)
                return Outcome.CLEAN
            elif isinstance(parent, ast.Return | ast.Yield | ast.YieldFrom):
                return self._to_callers(parent)
            elif isinstance(parent, ast.stmt):
                return Outcome.CLEAN  # a test, an expression statement, assert, del...
            child = parent
        return Outcome.CLEAN

    def _through_call(self, call: ast.Call, child: ast.AST) -> Outcome | None:
        """A tainted value reaches ``call`` (as an argument or as the receiver of a method):
        the outcome, or None to keep following the call's result."""
        if child is call.func and not isinstance(child, ast.Attribute):
            return Outcome.CLEAN  # calling a tainted callable: not a tensor
        if training.enters_autograd(self.sem, call):
            return Outcome.AUTOGRAD
        inside = self._inside(call)
        if not inside and not self.seen.call(call):
            return Outcome.UNSEEN
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr in _PYTHON_RESULT_METHODS:
                return Outcome.CLEAN
            if func.attr in _STORING_METHODS and child is not func:
                return self._taint(func.value)  # the container now holds it
        elif isinstance(func, ast.Name) and func.id in _PYTHON_RESULT_BUILTINS:
            return Outcome.CLEAN
        return None

    def _to_callers(self, node: ast.AST) -> Outcome:
        """A tainted value is returned or yielded: follow the calls of the function."""
        sem = self.sem
        func = sem.enclosing_function(node)
        if func is None or func in self.callers_followed:
            return Outcome.CLEAN if func is not None else Outcome.UNSEEN
        self.callers_followed.add(func)
        if len(self.callers_followed) > 3:
            return Outcome.UNSEEN
        calls = [
            c for c in sem.calls_by_name.get(func.name, ()) if sem.local_function(c.func) is func
        ]
        if not calls or referenced_as_value(sem, func):
            return Outcome.UNSEEN  # called from code the analysis cannot see
        self.todo.extend(calls)
        return Outcome.CLEAN


def _requires_grad_names(ctx: Context) -> set[str]:
    """Names the file marks as holding tensors that require grad: ``x.requires_grad_()``,
    ``x.requires_grad = True``, ``x = torch.zeros(..., requires_grad=True)``,
    ``x = nn.Parameter(...)``."""
    key = "evaluation-requires-grad"
    known = ctx.sem.memo.get(key)
    if isinstance(known, set):
        return known
    out: set[str] = set()
    sem = ctx.sem
    for call in sem.calls_by_attr.get("requires_grad_", ()):
        assert isinstance(call.func, ast.Attribute)
        if not (call.args and is_false(call.args[0])) and isinstance(call.func.value, ast.Name):
            out.add(call.func.value.id)
    for node in sem.assigns:
        value = node.value
        marks = isinstance(value, ast.Call) and (
            any(k.arg == "requires_grad" and not is_false(k.value) for k in value.keywords)
            or ctx.qualname(value.func) == "torch.nn.Parameter"
        )
        for target in node.targets:
            if isinstance(target, ast.Name) and marks:
                out.add(target.id)
            if (
                isinstance(target, ast.Attribute)
                and target.attr == "requires_grad"
                and isinstance(target.value, ast.Name)
                and not is_false(value)
            ):
                out.add(target.value.id)
    sem.memo[key] = out
    return out


def referenced_as_value(sem: Semantic, func: ast.AST) -> bool:
    """Whether the function's name is used other than by calling it (passed, returned,
    stored): code the analysis cannot see may call it."""
    assert isinstance(func, FUNCTION_NODES)
    for load in sem.names.get(func.name, ()):
        parent = sem.parent(load)
        if not (isinstance(parent, ast.Call) and parent.func is load):
            binding = sem.lookup(func.name, load)
            if binding is not None and binding.node is func:
                return True
    return False


def grad_off_globally(ctx: Context) -> bool:
    """A script that runs ``torch.set_grad_enabled(False)`` at module level and never turns
    gradients back on."""
    calls = list(ctx.sem.calls_to("torch.set_grad_enabled"))
    off = [c for c in calls if training.is_grad_off(ctx.sem, c) and ctx.sem.at_module_level(c)]
    return bool(off) and len(off) == len(calls) and not any(ctx.sem.calls_to("torch.enable_grad"))


def callee(call: ast.Call) -> ast.expr:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        return func.value
    return func


def forward_calls(
    ctx: Context, stmts: list[ast.stmt], models: tuple[str, ...] = ()
) -> list[ast.Call]:
    """Calls of a model in ``stmts`` (not in nested defs), in source order. ``models``: the
    dotted names of models known besides those found by kind; a call of one of their
    attributes that is no ``nn.Module`` method (``self.model.decoder(...)``: a submodule, or a
    method of the model's class) runs part of that model."""
    out = []
    for node in ctx.sem.walk_body(stmts):
        if not isinstance(node, ast.Call):
            continue
        target = callee(node)
        if isinstance(target, ast.Name) and target.id == "self":
            continue
        if _held_model(target, models) or is_model(ctx, target):
            out.append(node)
    return sorted(out, key=lambda c: (c.lineno, c.col_offset))


def _held_model(target: ast.expr, models: tuple[str, ...]) -> bool:
    if not models:
        return False
    if dotted(target) in models:
        return True
    return (
        isinstance(target, ast.Attribute)
        and dotted(target.value) in models
        and target.attr not in MODULE_METHODS
    )


# The methods of ``torch.nn.Module`` (torch 2.13) other than ``forward``: calling one of them
# runs no forward.
MODULE_METHODS = frozenset(
    {
        "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda",
        "double", "eval", "extra_repr", "float", "get_buffer", "get_extra_state",
        "get_parameter", "get_submodule", "half", "ipu", "load_state_dict", "modules", "mtia",
        "named_buffers", "named_children", "named_modules", "named_parameters", "parameters",
        "register_backward_hook", "register_buffer", "register_forward_hook",
        "register_forward_pre_hook", "register_full_backward_hook",
        "register_full_backward_pre_hook", "register_load_state_dict_post_hook",
        "register_load_state_dict_pre_hook", "register_module", "register_parameter",
        "register_state_dict_post_hook", "register_state_dict_pre_hook", "requires_grad_",
        "set_extra_state", "set_submodule", "share_memory", "state_dict", "to", "to_empty",
        "train", "type", "xpu", "zero_grad",
    }
)  # fmt: skip


def is_model(ctx: Context, expr: ast.expr) -> bool:
    """A module by construction or use, or a parameter every caller passes a module to."""
    kind = ctx.kind(expr)
    if kind is not None or not isinstance(expr, ast.Name):
        return kind is Kind.MODULE
    binding = ctx.sem.lookup(expr.id, expr)
    return binding is not None and kinds.argument_kind(ctx.sem, binding) is Kind.MODULE


def trains(
    ctx: Context, stmts: list[ast.stmt], seen: set[ast.AST] | None = None, depth: int = 0
) -> bool:
    """Whether ``stmts`` (or local functions they call) compute gradients or manage grad mode."""
    memo = ctx.sem.memo
    seen = set() if seen is None else seen
    for stmt in stmts:
        key = ("evaluation-stmt-trains", stmt)
        known = memo.get(key)
        if known is None:
            known = _statement_trains(ctx, stmt, seen, depth)
            memo[key] = known
        if known:
            return True
    return False


def _statement_trains(ctx: Context, stmt: ast.stmt, seen: set[ast.AST], depth: int) -> bool:
    sem = ctx.sem
    for node in sem.walk_body([stmt]):
        if isinstance(node, ast.Call):
            func = node.func
            qual = ctx.qualname(func)
            if qual in _AUTOGRAD_CALLS or (qual or "").startswith(
                ("torch.func.", "torch.autograd.functional.")
            ):
                return True
            if qual == "torch.set_grad_enabled" and not training.is_grad_off(sem, node):
                return True
            if isinstance(func, ast.Attribute):
                if func.attr in ("backward", "manual_backward"):
                    return True
                if func.attr == "requires_grad_" and not (
                    node.args and isinstance(node.args[0], ast.Constant) and not node.args[0].value
                ):
                    return True
                if func.attr == "step" and ctx.kind(func.value) in (Kind.OPTIMIZER, Kind.SCALER):
                    return True
            if any(k.arg == "requires_grad" and not is_false(k.value) for k in node.keywords):
                return True
            helper = summaries.summary(sem, func) if sem.project is not None else None
            if helper is not None and helper.sem is not sem:
                if helper.autograd or "backward" in helper.methods:
                    return True  # project code of another module that needs autograd
            if _callable_that_trains(sem, func):
                return True  # an object whose calls backpropagate (a loss-and-step helper)
            local = sem.local_function(func)
            if local is not None and local not in seen and depth < 6:
                seen.add(local)
                key = ("evaluation-trains", local)
                known = sem.memo.get(key)
                if known is None:
                    sem.memo[key] = False  # in progress: a recursive call adds nothing
                    known = trains(ctx, list(local.body), seen, depth + 1)
                    sem.memo[key] = known
                if known:
                    return True
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "requires_grad"
                    and not is_false(node.value)
                ):
                    return True
    return False


def _callable_that_trains(sem: Semantic, func: ast.expr) -> bool:
    """``func`` names a class (of the file or another project module) whose ``__call__``
    backpropagates: the object it makes is handed on and called where the analysis may not
    follow (``run_epoch(data, model, SimpleLossCompute(generator, criterion, opt=None))``)."""
    if not isinstance(func, ast.Name | ast.Attribute):
        return False
    defined = sem.owner(func).class_def(func)
    if defined is None:
        return False
    owner, cls = defined
    call = _method(cls, "__call__")
    if call is None:
        return False
    found = summaries.of_function(owner, call)
    return found.autograd or "backward" in found.methods


def frozen_models(ctx: Context) -> set[str]:
    """Models whose parameters never require grad (``m.requires_grad_(False)``)."""
    out: set[str] = set()
    for call in ctx.sem.calls_by_attr.get("requires_grad_", ()):
        if call.args and is_false(call.args[0]):
            assert isinstance(call.func, ast.Attribute)
            name = dotted(call.func.value)
            if name:
                out.add(name)
    return out


def calls_train(ctx: Context, stmt: ast.stmt) -> bool:
    for node in ctx.sem.walk_body([stmt]):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "train"
            and (not node.args or not is_false(node.args[0]))
            and ctx.kind(node.func.value) is Kind.MODULE
        ):
            return True
    return False


def called_without_grad(ctx: Context, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a call of ``func`` runs with gradients off, or its result is backpropagated;
    also a call from a function of the file whose own call does (``_run_target`` called by
    ``_translate_batch``, which ``translate_batch`` calls under ``torch.no_grad()``), up to five
    callers up. Worked out once per function, each caller read once (breadth first)."""
    sem = ctx.sem
    memo = sem.memo.setdefault("evaluation-called-without-grad", {})
    assert isinstance(memo, dict)
    known = memo.get(func)
    if known is not None:
        return known
    found = False
    level: list[ast.FunctionDef | ast.AsyncFunctionDef] = [func]
    seen: set[ast.AST] = {func}
    for _depth in range(6):  # the function, then its callers up to five levels up
        callers: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        for each in level:
            named = (*sem.calls_by_name.get(each.name, ()), *sem.calls_by_attr.get(each.name, ()))
            for call in named:
                if training.grad_disabled(sem, call) or backpropagated(ctx, call):
                    found = True
                    break
                caller = sem.enclosing_function(call)
                if caller is not None and caller not in seen:
                    seen.add(caller)
                    callers.append(caller)
            if found:
                break
        if found or not callers:
            break
        level = callers
    memo[func] = found
    return found


def backpropagated(ctx: Context, call: ast.Call) -> bool:
    """``f(x).backward()``, or ``loss = f(x)`` and later ``loss.backward()`` (or of an
    expression using ``loss``) in the same function."""
    sem = ctx.sem
    parent = sem.parent(call)
    while isinstance(parent, ast.expr):
        if isinstance(parent, ast.Attribute) and parent.attr == "backward":
            return True
        parent = sem.parent(parent)
    if not (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return False
    name = parent.targets[0].id
    scope = sem.enclosing_function(call) or sem.tree
    for other in sem.calls_by_attr.get("backward", ()):
        if sem.enclosing_function(other) is not (scope if scope is not sem.tree else None):
            continue
        assert isinstance(other.func, ast.Attribute)
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(other.func.value)):
            return True
    return False


# ---- evidence that the forward repeats ----------------------------------------------------
def repeats(ctx: Context, call: ast.Call) -> bool:
    """Whether a forward call runs again and again: inside a loop (same function) over a
    DataLoader, over ``range(...)``, a ``while`` loop, a loop around a batch loop, a loop whose
    items reach the call's arguments (``for x, y in val_data: model(x)``, whatever the iterable
    is called), or any loop that appends or adds its output to something that outlives the
    iteration. A single forward (a demo cell, ``predict(sentence)``) keeps one graph until its
    output is dropped, which is not worth reporting."""
    sem = ctx.sem
    for loop in training.enclosing_loops(sem, call):
        if training.repeats(sem, loop):
            return True
        if _feeds(sem, call, loop.node):
            return True  # each iteration feeds the model what the loop iterates
        if _accumulates(ctx, call, loop.node):
            return True
    child: ast.AST = call
    for anc in sem.ancestors(call):  # [model(x) for x in loader], sum(... for x in loader)
        if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            break
        if isinstance(anc, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            if any(child is g.iter for g in anc.generators):
                child = anc
                continue
            for gen in anc.generators:
                it = gen.iter
                if _feeds(sem, call, gen) or (
                    isinstance(it, ast.Call) and terminal_name(it.func) in ("range", "count")
                ):
                    return True
                if isinstance(it, ast.Name | ast.Attribute) and kinds.is_loader(sem, it):
                    return True
        child = anc
    return False


def _feeds(sem: Semantic, call: ast.Call, loop: ast.AST) -> bool:
    """Whether what a ``for`` loop (or comprehension) iterates reaches the arguments of
    ``call``: a name its target binds, or one assigned in its body from such a name before the
    call (``x, y = batch`` then ``model(x.cuda())``). A loop over a literal list or tuple runs a
    fixed handful of times and does not count."""
    if not isinstance(loop, ast.For | ast.AsyncFor | ast.comprehension):
        return False
    if isinstance(loop.iter, ast.List | ast.Tuple | ast.Set):
        return False
    fed = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    if not fed:
        return False
    if isinstance(loop, ast.For | ast.AsyncFor):
        end = (call.lineno, call.col_offset)
        for node in sem.walk_body(loop.body):
            if (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)) >= end:
                continue
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value:
                if _mentions(node.value, fed):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    fed |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return any(_mentions(arg, fed) for arg in (*call.args, *(k.value for k in call.keywords)))


def _mentions(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _accumulates(ctx: Context, call: ast.Call, loop: ast.AST) -> bool:
    """``outs.append(model(x))`` or ``y = model(x)`` then ``outs.append(y)`` / ``acc += y`` in
    the loop, into something made before it."""
    sem = ctx.sem
    stmt = sem.statement_of(call)
    names = set()
    if isinstance(stmt, ast.Assign):
        names = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for acc_node, acc, value in training.accumulations(sem):
        if not sem.is_inside(acc_node, loop) or training.is_python_value(value):
            continue
        holds = (
            sem.is_inside(call, value)
            or call is value
            or any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(value))
        )
        base = training.accumulator_name(acc)
        if holds and base is not None:
            binding = sem.lookup(base.split(".")[0], acc)
            if binding is None or not sem.is_inside(binding.node, loop):
                return True
    return False


def mode_switch(ctx: Context, call: ast.Call) -> bool:
    """A forward of a model the analysis cannot see into, called with a constant flag
    (``model(im, label, make_adv=True)``): the flag may switch the forward into code that
    needs autograd (robustness's ``AttackerModel`` runs a PGD attack inside ``forward``)."""
    flags = [
        kw
        for kw in call.keywords
        if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool | str)
    ]
    return bool(flags) and _origins(ctx, callee(call)) is None
