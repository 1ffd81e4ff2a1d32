"""Training-loop facts, read by the TDR1xx rules and by many others.

The loops of a file (``LoopInfo``: which loops iterate a DataLoader, how they nest, which loops
repeat training-like work), backward passes, optimizer steps and gradient clipping, where
gradient tracking is off (``torch.no_grad``, ``torch.inference_mode``,
``torch.set_grad_enabled(False)``) and where ``autocast`` is on (with its device and dtype),
also through a launcher that runs them for the loop (``Launcher``: Accelerate's
``Accelerator``, Lightning Fabric's ``Fabric``, a DeepSpeed engine, told by the call that makes
them: ``accelerator.autocast()``, ``fabric.backward(loss)``). On
top of those, the shape of one training step: which statements run on every iteration of a loop
and which only under an ``if``, which ``if`` guards an ``optimizer.step()`` the way gradient
accumulation does, the order of backward, clip and step calls within one iteration, and which
expressions hold a loss tensor that still carries its autograd graph. The loop facts are built
once per file in ``sem.memo``. All of it is read from ``Semantic`` facts.
"""

from __future__ import annotations

import ast
import bisect
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from . import arguments, graphs, kinds
from .kinds import Kind
from .semantic import (
    FUNCTION_NODES,
    LOOP_NODES,
    Binding,
    Semantic,
    argument,
    dotted,
    has_star_kwargs,
    is_false,
    keyword,
    terminal_name,
)

GRAD_OFF_CALLS = frozenset({"torch.no_grad", "torch.inference_mode"})
AUTOCAST = frozenset({"torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"})
CLIP_FUNCTIONS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
    }
)
# Functional losses whose names do not end in ``_loss``.
_FUNCTIONAL_LOSSES = frozenset(
    {
        "cross_entropy",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "nll_loss",
        "kl_div",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "poisson_nll_loss",
        "gaussian_nll_loss",
        "triplet_margin_loss",
        "triplet_margin_with_distance_loss",
        "margin_ranking_loss",
        "hinge_embedding_loss",
        "cosine_embedding_loss",
        "multilabel_margin_loss",
        "multilabel_soft_margin_loss",
        "multi_margin_loss",
        "soft_margin_loss",
        "ctc_loss",
    }
)
# An ``if`` test that reads like gradient accumulation: ``(i + 1) % k == 0``, ``accum_steps``.
_ACCUMULATION_NAME = re.compile(r"accum|grad_acc|(^|_)acc_steps", re.I)
# Calls whose result is a Python number or detached data, never a tensor with a graph.
PLAIN_RESULT_METHODS = frozenset({"item", "tolist", "detach", "numpy", "size", "numel", "dim"})
PLAIN_RESULT_FUNCTIONS = frozenset({"float", "int", "len", "bool", "round", "str"})
# Objects that run a training step's backward pass and autocast region themselves
# (``accelerator.backward(loss)``, ``with fabric.autocast():``), by the call that makes them.
LAUNCHERS = {
    "accelerate.Accelerator": "accelerate",
    "accelerate.accelerator.Accelerator": "accelerate",
    "lightning.Fabric": "fabric",
    "lightning.fabric.Fabric": "fabric",
    "lightning.fabric.fabric.Fabric": "fabric",
    "lightning_fabric.Fabric": "fabric",
    "lightning_fabric.fabric.Fabric": "fabric",
}
_DEEPSPEED_INIT = "deepspeed.initialize"  # its first result is an engine with ``backward``
# A launcher's option that turns its autocast off, and the literal values that do.
_FULL_PRECISION: dict[str, tuple[str, frozenset[object]]] = {
    "accelerate": ("mixed_precision", frozenset({"no"})),
    "fabric": ("precision", frozenset({"32-true", "64-true", "32", "64", 32, 64})),
}
# What a launcher is called when the code shows no construction (a parameter, an attribute
# set elsewhere): a hint only, used when nothing else is known.
_LAUNCHER_NAME = re.compile(r"accelerat|fabric|engine", re.I)


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def before(a: ast.AST, b: ast.AST) -> bool:
    """Whether ``a`` starts before ``b`` in the source."""
    return _pos(a) < _pos(b)


# ------------------------------------------------------------------ loops ----------------
_UNKNOWN = object()


@dataclass(eq=False)
class LoopInfo:
    """A ``for``/``while`` loop: the loop it is nested in (same function), the function, class
    or lambda around it, and the DataLoader it iterates when it is a batch loop."""

    node: ast.For | ast.AsyncFor | ast.While
    parent: LoopInfo | None
    function: ast.AST | None
    # The file's facts, to tell the loader on first use (weakly held: no reference cycle).
    facts: weakref.ref[Semantic] | None = None
    _loader: object = _UNKNOWN

    @property
    def loader(self) -> ast.expr | None:
        """The loader this loop iterates, when it is a batch loop (worked out on first use:
        most loops are never asked)."""
        if self._loader is _UNKNOWN:
            node = self.node
            sem = self.facts() if self.facts is not None else None
            found = None
            if sem is not None and isinstance(node, ast.For | ast.AsyncFor):
                found = _iterated_loader(sem, node.iter)
            self._loader = found
        return self._loader  # type: ignore[return-value]

    @property
    def is_batch_loop(self) -> bool:
        return self.loader is not None

    @property
    def target_name(self) -> str | None:
        node = self.node
        if isinstance(node, ast.For | ast.AsyncFor):
            target = node.target
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            if isinstance(target, ast.Name) and target.id != "_":
                return target.id
        return None


# Loop facts by loop node and the loops directly inside each (children are kept apart from
# ``LoopInfo`` so that the facts hold no reference cycle and are freed with the file's).
_Loops = tuple[dict[ast.AST, LoopInfo], dict[ast.AST, list[LoopInfo]]]
_LOOPS = "loops"  # key of the loop facts in ``sem.memo``


def _loops(sem: Semantic) -> _Loops:
    """The facts of every loop of the file (``sem.loops``, in source order), built on first
    use."""
    known = sem.memo.get(_LOOPS)
    if known is not None:
        return known  # type: ignore[return-value]
    facts = weakref.ref(sem)
    table: dict[ast.AST, LoopInfo] = {node: LoopInfo(node, None, None, facts) for node in sem.loops}
    inner: dict[ast.AST, list[LoopInfo]] = {}
    sem.memo[_LOOPS] = loops = (table, inner)
    for node, info in table.items():
        for anc in sem.ancestors(node):
            if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
                info.function = anc
                break
            if isinstance(anc, LOOP_NODES) and _in_loop_body(sem, anc, node):
                info.parent = table[anc]
                inner.setdefault(anc, []).append(info)
                break
    return loops


