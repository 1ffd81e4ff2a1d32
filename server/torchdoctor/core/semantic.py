"""Names and scopes: one pass over a module's ``ast`` (``Semantic``) and the questions about
names and structure every rule asks.

The pass records each node's parent, the scopes and their bindings (``Scope``, ``Binding``),
import aliases, and indexes of calls, attributes, names, assignments, ``with`` statements,
functions, classes and loops. Over those: ``lookup`` (which binding a name refers to),
``qualname`` (``torch.utils.data.DataLoader`` for ``DL`` after ``from torch.utils.data import
DataLoader as DL``, normalised by ``canonical``), ``calls_to`` and ``references_to`` (uses of a
qualified name), ancestors, enclosing statements, blocks, functions and classes, walks that stop
at nested functions, and whether code runs at import or as a script. ``from_chunks`` builds the
same facts from chunks of statements that an earlier version of the file shared. The module
ends with plain ``ast`` helpers (``dotted``, ``keyword``, ``argument``, ``int_literal``,
``is_true``/``is_false``/``is_none``...).

The facts about torch itself are read from these by the subject modules: ``kinds`` (what a value
is), ``training`` (loops, backward, optimizer steps, grad mode, autocast), ``data``,
``distributed``, ``checkpoints`` and ``graphs``. They cache what they derive per file in
``Semantic.memo``.
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# Public spellings that torch re-exports under a shorter name: normalise to the short one.
_CANONICAL_PREFIXES = {
    "torch.utils.data.dataloader.": "torch.utils.data.",
    "torch.utils.data.distributed.": "torch.utils.data.",
    "torch.utils.data.sampler.": "torch.utils.data.",
    "torch.utils.data.dataset.": "torch.utils.data.",
    "torch.nn.parallel.distributed.": "torch.nn.parallel.",
    "torch.nn.parallel.data_parallel.": "torch.nn.parallel.",
    "torch.nn.modules.": "torch.nn.",
    "torch.optim.optimizer.": "torch.optim.",
    "torch.cuda.amp.grad_scaler.": "torch.cuda.amp.",
    "torch.cuda.amp.autocast_mode.": "torch.cuda.amp.",
    "torch.cpu.amp.grad_scaler.": "torch.cpu.amp.",
    "torch.cpu.amp.autocast_mode.": "torch.cpu.amp.",
    "torch.amp.grad_scaler.": "torch.amp.",
    "torch.amp.autocast_mode.": "torch.amp.",
    "torch.autograd.grad_mode.": "torch.",
    "pytorch_lightning.": "lightning.pytorch.",
}
_CANONICAL_EXACT = {
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.autocast": "torch.amp.autocast",
    "torch.utils.data.DataLoader": "torch.utils.data.DataLoader",
    "lightning.LightningModule": "lightning.pytorch.LightningModule",
}
# Sub-module paths inside torch.nn.modules.* (e.g. torch.nn.modules.linear.Linear).
_NN_SUBMODULE = re.compile(r"^torch\.nn\.[a-z_]+\.(?=[A-Z])")


@functools.lru_cache(maxsize=65536)  # asked for the same names again and again
def canonical(qualname: str) -> str:
    """The short public spelling of a qualified name (``torch.nn.Linear`` for
    ``torch.nn.modules.linear.Linear``, ``torch.amp.autocast`` for ``torch.autocast``)."""
    for prefix, short in _CANONICAL_PREFIXES.items():
        if qualname.startswith(prefix):
            qualname = short + qualname[len(prefix) :]
            break
    if qualname.startswith("torch.nn.") and not qualname.startswith(
        ("torch.nn.functional.", "torch.nn.utils.", "torch.nn.init.", "torch.nn.parallel.")
    ):
        qualname = _NN_SUBMODULE.sub("torch.nn.", qualname)
    return _CANONICAL_EXACT.get(qualname, qualname)


SCOPE_NODES = (
    ast.Module,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOP_NODES = (ast.For, ast.AsyncFor, ast.While)


@dataclass(slots=True)
class Binding:
    """One place where a name gets a value (slots: a long script has hundreds of thousands)."""

    name: str
    node: ast.AST
    how: str  # import | assign | def | class | param | loop | with | other
    scope: ast.AST
    value: ast.expr | None = None
    index: int | None = None  # position inside a tuple target: a, b = value
    qualname: str | None = None  # for imports

    @property
    def pos(self) -> tuple[int, int]:
        return (getattr(self.node, "lineno", 0), getattr(self.node, "col_offset", 0))


@dataclass
class Scope:
    node: ast.AST
    parent: Scope | None
    bindings: dict[str, list[Binding]] = field(default_factory=lambda: defaultdict(list))
    global_names: set[str] = field(default_factory=set)

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, ast.ClassDef)


# Nodes the walk records (names, attributes and calls it records inline).
_RECORDED = frozenset(
    {
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.NamedExpr,
        ast.For,
        ast.AsyncFor,
        ast.comprehension,
        ast.withitem,
        ast.ExceptHandler,
        ast.Import,
        ast.ImportFrom,
        ast.Global,
        ast.Nonlocal,
        ast.With,
        ast.AsyncWith,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.While,
    }
)


_SCOPE_TYPES = frozenset(SCOPE_NODES)
# Fields that can hold child nodes, per node type (singleton operator/context nodes excluded).
_NO_CHILD_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "kind", "conversion", "is_async"})
# Fields that hold identifiers or constants, never nodes (the walk does not look into them).
_SCALAR_FIELDS: dict[str, frozenset[str]] = {
    "Name": frozenset({"id"}),
    "Constant": frozenset({"value"}),
    "Attribute": frozenset({"attr"}),
    "alias": frozenset({"name", "asname"}),
    "arg": frozenset({"arg"}),
    "keyword": frozenset({"arg"}),
    "FunctionDef": frozenset({"name"}),
    "AsyncFunctionDef": frozenset({"name"}),
    "ClassDef": frozenset({"name"}),
    "ExceptHandler": frozenset({"name"}),
    "ImportFrom": frozenset({"module", "level"}),
    "Global": frozenset({"names"}),
    "Nonlocal": frozenset({"names"}),
    "MatchSingleton": frozenset({"value"}),
    "MatchAs": frozenset({"name"}),
    "MatchStar": frozenset({"name"}),
    "MatchMapping": frozenset({"rest"}),
    "MatchClass": frozenset({"kwd_attrs"}),
    "TypeVar": frozenset({"name"}),
    "ParamSpec": frozenset({"name"}),
    "TypeVarTuple": frozenset({"name"}),
}
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_REVERSED_FIELDS: dict[type, tuple[str, ...]] = {}  # the same, last field first
# The fields of a scope's node that belong to the enclosing scope (see ``_outside_scope``).
_NO_FIELDS: frozenset[str] = frozenset()
_OUTSIDE_FIELDS: dict[type, frozenset[str]] = {
    ast.FunctionDef: frozenset({"args", "decorator_list", "returns"}),
    ast.AsyncFunctionDef: frozenset({"args", "decorator_list", "returns"}),
    ast.ClassDef: frozenset({"bases", "keywords", "decorator_list"}),
}


def _child_fields(kind: type) -> tuple[str, ...]:
    scalar = _SCALAR_FIELDS.get(kind.__name__, frozenset())
    fields = tuple(
        f for f in getattr(kind, "_fields", ()) if f not in _NO_CHILD_FIELDS and f not in scalar
    )
    _CHILD_FIELDS[kind] = fields
    return fields


# The fields of a statement that hold blocks of statements.
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_NESTED_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})


def _children(node: ast.AST) -> list[ast.AST]:
    """The child nodes of ``node`` (operator and context singletons left out)."""
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _child_fields(kind)
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


_UNKNOWN = object()  # not looked up yet


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


@functools.lru_cache(maxsize=1024)  # rules ask for the same names in every file
def _targets(qualnames: tuple[str, ...]) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """The qualified names asked for, and them by their last part (``Linear`` for
    ``torch.nn.Linear``)."""
    by_last: dict[str, set[str]] = defaultdict(set)
    for qualname in qualnames:
        by_last[qualname.rsplit(".", 1)[-1]].add(qualname)
    return frozenset(qualnames), {last: frozenset(q) for last, q in by_last.items()}


# The nodes whose place in the pre-order is kept: those a walk starts from (statements, the
# module) or skips (nested functions, classes and lambdas). A walk from another node of the
# file follows its children (the same order).
_INDEXED = frozenset(
    {
        ast.Module,
        ast.Lambda,
        *(k for k in vars(ast).values() if isinstance(k, type) and issubclass(k, ast.stmt)),
    }
)


def _pre_order_index(order: list[ast.AST]) -> dict[ast.AST, int]:
    """The index in ``order`` (a pre-order) of each of its nodes of an ``_INDEXED`` type (a
    tenth of them: an index of every node took more memory than the rest of the facts)."""
    indexed = _INDEXED
    return {node: i for i, node in enumerate(order) if type(node) in indexed}


class _Sizes(dict[ast.AST, int]):
    """The subtree size of each indexed node of a pre-order, worked out when first asked (most
    never are): the distance to its last descendant, which is its last child's last
    descendant."""

    def __init__(self, index: dict[ast.AST, Any], order: list[ast.AST] | None = None) -> None:
        super().__init__()
        self.index = index
        self.order = order  # None: the index holds (a chunk's order, the index there)

    def __missing__(self, node: ast.AST) -> int:
        last = node
        while True:
            children = _children(last)
            if not children:
                break
            last = children[-1]
        first = self.index[node]
        order = self.order
        if type(first) is tuple:
            order, first = first
        assert order is not None
        end = first if last is node else order.index(last, first)
        size = end - first + 1
        self[node] = size
        return size


class Resolver(Protocol):
    """What resolves names imported from the user's other modules (``core.project.Project``)."""

    def resolve(self, sem: Semantic, binding: Binding) -> tuple[Semantic, ast.AST] | None: ...

    def owner(self, node: ast.AST) -> Semantic | None: ...

    def imported_from_project(self, sem: Semantic, binding: Binding) -> bool: ...

    def imported_module(self, sem: Semantic, name: str) -> Semantic | None: ...

    def calling(self, path: str, name: str) -> Sequence[Any]: ...


