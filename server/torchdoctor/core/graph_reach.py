"""Which autograd graph a tensor of a loop's iteration holds (``reach``): the forward calls of
the iteration it goes through (``Reach.nodes``: two backward passes share a graph when they
share one), and whether it also reaches a graph that outlives the iteration: a tensor made
before the loop with autograd on (``Reach.kept``: features of a module whose parameters require
grad, made by a helper of another module too), or a value carried from the previous iteration
(``Reach.carried``: an RNN state read before the statement that rebinds it and not detached, a
``self.hidden`` the loop or a module's ``forward`` keeps for the next call).

The value of a name is followed through its bindings, the returns (and yields) of the
project's functions it is made by (their parameters bound to the call's arguments), the call
sites of the function's own parameters, tuple unpacking, comprehensions and the items a list
gets by ``append``. A value stops carrying a graph at ``.detach()``, ``.data``, ``.item()``,
a tensor factory (``torch.zeros``, ``torch.tensor``...), a constructor, and code that runs
under ``torch.no_grad()``. A call of a module (or of a callable the analysis cannot name) makes
a graph. When the value is too involved to follow, ``Reach.unknown`` says so.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from . import arguments, distributed, graphs, kinds, summaries, training
from .semantic import FUNCTION_NODES, Binding, Semantic, dotted

_BUDGET = 1500  # expressions looked at per question before giving up (then: unknown)
_MAX_CALLS = 4  # nested helper calls followed
# Methods and attributes whose result holds no autograd graph.
_CUT_METHODS = frozenset(
    {"detach", "detach_", "item", "tolist", "numpy", "size", "dim", "numel", "nelement"}
    | {"requires_grad_", "data_ptr", "element_size", "stride", "is_contiguous", "type_as_"}
    | {"parameters", "named_parameters", "state_dict", "zero_grad", "step", "eval", "train"}
)
_CUT_ATTRIBUTES = frozenset(
    {"data", "grad", "shape", "dtype", "device", "requires_grad", "is_cuda", "ndim", "T_"}
)
# Builtins whose result is a plain Python value.
_PLAIN_BUILTINS = frozenset(
    {"len", "int", "float", "bool", "str", "repr", "print", "range", "isinstance", "type"}
    | {"format", "round", "hash", "id", "open", "super", "getattr", "hasattr"}
)
_FACTORIES = frozenset(
    "torch." + n
    for n in (
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "tensor",
        "as_tensor",
        "from_numpy",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "randint_like",
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
        "HalfTensor",
        "LongTensor",
        "IntTensor",
        "ByteTensor",
        "BoolTensor",
        "cuda.FloatTensor",
        "cuda.DoubleTensor",
        "cuda.HalfTensor",
        "cuda.LongTensor",
        "cuda.IntTensor",
        "cuda.ByteTensor",
        "cuda.BoolTensor",
        "no_grad",
        "device",
    )
)
_ITER = "iter"  # a value of the loop's iteration
_BEFORE = "before"  # a value made before the loop (or in a helper, on its own)


@dataclass
class Reach:
    """What a value of the iteration holds of autograd graphs."""

    graph: bool = False  # it carries autograd history
    nodes: set[ast.AST] = field(default_factory=set)  # forward calls of the iteration in it
    kept: ast.AST | None = None  # where a graph made before the loop is bound
    # Where a value carried from the previous iteration with its graph is bound (``state``
    # in ``out, state = model(x, state)``, ``self.hidden`` in a module's ``forward``).
    carried: ast.AST | None = None
    unknown: bool = False  # too involved to follow

    def add(self, other: Reach) -> None:
        self.graph = self.graph or other.graph
        self.nodes |= other.nodes
        self.kept = self.kept or other.kept
        self.carried = self.carried or other.carried
        self.unknown = self.unknown or other.unknown


@dataclass(frozen=True)
class _Env:
    """Where a helper's body is evaluated: its module, its parameters' arguments."""

    sem: Semantic
    args: tuple[tuple[str, ast.expr, _Env, str], ...] = ()
    calls: int = 0

    def argument(self, name: str) -> tuple[ast.expr, _Env, str] | None:
        for param, value, env, ctx in self.args:
            if param == name:
                return value, env, ctx
        return None


_Assignment = ast.Assign | ast.AugAssign | ast.AnnAssign
_Helper = tuple[Semantic, "ast.FunctionDef | ast.AsyncFunctionDef", bool]


def reach(sem: Semantic, exprs: list[ast.expr], loop: ast.AST) -> Reach:
    """The graphs the values ``exprs`` (read in the body of ``loop``) hold."""
    walker = _Walker(sem, loop)
    out = Reach()
    for expr in exprs:
        out.add(walker.value(expr, _Env(sem), _ITER))
    if walker.budget <= 0:
        out.unknown = True
    return out


class _Walker:
    def __init__(self, sem: Semantic, loop: ast.AST) -> None:
        self.sem = sem
        self.loop = loop
        self.budget = _BUDGET
        self.active: set[tuple[int, str]] = set()  # bindings being followed (cycles)
        # Attributes the loop assigns (``self.hidden``), by dotted name: made on first use.
        self.stores: dict[str, list[tuple[ast.expr, _Assignment]]] | None = None
        self.items = False  # following the iterable of the loop

    # ------------------------------------------------------------- expressions ----------
    def value(self, expr: ast.AST | None, env: _Env, ctx: str) -> Reach:
        self.budget -= 1
        if expr is None or self.budget <= 0:
            return Reach(unknown=self.budget <= 0)
        if isinstance(expr, ast.Name):
            return self.name(expr, env, ctx)
        if isinstance(expr, ast.Call):
            return self.call(expr, env, ctx)
        if isinstance(expr, ast.Attribute):
            if expr.attr in _CUT_ATTRIBUTES:
                return Reach()
            if ctx == _ITER and env.sem is self.sem and not env.args:
                kept = self.attribute_state(expr, env)
                if kept is not None:
                    return kept
            return self.value(expr.value, env, ctx)
        if isinstance(expr, ast.Subscript | ast.Starred | ast.Await | ast.NamedExpr):
            return self.value(expr.value, env, ctx)
        if isinstance(expr, ast.Compare | ast.BoolOp | ast.Constant | ast.JoinedStr | ast.Lambda):
            return Reach()
        out = Reach()
        if isinstance(expr, ast.BinOp):
            parts: list[ast.AST] = [expr.left, expr.right]
        elif isinstance(expr, ast.UnaryOp):
            parts = [expr.operand]
        elif isinstance(expr, ast.IfExp):
            parts = [expr.body, expr.orelse]
        elif isinstance(expr, ast.Tuple | ast.List | ast.Set):
            parts = list(expr.elts)
        elif isinstance(expr, ast.Dict):
            parts = [v for v in expr.values if v is not None]
        elif isinstance(expr, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            parts = [expr.elt]
        elif isinstance(expr, ast.DictComp):
            parts = [expr.value]
        else:
            parts = []
        for part in parts:
            out.add(self.value(part, env, ctx))
        return out

    def element(self, expr: ast.AST | None, index: int, env: _Env, ctx: str) -> Reach:
        """Item ``index`` of the tuple ``expr`` makes (``a, b = expr``)."""
        if isinstance(expr, ast.Tuple | ast.List) and not any(
            isinstance(e, ast.Starred) for e in expr.elts
        ):
            if index < len(expr.elts):
                return self.value(expr.elts[index], env, ctx)
            return Reach()
        if isinstance(expr, ast.Call):
            found = self.helpers(expr, env)
            if found:
                return self.returned(expr, found, env, ctx, index)
        return self.value(expr, env, ctx)

    # ------------------------------------------------------------- calls -----------------
    def call(self, call: ast.Call, env: _Env, ctx: str) -> Reach:
        sem = env.sem
        func = call.func
        args = [*call.args, *(k.value for k in call.keywords)]
        if isinstance(func, ast.Attribute) and func.attr in _CUT_METHODS:
            return Reach()
        quals = _callee_quals(sem, func)
        if quals and all(q in _FACTORIES for q in quals):
            return Reach()
        if training.grad_disabled(sem, call):
            return Reach()
        found = self.helpers(call, env)
        if found:
            return self.returned(call, found, env, ctx, None)
        if quals or sem.class_def(func) is not None:
            return self.union(args, env, ctx)  # a library function, a constructor
        builtin = (
            func.id
            if isinstance(func, ast.Name)
            and hasattr(builtins, func.id)
            and sem.lookup(func.id, func) is None
            else None
        )
        if builtin in _PLAIN_BUILTINS:
            return Reach()
        if isinstance(func, ast.Attribute):
            receiver = func.value
            own = kinds.kind(sem, func)
            if own is not None and own is not kinds.Kind.MODULE:
                return self.union(args, env, ctx)  # self.criterion(out, y)
            if own is kinds.Kind.MODULE or _instance_attribute(sem, func):
                return self.forward(call, args, env, ctx)  # self.generator(h)
            if func.attr in ("forward", "__call__") and _is_module(sem, receiver):
                return self.forward(call, args, env, ctx)
            if _is_module(sem, receiver) or kinds.kind(sem, receiver) is not None:
                return self.union(args, env, ctx)  # model.to(...), optimizer.step()
            return self.union([receiver, *args], env, ctx)  # a tensor's method
        if builtin is not None:
            return self.union(args, env, ctx)  # zip, dict, sum, max...
        made = kinds.kind(sem, func)
        if made is not None and made is not kinds.Kind.MODULE:
            return self.union(args, env, ctx)  # a loss function, a scheduler...
        if self.items and made is None:
            return self.union(args, env, ctx)  # a source of the loop's items: data
        return self.forward(call, args, env, ctx)

    def forward(self, call: ast.Call, args: list[ast.expr], env: _Env, ctx: str) -> Reach:
        out = self.union(args, env, ctx)
        out.graph = True
        if ctx == _ITER:
            out.nodes.add(call)
            kept = self.module_state(call, env)
            if kept is not None and isinstance(call.func, ast.Name | ast.Attribute):
                # Named as the caller sees it: `model.hidden`.
                out.carried = out.carried or ast.Attribute(call.func, kept.attr, ast.Load())
        return out

    def attribute_state(self, attr: ast.Attribute, env: _Env) -> Reach | None:
        """``self.hidden`` read in the loop where the loop also assigns it: made earlier in
        the iteration, or carried from the previous one."""
        want = dotted(attr)
        if want is None:
            return None
        sem = self.sem
        if self.stores is None:
            self.stores = {}
            for stmt in sem.walk(self.loop):
                if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
                    for node in _stored(stmt):
                        if isinstance(node, ast.Attribute) and (key := dotted(node)):
                            self.stores.setdefault(key, []).append((node, stmt))
        stores = self.stores.get(want)
        if not stores:
            return None
        guard = (id(attr), "attribute")
        if guard in self.active:
            return Reach()
        self.active.add(guard)
        try:
            return self._attribute_state(attr, stores, env)
        finally:
            self.active.discard(guard)

    def _attribute_state(
        self, attr: ast.Attribute, stores: list[tuple[ast.expr, _Assignment]], env: _Env
    ) -> Reach:
        sem = self.sem
        here = (attr.lineno, attr.col_offset)
        before = [
            (n, st)
            for n, st in stores
            if (st.lineno, st.col_offset) < here and not sem.is_inside(attr, st)
        ]
        if before:
            node, stmt = before[-1]
            return self.value(_assigned_value(stmt, node), env, _ITER)
        out = Reach()
        for node, stmt in stores:
            carried = self.value(_assigned_value(stmt, node), env, _ITER)
            if carried.graph:
                out.add(Reach(graph=True, carried=node, unknown=carried.unknown))
        return out

    def module_state(self, call: ast.Call, env: _Env) -> ast.Attribute | None:
        """A module of the project whose ``forward`` keeps a graph on itself for the next call
        (``out, self.hidden = self.rnn(x, self.hidden)``): the assignment, else None."""
        func = call.func
        if not isinstance(func, ast.Name | ast.Attribute):
            return None
        found = summaries.instance_class(env.sem, func)
        if found is None:
            return None
        owner, cls = found
        forward = graphs.class_method(owner, cls, "forward")
        if forward is None:
            return None
        read = {
            node.attr
            for node in owner.walk(forward)
            if isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        }
        inner = _Env(owner, (), env.calls + 1)
        for stmt in owner.walk(forward):
            if not isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
                continue
            for node in _stored(stmt):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and node.attr in read
                    and self.value(_assigned_value(stmt, node), inner, _BEFORE).graph
                ):
                    return node
        return None

    def union(self, exprs: list[ast.expr], env: _Env, ctx: str) -> Reach:
        out = Reach()
        for expr in exprs:
            out.add(self.value(expr, env, ctx))
        return out

    def helpers(self, call: ast.Call, env: _Env) -> list[_Helper]:
        """The project functions ``call`` may run: a function of the project, or a method of
        the class around the call with its overrides in the file's subclasses."""
        sem = env.sem
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "self":
                cls = sem.enclosing_class(call)
                if cls is None:
                    return []
                found = graphs.class_method(sem, cls, func.attr)
                methods = [found] if found is not None else []
                for sub in _subclasses(sem, cls):
                    methods += [
                        m for m in sub.body if isinstance(m, FUNCTION_NODES) and m.name == func.attr
                    ]
                return [(sem, m, True) for m in dict.fromkeys(methods)]
        defined = sem.function_def(func)
        return [(defined[0], defined[1], False)] if defined is not None else []

    def returned(
        self, call: ast.Call, found: list[_Helper], env: _Env, ctx: str, index: int | None
    ) -> Reach:
        """What a call of project functions returns (item ``index`` of its tuple)."""
        if env.calls >= _MAX_CALLS:
            return Reach(graph=True, unknown=True)
        out = Reach()
        for owner, func, method in found:
            bound = arguments.bind(call, arguments.signature_of(func, method))
            params = [
                a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)
            ]
            passed = tuple((p, v, env, ctx) for p in params if (v := bound.value(p)) is not None)
            inner = _Env(owner, passed, env.calls + 1)
            for node in owner.walk(func):
                if not isinstance(node, ast.Return | ast.Yield | ast.YieldFrom):
                    continue
                if index is not None and isinstance(node, ast.Return):
                    out.add(self.element(node.value, index, inner, _BEFORE))
                else:
                    out.add(self.value(node.value, inner, _BEFORE))
        if ctx == _ITER and out.graph:
            out.nodes.add(call)
        return out

    # ------------------------------------------------------------- names -----------------
    def name(self, name: ast.Name, env: _Env, ctx: str) -> Reach:
        sem = env.sem
        binding = sem.lookup(name.id, name)
        if binding is None:
            # Made where the analysis cannot see (a star import, an earlier notebook run).
            return Reach(unknown=not hasattr(builtins, name.id))
        if binding.how in ("import", "def", "class"):
            return Reach()
        if binding.how == "param":
            passed = env.argument(name.id)
            if passed is not None:
                value, outer, outer_ctx = passed
                return self.value(value, outer, outer_ctx)
        if ctx == _ITER and sem is self.sem and not env.args:
            return self.iteration_name(name, binding, env)
        out = self.binding(binding, env, ctx)
        if env.args and out.graph and binding.scope is sem.tree:
            # A helper called in the loop reads a module-level value: made before the loop.
            out.kept = out.kept or binding.node
        return out

    def iteration_name(self, name: ast.Name, binding: Binding, env: _Env) -> Reach:
        """A name read in the loop's body: made in this iteration, before the loop, or carried
        from the previous iteration."""
        sem, loop = self.sem, self.loop
        if _inside(sem, binding.node, loop) and _precedes(sem, binding, name):
            return self.binding(binding, env, _ITER)
        out = Reach()
        if _detached_in_place(sem, name, loop):
            return out
        scope = sem.scopes.get(binding.scope)
        for other in scope.bindings.get(name.id, []) if scope is not None else []:
            if _inside(sem, other.node, loop) and not _precedes(sem, other, name):
                carried = self.binding(other, env, _ITER)
                if carried.graph:
                    out.add(Reach(graph=True, carried=other.node, unknown=carried.unknown))
        start = sem.lookup(name.id, loop)
        if start is not None and not _inside(sem, start.node, loop):
            made = self.binding(start, env, _BEFORE)
            if made.graph:
                out.add(Reach(graph=True, kept=start.node, unknown=made.unknown))
            else:
                out.unknown = out.unknown or made.unknown
        return out

    def binding(self, binding: Binding, env: _Env, ctx: str) -> Reach:
        key = (id(binding.node), ctx)
        if key in self.active:
            return Reach()
        self.active.add(key)
        try:
            return self._binding(binding, env, ctx)
        finally:
            self.active.discard(key)

    def _binding(self, binding: Binding, env: _Env, ctx: str) -> Reach:
        sem = env.sem
        if binding.how in ("import", "def", "class"):
            return Reach()
        if binding.how == "param":
            return self.parameter(binding, env, ctx)
        if binding.how in ("assign", "with"):
            if binding.index is not None:
                out = self.element(binding.value, binding.index, env, ctx)
            else:
                out = self.value(binding.value, env, ctx)
            if isinstance(binding.value, ast.List | ast.ListComp) or _makes_list(binding.value):
                out.add(self.appended(binding, env, ctx))
            return out
        parent = sem.parent(binding.node)
        while isinstance(parent, ast.Tuple | ast.List | ast.Starred):
            parent = sem.parent(parent)
        if binding.how == "loop" and isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension):
            if parent is self.loop and ctx == _ITER:
                if training.loop_info(sem, parent).is_batch_loop:
                    return Reach()  # batches of data
                self.items = True  # what the loop iterates: batches unless shown otherwise
                try:
                    made = self.value(parent.iter, env, _BEFORE)
                finally:
                    self.items = False
                if made.graph:
                    return Reach(graph=True, kept=binding.node, unknown=made.unknown)
                return made
            return self.value(parent.iter, env, ctx)
        if isinstance(parent, ast.AugAssign):
            out = self.value(parent.value, env, ctx)
            scope = sem.scopes.get(binding.scope)
            earlier = [
                b
                for b in (scope.bindings.get(binding.name, []) if scope is not None else [])
                if b.pos < binding.pos
            ]
            if earlier:
                out.add(self.binding(earlier[-1], env, ctx))
            return out
        return Reach()

    def appended(self, binding: Binding, env: _Env, ctx: str) -> Reach:
        """The items a list gets by ``append``/``extend``/``insert`` in its scope."""
        sem = env.sem
        out = Reach()
        for attr in ("append", "extend", "insert"):
            for call in sem.calls_by_attr.get(attr, ()):
                func = call.func
                if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
                    continue
                if func.value.id != binding.name or not call.args:
                    continue
                if sem.lookup(binding.name, func.value) is not binding:
                    continue
                out.add(self.value(call.args[-1], env, ctx))
        return out

    def parameter(self, binding: Binding, env: _Env, ctx: str) -> Reach:
        """A parameter of a function: what the function's callers in the file pass (for a
        method, ``x.name(...)`` calls)."""
        sem = env.sem
        func = binding.scope
        if not isinstance(func, FUNCTION_NODES) or env.calls >= _MAX_CALLS:
            return Reach()
        method = isinstance(sem.parent(func), ast.ClassDef)
        signature = arguments.signature_of(func, method)
        out = Reach()
        for call in distributed.callers(sem, func) or ():
            value = arguments.bind(call, signature).value(binding.name)
            if value is not None:
                out.add(self.value(value, _Env(sem, (), env.calls + 1), _BEFORE))
        out.nodes = set()
        return out