def _in_loop_body(sem: Semantic, loop: ast.AST, node: ast.AST) -> bool:
    return not (
        isinstance(loop, ast.For | ast.AsyncFor) and sem.is_inside(node, loop.iter)
    ) and not (isinstance(loop, ast.While) and sem.is_inside(node, loop.test))


def iterated_candidates(expr: ast.expr) -> list[ast.expr]:
    """What a ``for`` loop over ``expr`` may iterate as its loader, seen through
    ``enumerate``, ``tqdm``, ``iter``, ``zip``, ``track`` and ``islice``: the expressions one of
    which ``LoopInfo.loader`` is, when it is any."""
    seen = 0
    while isinstance(expr, ast.Call) and seen < 4:
        seen += 1
        name = terminal_name(expr.func)
        if name in ("enumerate", "tqdm", "iter", "zip", "track", "islice") and expr.args:
            if name == "zip":
                return list(expr.args)
            expr = expr.args[0]
        else:
            return []
    return [expr]


def _iterated_loader(sem: Semantic, expr: ast.expr) -> ast.expr | None:
    for candidate in iterated_candidates(expr):
        if kinds.is_loader(sem, candidate):
            return candidate
    return None


def loop_info(sem: Semantic, loop: ast.AST) -> LoopInfo:
    return _loops(sem)[0][loop]


def all_loops(sem: Semantic) -> list[LoopInfo]:
    return list(_loops(sem)[0].values())


def enclosing_loops(sem: Semantic, node: ast.AST) -> list[LoopInfo]:
    """Loops whose body contains ``node``, innermost first, within the same function."""
    table = _loops(sem)[0]
    out = []
    for anc in sem.ancestors(node):
        if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            break
        if isinstance(anc, LOOP_NODES) and _in_loop_body(sem, anc, node):
            out.append(table[anc])
    return out


def in_loop(sem: Semantic, node: ast.AST) -> bool:
    """Whether an expression lies in the body (or the target) of a loop of its function, read
    from the statements of the file's loop bodies (collected once) instead of from every loop
    around it. A loop's iterable or condition is not in it."""
    child = node
    for anc in sem.ancestors(node):
        if isinstance(anc, ast.Lambda):
            return False
        if isinstance(anc, ast.stmt):
            if isinstance(anc, (*FUNCTION_NODES, ast.ClassDef)):
                return False  # a decorator, a default, a base: outside the function's loops
            if isinstance(anc, ast.For | ast.AsyncFor) and child is not anc.iter:
                return True  # the loop's target
            return anc in _loop_statements(sem)
        child = anc
    return False


def _loop_statements(sem: Semantic) -> set[ast.AST]:
    """The statements in the body (or ``else``) of a loop of the same function: not those of
    a function or class defined there."""
    key = "training-loop-statements"
    known = sem.memo.get(key)
    if isinstance(known, set):
        return known
    found: set[ast.AST] = set()
    nested = (*FUNCTION_NODES, ast.ClassDef)
    for loop in sem.loops:
        if loop in found:
            continue  # inside a loop already walked
        todo: list[ast.stmt] = [*loop.body, *loop.orelse]
        while todo:
            stmt = todo.pop()
            found.add(stmt)
            if isinstance(stmt, nested):
                continue
            for block in _STATEMENT_BLOCKS:
                todo.extend(getattr(stmt, block, ()))
            for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
                todo.extend(part.body)
    sem.memo[key] = found
    return found


_STATEMENT_BLOCKS = ("body", "orelse", "finalbody")


def loop_uses_loader(sem: Semantic, loop: LoopInfo, loader: ast.expr) -> bool:
    """Whether an epoch-level loop iterates ``loader`` (directly, by passing it to a call, or
    by calling a function of the file that iterates it: a method of the class for a loader kept
    on ``self``, a function that reads a module-level loader as a global)."""
    want = reference(loader)
    if want is None:
        return False
    return _body_uses_loader(sem, loop.node.body, want, loop.node, 0)


def reference(expr: ast.AST) -> str | None:
    """How code refers to a value it keeps: ``a.b.c`` for names and attributes,
    ``loaders['train']`` for an item of one under a literal key; None for anything else."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        base = dotted(expr.value)
        return f"{base}[{expr.slice.value!r}]" if base is not None else None
    return dotted(expr)


def _body_uses_loader(
    sem: Semantic, body: list[ast.stmt], want: str, anchor: ast.AST, depth: int
) -> bool:
    for node in sem.walk_body(body):
        if isinstance(node, ast.For | ast.AsyncFor):
            # ``want`` is known to be a loader: a loop over it is its batch loop.
            for inner in iterated_candidates(node.iter):
                if reference(inner) == want and (depth == 0 or _same_value(sem, inner, anchor)):
                    return True
        elif isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if reference(arg) == want and (depth == 0 or _same_value(sem, arg, anchor)):
                    return True
            if depth >= 2:
                continue
            called = _called_here(sem, node.func, want)
            if called is not None and _body_uses_loader(sem, called.body, want, anchor, depth + 1):
                return True  # ``self.train_epoch()`` iterates ``self.train_loader``
    return False


def _called_here(
    sem: Semantic, func: ast.expr, want: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function of this file a call runs that may read the loader ``want``: a method of
    the class (``self.run_epoch()``) for a loader on ``self``, a function for a name."""
    if want.startswith("self."):
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            cls = sem.enclosing_class(func) if func.value.id == "self" else None
            return graphs.class_method(sem, cls, func.attr) if cls is not None else None
        return None
    return sem.local_function(func) if "." not in want.split("[")[0] else None


def _same_value(sem: Semantic, use: ast.expr, anchor: ast.AST) -> bool:
    """Whether a plain name read at ``use`` (or the dict a subscript reads) is the one visible
    at ``anchor`` (a global read in a function called from there); names with attributes are
    compared by spelling."""
    if isinstance(use, ast.Subscript):
        use = use.value
    if not isinstance(use, ast.Name):
        return True
    here = sem.lookup(use.id, use)
    return here is None or here is sem.lookup(use.id, anchor)


def repeats(sem: Semantic, loop: LoopInfo) -> bool:
    """Whether a loop repeats training-like work: a batch loop, a loop around one (an epoch
    loop), a ``while`` loop, or a ``for`` over ``range(...)``/``itertools.count()``. Loops over
    a collection (``for m in models``) do not count: doing a thing once per item is fine."""
    node = loop.node
    if loop.is_batch_loop or isinstance(node, ast.While):
        return True
    if isinstance(node.iter, ast.Call) and terminal_name(node.iter.func) in ("range", "count"):
        return True
    return contains_batch_loop(sem, loop)