class Chunk(Protocol):
    """A run of top-level statements (``core.incremental``) and the facts collected for it."""

    body: list[ast.stmt]
    facts: object


# What a chunk adds to a module's facts: lists and indexes, concatenated in chunk order.
_CHUNK_LISTS = (
    "calls",
    "imports",
    "loops",
    "withs",
    "assigns",
    "aug_assigns",
    "functions",
    "classes",
    "star_imports",
)
_CHUNK_INDEXES = ("calls_by_attr", "calls_by_name", "attributes", "names", "self_attr_values")
_CHUNK_SETS = ("call_bound", "call_kept_attrs")


class _ChunkFacts:
    """The facts one chunk contributes, collected by the same walk as a whole module's."""

    def __init__(self, tree: ast.Module, body: list[ast.stmt]) -> None:
        part = Semantic.__new__(Semantic)
        part._setup(tree)
        module = part.scopes.pop(tree)
        part._visit([(stmt, tree, module) for stmt in reversed(body)])
        self.part = part
        self.body = body
        self.nodes = part.order  # every node of the chunk (operator singletons left out)
        self._subtrees: tuple[dict[ast.AST, Any], dict[ast.AST, int]] | None = None
        self.module = module  # what the statements bound at module level
        self.top_scopes = [s for s in part.scopes.values() if s.parent is module]
        self.module_bindings = [b for bs in module.bindings.values() for b in bs]

    def subtrees(self) -> tuple[dict[ast.AST, Any], dict[ast.AST, int]]:
        """For each node of the chunk: ``(the chunk's order, its index there)`` and the size
        of its subtree."""
        if self._subtrees is None:
            order = self.part.order
            index: dict[ast.AST, Any] = {
                node: (order, i) for node, i in _pre_order_index(order).items()
            }
            self._subtrees = index, _Sizes(index)
        return self._subtrees

    def merge_into(self, sem: Semantic) -> None:
        part, tree = self.part, sem.tree
        module = sem.scopes[tree]
        sem.order.extend(part.order)
        sem.parents.update(part.parents)
        for stmt in self.body:
            sem.parents[stmt] = tree
        sem.scopes.update(part.scopes)
        for scope in self.top_scopes:
            scope.parent = module
        for binding in self.module_bindings:
            binding.scope = tree
        for name, bindings in self.module.bindings.items():
            module.bindings[name].extend(bindings)
        module.global_names.update(self.module.global_names)
        for name in _CHUNK_LISTS:
            getattr(sem, name).extend(getattr(part, name))
        for name in _CHUNK_INDEXES:
            index = getattr(sem, name)
            for key, values in getattr(part, name).items():
                index[key].extend(values)
        for name in _CHUNK_SETS:
            getattr(sem, name).update(getattr(part, name))


