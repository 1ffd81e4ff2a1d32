"""Facts about code that PyTorch turns into graphs: which functions of a file ``torch.compile``
compiles (decorated functions, functions passed to it, the ``forward`` of local classes whose
instances it gets), which branch tests read tensor data, and the example inputs and options of
``torch.export.export`` / ``torch.onnx.export`` calls. Shared by the TDR2xx rules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from . import arguments, kinds
from .kinds import MODULE_SELF_METHODS, Kind
from .semantic import FUNCTION_NODES, Semantic, keyword

Function = ast.FunctionDef | ast.AsyncFunctionDef

COMPILE = "torch.compile"
TORCH_EXPORT = "torch.export.export"
ONNX_EXPORT = "torch.onnx.export"
JIT_TRACE = "torch.jit.trace"
# Calls that return an ExportedProgram (``torch.onnx.export`` ignores shape options for one).
EXPORTED_PROGRAM_MAKERS = frozenset(
    {"torch.export.export", "torch.export.load", "torch.export.draft_export"}
)
_DISABLE_DECORATORS = frozenset(
    {"torch.compiler.disable", "torch._dynamo.disable", "torch.jit.ignore", "torch.jit.unused"}
)
# Tensor methods and torch functions whose Python truth value is read from tensor data.
_DATA_METHODS = frozenset(
    {
        "any",
        "all",
        "sum",
        "max",
        "min",
        "mean",
        "amax",
        "amin",
        "prod",
        "norm",
        "count_nonzero",
        "item",
        "equal",
        "allclose",
    }
)
_DATA_FUNCTIONS = frozenset(f"torch.{name}" for name in _DATA_METHODS - {"item"}) | {
    "torch.is_nonzero"
}
# Checks that select a code path for compiled/traced code: what is under them is deliberate.
_GRAPH_GUARDS = frozenset(
    {
        "is_compiling",
        "is_dynamo_compiling",
        "is_exporting",
        "is_scripting",
        "is_tracing",
    }
)
# Tensor factories whose first argument is the size of dimension 0.
_FACTORIES = frozenset(
    f"torch.{n}" for n in ("randn", "rand", "zeros", "ones", "empty", "full", "randint")
)


# ------------------------------------------------------------------ compiled code ----------
def is_compile(sem: Semantic, expr: ast.AST) -> bool:
    """``torch.compile`` or a call of it (``@torch.compile(mode=...)``), not ``disable=True``."""
    if isinstance(expr, ast.Call):
        disable = keyword(expr, "disable")
        if disable is not None and isinstance(disable.value, ast.Constant) and disable.value.value:
            return False
        expr = expr.func
    return sem.qualname(expr) == COMPILE


def instance_classes(sem: Semantic, expr: ast.AST | None) -> list[ast.ClassDef]:
    """The classes of this file whose instances ``expr`` may hold: ``Net()``, ``Net().cuda()``,
    a name or ``self.attr`` assigned one of those."""

    def made_by(call: ast.Call) -> ast.ClassDef | None:
        node: ast.expr = call
        while (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MODULE_SELF_METHODS
        ):
            node = node.func.value
        return sem.local_class(node.func) if isinstance(node, ast.Call) else None

    calls, _other = kinds.constructions(sem, expr, lambda c: made_by(c) is not None)
    out: list[ast.ClassDef] = []
    for call in calls:
        cls = made_by(call)
        if cls is not None and cls not in out:
            out.append(cls)
    return out


def class_method(sem: Semantic, cls: ast.ClassDef, name: str, _depth: int = 0) -> Function | None:
    """The method ``name`` of a class of this file, also inherited from a local base class."""
    for stmt in cls.body:
        if isinstance(stmt, FUNCTION_NODES) and stmt.name == name:
            return stmt
    if _depth > 8:
        return None
    for base in cls.bases:
        local = sem.local_class(base)
        if local is not None and local is not cls:
            found = class_method(sem, local, name, _depth + 1)
            if found is not None:
                return found
    return None


def compiled_functions(sem: Semantic) -> dict[Function, ast.AST]:
    """Functions whose body Dynamo traces, each with the node that compiles it: functions
    decorated with ``torch.compile`` (any form), local functions passed to ``torch.compile``,
    and the ``forward`` of local classes whose instance is passed to ``torch.compile`` or gets
    ``.compile()`` (``nn.Module.compile``). Functions marked ``torch.compiler.disable`` are left
    out."""
    found: dict[Function, ast.AST] = {}
    if not sem.mentions("compile"):
        return found  # nothing resolves to `torch.compile`, no `.compile()` is called
    for func in sem.functions:
        for dec in func.decorator_list:
            if is_compile(sem, dec):
                found.setdefault(func, dec)
    for call in sem.calls_to(COMPILE):
        if not is_compile(sem, call):
            continue
        target = arguments.value(call, arguments.COMPILE, "model")
        if isinstance(target, ast.Name):
            local = sem.local_function(target)
            if local is not None:
                found.setdefault(local, call)
                continue
        for cls in instance_classes(sem, target):
            forward = class_method(sem, cls, "forward")
            if forward is not None:
                found.setdefault(forward, call)
    for call in sem.calls_by_attr.get("compile", ()):
        assert isinstance(call.func, ast.Attribute)
        for cls in instance_classes(sem, call.func.value):
            if kinds.class_kind(sem, cls) is not Kind.MODULE or class_method(sem, cls, "compile"):
                continue
            forward = class_method(sem, cls, "forward")
            if forward is not None:
                found.setdefault(forward, call)
    return {f: node for f, node in found.items() if not graph_disabled(sem, f)}


def graph_disabled(sem: Semantic, func: Function) -> bool:
    """``@torch.compiler.disable`` / ``@torch._dynamo.disable`` / ``@torch.jit.ignore``."""
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if sem.qualname(target) in _DISABLE_DECORATORS:
            return True
    return False


def under_graph_guard(sem: Semantic, node: ast.AST, within: ast.AST) -> bool:
    """Whether ``node`` sits under an ``if`` (or conditional expression) that asks whether code
    is being compiled, traced, scripted or exported (``torch.compiler.is_compiling()``...)."""
    for anc in sem.ancestors(node):
        if anc is within:
            return False
        if isinstance(anc, ast.If | ast.IfExp | ast.While) and _mentions_guard(anc.test):
            return True
    return False


def _mentions_guard(test: ast.expr) -> bool:
    for node in ast.walk(test):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in _GRAPH_GUARDS:
            return True
    return False


# ------------------------------------------------------------------ data-dependent tests ---
def data_call(sem: Semantic, expr: ast.AST) -> ast.Call | None:
    """The call that makes a branch test depend on tensor data, or None: a reduction such as
    ``x.sum()``/``x.any()``/``torch.all(x)``, ``x.item()``, ``torch.equal(a, b)``, also inside
    comparisons, arithmetic, ``not`` and ``and``/``or`` (``if x.max() > 0 and flag:``).
    Branches on shapes, flags, ``None`` checks or ``self.training`` are not data-dependent."""
    if isinstance(expr, ast.BoolOp):
        for value in expr.values:
            found = data_call(sem, value)
            if found is not None:
                return found
        return None
    if isinstance(expr, ast.UnaryOp):
        return data_call(sem, expr.operand)
    if isinstance(expr, ast.BinOp):
        return data_call(sem, expr.left) or data_call(sem, expr.right)
    if isinstance(expr, ast.Compare):
        if any(isinstance(op, ast.Is | ast.IsNot | ast.In | ast.NotIn) for op in expr.ops):
            return None
        for operand in (expr.left, *expr.comparators):
            found = data_call(sem, operand)
            if found is not None:
                return found
        return None
    if not isinstance(expr, ast.Call):
        return None
    qual = sem.qualname(expr.func)
    if qual is not None:
        return expr if qual in _DATA_FUNCTIONS else None
    func = expr.func
    if not isinstance(func, ast.Attribute) or func.attr not in _DATA_METHODS:
        return None
    receiver = func.value
    if isinstance(receiver, ast.Name) and receiver.id == "self":
        return None
    if isinstance(receiver, ast.Call) and sem.qualname(receiver.func) is None:
        # ``x.abs().max()`` is data; ``helper(x).max()`` of an unknown helper may be anything
        # but a plain Python value has no ``.max()`` either: only method chains count.
        if not isinstance(receiver.func, ast.Attribute):
            return None
    return expr


def data_dependent_branches(sem: Semantic, func: Function) -> Iterator[tuple[ast.expr, ast.Call]]:
    """Tests of ``if``/``while``/conditional expressions/comprehension filters in ``func``'s
    body (not in nested functions) that read tensor data, with the call that reads it; tests
    under an ``is_compiling()``/``is_tracing()`` check are left out."""
    for node in sem.walk_body(func.body):
        tests: list[ast.expr] = []
        if isinstance(node, ast.If | ast.While | ast.IfExp):
            tests.append(node.test)
        elif isinstance(node, ast.comprehension):
            tests.extend(node.ifs)
        for test in tests:
            call = data_call(sem, test)
            if call is not None and not under_graph_guard(sem, test, func):
                yield test, call


def training_only(sem: Semantic, node: ast.AST, func: ast.AST) -> bool:
    """Whether ``node`` runs only in training mode, within ``func``: under
    ``if self.training:`` (or ``and``-ed with it), in the ``else`` of ``if not self.training:``,
    or on the right of ``self.training and ...``. Exported and traced models run in eval mode."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        if any(_is_training(p) for p in node.values):
            return True  # ``if self.training and x.sum() > 0:``
    child = node
    for anc in sem.ancestors(node):
        if anc is func:
            return False
        if isinstance(anc, ast.If) and child is not anc.test:
            test = anc.test
            negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            if negated:
                assert isinstance(test, ast.UnaryOp)
                test = test.operand
            parts = (
                test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else []
            )
            if _is_training(test) or (not negated and any(_is_training(p) for p in parts)):
                if (child in anc.body) != negated:
                    return True
        child = anc
    return False