def contains_batch_loop(sem: Semantic, loop: LoopInfo) -> bool:
    """Whether a batch loop is nested (at any depth, same function) inside ``loop``."""
    inner = _loops(sem)[1]
    stack = list(inner.get(loop.node, ()))
    while stack:
        child = stack.pop()
        if child.is_batch_loop:
            return True
        stack.extend(inner.get(child.node, ()))
    return False


def repeating_loop(sem: Semantic, node: ast.AST) -> LoopInfo | None:
    """The innermost loop around ``node`` (same function) that repeats training-like work."""
    for loop in enclosing_loops(sem, node):
        if repeats(sem, loop):
            return loop
    return None


# ------------------------------------------------------------------ backward and steps ----
def is_backward(sem: Semantic, call: ast.Call) -> bool:
    """``x.backward(...)``, ``torch.autograd.backward(...)`` or a launcher's
    ``accelerator.backward(loss)`` / ``fabric.backward(loss)``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "backward":
        if sem.qualname(func) in (None, "torch.autograd.backward"):
            return True
        # A launcher imported from another module (``from utils import accelerator``).
        return bool(call.args) and launcher(sem, func.value) is not None
    return sem.qualname(func) == "torch.autograd.backward"


def scaled_backward_scaler(call: ast.Call) -> ast.expr | None:
    """The scaler in ``scaler.scale(loss).backward()``; None for other calls."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "backward":
        inner = func.value
        if (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr == "scale"
        ):
            return inner.func.value
    return None


def optimizer_steps(sem: Semantic, within: ast.AST) -> list[ast.Call]:
    """``optimizer.step()`` and ``scaler.step(optimizer)`` calls under ``within`` (not in
    nested functions), in source order."""
    steps, keys = _file_steps(sem)
    if not steps:
        return []
    lo, hi = 0, len(steps)
    end = getattr(within, "end_lineno", None)
    if end is not None:  # only the steps within its span can be under it
        lo = bisect.bisect_left(keys, (within.lineno, within.col_offset))  # type: ignore[attr-defined]
        hi = bisect.bisect_right(keys, (end, within.end_col_offset))  # type: ignore[attr-defined]
    return [step for step in steps[lo:hi] if _directly_under(sem, step, within)]


def all_optimizer_steps(sem: Semantic) -> list[ast.Call]:
    """The optimizer steps of the file at module level and in functions (not in lambdas or
    class bodies), in source order."""
    steps, _ = _file_steps(sem)
    out = []
    for step in steps:
        scope = next((a for a in sem.ancestors(step) if type(a) in _SCOPE_NODES), None)
        if scope is None or isinstance(scope, FUNCTION_NODES):
            out.append(step)
    return out


_SCOPE_NODES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_STEPS = "training-optimizer-steps"


def _file_steps(sem: Semantic) -> tuple[list[ast.Call], list[tuple[int, int]]]:
    """Every optimizer step call of the file with its position, worked out once per file."""
    known = sem.memo.get(_STEPS)
    if isinstance(known, tuple):
        return known
    steps = []
    for node in sem.calls_by_attr.get("step", ()):
        if not isinstance(node.func, ast.Attribute):
            continue
        receiver = node.func.value
        if kinds.is_optimizer(sem, receiver) or (
            node.args
            and kinds.is_optimizer(sem, node.args[0])
            and not kinds.is_scheduler(sem, receiver)
        ):
            steps.append(node)
    steps.sort(key=_pos)
    found = (steps, [_pos(step) for step in steps])
    sem.memo[_STEPS] = found
    return found


def _directly_under(sem: Semantic, node: ast.AST, within: ast.AST) -> bool:
    """Whether ``node`` lies under ``within`` with no nested function, class or lambda
    between them (what ``sem.walk(within)`` reaches)."""
    for anc in sem.ancestors(node):
        if anc is within:
            return True
        if type(anc) in _SCOPE_NODES:
            return False
    return False


# ------------------------------------------------------------------ grad mode ------------
def grad_disabled(sem: Semantic, node: ast.AST) -> bool:
    """Whether gradient tracking is off where ``node`` runs: under ``torch.no_grad()``,
    ``torch.inference_mode()``, ``torch.set_grad_enabled(False)`` (as a context manager,
    a decorator, or an earlier statement in an enclosing block)."""
    child: ast.AST = node
    for anc in sem.ancestors(node):
        if isinstance(anc, ast.With | ast.AsyncWith) and child in anc.body:
            if any(is_grad_off(sem, item.context_expr) for item in anc.items):
                return True
        if isinstance(anc, FUNCTION_NODES):
            return any(is_grad_off(sem, d) or named_grad_off(d) for d in anc.decorator_list)
        if isinstance(anc, ast.Lambda | ast.ClassDef):
            return False
        if isinstance(child, ast.stmt):
            try:
                block, index = sem.block_of(child)
            except ValueError:
                block, index = [], 0
            earliest = _grad_off_statements(sem).get(id(block))
            if earliest is not None and earliest < index:
                return True
        child = anc
    return False


_GRAD_OFF_STATEMENTS = "training-grad-off-statements"


def _grad_off_statements(sem: Semantic) -> dict[int, int]:
    """{id of a block: index of its first ``torch.set_grad_enabled(False)`` statement}, worked
    out once per file (asking each block again per node made long files quadratic)."""
    known = sem.memo.get(_GRAD_OFF_STATEMENTS)
    if isinstance(known, dict):
        return known
    out: dict[int, int] = {}
    named = [
        *sem.calls_by_attr.get("set_grad_enabled", ()),
        *sem.calls_by_name.get("set_grad_enabled", ()),
    ]
    for call in dict.fromkeys([*named, *sem.calls_to("torch.set_grad_enabled")]):
        stmt = sem.parent(call)
        if not isinstance(stmt, ast.Expr) or stmt.value is not call:
            continue
        if not isinstance(call, ast.Call) or not _is_set_grad_false(sem, call):
            continue
        try:
            block, index = sem.block_of(stmt)
        except ValueError:
            continue
        out[id(block)] = min(index, out.get(id(block), index))
    sem.memo[_GRAD_OFF_STATEMENTS] = out
    return out


def is_grad_off(sem: Semantic, expr: ast.expr) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()`` (not ``inference_mode(False)``) or
    ``torch.set_grad_enabled(False)``, called or (the first two) as a bare decorator."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    qual = torch_qualname(sem, target)
    if qual in GRAD_OFF_CALLS:
        if isinstance(expr, ast.Call) and qual == "torch.inference_mode":
            return not is_false(arguments.value(expr, qual, "mode"))
        return True
    return isinstance(expr, ast.Call) and _is_set_grad_false(sem, expr)