class Semantic:
    """Facts about one parsed module, computed in one pass and queried by every rule."""

    def __init__(self, tree: ast.Module) -> None:
        self._setup(tree)
        self._visit([(tree, None, self.scopes[tree])])

    @classmethod
    def from_chunks(cls, tree: ast.Module, chunks: Sequence[Chunk]) -> Semantic:
        """The facts of ``tree``, whose body is the chunks' statements in order, reusing what an
        earlier call collected for the same chunks (see ``core.incremental``: a chunk reused
        after an edit holds the same node objects, only their rows may have moved, and facts
        refer to nodes, never to rows). Gives what ``Semantic(tree)`` gives."""
        sem = cls.__new__(cls)
        sem._setup(tree)
        sem.order.append(tree)
        sem._chunks = []
        for chunk in chunks:
            part = chunk.facts
            if not isinstance(part, _ChunkFacts):
                part = _ChunkFacts(tree, chunk.body)
                chunk.facts = part
            part.merge_into(sem)
            sem._chunks.append(part)
        return sem

    def _setup(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {}
        self.scopes: dict[ast.AST, Scope] = {}
        self.calls: list[ast.Call] = []
        self.calls_by_attr: dict[str, list[ast.Call]] = defaultdict(list)
        self.calls_by_name: dict[str, list[ast.Call]] = defaultdict(list)
        self.attributes: dict[str, list[ast.Attribute]] = defaultdict(list)
        self.names: dict[str, list[ast.Name]] = defaultdict(list)
        self.imports: list[tuple[ast.Import | ast.ImportFrom, ast.alias, str | None]] = []
        self.loops: list[ast.For | ast.AsyncFor | ast.While] = []
        self.withs: list[ast.With | ast.AsyncWith] = []
        self.assigns: list[ast.Assign] = []
        self.aug_assigns: list[ast.AugAssign] = []
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.classes: list[ast.ClassDef] = []
        self.star_imports: list[ast.ImportFrom] = []  # ``from m import *`` at module level
        self.self_attr_values: dict[tuple[ast.AST, str], list[ast.expr]] = defaultdict(list)
        # Names an assignment binds to a call's result, and attributes of ``self`` a method
        # assigns a call's result to: what may hold an instance the file's code made.
        self.call_bound: set[str] = set()
        self.call_kept_attrs: set[str] = set()
        self._qual_cache: dict[ast.AST, str | None] = {}
        self.name_scopes: dict[ast.AST, Scope] = {}  # the scope of each statement asked about
        # Facts derived by the subject modules (kinds, training, data...), computed once per file.
        self.memo: dict[object, object] = {}
        self._function_cache: dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef | None] = {}
        self.order: list[ast.AST] = []  # every node, in source (pre-)order
        self._index: dict[ast.AST, Any] | None = None
        self._size: dict[ast.AST, int] | None = None
        self._chunks: list[_ChunkFacts] | None = None  # when built from chunks
        self.scopes[tree] = Scope(tree, None)
        # The project this file belongs to (names imported from its other modules resolve
        # through it) and the file's path; None when the file is checked on its own.
        self.project: Resolver | None = None
        self.path: str | None = None
        self._definitions: dict[ast.AST, tuple[Semantic, ast.AST] | None] = {}
        # A name's bindings in a scope ordered by position, made when a lookup first needs
        # them: (how many bindings it was made from, their positions, the bindings).
        self._by_position: dict[int, tuple[int, list[tuple[int, int]], list[Binding]]] = {}
        self._blocks: dict[ast.AST, int] = {}  # statement -> its index in its block
        self._binding_index: dict[int, tuple[int, dict[int, int]]] = {}
        self._reads: dict[str, dict[ast.AST, list[ast.Name]]] = {}  # see ``reads``
        self._lookups: dict[object, Binding | None] = {}  # see ``lookup``

    def release(self) -> None:
        """Drop the derived facts, which refer back to these (a function's summary, a name's
        definition here): without them, the tree and its facts hold no reference cycle, and are
        freed as soon as the last reference goes, without waiting for the cycle collector to
        traverse them all."""
        self.memo.clear()
        self._definitions.clear()
        self._by_position.clear()
        self._blocks.clear()
        self._binding_index.clear()
        self._reads.clear()
        self._lookups.clear()

    # ---------------------------------------------------------------- building ---------
    def _visit(self, stack: list[tuple[ast.AST, ast.AST | None, Scope]]) -> None:
        """Walk the subtrees on ``stack``, each entry: (node, parent, scope), in pre-order. This
        is the hot path of the whole linter: keep it free of per-node allocations beyond the
        stack entries, and the commonest nodes (names, constants, attributes, calls) handled
        inline."""
        parents = self.parents
        record = self._record
        recorded = _RECORDED
        scope_types = _SCOPE_TYPES
        fields_of = _REVERSED_FIELDS
        push = stack.append
        pop = stack.pop
        add = self.order.append
        names = self.names
        attributes = self.attributes
        calls = self.calls.append
        calls_by_attr = self.calls_by_attr
        calls_by_name = self.calls_by_name
        name_type, load_type, constant_type = ast.Name, ast.Load, ast.Constant
        attribute_type, call_type = ast.Attribute, ast.Call
        node_type = ast.AST
        node: Any  # its type is told by ``kind``, which mypy does not follow
        while stack:
            node, parent, scope = pop()
            if parent is not None:
                parents[node] = parent
            add(node)
            kind = type(node)
            if kind is name_type:
                if type(node.ctx) is load_type:
                    names[node.id].append(node)
                continue
            if kind is constant_type:
                continue
            if kind is attribute_type:
                attributes[node.attr].append(node)
                push((node.value, node, scope))
                continue
            if kind is call_type:
                calls(node)
                func = node.func
                if type(func) is attribute_type:
                    calls_by_attr[func.attr].append(node)
                elif type(func) is name_type:
                    calls_by_name[func.id].append(node)
                for keyword in reversed(node.keywords):
                    push((keyword, node, scope))
                for arg in reversed(node.args):
                    push((arg, node, scope))
                push((func, node, scope))
                continue
            inner, outside = scope, _NO_FIELDS
            if kind in scope_types and parent is not None:
                inner = self._enter_scope(node, scope)
                # Decorators, defaults, bases and annotations: the enclosing scope.
                outside = _OUTSIDE_FIELDS.get(kind, _NO_FIELDS)
            if kind in recorded:
                record(node, scope, inner)
            fields = fields_of.get(kind)
            if fields is None:
                fields = _child_fields(kind)[::-1]
                fields_of[kind] = fields
            for name in fields:
                value = getattr(node, name, None)
                if value is None:
                    continue
                where = scope if name in outside else inner
                if type(value) is list:
                    for child in reversed(value):
                        if child is not None:  # a dict's keys hold None for ``**x``
                            push((child, node, where))
                elif isinstance(value, node_type):
                    push((value, node, where))

    def _subtrees(self) -> tuple[dict[ast.AST, Any], dict[ast.AST, int]]:
        """Pre-order index and subtree size of the ``_INDEXED`` nodes (computed on first use):
        a subtree is the slice ``order[index : index + size]``. Built from chunks, the index of a node is
        ``(its chunk's order, the index there)``, what the chunk computed once for all the
        versions that reuse it."""
        if self._index is None:
            if self._chunks is None:
                self._index = _pre_order_index(self.order)
                self._size = _Sizes(self._index, self.order)
            else:
                index: dict[ast.AST, Any] = {self.tree: (self.order, 0)}
                size = _Sizes(index)
                size[self.tree] = len(self.order)
                for part in self._chunks:
                    part_index, part_size = part.subtrees()
                    index.update(part_index)
                    size.update(part_size)  # what the chunk worked out already
                self._index, self._size = index, size
        assert self._size is not None
        return self._index, self._size

    @staticmethod
    def _outside_scope(node: ast.AST, child: ast.AST) -> bool:
        if isinstance(node, FUNCTION_NODES):
            return (
                child in node.decorator_list
                or child is node.returns
                or isinstance(child, ast.arguments)
            )
        if isinstance(node, ast.ClassDef):
            return child in node.decorator_list or child in node.bases or child in node.keywords
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            return bool(node.generators) and child is node.generators[0].iter
        return False

    def _enter_scope(self, node: ast.AST, parent: Scope) -> Scope:
        scope = Scope(node, parent)
        self.scopes[node] = scope
        if isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
            parent.bindings[node.name].append(
                Binding(
                    node.name,
                    node,
                    "class" if isinstance(node, ast.ClassDef) else "def",
                    parent.node,
                )
            )
        if isinstance(node, (*FUNCTION_NODES, ast.Lambda)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                scope.bindings[arg.arg].append(Binding(arg.arg, arg, "param", node))
            for extra in (args.vararg, args.kwarg):
                if extra is not None:
                    scope.bindings[extra.arg].append(Binding(extra.arg, extra, "param", node))
        return scope

    def _bind_target(
        self, target: ast.expr, scope: Scope, how: str, value: ast.expr | None, index: int | None
    ) -> None:
        if isinstance(target, ast.Name):
            dest = self._binding_scope(scope, target.id)
            dest.bindings[target.id].append(
                Binding(target.id, target, how, dest.node, value, index)
            )
            if how == "assign" and type(value) is ast.Call:
                self.call_bound.add(target.id)
        elif isinstance(target, ast.Tuple | ast.List):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    self._bind_target(elt.value, scope, how, None, None)
                else:
                    self._bind_target(elt, scope, how, value, i if value is not None else None)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, scope, how, None, None)
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and value is not None
            and index is None
        ):
            cls = self._enclosing_class_of_scope(scope)
            if cls is not None:
                self.self_attr_values[(cls, target.attr)].append(value)
                if type(value) is ast.Call:
                    self.call_kept_attrs.add(target.attr)

    def _enclosing_class_of_scope(self, scope: Scope) -> ast.ClassDef | None:
        if isinstance(scope.node, FUNCTION_NODES) and scope.parent is not None:
            if isinstance(scope.parent.node, ast.ClassDef):
                return scope.parent.node
        return None

    def _binding_scope(self, scope: Scope, name: str) -> Scope:
        if name in scope.global_names:
            while scope.parent is not None:
                scope = scope.parent
        return scope

    def _record(self, node: ast.AST, scope: Scope, inner: Scope) -> None:
        if isinstance(node, ast.Assign):
            self.assigns.append(node)
            for target in node.targets:
                self._bind_target(target, scope, "assign", node.value, None)
        elif isinstance(node, ast.AnnAssign):
            self._bind_target(node.target, scope, "assign", node.value, None)
        elif isinstance(node, ast.AugAssign):
            self.aug_assigns.append(node)
            self._bind_target(node.target, scope, "other", None, None)
        elif isinstance(node, ast.NamedExpr):
            self._bind_target(node.target, scope, "assign", node.value, None)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            self._bind_target(node.target, inner, "loop", None, None)
        elif isinstance(node, ast.withitem):
            if node.optional_vars is not None:
                self._bind_target(node.optional_vars, scope, "with", node.context_expr, None)
        elif isinstance(node, ast.ExceptHandler):
            if node.name:
                scope.bindings[node.name].append(Binding(node.name, node, "other", scope.node))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    name, qual = alias.asname, alias.name
                else:
                    name = qual = alias.name.split(".")[0]
                self.imports.append((node, alias, alias.name))
                dest = self._binding_scope(scope, name)
                dest.bindings[name].append(
                    Binding(name, alias, "import", dest.node, qualname=canonical(qual))
                )
        elif isinstance(node, ast.ImportFrom):
            base = node.module if not node.level else None
            for alias in node.names:
                if alias.name == "*":
                    if scope.node is self.tree:
                        self.star_imports.append(node)
                    continue
                name = alias.asname or alias.name
                from_qual = f"{base}.{alias.name}" if base else None
                self.imports.append((node, alias, from_qual))
                dest = self._binding_scope(scope, name)
                dest.bindings[name].append(
                    Binding(
                        name,
                        alias,
                        "import",
                        dest.node,
                        qualname=canonical(from_qual) if from_qual else None,
                    )
                )
        elif isinstance(node, ast.Global | ast.Nonlocal):
            if isinstance(node, ast.Global):
                scope.global_names.update(node.names)
        elif isinstance(node, ast.With | ast.AsyncWith):
            self.withs.append(node)
        elif isinstance(node, FUNCTION_NODES):
            self.functions.append(node)
        elif isinstance(node, ast.ClassDef):
            self.classes.append(node)
        if isinstance(node, LOOP_NODES):
            self.loops.append(node)

    # ---------------------------------------------------------------- structure --------
    def _foreign(self, node: ast.AST) -> Semantic | None:
        """The facts of the other project module ``node`` belongs to; None for this file's."""
        if self.project is None or node is self.tree or node in self.parents:
            return None
        owner = self.project.owner(node)
        return owner if owner is not self else None

    def parent(self, node: ast.AST) -> ast.AST | None:
        found = self.parents.get(node)
        if found is None and self.project is not None:
            other = self._foreign(node)
            if other is not None:
                return other.parent(node)
        return found

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        node_: ast.AST | None = self.parents.get(node)
        if node_ is None and self.project is not None:
            other = self._foreign(node)
            if other is not None:
                yield from other.ancestors(node)
                return
        while node_ is not None:
            yield node_
            node_ = self.parents.get(node_)

    def statement_of(self, node: ast.AST) -> ast.stmt:
        other = self._foreign(node) if self.project is not None else None
        if other is not None:
            return other.statement_of(node)
        current: ast.AST = node
        while not isinstance(current, ast.stmt):
            parent = self.parents.get(current)
            if parent is None:
                raise ValueError("node is not inside a statement")
            current = parent
        return current

    def block_of(self, stmt: ast.stmt) -> tuple[list[ast.stmt], int]:
        """The statement list holding ``stmt`` and its index there."""
        other = self._foreign(stmt) if self.project is not None else None
        if other is not None:
            return other.block_of(stmt)
        parent = self.parents.get(stmt)
        if parent is None:
            raise ValueError("statement has no parent")
        where = self._blocks.get(stmt)
        if where is None:
            for fld in _BLOCK_FIELDS:
                block = getattr(parent, fld, None)
                if isinstance(block, list):  # every statement of the parent's blocks, at once
                    for i, item in enumerate(block):
                        self._blocks[item] = i
            where = self._blocks.get(stmt)
            if where is None:
                raise ValueError("statement not found in its parent")
        # Only the index is kept (a tuple per statement took more memory than the statement
        # list's own entries): the block is the parent's list that holds the statement there.
        for fld in _BLOCK_FIELDS:
            block = getattr(parent, fld, None)
            if isinstance(block, list) and where < len(block) and block[where] is stmt:
                return block, where
        raise ValueError("statement not found in its parent")

    def in_version_fallback(self, node: ast.AST, errors: Iterable[str]) -> bool:
        """Whether ``node`` is code for other PyTorch versions: inside an ``except`` handler
        that catches one of ``errors`` (or everything), or in a branch of an ``if`` that tests
        ``hasattr(...)``/``getattr(...)``, a name containing "version", or a value computed
        from ``torch.__version__`` (also through a project function that returns one)."""
        child = node
        for anc in self.ancestors(node):
            if isinstance(anc, ast.ExceptHandler) and _catches(anc, errors):
                return True
            if (
                isinstance(anc, ast.If | ast.IfExp)
                and child is not anc.test
                and (_tests_version(anc.test) or self._reads_torch_version(anc.test))
            ):
                return True
            child = anc
        return False

    def in_torch_version_branch(self, node: ast.AST) -> bool:
        """Whether ``node`` runs in a branch of an ``if`` whose test is computed from
        ``torch.__version__`` (code for some torch versions only)."""
        child = node
        for anc in self.ancestors(node):
            if (
                isinstance(anc, ast.If | ast.IfExp)
                and child is not anc.test
                and self._reads_torch_version(anc.test)
            ):
                return True
            child = anc
        return False

    def _reads_torch_version(self, test: ast.expr, depth: int = 0) -> bool:
        """Whether a condition is computed from ``torch.__version__``: it reads it, or a name
        assigned the result of a function (of this file or another project module) whose
        returned value reads it (``newer = is_pytorch_1_1_0_or_later()``)."""
        if depth > 2:
            return False
        for node in ast.walk(test):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "__version__"
                and self.qualname(node) == "torch.__version__"
            ):
                return True
            value: ast.expr | None = None
            if isinstance(node, ast.Name):
                binding = self.lookup(node.id, node)
                if binding is not None and binding.how == "assign" and binding.index is None:
                    value = binding.value
            elif isinstance(node, ast.Call):
                value = node
            if not isinstance(value, ast.Call):
                continue
            defined = self.function_def(value.func)
            if defined is not None and any(
                defined[0]._reads_torch_version(r, depth + 1)
                for r in defined[0].returns(defined[1])
            ):
                return True
        return False

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        cache = self._function_cache
        if node in cache:
            return cache[node]
        found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        for anc in self.ancestors(node):
            if isinstance(anc, FUNCTION_NODES):
                found = anc
                break
            if isinstance(anc, ast.Lambda):
                break
        cache[node] = found
        return found

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, ast.ClassDef):
                return anc
        return None

    def at_module_level(self, node: ast.AST) -> bool:
        """True when ``node`` runs when the module runs (not inside a def, lambda or class body)."""
        return not any(
            isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef))
            for anc in self.ancestors(node)
        )

    def in_main_guard(self, node: ast.AST) -> bool:
        """Whether ``node`` lies in the body of an ``if __name__ == "__main__":`` block."""
        child: ast.AST = node
        for anc in self.ancestors(node):
            if isinstance(anc, ast.If) and is_main_guard(anc) and child in anc.body:
                return True
            child = anc
        return False

    def runs_as_script(self, node: ast.AST) -> bool:
        """Whether the file runs ``node`` when executed as a script, rather than being a library
        module: ``node`` at module level, an ``if __name__ == "__main__":`` block, or a
        module-level call of a function the file defines."""
        if self.at_module_level(node):
            return True
        local = {
            stmt.name
            for stmt in self.tree.body
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for stmt in self.tree.body:
            if is_main_guard(stmt):
                return True
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name)
                and stmt.value.func.id in local
            ):
                return True
        return False

    def runs_on_import(self, node: ast.AST) -> bool:
        """Module-level code that runs when the file is imported or re-imported by a spawned
        worker: not in a def, lambda or class body, nor under ``if __name__ == "__main__":``."""
        return self.at_module_level(node) and not self.in_main_guard(node)

    def scope_of(self, node: ast.AST) -> Scope:
        """The scope ``node`` is evaluated in: decorators, return annotations, base classes and
        class keywords belong to the scope around their def or class."""
        known = self.name_scopes.get(node)
        if known is not None:
            return known
        # Kept once per statement rather than once per node asked: a node's scope is the
        # scope of the statement around it unless a scope (a lambda, a comprehension) lies
        # between them.
        scopes, known_scopes = self.scopes, self.name_scopes
        found = scopes[self.tree]
        child = node
        kept = node if isinstance(node, ast.stmt) else None
        for anc in self.ancestors(node):
            scope = scopes.get(anc)
            if scope is not None and not self._outside_scope(anc, child):
                found = scope
                break
            if isinstance(anc, ast.stmt):
                known = known_scopes.get(anc)
                if known is not None:
                    found = known
                    break
                if kept is None:
                    kept = anc
            child = anc
        if kept is not None:
            known_scopes[kept] = found
        return found

    def walk(self, node: ast.AST, *, into_functions: bool = False) -> Iterator[ast.AST]:
        """Nodes under ``node`` (itself excluded), by default not entering nested defs/classes."""
        stop = () if into_functions else _NESTED_SCOPES
        index, size = self._subtrees()
        start = index.get(node)
        if start is None and node in self.parents:  # not indexed: the same order, by children
            stack = _children(node)[::-1]
            while stack:
                child = stack.pop()
                yield child
                if type(child) not in stop:
                    stack.extend(_children(child)[::-1])
            return
        if start is None:  # a node made after the pass
            stack = _children(node)
            while stack:
                child = stack.pop()
                yield child
                if type(child) not in stop:
                    stack.extend(_children(child))
            return
        order = self.order
        if type(start) is tuple:
            order, start = start
        i, end = start + 1, start + size[node]
        while i < end:
            child = order[i]
            yield child
            i += size[child] if type(child) in stop else 1

    def walk_body(
        self, stmts: Iterable[ast.stmt], *, into_functions: bool = False
    ) -> Iterator[ast.AST]:
        for stmt in stmts:
            yield stmt
            if not into_functions and isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
                continue
            yield from self.walk(stmt, into_functions=into_functions)

    def mentions(self, identifier: str) -> bool:
        """Whether anything in the file is named ``identifier``: an attribute, a name read, or
        a part of an imported name. When nothing is, no callee of the file resolves to a
        qualified name ending in it (``qualname``), whatever name it is imported or assigned
        as; unless names come in through ``from m import *`` of a project module."""
        key = ("semantic-mentions", identifier)
        known = self.memo.get(key)
        if not isinstance(known, bool):
            known = (
                identifier in self.attributes
                or identifier in self.names
                or any(identifier in alias.name for _stmt, alias, _qual in self.imports)
                or (self.project is not None and bool(self.star_imports))
            )
            self.memo[key] = known
        return known

    def is_inside(self, node: ast.AST, container: ast.AST) -> bool:
        """Whether ``node`` is a descendant of ``container``."""
        if hasattr(node, "lineno") and getattr(container, "end_lineno", None) is not None:
            # Descendants lie within their ancestor's span: rule most candidates out cheaply.
            if not (
                (container.lineno, container.col_offset)  # type: ignore[attr-defined]
                <= (node.lineno, node.col_offset)  # type: ignore[attr-defined]
                <= (container.end_lineno, container.end_col_offset)  # type: ignore[attr-defined]
            ):
                return False
        return any(anc is container for anc in self.ancestors(node))

    # ---------------------------------------------------------------- names ------------
    def lookup(self, name: str, at: ast.AST) -> Binding | None:
        """The binding a use of ``name`` at ``at`` most likely refers to (flow-approximate)."""
        if self.project is not None and at not in self.parents:
            other = self._foreign(at)
            if other is not None:
                return other.lookup(name, at)
        # A name read is its own key (most lookups): no tuple kept per lookup.
        key: object = at if type(at) is ast.Name and at.id == name else (name, at)
        found = self._lookups.get(key, _UNKNOWN)
        if found is not _UNKNOWN:
            return found  # type: ignore[return-value]
        found = None
        scope: Scope | None = self.scope_of(at)
        first = True
        pos = _pos(at)
        while scope is not None:
            if scope.is_class and not first:
                scope = scope.parent
                continue
            if name in scope.global_names:
                scope = self.scopes[self.tree]
            bindings = scope.bindings.get(name)
            if bindings:
                found = self._latest_before(bindings, pos, at)
                break
            first = False
            scope = scope.parent
        self._lookups[key] = found
        return found

    def reads(self, name: str) -> dict[ast.AST, list[ast.Name]]:
        """{the node of a binding of ``name``: the reads of ``name`` that see it}, in source
        order, made once per name (following one value by asking every read of its name
        again was quadratic in a file that rebinds the name many times)."""
        known = self._reads.get(name)
        if known is None:
            known = {}
            for use in self.names.get(name, ()):
                binding = self.lookup(name, use)
                if binding is not None:
                    known.setdefault(binding.node, []).append(use)
            self._reads[name] = known
        return known

    def _latest_before(self, bindings: list[Binding], pos: tuple[int, int], at: ast.AST) -> Binding:
        """The latest of ``bindings`` made before ``pos`` (whose value ``at`` is not inside),
        else the last one: a binary search, so that a name bound thousands of times (``x``,
        ``model`` and ``loss`` in a long notebook) costs no more per use than one bound once."""
        ordered = self._by_position.get(id(bindings))
        if ordered is None or ordered[0] != len(bindings):
            by_pos = sorted(bindings, key=lambda b: b.pos)  # stable: equal positions in order
            ordered = (len(bindings), [b.pos for b in by_pos], by_pos)
            self._by_position[id(bindings)] = ordered
        _count, positions, by_pos = ordered
        i = bisect.bisect_right(positions, pos)
        while i > 0:
            i -= 1
            if not self._in_own_value(by_pos[i], at):
                return by_pos[i]
        return bindings[-1]

    def reaching(self, name: str, at: ast.AST) -> list[Binding]:
        """The bindings of ``name`` whose value may be what a use at ``at`` reads: the one
        ``lookup`` gives, and earlier ones of the same scope that no later binding before
        ``at`` replaces on every path (``loader`` bound in both branches of ``if distributed:
        ... else: ...``, ``model = DDP(model)`` inside ``if args.distributed:``)."""
        latest = self.lookup(name, at)
        if latest is None:
            return []
        out = [latest]
        scope = self.scopes.get(latest.scope)
        bindings = scope.bindings.get(name, []) if scope is not None else []
        pos = _pos(at)
        index = self._index_of(bindings, latest)
        if latest.pos > pos or index is None:
            return out
        for binding in reversed(bindings[:index]):
            if binding.pos > pos:
                continue
            if any(self._replaces(later, binding) for later in out):
                break
            out.append(binding)
        return out

    def may_reach(self, name: str, at: ast.AST) -> list[Binding]:
        """``reaching``, less the bindings made in another branch of an ``if`` (or ``match``)
        than ``at``: a run that reaches ``at`` never made them (``model = model.cuda(gpu)``
        under ``if args.gpu is not None:`` is not the model that its ``elif`` wraps)."""
        return [b for b in self.reaching(name, at) if not self.exclusive_branches(b.node, at)]

    def _index_of(self, bindings: list[Binding], binding: Binding) -> int | None:
        """Where ``binding`` is in ``bindings`` (an index made once per list and length)."""
        known = self._binding_index.get(id(bindings))
        if known is None or known[0] != len(bindings):
            known = (len(bindings), {id(b): i for i, b in enumerate(bindings)})
            self._binding_index[id(bindings)] = known
        return known[1].get(id(binding))

    def _replaces(self, later: Binding, earlier: Binding) -> bool:
        """Whether ``later`` runs on every path from ``earlier`` on: its statement sits in the
        block (or a ``with`` body inside the block) that holds ``earlier``'s statement or one
        of its ancestors."""
        try:
            block, _ = self.block_of(self.statement_of(later.node))
        except ValueError:
            return True
        owner = self.parent(block[0]) if block else None
        while isinstance(owner, ast.With | ast.AsyncWith) and owner.body is block:
            try:
                block, _ = self.block_of(owner)
            except ValueError:
                break
            owner = self.parent(block[0]) if block else None
        if isinstance(earlier.node, ast.arg):  # a parameter: replaced in the function's body
            return block is getattr(earlier.scope, "body", None)
        try:
            mine = self.statement_of(earlier.node)
        except ValueError:
            return True
        return any(self.in_block(stmt, block) for stmt in (mine, *self.ancestors(mine)))

    def in_block(self, node: ast.AST, block: list[ast.stmt]) -> bool:
        """Whether the statement ``node`` is one of ``block`` (from the index of blocks: no
        scan of the block)."""
        if not isinstance(node, ast.stmt):
            return False
        try:
            return self.block_of(node)[0] is block
        except ValueError:
            return False

    def bind_star_import(self, node: ast.ImportFrom, names: dict[str, str | None]) -> None:
        """Bind at module level the names ``from m import *`` (``node``) brings in, as the
        project module ``m`` exports them: each name with its qualified name when ``m`` imports
        it from an installed package (``torch``, ``nn``...), else None (resolved through the
        project)."""
        star = node.names[0]
        module = self.scopes[self.tree]
        for name, qual in names.items():
            binding = Binding(name, star, "import", self.tree, qualname=qual)
            bindings = module.bindings[name]
            at = len(bindings)
            while at and bindings[at - 1].pos > binding.pos:
                at -= 1
            bindings.insert(at, binding)
        self._qual_cache.clear()
        self._definitions.clear()
        self._lookups.clear()

    def _in_own_value(self, binding: Binding, at: ast.AST) -> bool:
        """``x`` on the right of ``x = f(x)`` still reads the previous ``x``."""
        value = binding.value
        if value is None or binding.how not in ("assign", "with"):
            return False
        return at is value or self.is_inside(at, value)

    def qualname(self, expr: ast.AST, _depth: int = 0) -> str | None:
        """``torch.utils.data.DataLoader`` for ``DL`` after ``from torch.utils.data import
        DataLoader as DL``; None when the expression is not an imported name."""
        if _depth > 8:
            return None
        if self.project is not None and expr not in self.parents:
            other = self._foreign(expr)
            if other is not None:
                return other.qualname(expr, _depth)
        if type(expr) is ast.Name:
            # A name's answer is its binding's: an import's qualified name, or (kept once per
            # binding, by its node) what a module-level alias assigned from a dotted name holds.
            lookups: dict[object, Any] = self._lookups
            binding = lookups.get(expr, _UNKNOWN)  # ``lookup``'s own key for a read
            if binding is _UNKNOWN:
                binding = self.lookup(expr.id, expr)
            if binding is None:
                return None
            if binding.how == "import":
                return binding.qualname
            if not (
                binding.how == "assign"
                and binding.index is None
                and isinstance(binding.value, ast.Name | ast.Attribute)
                and binding.scope is self.tree
            ):
                return None
            key = binding.node
            cached = self._qual_cache.get(key, ...)
            if cached is ...:
                self._qual_cache[key] = None  # an alias of itself (``x = x``) names nothing
                cached = self.qualname(binding.value, _depth + 1)
                self._qual_cache[key] = cached
            return cached
        if type(expr) is not ast.Attribute:
            return None
        cached = self._qual_cache.get(expr, ...)
        if cached is not ...:
            return cached
        assert isinstance(expr, ast.Attribute)
        base = self.qualname(expr.value, _depth + 1)
        if base is None:
            return None  # not kept (most attributes: `model.train`): as quick to find again
        result = canonical(f"{base}.{expr.attr}")
        self._qual_cache[expr] = result
        return result

    def calls_to(self, *qualnames: str) -> Iterator[ast.Call]:
        """Calls whose callee resolves to one of ``qualnames``."""
        wanted, last_parts = _targets(qualnames)
        by_attr, by_name = self.calls_by_attr, self.calls_by_name
        wanted_parts = last_parts.keys()
        for part in sorted((wanted_parts & by_attr.keys()) | (wanted_parts & by_name.keys())):
            for call in (*by_attr.get(part, ()), *by_name.get(part, ())):
                if self.qualname(call.func) in wanted:
                    yield call
        # Calls through an alias whose last part differs (from x import y as z).
        for _node, alias, qual in self.imports:
            if alias.asname and qual and canonical(qual) in wanted:
                for call in by_name.get(alias.asname, ()):
                    if alias.asname not in last_parts and self.qualname(call.func) in wanted:
                        yield call

    def references_to(self, *qualnames: str) -> Iterator[ast.Name | ast.Attribute]:
        """Loads of a name or attribute that resolves to one of ``qualnames``."""
        wanted, last_parts = _targets(qualnames)
        attributes = self.attributes
        for part in sorted(last_parts.keys() & attributes.keys()):
            for attr in attributes[part]:
                if self.qualname(attr) in last_parts[part]:
                    yield attr
        for _node, alias, qual in self.imports:
            if qual and canonical(qual) in wanted:
                name = alias.asname or alias.name.split(".")[0]
                for ref in self.names.get(name, ()):
                    if self.qualname(ref) in wanted:
                        yield ref

    def torch_imported(self) -> bool:
        """Whether the file imports ``torch`` or one of its submodules (anywhere in it)."""
        return any(
            qual and (qual == "torch" or qual.startswith("torch.")) for _n, _a, qual in self.imports
        )

    # ---------------------------------------------------------------- local definitions
    def local_function(self, func: ast.expr) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The function defined in this file that a call's callee names, if any."""
        if isinstance(func, ast.Name):
            binding = self.lookup(func.id, func)
            if binding is not None and binding.how == "def":
                node = binding.node
                if isinstance(node, FUNCTION_NODES):
                    return node
        return None

    # ---------------------------------------------------------------- across modules --
    def owner(self, node: ast.AST) -> Semantic:
        """The facts of the module ``node`` belongs to: these, or (for a node of another module
        of the project, reached through ``definition``) that module's."""
        if self.project is None or node is self.tree or node in self.parents:
            return self
        return self.project.owner(node) or self

    def definition(self, expr: ast.AST, _depth: int = 0) -> tuple[Semantic, ast.AST] | None:
        """Where the function, class or module that a name (or ``module.name``) refers to is
        defined: in this file, or through ``project`` in another module of the project. Gives
        the facts of the defining module with the ``def``/``class`` node (the module's tree for
        a module, the assigned name for a module-level value)."""
        if _depth > 8:
            return None
        if type(expr) is ast.Name:
            # A name stands for what its binding stands for: kept once per binding (by the
            # binding's node), not once per read of the name.
            lookups: dict[object, Any] = self._lookups
            # ``lookup``'s own key for a read (a node of another module is never one here)
            binding = lookups.get(expr, _UNKNOWN)
            if binding is _UNKNOWN:
                binding = self.lookup(expr.id, expr)
            if binding is None:
                return None
            if binding.how in ("def", "class"):
                return self, binding.node
            if binding.how != "import" or self.project is None:
                return None
            key = binding.node
            if key in self._definitions:
                return self._definitions[key]
            self._definitions[key] = None  # recursion guard
            found = self.binding_definition(binding)
            self._definitions[key] = found
            return found
        if type(expr) is not ast.Attribute:
            return None
        if expr in self._definitions:
            return self._definitions[expr]
        assert isinstance(expr, ast.Attribute)
        found = None
        base = self.definition(expr.value, _depth + 1)
        if base is not None and isinstance(base[1], ast.Module):
            self._definitions[expr] = None  # recursion guard
            other = base[0]
            bindings = other.scopes[other.tree].bindings.get(expr.attr)
            if bindings:
                found = other.binding_definition(bindings[-1])
        if found is None:
            found = self._submodule(expr)
            if found is None and base is None:
                return None  # not kept: asked again, the answer is as quick to find
        self._definitions[expr] = found
        return found

    def _submodule(self, expr: ast.Attribute) -> tuple[Semantic, ast.AST] | None:
        """``onmt.model_builder`` after ``import onmt.model_builder``: the submodule the file
        imports by its dotted name (its package need not import it)."""
        if self.project is None:
            return None
        prefixes = self.memo.get("imported-dotted")
        if not isinstance(prefixes, frozenset):
            parts = [
                alias.name.split(".")
                for stmt, alias, _qual in self.imports
                if isinstance(stmt, ast.Import) and alias.asname is None and "." in alias.name
            ]
            prefixes = frozenset(".".join(p[:i]) for p in parts for i in range(2, len(p) + 1))
            self.memo["imported-dotted"] = prefixes
        name = dotted(expr) if prefixes else None
        if name is None or name not in prefixes:
            return None
        module = self.project.imported_module(self, name)
        return None if module is None else (module, module.tree)

    def binding_definition(self, binding: Binding) -> tuple[Semantic, ast.AST] | None:
        """The definition a binding stands for: its own ``def``/``class``, or what an import of
        a project module names."""
        if binding.how in ("def", "class"):
            return self, binding.node
        if binding.how == "import" and self.project is not None:
            return self.project.resolve(self, binding)
        return None

    def function_def(
        self, func: ast.AST
    ) -> tuple[Semantic, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        """The function (of this file or another project module) a callee names."""
        found = self.definition(func)
        if found is not None and isinstance(found[1], FUNCTION_NODES):
            return found[0], found[1]
        return None

    def class_def(self, expr: ast.AST) -> tuple[Semantic, ast.ClassDef] | None:
        """The class (of this file or another project module) ``expr`` names."""
        found = self.definition(expr)
        if found is not None and isinstance(found[1], ast.ClassDef):
            return found[0], found[1]
        return None

    def local_class(self, expr: ast.expr) -> ast.ClassDef | None:
        """The class defined in this file that ``expr`` names, if any."""
        if isinstance(expr, ast.Name):
            binding = self.lookup(expr.id, expr)
            if (
                binding is not None
                and binding.how == "class"
                and isinstance(binding.node, ast.ClassDef)
            ):
                return binding.node
        return None

    def returns(self, func: ast.AST) -> list[ast.expr]:
        """The values ``func`` returns (``return x`` statements, not in nested functions)."""
        out: list[ast.expr] = []
        for node in self.walk(func):
            if isinstance(node, ast.Return) and node.value is not None:
                out.append(node.value)
        return out

    def calls_from_project(self, func: ast.AST) -> list[tuple[Semantic, ast.Call]]:
        """The calls of a function or class of this module's top level that the project's
        other modules make (by name or ``module.name``), with the facts of the calling
        module."""
        if self.project is None or self.path is None:
            return []
        if not isinstance(func, (*FUNCTION_NODES, ast.ClassDef)) or func not in self.tree.body:
            return []  # (a function or class of the module's top level)
        key = ("calls-from-project", func)
        known = self.memo.get(key)
        if isinstance(known, list):
            return known
        found: list[tuple[Semantic, ast.Call]] = []
        for module in self.project.calling(self.path, func.name):
            other: Semantic = module.sem
            if other is self:
                continue
            for call in (
                *other.calls_by_name.get(func.name, ()),
                *other.calls_by_attr.get(func.name, ()),
            ):
                defined = other.definition(call.func)
                # (the checked file's own tree, or the project's parse of the same file)
                if defined is not None and (
                    defined[1] is func
                    or (
                        defined[0].path == self.path
                        and isinstance(defined[1], type(func))
                        and _pos(defined[1]) == _pos(func)
                    )
                ):
                    found.append((other, call))
        self.memo[key] = found
        return found

    def unpacked_values(self, binding: Binding) -> list[ast.expr] | None:
        """What a name bound by tuple unpacking may hold: for ``a, b = x, y`` the element at
        its position; for ``model, opt = build(...)`` that element of every tuple the function
        (of this file or another project module) returns. None when it cannot be read: a
        starred target or element, a return that is not a tuple long enough, an unknown
        callee."""
        value, index = binding.value, binding.index
        if index is None or value is None or binding.how != "assign":
            return None
        if isinstance(value, ast.Tuple | ast.List):
            elements: list[ast.expr] | None = _elements(value, index)
            return elements
        if not isinstance(value, ast.Call):
            return None
        defined = self.function_def(value.func)
        if defined is None:
            return None
        out: list[ast.expr] = []
        for returned in defined[0].returns(defined[1]):
            found = _elements(returned, index)
            if found is None:
                return None
            out += found
        return out or None

    def class_bases(self, cls: ast.ClassDef, _depth: int = 0) -> set[str]:
        """Qualified names of a class's bases, following classes defined in this file and in
        the project's other modules."""
        key = ("class-bases", cls)
        if _depth == 0:
            known = self.memo.get(key)
            if known is not None:
                return set(known)  # type: ignore[call-overload]
        out: set[str] = set()
        if _depth > 10:
            return out
        foreign = False
        for base in cls.bases:
            if isinstance(base, ast.Subscript):
                base = base.value
            qual = self.qualname(base)
            if qual:
                out.add(qual)
            defined = self.class_def(base) if isinstance(base, ast.Name | ast.Attribute) else None
            if defined is not None and defined[1] is not cls:
                out |= defined[0].class_bases(defined[1], _depth + 1)
                foreign = foreign or defined[0] is not self
        if _depth == 0 and not foreign:  # another module's may change without this one
            self.memo[key] = frozenset(out)
        return out

    # ---------------------------------------------------------------- control flow ---
    def enclosing_withs(self, node: ast.AST) -> Iterator[ast.With | ast.AsyncWith]:
        """``with`` statements whose body contains ``node``, innermost first, same function."""
        child: ast.AST = node
        for anc in self.ancestors(node):
            if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
                return
            if isinstance(anc, ast.With | ast.AsyncWith) and child in anc.body:
                yield anc
            child = anc

    def exclusive_branches(self, a: ast.AST, b: ast.AST) -> bool:
        """Whether ``a`` and ``b`` sit in different branches of one ``if`` (or conditional
        expression, or ``match``), so that one run never executes both."""
        path: dict[ast.AST, ast.AST] = {}  # ancestor of a -> its child on the way to a
        child = a
        for anc in self.ancestors(a):
            path[anc] = child
            child = anc
        child = b
        for anc in self.ancestors(b):
            if anc in path:
                mine, other = path[anc], child
                if isinstance(anc, ast.If | ast.IfExp):
                    return (
                        mine is not anc.test
                        and other is not anc.test
                        and _in_field(anc, "orelse", mine) != _in_field(anc, "orelse", other)
                    )
                return (
                    isinstance(anc, ast.Match)
                    and mine is not other
                    and mine in anc.cases
                    and other in anc.cases
                )
            child = anc
        return False


def _in_field(node: ast.AST, name: str, child: ast.AST) -> bool:
    value = getattr(node, name, None)
    return child is value or (isinstance(value, list) and any(c is child for c in value))


def is_main_guard(stmt: ast.AST) -> bool:
    """``if __name__ == "__main__":`` (either operand order, possibly ``and``-ed with more)."""
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for item in tests:
        if isinstance(item, ast.Compare) and len(item.ops) == 1 and isinstance(item.ops[0], ast.Eq):
            sides = [item.left, item.comparators[0]]
            if any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
                isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
            ):
                return True
    return False