# ------------------------------------------------------------------ helpers ---------------
def _stored(stmt: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.expr]:
    """The names and attributes a statement assigns (inside tuple targets too)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    out: list[ast.expr] = []
    todo = list(targets)
    while todo:
        target = todo.pop()
        if isinstance(target, ast.Tuple | ast.List):
            todo.extend(target.elts)
        elif isinstance(target, ast.Starred):
            todo.append(target.value)
        else:
            out.append(target)
    return out


def _assigned_value(stmt: ast.Assign | ast.AugAssign | ast.AnnAssign, target: ast.expr) -> ast.AST:
    """What ``target`` gets: its item of a tuple value, or the whole value."""
    value = stmt.value
    if isinstance(stmt, ast.Assign) and isinstance(value, ast.Tuple):
        for outer in stmt.targets:
            if isinstance(outer, ast.Tuple) and len(outer.elts) == len(value.elts):
                for elt, item in zip(outer.elts, value.elts, strict=True):
                    if elt is target:
                        return item
    return value if value is not None else ast.Constant(None)


def _callee_quals(sem: Semantic, func: ast.expr) -> list[str]:
    """The imported names a callee stands for: ``torch.zeros``; both sides of ``Tensor =
    torch.cuda.FloatTensor if cuda else torch.FloatTensor``."""
    qual = sem.qualname(func)
    if qual is not None:
        return [qual]
    if isinstance(func, ast.Name):
        binding = sem.lookup(func.id, func)
        if binding is not None and binding.how == "assign" and binding.index is None:
            value = binding.value
            if isinstance(value, ast.IfExp):
                sides = [sem.qualname(value.body), sem.qualname(value.orelse)]
                if all(sides):
                    return [s for s in sides if s is not None]
    return []


def _subclasses(sem: Semantic, cls: ast.ClassDef) -> list[ast.ClassDef]:
    """The classes of the file that derive from ``cls`` (directly or through others)."""
    out: list[ast.ClassDef] = []
    todo = [cls]
    while todo and len(out) < 32:
        base = todo.pop()
        for other in sem.classes:
            if other not in out and any(sem.local_class(b) is base for b in other.bases):
                out.append(other)
                todo.append(other)
    return out


def _instance_attribute(sem: Semantic, func: ast.Attribute) -> bool:
    """``self.attr(...)`` where ``attr`` is no method of the class: an object kept on the
    instance is called."""
    receiver = func.value
    if not isinstance(receiver, ast.Name):
        return False
    binding = sem.lookup(receiver.id, receiver)
    owner = binding.scope if binding is not None and binding.how == "param" else None
    if not isinstance(owner, FUNCTION_NODES) or not owner.args.args:
        return False
    cls = sem.enclosing_class(owner)
    if cls is None or owner.args.args[0] is not binding.node:  # type: ignore[union-attr]
        return False
    return graphs.class_method(sem, cls, func.attr) is None


def _is_module(sem: Semantic, expr: ast.expr) -> bool:
    return kinds.kind(sem, expr) is kinds.Kind.MODULE


def _makes_list(value: ast.expr | None) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "list"
        and not value.args
    )


def _inside(sem: Semantic, node: ast.AST, loop: ast.AST) -> bool:
    """``node`` is in the body (or ``else``) of ``loop``, or is the loop's own target."""
    if isinstance(loop, ast.For | ast.AsyncFor) and sem.is_inside(node, loop.target):
        return True
    if isinstance(loop, ast.For | ast.AsyncFor) and sem.is_inside(node, loop.iter):
        return False
    if isinstance(loop, ast.While) and sem.is_inside(node, loop.test):
        return False
    return sem.is_inside(node, loop)