def _is_set_grad_false(sem: Semantic, call: ast.Call) -> bool:
    if torch_qualname(sem, call.func) != "torch.set_grad_enabled":
        return False
    return is_false(arguments.value(call, "torch.set_grad_enabled", "mode"))


def torch_qualname(sem: Semantic, expr: ast.AST) -> str | None:
    """``sem.qualname``, and also ``torch.no_grad`` for ``torch.no_grad`` written in a file
    where ``torch`` has no binding of its own: it arrives through a star import (``from utils
    import *``), which the name table cannot see into."""
    qual = sem.qualname(expr)
    if qual is not None:
        return qual
    name = dotted(expr)
    if name is None or not name.startswith("torch."):
        return None
    base = expr
    while isinstance(base, ast.Attribute):
        base = base.value
    if sem.lookup("torch", base) is not None:
        return None  # a local `torch` that is not the module
    star = any(  # star imports are only allowed at module level
        isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names)
        for stmt in sem.tree.body
    )
    return name if star else None


def named_grad_off(decorator: ast.expr) -> bool:
    """A project's own wrapper such as ``@smart_inference_mode()`` or ``@utils.no_grad``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = terminal_name(target) or ""
    return "inference_mode" in name or "no_grad" in name


# ------------------------------------------------------------------ autocast -------------
def is_autocast(sem: Semantic, expr: ast.expr) -> bool:
    """``torch.autocast``/``torch.amp.autocast``/``torch.cuda|cpu.amp.autocast``, called or
    not, and a launcher's ``accelerator.autocast()`` / ``fabric.autocast()``."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    if sem.qualname(target) in AUTOCAST:
        return True
    return _launcher_autocast(sem, expr) is not None


def _launcher_autocast(sem: Semantic, expr: ast.expr) -> Launcher | None:
    """The Accelerate or Fabric launcher of ``accelerator.autocast()``, if ``expr`` is one."""
    if not (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "autocast"
    ):
        return None
    found = launcher(sem, expr.func.value)
    return found if found is not None and found.library != "deepspeed" else None


def enclosing_autocast(sem: Semantic, node: ast.AST) -> ast.With | ast.AsyncWith | None:
    """The innermost ``with autocast(...)`` around ``node`` (same function), or None when
    there is none or the innermost one is literally disabled (``enabled=False``)."""
    for with_ in sem.enclosing_withs(node):
        for item in with_.items:
            if is_autocast(sem, item.context_expr):
                return None if autocast_disabled(sem, item.context_expr) else with_
    return None


def autocast_disabled(sem: Semantic, expr: ast.expr) -> bool:
    """``autocast(..., enabled=False)``: positional ``enabled`` is the first argument of
    ``torch.cuda/cpu.amp.autocast`` and the third of ``torch.autocast``."""
    if not isinstance(expr, ast.Call):
        return False
    found = _launcher_autocast(sem, expr)
    if found is not None:
        # ``Accelerator(mixed_precision="no")``, ``Fabric(precision="32-true")``.
        option, values = _FULL_PRECISION.get(found.library, ("", frozenset()))
        value = launcher_option(found, option)
        return isinstance(value, ast.Constant) and value.value in values
    return is_false(arguments.bind_as(expr, sem.qualname(expr.func)).value("enabled"))


def autocast_device(sem: Semantic, expr: ast.expr) -> str | None:
    """The device type of an ``autocast(...)`` call when the source states it (a string
    literal, or ``torch.cuda/cpu.amp.autocast``); None when it is computed at run time."""
    if not isinstance(expr, ast.Call):
        return None
    qual = sem.qualname(expr.func)
    if qual in ("torch.cuda.amp.autocast", "torch.cpu.amp.autocast"):
        return qual.split(".")[1]
    value = arguments.bind_as(expr, qual).value("device_type")
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.split(":")[0]
    return None


def autocast_dtype(sem: Semantic, expr: ast.expr) -> str | None:
    """``"float16"``/``"bfloat16"``: the dtype an ``autocast(...)`` call runs in, explicit
    (``dtype=torch.half``) or the device's default (float16 on CUDA, bfloat16 on CPU,
    ``torch.get_autocast_dtype``); None when it cannot be told from the source."""
    if not isinstance(expr, ast.Call):
        return None
    value = arguments.bind_as(expr, sem.qualname(expr.func)).value("dtype")
    if value is None:
        return {"cuda": "float16", "cpu": "bfloat16"}.get(autocast_device(sem, expr) or "")
    names = {"torch.float16": "float16", "torch.half": "float16", "torch.bfloat16": "bfloat16"}
    return names.get(sem.qualname(value) or "")


# ------------------------------------------------------------------ loops and guards ------
def iteration_loop(sem: Semantic, node: ast.AST) -> LoopInfo | None:
    """The loop one run of which is "one iteration" for ``node``: the innermost loop around it
    (same function) that repeats training-like work (a batch loop, an epoch loop, ``while``,
    ``for ... in range(...)``) or runs a backward pass (``for i, batch in pbar:``)."""
    for loop in enclosing_loops(sem, node):
        if is_iteration_loop(sem, loop):
            return loop
    return None


def is_iteration_loop(sem: Semantic, loop: LoopInfo) -> bool:
    """A loop that repeats training-like work or runs a backward pass."""
    key = ("iteration-loop", loop.node)
    known = sem.memo.get(key)
    if known is None:
        known = repeats(sem, loop) or (
            has_backward_calls(sem)
            and any(
                isinstance(n, ast.Call) and is_backward(sem, n)
                for n in sem.walk_body(loop.node.body)
            )
        )
        sem.memo[key] = known
    return bool(known)


def has_backward_calls(sem: Semantic) -> bool:
    """Whether the file has any ``.backward()`` or ``torch.autograd.backward``/``grad`` call."""
    return bool(sem.calls_by_attr.get("backward") or sem.calls_by_name.get("backward")) or bool(
        sem.calls_by_attr.get("grad") or sem.calls_by_name.get("grad")
    )


def backward_named(sem: Semantic) -> bool:
    """Whether anything in the file is named ``backward`` (``Semantic.mentions``). When nothing
    is, no call of the file is a backward pass (``is_backward``: a ``.backward()`` call, or
    ``torch.autograd.backward`` under whatever name the file imports or assigns it as)."""
    return sem.mentions("backward")