def _is_training(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Attribute) and expr.attr == "training"


# ------------------------------------------------------------------ export calls -----------
def export_inputs(call: ast.Call) -> list[ast.expr] | None:
    """The example positional inputs of an export call (``torch.export.export``,
    ``torch.onnx.export``: both take them second) when they are a literal tuple (or list),
    else None."""
    args = arguments.value(call, arguments.EXPORT, "args")
    if isinstance(args, ast.Tuple | ast.List) and not any(
        isinstance(e, ast.Starred) for e in args.elts
    ):
        return list(args.elts)
    return None


def written_inputs(sem: Semantic, call: ast.Call) -> bool:
    """Whether an export call's example inputs are written in this file: a literal tuple or list,
    a ``torch.*`` call (``torch.randn(...)``), or a name assigned one of those. Inputs received
    from a caller (a generic export helper) or computed elsewhere are not."""
    args = arguments.value(call, arguments.EXPORT, "args")
    if isinstance(args, ast.Name):
        binding = sem.lookup(args.id, args)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        args = binding.value
    if isinstance(args, ast.Tuple | ast.List):
        return bool(args.elts)  # ``args=()``: the inputs are all in ``kwargs=``
    return isinstance(args, ast.Call) and (sem.qualname(args.func) or "").startswith("torch.")