def terminal_name(expr: ast.AST) -> str | None:
    """``loader`` for ``loader``, ``self.train_loader`` -> ``train_loader``."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def dotted(expr: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def argument(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    """The value passed for parameter ``name`` (by keyword, or at ``position`` when given)."""
    kw = keyword(call, name)
    if kw is not None:
        return kw.value
    if (
        position is not None
        and len(call.args) > position
        and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1])
    ):
        return call.args[position]
    return None


def has_star_kwargs(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords)


def is_true(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True


def is_false(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False


def is_none(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def int_literal(expr: ast.AST | None) -> int | None:
    """The value of an integer literal (``3``, ``-1``); None for anything else."""
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if (
        isinstance(expr, ast.UnaryOp)
        and isinstance(expr.op, ast.USub)
        and isinstance(expr.operand, ast.Constant)
        and type(expr.operand.value) is int
    ):
        return -expr.operand.value
    return None


def _catches(handler: ast.ExceptHandler, errors: Iterable[str]) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in errors for n in names)


def _tests_version(test: ast.expr) -> bool:
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("hasattr", "getattr")
        ):
            return True
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if isinstance(name, str) and "version" in name.lower():
            return True
    return False


def _elements(value: ast.expr, index: int) -> list[ast.expr] | None:
    """The element at ``index`` of a literal tuple or list without starred elements."""
    if not isinstance(value, ast.Tuple | ast.List) or index >= len(value.elts):
        return None
    if any(isinstance(e, ast.Starred) for e in value.elts):
        return None
    return [value.elts[index]]