def conditions_between(sem: Semantic, node: ast.AST, loop: ast.AST) -> list[ast.AST]:
    """The constructs between ``node`` and ``loop`` that may skip it on an iteration, innermost
    first: ``if`` statements and expressions, ``match``, ``try`` handlers, nested loops."""
    out: list[ast.AST] = []
    child: ast.AST = node
    for anc in sem.ancestors(node):
        if anc is loop:
            break
        if isinstance(anc, ast.If | ast.IfExp | ast.Match | ast.ExceptHandler | ast.BoolOp):
            if not (isinstance(anc, ast.If | ast.IfExp) and child is anc.test):
                out.append(anc)
        elif isinstance(anc, LOOP_NODES) or (isinstance(anc, ast.Try) and child in anc.orelse):
            out.append(anc)
        child = anc
    return out


def runs_every_iteration(sem: Semantic, node: ast.AST, loop: ast.AST) -> bool:
    """Whether ``node`` runs exactly once on every iteration of ``loop``: no ``if``, ``match``,
    handler or nested loop stands between them (``with`` and ``try`` bodies do not count), and
    no earlier ``continue`` may skip it (``break``, ``return`` and ``raise`` end the loop)."""
    if conditions_between(sem, node, loop):
        return False
    assert isinstance(loop, LOOP_NODES)
    return not any(
        isinstance(stmt, ast.Continue) and before(stmt, node) and _loop_of(sem, stmt) is loop
        for stmt in sem.walk_body(loop.body)
    )


def _loop_of(sem: Semantic, stmt: ast.AST) -> ast.AST | None:
    for anc in sem.ancestors(stmt):
        if isinstance(anc, LOOP_NODES):
            return anc
    return None


def is_accumulation_test(test: ast.expr) -> bool:
    """An ``if`` test that counts micro-batches: it takes a remainder (``(i + 1) % k == 0``) or
    reads a name about accumulation (``step == accum_steps``, ``should_accumulate``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return not isinstance(node.left, ast.Constant | ast.JoinedStr)
        name = terminal_name(node)
        if name and _ACCUMULATION_NAME.search(name):
            return True
    return False


def accumulation_guard(sem: Semantic, step: ast.Call, loop: ast.AST) -> ast.If | None:
    """The ``if`` that makes ``step`` (an optimizer step) run only every k-th iteration of
    ``loop``: the innermost ``if`` between them whose test counts micro-batches, with the step in
    its body (not in its ``else``). None when the step runs unconditionally or under another
    kind of condition (``if torch.isfinite(norm):``, ``if not skip:``)."""
    child: ast.AST = step
    for anc in sem.ancestors(step):
        if anc is loop or isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            return None
        if isinstance(anc, ast.If) and child in anc.body and is_accumulation_test(anc.test):
            return anc
        child = anc
    return None


def accumulation_count(test: ast.expr) -> ast.expr | None:
    """``k`` in ``(i + 1) % k == 0`` (the right operand of the first remainder), if any."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return node.right
    return None


def accumulated_steps(sem: Semantic, loop: LoopInfo) -> list[tuple[ast.Call, ast.If]]:
    """Optimizer steps of ``loop`` (not of its nested loops) that run under an accumulation
    guard, with that guard."""
    out = []
    for step in optimizer_steps(sem, loop.node):
        if iteration_loop(sem, step) is not loop:
            continue
        guard = accumulation_guard(sem, step, loop.node)
        if guard is not None:
            out.append((step, guard))
    return out


def step_optimizer(sem: Semantic, step: ast.Call) -> ast.expr | None:
    """The optimizer a step call updates: ``opt`` in ``opt.step()`` and ``scaler.step(opt)``."""
    assert isinstance(step.func, ast.Attribute)
    receiver = step.func.value
    if (
        step.args
        and kinds.is_optimizer(sem, step.args[0])
        and not kinds.is_optimizer(sem, receiver)
    ):
        return step.args[0]
    return receiver


# ------------------------------------------------------------------ calls in one iteration --
def calls_in(sem: Semantic, within: ast.AST | list[ast.stmt]) -> Iterator[ast.Call]:
    """Calls under a node or a statement list, not entering nested functions."""
    nodes = sem.walk_body(within) if isinstance(within, list) else sem.walk(within)
    for node in nodes:
        if isinstance(node, ast.Call):
            yield node


def backward_calls(sem: Semantic, within: ast.AST | list[ast.stmt]) -> list[ast.Call]:
    """Backward passes (``x.backward()``, ``scaler.scale(x).backward()``,
    ``torch.autograd.backward(x)``) in source order."""
    return sorted((c for c in calls_in(sem, within) if is_backward(sem, c)), key=_pos)


def clip_calls(sem: Semantic) -> list[ast.Call]:
    return sorted(sem.calls_to(*CLIP_FUNCTIONS), key=_pos)