def batch_of_one(sem: Semantic, expr: ast.AST) -> bool:
    """``torch.randn(1, ...)``, ``torch.zeros((1, 3))``...: an example input whose dimension 0
    is literally 1 (``torch.export`` specialises such a dimension and rejects marking it
    dynamic)."""
    if not isinstance(expr, ast.Call) or sem.qualname(expr.func) not in _FACTORIES:
        return False
    first = expr.args[0] if expr.args else None
    if isinstance(first, ast.Tuple | ast.List):
        first = first.elts[0] if first.elts else None
    return isinstance(first, ast.Constant) and first.value == 1


def is_exported_program(sem: Semantic, expr: ast.AST | None) -> bool:
    """Whether ``expr`` may hold an ``ExportedProgram`` made in this file."""
    calls, _other = kinds.constructions(
        sem, expr, lambda c: sem.qualname(c.func) in EXPORTED_PROGRAM_MAKERS
    )
    return bool(calls)


def literal_bool(expr: ast.AST | None) -> bool | None:
    """True/False for a literal boolean, None otherwise."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
        return expr.value
    return None


def literal_strings(expr: ast.AST | None) -> list[str] | None:
    """``["input", "mask"]`` for a literal list/tuple of strings, else None."""
    if not isinstance(expr, ast.List | ast.Tuple):
        return None
    out = []
    for elt in expr.elts:
        if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
            return None
        out.append(elt.value)
    return out