def _precedes(sem: Semantic, binding: Binding, read: ast.AST) -> bool:
    """``binding`` is made before ``read`` in the iteration (not after it, and not by the
    statement whose value reads it: ``h = cell(x, h)``)."""
    if binding.how == "loop":
        binder = sem.parent(binding.node)
        while isinstance(binder, ast.Tuple | ast.List | ast.Starred):
            binder = sem.parent(binder)
        if isinstance(binder, ast.comprehension):  # read by the comprehension's element
            owner = sem.parent(binder)
            return owner is not None and sem.is_inside(read, owner)
    if binding.pos > (getattr(read, "lineno", 0), getattr(read, "col_offset", 0)):
        return False
    if binding.how in ("loop", "with", "param"):
        return True  # bound before the body that reads it runs
    try:
        stmt = sem.statement_of(binding.node)
    except ValueError:
        return True
    return not sem.is_inside(read, stmt)


def _detached_in_place(sem: Semantic, name: ast.Name, loop: ast.AST) -> bool:
    """``h.detach_()`` (or ``for t in h: t.detach_()``) runs in the loop before ``name`` is
    read: the carried value no longer holds the previous iteration's graph."""
    here = (name.lineno, name.col_offset)
    for call in sem.calls_by_attr.get("detach_", ()):
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        if not isinstance(receiver, ast.Name) or not _inside(sem, call, loop):
            continue
        if (call.lineno, call.col_offset) >= here:
            continue
        if receiver.id == name.id:
            return True
        for anc in sem.ancestors(call):
            if anc is loop:
                break
            if (
                isinstance(anc, ast.For)
                and isinstance(anc.target, ast.Name)
                and anc.target.id == receiver.id
                and isinstance(anc.iter, ast.Name)
                and anc.iter.id == name.id
            ):
                return True
    return False