def is_zero_grad(sem: Semantic, call: ast.Call) -> bool:
    """``optimizer.zero_grad()`` or ``model.zero_grad()`` (kinds by construction or name)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "zero_grad"):
        return False
    return kinds.is_optimizer(sem, func.value) or kinds.kind(sem, func.value) is Kind.MODULE


def tensor_of_backward(call: ast.Call, sem: Semantic | None = None) -> ast.expr | None:
    """The tensor a backward call differentiates: ``loss`` in ``loss.backward()``,
    ``scaler.scale(loss).backward()``, ``torch.autograd.backward(loss)`` and a launcher's
    ``accelerator.backward(loss)`` / ``fabric.backward(loss)`` / ``engine.backward(loss)``
    (told by the call that made the launcher when ``sem`` is given)."""
    func = call.func
    if scaled_backward_scaler(call) is not None:
        assert isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
        inner = func.value
        return inner.args[0] if inner.args else None
    if isinstance(func, ast.Attribute) and func.attr == "backward":
        receiver = func.value
        if call.args:
            if sem is not None:
                wrapper = launcher(sem, receiver) is not None
            else:
                wrapper = bool(_LAUNCHER_NAME.search(terminal_name(receiver) or ""))
            if wrapper:
                return call.args[0]
        return receiver
    return call.args[0] if call.args else None


# ------------------------------------------------------------------ launchers -------------
@dataclass(frozen=True)
class Launcher:
    """An object that runs the backward pass and the autocast region for the training loop."""

    library: str  # "accelerate", "fabric", "deepspeed"; "" when told by its name only
    made: ast.Call | None  # the call that made it, when the code shows one


def launcher(sem: Semantic, expr: ast.AST, _depth: int = 0) -> Launcher | None:
    """What ``expr`` holds when it is Accelerate's ``Accelerator``, Lightning Fabric's
    ``Fabric`` or a DeepSpeed engine: read from the call that made it (through names,
    ``self.attr``, helpers' returns, other modules), a parameter's annotation, or the values a
    local function's call sites pass. Only when the code shows none of those is the name a
    hint (``accelerator``, ``fabric``, ``engine``)."""
    if _depth > 4:
        return None
    sem = sem.owner(expr)
    key = ("launcher", expr)
    if key in sem.memo:
        return sem.memo[key]  # type: ignore[return-value]
    sem.memo[key] = None  # recursion guard
    found = _launcher(sem, expr, _depth)
    sem.memo[key] = found
    return found


def _launcher(sem: Semantic, expr: ast.AST, depth: int) -> Launcher | None:
    def makes(call: ast.Call) -> bool:
        return sem.owner(call).qualname(call.func) in LAUNCHERS

    calls, other = kinds.constructions(sem, expr, makes)
    if calls:
        made = calls[0]
        return Launcher(LAUNCHERS[sem.owner(made).qualname(made.func) or ""], made)
    binding = sem.lookup(expr.id, expr) if isinstance(expr, ast.Name) else None
    if binding is not None and binding.how == "assign" and binding.index == 0:
        value = binding.value
        if isinstance(value, ast.Call) and sem.qualname(value.func) == _DEEPSPEED_INIT:
            return Launcher("deepspeed", value)
    if binding is not None and binding.how == "param":
        annotation = getattr(binding.node, "annotation", None)
        library = LAUNCHERS.get(sem.qualname(annotation) or "") if annotation else None
        if library is not None:
            return Launcher(library, None)
        passed = _passed_values(sem, binding)
        if passed:
            found = [launcher(sem, value, depth + 1) for value in passed]
            return found[0] if all(f is not None for f in found) else None
    if other and not _made_by_class(sem, expr) and _LAUNCHER_NAME.search(terminal_name(expr) or ""):
        return Launcher("", None)
    return None


def _made_by_class(sem: Semantic, expr: ast.AST) -> bool:
    """Whether ``expr`` holds an instance of a class of the project (whatever its name)."""
    values: list[ast.expr] = []
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is not None and binding.how == "assign" and binding.index is None:
            values = [binding.value] if binding.value is not None else []
    elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        cls = sem.enclosing_class(expr) if expr.value.id == "self" else None
        values = list(sem.self_attr_values.get((cls, expr.attr), ())) if cls else []
    return any(isinstance(v, ast.Call) and sem.class_def(v.func) is not None for v in values)


def _passed_values(sem: Semantic, binding: Binding) -> list[ast.expr]:
    """The values the call sites of a function of this file pass for one of its parameters
    (empty when one of them passes it through ``*args``/``**kw`` or leaves it out)."""
    func = binding.scope
    if not isinstance(func, FUNCTION_NODES):
        return []
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    index = positional.index(binding.name) if binding.name in positional else None
    values = []
    for call in sem.calls_by_name.get(func.name, ()):
        if sem.local_function(call.func) is not func:
            continue
        value = argument(call, binding.name, index)
        if value is None or has_star_kwargs(call):
            return []
        values.append(value)
    return values


def launcher_option(found: Launcher, name: str) -> ast.expr | None:
    """The value of a keyword the launcher was made with (``mixed_precision=``)."""
    if found.made is None:
        return None
    kw = keyword(found.made, name)
    return kw.value if kw is not None else None


def backward_scales_loss(sem: Semantic, call: ast.Call) -> bool:
    """Whether a backward call divides the loss by the accumulation count itself: a DeepSpeed
    engine's ``backward`` does, and Accelerate's does when the ``Accelerator`` is made with the
    count (``gradient_accumulation_steps=``, a plugin, or ``**options``)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "backward" and call.args):
        return False
    found = launcher(sem, func.value)
    if found is None:
        return False
    if found.library == "deepspeed":
        return True
    return (
        found.library == "accelerate"
        and found.made is not None
        and any(
            kw.arg in (None, "gradient_accumulation_steps", "gradient_accumulation_plugin")
            for kw in found.made.keywords
        )
    )


# ------------------------------------------------------------------ losses --------------
def is_loss_call(sem: Semantic, expr: ast.AST) -> bool:
    """A call that computes a loss: ``criterion(...)`` where ``criterion`` is an ``nn.*Loss``,
    ``F.cross_entropy(...)``/``F.*_loss(...)``, ``nn.MSELoss()(...)``."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    qual = sem.qualname(func)
    if qual is not None:
        if qual.startswith("torch.nn.functional."):
            last = qual.rsplit(".", 1)[-1]
            return last in _FUNCTIONAL_LOSSES or last.endswith("_loss")
        return False
    if isinstance(func, ast.Call):
        return kinds.kind(sem, func) is Kind.LOSS
    return isinstance(func, ast.Name | ast.Attribute) and kinds.kind(sem, func) is Kind.LOSS


def _value_bindings(sem: Semantic, name: ast.Name) -> list[ast.expr] | None:
    """The values the name may hold at ``name``: its latest assignment in the scope before the
    use (None when it is a parameter, a loop variable or otherwise unknown)."""
    binding = sem.lookup(name.id, name)
    if binding is None or binding.how != "assign" or binding.index is not None:
        return None
    return [binding.value] if binding.value is not None else None


def holds_loss(sem: Semantic, expr: ast.AST, _depth: int = 0) -> bool:
    """Whether ``expr`` is a loss tensor that carries its autograd graph: a loss call made
    while gradients are on, arithmetic on one (``loss * n``, ``a + b``), or a name assigned from
    one or that is ``.backward()``-ed. ``.item()``, ``.detach()``, ``float(...)`` end it."""
    if _depth > 6:
        return False
    if isinstance(expr, ast.Call):
        if is_loss_call(sem, expr):
            return not grad_disabled(sem, expr)
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in ("mean", "sum", "float", "clone"):
            return holds_loss(sem, func.value, _depth + 1)
        return False
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
        return holds_loss(sem, expr.left, _depth + 1) or holds_loss(sem, expr.right, _depth + 1)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return holds_loss(sem, expr.operand, _depth + 1)
    if isinstance(expr, ast.Name):
        values = _value_bindings(sem, expr)
        if values and any(holds_loss(sem, v, _depth + 1) for v in values):
            return True
        return is_backpropagated(sem, expr)
    return False


def is_backpropagated(sem: Semantic, name: ast.Name) -> bool:
    """Whether the value ``name`` reads is ``.backward()``-ed (``name.backward()`` or
    ``scaler.scale(name).backward()``) in the same scope, with no rebinding in between, while
    gradients are on."""
    binding = sem.lookup(name.id, name)
    if binding is None:
        return False
    if binding.value is not None and grad_disabled(sem, binding.value):
        return False
    for call in sem.calls_by_attr.get("backward", ()):
        tensor = tensor_of_backward(call, sem)
        if (
            isinstance(tensor, ast.Name)
            and tensor.id == name.id
            and sem.lookup(tensor.id, tensor) is binding
            and not grad_disabled(sem, call)
        ):
            return True
    return False


def names_reaching_backward(sem: Semantic, scope: ast.AST) -> set[str]:
    """Names whose values flow into a backward pass under ``scope``: those read by the
    differentiated expression, and (transitively) by the assignments of those names."""
    out: set[str] = set()
    todo: list[ast.AST] = []
    for call in backward_calls(sem, scope):
        tensor = tensor_of_backward(call, sem)
        if tensor is not None:
            todo.append(tensor)
    while todo:
        expr = todo.pop()
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id not in out:
                out.add(node.id)
                scope_ = sem.scope_of(node)
                for binding in scope_.bindings.get(node.id, ()):
                    if binding.value is not None:
                        todo.append(binding.value)
    return out


def is_plain_value(expr: ast.AST | None) -> bool:
    """A value that holds no autograd graph: a literal, ``x.item()``, ``x.detach()``,
    ``float(x)``, ``len(x)``, ``x.size(0)``, ``x.shape[0]``, and arithmetic on those."""
    if expr is None:
        return False
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute):
            return func.attr in PLAIN_RESULT_METHODS
        return isinstance(func, ast.Name) and func.id in PLAIN_RESULT_FUNCTIONS
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute):
        return expr.value.attr == "shape"
    if isinstance(expr, ast.Attribute):
        return expr.attr == "shape"
    if isinstance(expr, ast.BinOp):
        return is_plain_value(expr.left) and is_plain_value(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return is_plain_value(expr.operand)
    return False


def is_python_value(expr: ast.AST | None) -> bool:
    """A value that holds no tensor at all: a literal, ``x.item()``, ``x.tolist()``,
    ``float(x)``, ``len(x)``, ``x.size(0)``, ``x.shape[0]``, and arithmetic on those. Unlike
    ``is_plain_value``, ``x.detach()`` is not one: it is a tensor (an inference tensor when
    ``x`` is one)."""
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr == "detach":
            return False
        return is_plain_value(expr)
    if isinstance(expr, ast.BinOp):
        return is_python_value(expr.left) and is_python_value(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return is_python_value(expr.operand)
    return is_plain_value(expr)


# Calls that differentiate, or make the tensors they are given take part in autograd later.
_AUTOGRAD_ENTRY_METHODS = frozenset({"backward", "register_hook", "retain_grad"})


def enters_autograd(sem: Semantic, call: ast.Call) -> bool:
    """Whether ``call`` hands the tensors it is given to autograd: a backward pass
    (``x.backward()``, ``torch.autograd.grad/backward``, ``torch.func``), ``requires_grad_()``
    (not ``requires_grad_(False)``), ``retain_grad()``/``register_hook()``, ``nn.Parameter(x)``,
    or an optimizer built over them (``torch.optim.SGD([x])``), whose ``step()`` updates them
    in place."""
    func = call.func
    qual = torch_qualname(sem, func) or ""
    if qual.startswith(("torch.autograd.", "torch.func.")) or qual == "torch.nn.Parameter":
        return True
    if qual.startswith("torch.optim.") and qual.count(".") == 2:
        return qual.rsplit(".", 1)[-1][:1].isupper()
    if isinstance(func, ast.Attribute):
        if func.attr in _AUTOGRAD_ENTRY_METHODS:
            return True
        if func.attr == "requires_grad_":
            return not (call.args and is_false(call.args[0]))
    return False


def _divides(expr: ast.AST) -> bool:
    """``x / k``, ``x * (1 / k)``, ``x.div(k)``, ``x.mul_(w)``: arithmetic that rescales."""
    if isinstance(expr, ast.BinOp):
        return isinstance(expr.op, ast.Div | ast.Mult | ast.FloorDiv)
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("div", "div_", "mul", "mul_", "true_divide", "divide")
    )


def unscaled_loss(sem: Semantic, tensor: ast.AST, _depth: int = 0) -> bool | None:
    """Whether a backpropagated tensor is a plain loss that nothing rescaled (True), was
    rescaled (``/ k``, ``*= w``, ``.div(k)``: False), or cannot be told (None: a helper's
    result, a model output, a parameter)."""
    if _depth > 6:
        return None
    if _divides(tensor):
        return False
    if isinstance(tensor, ast.Call):
        if is_loss_call(sem, tensor):
            return True
        func = tensor.func
        if isinstance(func, ast.Attribute) and func.attr in ("mean", "sum", "float"):
            return unscaled_loss(sem, func.value, _depth + 1)
        return _returned_loss(sem, tensor, _depth)
    if isinstance(tensor, ast.BinOp) and isinstance(tensor.op, ast.Add | ast.Sub):
        parts = [unscaled_loss(sem, p, _depth + 1) for p in (tensor.left, tensor.right)]
        if False in parts:
            return False
        return True if all(parts) else None
    if isinstance(tensor, ast.Name):
        binding = sem.lookup(tensor.id, tensor)
        if binding is None:
            return None
        parent = sem.parent(binding.node)
        if isinstance(parent, ast.AugAssign) and parent.target is binding.node:
            # ``loss /= k`` as the latest assignment before the use.
            return False if isinstance(parent.op, ast.Div | ast.Mult) else None
        if binding.how != "assign" or binding.index is not None or binding.value is None:
            return None
        return unscaled_loss(sem, binding.value, _depth + 1)
    return None


def _returned_loss(sem: Semantic, call: ast.Call, depth: int) -> bool | None:
    """``unscaled_loss`` of what a function of the project returns (``loss_fn(logits, y)``
    whose every ``return`` is a plain loss): the same for all its returns, else None."""
    defined = sem.owner(call).function_def(call.func)
    if defined is None:
        return None
    owner, func = defined
    found = {unscaled_loss(owner, value, depth + 1) for value in owner.returns(func)}
    return found.pop() if len(found) == 1 else None


def rescales_gradients(sem: Semantic, within: list[ast.stmt]) -> bool:
    """Whether gradients are rescaled by hand: ``p.grad /= k``, ``p.grad.div_(k)``."""
    for node in sem.walk_body(within):
        if isinstance(node, ast.AugAssign) and terminal_name(node.target) == "grad":
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("div_", "mul_")
            and terminal_name(node.func.value) == "grad"
        ):
            return True
    return False


# ------------------------------------------------------------------ order in one iteration --
def iteration_region(sem: Semantic, node: ast.AST) -> ast.AST:
    """What "one iteration" is for ``node``: its iteration loop, else the function around it
    (a ``train_step(batch)`` helper), else the module (a script or a notebook)."""
    loop = iteration_loop(sem, node)
    if loop is not None:
        return loop.node
    function = sem.enclosing_function(node)
    return function if function is not None else sem.tree


def same_iteration(sem: Semantic, calls: list[ast.Call], node: ast.AST) -> list[ast.Call]:
    """The calls that can run in the same iteration as ``node`` (not in the other branch of an
    ``if`` around it), in source order."""
    return sorted((c for c in calls if not sem.exclusive_branches(c, node)), key=_pos)


def directly_in(sem: Semantic, node: ast.AST, region: ast.AST) -> bool:
    """Whether ``node`` runs at the level of ``region`` (not in a loop nested inside it)."""
    for anc in sem.ancestors(node):
        if anc is region:
            return True
        if isinstance(anc, LOOP_NODES):
            return False
    return True


# ------------------------------------------------------------------ accumulators ----------
def accumulations(sem: Semantic) -> Iterator[tuple[ast.stmt | ast.Call, ast.expr, ast.expr]]:
    """Places that add a value into something that outlives the statement: ``acc += v``,
    ``acc = acc + v`` and ``acc.append(v)``, as (node, accumulator, value)."""
    for aug in sem.aug_assigns:
        if isinstance(aug.op, ast.Add):
            yield aug, aug.target, aug.value
    for node in sem.assigns:
        value = node.value
        if type(value) is not ast.BinOp or type(value.op) is not ast.Add or len(node.targets) != 1:
            continue
        target, left = node.targets[0], value.left
        if type(target) is ast.Name:
            same = type(left) is ast.Name and left.id == target.id
        else:
            same = ast.dump(target).replace("Store", "Load") == ast.dump(left)
        if same:
            yield node, target, value.right
    for call in sem.calls_by_attr.get("append", ()):
        if len(call.args) == 1 and not call.keywords:
            assert isinstance(call.func, ast.Attribute)
            yield call, call.func.value, call.args[0]


def accumulator_name(expr: ast.expr) -> str | None:
    """The name an accumulator lives in: ``total``, ``self.total`` -> ``self.total``,
    ``stats["loss"]`` -> ``stats``."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return f"{expr.value.id}.{expr.attr}"
    return None


def rebound_in(sem: Semantic, name: str, within: list[ast.stmt], skip: ast.AST) -> bool:
    """Whether ``name`` (``x`` or ``self.x``) gets a fresh value by plain assignment in
    ``within`` (other than at ``skip``): then it does not outlive one iteration."""
    for node in sem.walk_body(within):
        if node is skip or not isinstance(node, ast.Assign | ast.AnnAssign | ast.With | ast.For):
            continue
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target] if node.value is not None else []
        elif isinstance(node, ast.For):
            targets = [node.target]
        else:
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Name | ast.Attribute) and _dotted(part) == name:
                    return True
    return False


def escapes(sem: Semantic, name: str, scope: ast.AST, *, returns: bool = True) -> bool:
    """Whether the value of ``name`` may be differentiated: it flows into a backward pass in
    ``scope``, or (with ``returns``) it is returned or yielded to a caller."""
    base = name.split(".")[0] if not name.startswith("self.") else name
    if returns:
        # Names computed from the accumulator (`mean = total / n`) carry it too.
        carried = {base}
        nodes = list(sem.walk(scope))
        for _ in range(3):
            grew = False
            for node in nodes:
                if isinstance(node, ast.Assign) and any(
                    _dotted(n) in carried for n in ast.walk(node.value)
                ):
                    for target in node.targets:
                        if isinstance(target, ast.Name) and target.id not in carried:
                            carried.add(target.id)
                            grew = True
            if not grew:
                break
        for node in nodes:
            if isinstance(node, ast.Return | ast.Yield | ast.YieldFrom) and node.value is not None:
                if any(_dotted(n) in carried for n in ast.walk(node.value)):
                    return True
    return base.split(".")[-1] in names_reaching_backward(sem, scope) or (
        "." in base and base.split(".")[-1] in _attrs_reaching_backward(sem, scope)
    )


def _attrs_reaching_backward(sem: Semantic, scope: ast.AST) -> set[str]:
    out: set[str] = set()
    for call in backward_calls(sem, scope):
        tensor = tensor_of_backward(call, sem)
        if tensor is not None:
            out |= {n.attr for n in ast.walk(tensor) if isinstance(n, ast.Attribute)}
    return out


def _dotted(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return f"{expr.value.id}.{expr.attr}"
    return None


def read_later(sem: Semantic, name: str, node: ast.AST) -> bool:
    """Whether ``name`` may be read after ``node`` has run: a later load in the same function
    (or module), any load in a loop around ``node`` (the next iteration), any load in a nested
    function, and, for module-level code, any load in a function."""
    scope = sem.enclosing_function(node) or sem.tree
    binding = sem.lookup(name, node)
    if binding is None or binding.scope is not scope:
        return True  # a global or a closure variable: read where this function cannot see
    end = (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
    loops = [loop.node for loop in enclosing_loops(sem, node)]
    for owner, loads in _loads_by_owner(sem, name).items():
        if owner is not scope and not (scope is sem.tree or sem.is_inside(owner, scope)):
            continue
        for load in loads:
            if load is node or sem.is_inside(load, node):
                continue
            if owner is not scope:
                return True
            if any(sem.is_inside(load, loop) for loop in loops):
                return True
            if _pos(load) > end and not _rebound_by_later_for(sem, name, load, end):
                return True
    return False


def _loads_by_owner(sem: Semantic, name: str) -> dict[ast.AST, list[ast.Name]]:
    """Loads of ``name`` grouped by the function they run in (the module for top-level code)."""
    key = ("loads-by-owner", name)
    table = sem.memo.get(key)
    if not isinstance(table, dict):
        grouped: dict[ast.AST, list[ast.Name]] = {}
        for load in sem.names.get(name, ()):
            grouped.setdefault(sem.enclosing_function(load) or sem.tree, []).append(load)
        sem.memo[key] = table = grouped
    return table


def _rebound_by_later_for(sem: Semantic, name: str, load: ast.AST, end: tuple[int, int]) -> bool:
    """``for x, y in other_loader:`` after ``end`` binds the ``x`` that ``load`` reads."""
    for anc in sem.ancestors(load):
        if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            return False
        if (
            isinstance(anc, ast.For | ast.AsyncFor)
            and _pos(anc) > end
            and not sem.is_inside(load, anc.iter)
            and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(anc.target))
        ):
            return True
    return False
