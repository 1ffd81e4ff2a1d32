"""One pass over a module's ``ast``: scopes, bindings, import aliases, kinds of names, loops.

Every rule asks the same questions (is this name a DataLoader? which loop is the epoch loop? is
gradient tracking off here?), so they are answered here once, and rules stay short.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol


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


def canonical(qualname: str) -> str:
    for prefix, short in _CANONICAL_PREFIXES.items():
        if qualname.startswith(prefix):
            qualname = short + qualname[len(prefix) :]
            break
    if qualname.startswith("torch.nn.") and not qualname.startswith(
        ("torch.nn.functional.", "torch.nn.utils.", "torch.nn.init.", "torch.nn.parallel.")
    ):
        qualname = _NN_SUBMODULE.sub("torch.nn.", qualname)
    return _CANONICAL_EXACT.get(qualname, qualname)


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
MODULE_ONLY_METHODS = frozenset({"parameters", "named_parameters", "eval", "train", "modules"})
_NOT_A_MODULE_NAME = re.compile(r"optim|sched|scaler|^opt$|_opt$|^opt_|dataset|loader", re.I)
_OPTIMIZER_NAME = re.compile(r"(^|_)(opt|optim|optimizer)(_|\d|$)|optimizer", re.I)
_SCHEDULER_NAME = re.compile(r"sched|(^|_)lr(_|$)|warm", re.I)
_LOADER_NAME = re.compile(r"loader|(^|_)dl$", re.I)
_NON_MODEL_NN = frozenset(
    {"Parameter", "ParameterList", "ParameterDict", "Buffer", "UninitializedParameter"}
)

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


@dataclass
class Binding:
    """One place where a name gets a value."""

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


_RECORDED = frozenset(
    {
        ast.Call,
        ast.Attribute,
        ast.Name,
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
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    fields = tuple(f for f in getattr(kind, "_fields", ()) if f not in _NO_CHILD_FIELDS)
    _CHILD_FIELDS[kind] = fields
    return fields


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


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _subtrees(
    order: list[ast.AST], parents: dict[ast.AST, ast.AST]
) -> tuple[dict[ast.AST, int], dict[ast.AST, int]]:
    """Index in ``order`` (a pre-order) and subtree size of each node of ``order``."""
    index = {node: i for i, node in enumerate(order)}
    size = dict.fromkeys(order, 1)
    for node in reversed(order):
        parent = parents.get(node)
        if parent in size:
            size[parent] += size[node]
    return index, size


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
)
_CHUNK_INDEXES = ("calls_by_attr", "calls_by_name", "attributes", "names", "self_attr_values")


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
        # Names read at module level: their scope is the module's, a new object each time.
        self.module_names = [n for n, scope in part.name_scopes.items() if scope is module]
        for name in self.module_names:
            del part.name_scopes[name]

    def subtrees(self) -> tuple[dict[ast.AST, Any], dict[ast.AST, int]]:
        """For each node of the chunk: ``(the chunk's order, its index there)`` and the size
        of its subtree."""
        if self._subtrees is None:
            order = self.part.order
            index, size = _subtrees(order, self.part.parents)
            self._subtrees = {node: (order, i) for node, i in index.items()}, size
        return self._subtrees

    def merge_into(self, sem: Semantic) -> None:
        part, tree = self.part, sem.tree
        module = sem.scopes[tree]
        sem.order.extend(part.order)
        sem.parents.update(part.parents)
        for stmt in self.body:
            sem.parents[stmt] = tree
        sem.scopes.update(part.scopes)
        sem.name_scopes.update(part.name_scopes)
        sem.name_scopes.update(dict.fromkeys(self.module_names, module))
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


class Semantic:
    """Facts about one parsed module, computed in one pass and queried by every rule."""

    def __init__(self, tree: ast.Module) -> None:
        self._setup(tree)
        self._visit_module(tree)

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
        self.self_attr_values: dict[tuple[ast.AST, str], list[ast.expr]] = defaultdict(list)
        self._qual_cache: dict[ast.AST, str | None] = {}
        self.name_scopes: dict[ast.AST, Scope] = {}  # the scope of each name read
        # Facts derived by the core's subject modules (training, data...), computed once per file.
        self.memo: dict[object, object] = {}
        self._function_cache: dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef | None] = {}
        self.order: list[ast.AST] = []  # every node, in source (pre-)order
        self._index: dict[ast.AST, Any] | None = None
        self._size: dict[ast.AST, int] | None = None
        self._kind_cache: dict[int, Kind | None] = {}
        self._evidence: dict[tuple[ast.AST, str], Kind] | None = None
        self._chunks: list[_ChunkFacts] | None = None  # when built from chunks
        self.scopes[tree] = Scope(tree, None)

    # ---------------------------------------------------------------- building ---------
    def _visit_module(self, tree: ast.Module) -> None:
        self._visit([(tree, None, self.scopes[tree])])

    def _visit(self, stack: list[tuple[ast.AST, ast.AST | None, Scope]]) -> None:
        """Walk the subtrees on ``stack``, each entry: (node, parent, scope), in pre-order. This
        is the hot path of the whole linter: keep it free of per-node allocations beyond the
        stack entries."""
        parents = self.parents
        record = self._record
        recorded = _RECORDED
        scope_types = _SCOPE_TYPES
        fields_of = _CHILD_FIELDS
        push = stack.append
        order = self.order
        add = order.append
        while stack:
            node, parent, scope = stack.pop()
            if parent is not None:
                parents[node] = parent
            add(node)
            kind = type(node)
            inner = scope
            if kind in scope_types and parent is not None:
                inner = self._enter_scope(node, scope)
            if kind in recorded:
                record(node, scope, inner)
            fields = fields_of.get(kind)
            if fields is None:
                fields = _child_fields(kind)
            header = inner is not scope
            for name in reversed(fields):
                value = getattr(node, name, None)
                if value is None:
                    continue
                if type(value) is list:
                    for child in reversed(value):
                        if isinstance(child, ast.AST):
                            # Decorators, defaults, bases and annotations: the enclosing scope.
                            if header and self._outside_scope(node, child):
                                push((child, node, scope))
                            else:
                                push((child, node, inner))
                elif isinstance(value, ast.AST):
                    if header and self._outside_scope(node, value):
                        push((value, node, scope))
                    else:
                        push((value, node, inner))

    def _subtrees(self) -> tuple[dict[ast.AST, Any], dict[ast.AST, int]]:
        """Pre-order index and subtree size of every node (computed on first use): a subtree
        is the slice ``order[index : index + size]``. Built from chunks, the index of a node is
        ``(its chunk's order, the index there)``, what the chunk computed once for all the
        versions that reuse it."""
        if self._index is None:
            if self._chunks is None:
                self._index, self._size = _subtrees(self.order, self.parents)
            else:
                index: dict[ast.AST, Any] = {self.tree: (self.order, 0)}
                size: dict[ast.AST, int] = {self.tree: len(self.order)}
                for part in self._chunks:
                    part_index, part_size = part.subtrees()
                    index.update(part_index)
                    size.update(part_size)
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
        if isinstance(node, ast.Call):
            self.calls.append(node)
            func = node.func
            if isinstance(func, ast.Attribute):
                self.calls_by_attr[func.attr].append(node)
            elif isinstance(func, ast.Name):
                self.calls_by_name[func.id].append(node)
        elif isinstance(node, ast.Attribute):
            self.attributes[node.attr].append(node)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.names[node.id].append(node)
                self.name_scopes[node] = scope
        elif isinstance(node, ast.Assign):
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
    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        node_: ast.AST | None = self.parents.get(node)
        while node_ is not None:
            yield node_
            node_ = self.parents.get(node_)

    def statement_of(self, node: ast.AST) -> ast.stmt:
        current: ast.AST = node
        while not isinstance(current, ast.stmt):
            parent = self.parents.get(current)
            if parent is None:
                raise ValueError("node is not inside a statement")
            current = parent
        return current

    def block_of(self, stmt: ast.stmt) -> tuple[list[ast.stmt], int]:
        """The statement list holding ``stmt`` and its index there."""
        parent = self.parents.get(stmt)
        if parent is None:
            raise ValueError("statement has no parent")
        for fld in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(parent, fld, None)
            if isinstance(block, list):
                for i, item in enumerate(block):
                    if item is stmt:
                        return block, i
        raise ValueError("statement not found in its parent")

    def in_version_fallback(self, node: ast.AST, errors: Iterable[str]) -> bool:
        """Whether ``node`` is code for other PyTorch versions: inside an ``except`` handler
        that catches one of ``errors`` (or everything), or in a branch of an ``if`` that tests
        ``hasattr(...)``/``getattr(...)`` or a name containing "version"."""
        child = node
        for anc in self.ancestors(node):
            if isinstance(anc, ast.ExceptHandler) and _catches(anc, errors):
                return True
            if (
                isinstance(anc, ast.If | ast.IfExp)
                and child is not anc.test
                and _tests_version(anc.test)
            ):
                return True
            child = anc
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
        scope = self.name_scopes.get(node)
        if scope is not None:
            return scope
        child = node
        for anc in self.ancestors(node):
            scope = self.scopes.get(anc)
            if scope is not None and not self._outside_scope(anc, child):
                return scope
            child = anc
        return self.scopes[self.tree]

    def walk(self, node: ast.AST, *, into_functions: bool = False) -> Iterator[ast.AST]:
        """Nodes under ``node`` (itself excluded), by default not entering nested defs/classes."""
        stop = () if into_functions else _NESTED_SCOPES
        index, size = self._subtrees()
        start = index.get(node)
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
                before = [b for b in bindings if b.pos <= pos and not self._in_own_value(b, at)]
                return (before or bindings)[-1]
            first = False
            scope = scope.parent
        return None

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
        cached = self._qual_cache.get(expr, ...)
        if cached is not ...:
            return cached
        result: str | None = None
        if isinstance(expr, ast.Name):
            binding = self.lookup(expr.id, expr)
            if binding is not None:
                if binding.how == "import":
                    result = binding.qualname
                elif (
                    binding.how == "assign"
                    and binding.index is None
                    and isinstance(binding.value, ast.Name | ast.Attribute)
                    and binding.scope is self.tree
                ):
                    result = self.qualname(binding.value, _depth + 1)
        elif isinstance(expr, ast.Attribute):
            base = self.qualname(expr.value, _depth + 1)
            if base is not None:
                result = canonical(f"{base}.{expr.attr}")
        self._qual_cache[expr] = result
        return result

    def calls_to(self, *qualnames: str) -> Iterator[ast.Call]:
        """Calls whose callee resolves to one of ``qualnames``."""
        wanted = set(qualnames)
        last_parts = {q.rsplit(".", 1)[-1] for q in wanted}
        for part in last_parts:
            for call in (*self.calls_by_attr.get(part, ()), *self.calls_by_name.get(part, ())):
                if self.qualname(call.func) in wanted:
                    yield call
        # Calls through an alias whose last part differs (from x import y as z).
        for _node, alias, qual in self.imports:
            if alias.asname and qual and canonical(qual) in wanted:
                for call in self.calls_by_name.get(alias.asname, ()):
                    if alias.asname not in last_parts and self.qualname(call.func) in wanted:
                        yield call

    def references_to(self, *qualnames: str) -> Iterator[ast.Name | ast.Attribute]:
        """Loads of a name or attribute that resolves to one of ``qualnames``."""
        wanted = set(qualnames)
        for q in wanted:
            for attr in self.attributes.get(q.rsplit(".", 1)[-1], ()):
                if self.qualname(attr) == q:
                    yield attr
        for _node, alias, qual in self.imports:
            if qual and canonical(qual) in wanted:
                name = alias.asname or alias.name.split(".")[0]
                for ref in self.names.get(name, ()):
                    if self.qualname(ref) in wanted:
                        yield ref

    def torch_imported(self) -> bool:
        return any(
            qual and (qual == "torch" or qual.startswith("torch.")) for _n, _a, qual in self.imports
        )

    # ---------------------------------------------------------------- kinds ------------
    def kind(self, expr: ast.AST | None, _depth: int = 0) -> Kind | None:
        """What a name or expression holds: a module, a DataLoader, an optimizer...

        Decided from constructors, aliases, tuple unpacking, local functions' return values and
        the methods called on a name (``.eval()``, ``.parameters()``).
        """
        if expr is None or _depth > 12:
            return None
        key = id(expr)
        if key in self._kind_cache:
            return self._kind_cache[key]
        self._kind_cache[key] = None  # recursion guard
        result = self._kind(expr, _depth)
        self._kind_cache[key] = result
        return result

    def _kind(self, expr: ast.AST, depth: int) -> Kind | None:
        if isinstance(expr, ast.Name):
            binding = self.lookup(expr.id, expr)
            if binding is None:
                return None
            return self.binding_kind(binding, depth)
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id == "self":
                cls = self.enclosing_class(expr)
                if cls is not None:
                    kinds = {
                        self.kind(v, depth + 1)
                        for v in self.self_attr_values.get((cls, expr.attr), ())
                    }
                    if len(kinds) == 1:
                        return kinds.pop()
                    if not kinds:
                        return self._use_evidence().get((cls, "self." + expr.attr))
            return None
        if isinstance(expr, ast.Call):
            return self._call_kind(expr, depth)
        if isinstance(expr, ast.IfExp):
            a, b = self.kind(expr.body, depth + 1), self.kind(expr.orelse, depth + 1)
            return a if a == b else None
        if isinstance(expr, ast.NamedExpr):
            return self.kind(expr.value, depth + 1)
        return None

    def binding_kind(self, binding: Binding, _depth: int = 0) -> Kind | None:
        """The kind of value a binding holds (from its value, else from how the name is used)."""
        kind = self._binding_value_kind(binding, _depth)
        if kind is None and not (binding.index is None and _plain_data(binding.value)):
            kind = self._use_evidence().get((binding.scope, binding.name))
        return kind

    def argument_kind(self, binding: Binding) -> Kind | None:
        """The kind of a parameter of a function defined in this file, from its call sites:
        ``net`` is a module in ``def evaluate(net, loader)`` when every call
        ``evaluate(model, ...)`` passes a module. None when a call passes something else or
        unknown, or when the function is never called by name."""
        func = binding.scope
        if binding.how != "param" or not isinstance(func, FUNCTION_NODES):
            return None
        args = func.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        kinds: set[Kind | None] = set()
        for call in self.calls_by_name.get(func.name, ()):
            if self.local_function(call.func) is not func:
                continue
            if any(isinstance(a, ast.Starred) for a in call.args) or has_star_kwargs(call):
                return None
            value: ast.expr | None = None
            if binding.name in positional and positional.index(binding.name) < len(call.args):
                value = call.args[positional.index(binding.name)]
            else:
                kw = keyword(call, binding.name)
                value = kw.value if kw is not None else None
            if value is None:
                return None
            kinds.add(self.kind(value))
        return kinds.pop() if len(kinds) == 1 else None

    def _binding_value_kind(self, binding: Binding, depth: int) -> Kind | None:
        if binding.how not in ("assign", "with") or binding.value is None:
            return None
        value = binding.value
        if binding.index is not None:
            return self._element_kind(value, binding.index, depth)
        if binding.how == "with":
            return None
        return self.kind(value, depth + 1)

    def _element_kind(self, value: ast.expr, index: int, depth: int) -> Kind | None:
        if isinstance(value, ast.Tuple | ast.List):
            if index < len(value.elts) and not any(isinstance(e, ast.Starred) for e in value.elts):
                return self.kind(value.elts[index], depth + 1)
            return None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            func = self.local_function(value.func)
            if func is not None:
                kinds = set()
                for ret in self.returns(func):
                    if isinstance(ret, ast.Tuple | ast.List):
                        if index < len(ret.elts):
                            kinds.add(self.kind(ret.elts[index], depth + 1))
                    else:
                        kinds.add(None)
                if len(kinds) == 1:
                    return kinds.pop()
        return None

    def local_function(self, func: ast.expr) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The function defined in this file that a call's callee names, if any."""
        if isinstance(func, ast.Name):
            binding = self.lookup(func.id, func)
            if binding is not None and binding.how == "def":
                node = binding.node
                if isinstance(node, FUNCTION_NODES):
                    return node
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

    def class_bases(self, cls: ast.ClassDef, _depth: int = 0) -> set[str]:
        """Qualified names of a class's bases, following classes defined in this file."""
        out: set[str] = set()
        if _depth > 10:
            return out
        for base in cls.bases:
            if isinstance(base, ast.Subscript):
                base = base.value
            qual = self.qualname(base)
            if qual:
                out.add(qual)
            local = self.local_class(base) if isinstance(base, ast.Name) else None
            if local is not None and local is not cls:
                out |= self.class_bases(local, _depth + 1)
        return out

    def class_kind(self, cls: ast.ClassDef) -> Kind | None:
        for qual in self.class_bases(cls):
            kind = self._constructor_kind(qual)
            if kind is Kind.LOSS:
                return Kind.MODULE
            if kind is not None:
                return kind
            if qual in ("torch.utils.data.Dataset", "torch.utils.data.IterableDataset"):
                return Kind.DATASET
            if qual.endswith(("LightningModule",)):
                return Kind.MODULE
        return None

    def _call_kind(self, call: ast.Call, depth: int) -> Kind | None:
        func = call.func
        qual = self.qualname(func)
        if qual is not None:
            if qual in ("torch.export.export", "torch.onnx.export"):
                return None  # an ExportedProgram / ONNXProgram: it takes a module, is not one
            if qual in MODEL_TAKERS and qual not in MODEL_WRAPPERS:
                first = call.args[0] if call.args else None
                return Kind.MODULE if self.kind(first, depth + 1) is Kind.MODULE else None
            return self._constructor_kind(qual)
        if isinstance(func, ast.Name):
            cls = self.local_class(func)
            if cls is not None:
                return self.class_kind(cls)
            local = self.local_function(func)
            if local is not None:
                kinds = {self.kind(r, depth + 1) for r in self.returns(local)}
                return kinds.pop() if len(kinds) == 1 else None
            return None
        if isinstance(func, ast.Attribute):
            if func.attr in MODULE_SELF_METHODS and self.kind(func.value, depth + 1) is Kind.MODULE:
                return Kind.MODULE
            if func.attr == "from_pretrained":
                owner = self.qualname(func.value) or ""
                last = owner.rsplit(".", 1)[-1]
                if owner.startswith("transformers.") and last.startswith("AutoModel"):
                    return Kind.MODULE
        return None

    @staticmethod
    def _constructor_kind(qual: str) -> Kind | None:
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

    def _use_evidence(self) -> dict[tuple[ast.AST, str], Kind]:
        """Kinds learned from how a name is used: ``m.eval()``, ``torch.compile(m)``..."""
        if self._evidence is not None:
            return self._evidence
        evidence: dict[tuple[ast.AST, str], Kind] = {}
        self._evidence = evidence

        def mark(expr: ast.expr) -> None:
            if isinstance(expr, ast.Name):
                if _NOT_A_MODULE_NAME.search(expr.id):
                    return
                binding = self.lookup(expr.id, expr)
                if binding is not None and binding.how in ("assign", "param", "with", "loop"):
                    evidence[(binding.scope, binding.name)] = Kind.MODULE
            elif (
                isinstance(expr, ast.Attribute)
                and isinstance(expr.value, ast.Name)
                and expr.value.id == "self"
                and not _NOT_A_MODULE_NAME.search(expr.attr)
            ):
                cls = self.enclosing_class(expr)
                if cls is not None:
                    evidence[(cls, "self." + expr.attr)] = Kind.MODULE

        for method in MODULE_ONLY_METHODS:
            for call in self.calls_by_attr.get(method, ()):
                if method in ("eval", "train") and (call.args or call.keywords):
                    if method == "eval" or not (
                        len(call.args) == 1 and isinstance(call.args[0], ast.Constant)
                    ):
                        continue
                assert isinstance(call.func, ast.Attribute)
                mark(call.func.value)
        for call in self.calls_by_attr.get("state_dict", ()):
            assert isinstance(call.func, ast.Attribute)
            mark(call.func.value)
        for call in self.calls_to(*MODEL_TAKERS):
            if call.args:
                mark(call.args[0])
        return evidence

    def constructions(
        self, expr: ast.AST | None, wanted: Callable[[ast.Call], bool], _depth: int = 0
    ) -> tuple[list[ast.Call], bool]:
        """The calls matching ``wanted`` whose result ``expr`` may hold (inline, through the
        assignments of a name or of ``self.attr`` in this file, either branch of ``a if c else
        b``), and whether ``expr`` may also hold something else (``None``, a parameter...)."""
        if expr is None or _depth > 6:
            return [], True
        if isinstance(expr, ast.Call):
            return ([expr], False) if wanted(expr) else ([], True)
        if isinstance(expr, ast.IfExp | ast.NamedExpr):
            parts = [expr.body, expr.orelse] if isinstance(expr, ast.IfExp) else [expr.value]
            found: list[ast.Call] = []
            other = False
            for part in parts:
                calls, maybe = self.constructions(part, wanted, _depth + 1)
                found += calls
                other = other or maybe
            return found, other
        values: list[ast.expr | None] = []
        if isinstance(expr, ast.Name):
            binding = self.lookup(expr.id, expr)
            if binding is None:
                return [], True
            scope = self.scopes.get(binding.scope)
            same = scope.bindings.get(expr.id, []) if scope is not None else [binding]
            values = [b.value if b.how == "assign" and b.index is None else None for b in same]
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            cls = self.enclosing_class(expr) if expr.value.id == "self" else None
            if cls is None:
                return [], True
            values = list(self.self_attr_values.get((cls, expr.attr), [])) or [None]
        else:
            return [], True
        found, other = [], False
        for value in values:
            calls, maybe = self.constructions(value, wanted, _depth + 1)
            found += calls
            other = other or maybe
        return found, other

    def is_loader(self, expr: ast.AST) -> bool:
        """A DataLoader by construction, or (when its kind is unknown) by its name."""
        kind = self.kind(expr)
        if kind is not None:
            return kind is Kind.LOADER
        name = terminal_name(expr)
        return bool(name) and bool(_LOADER_NAME.search(name or ""))

    def constructor_call(self, expr: ast.AST) -> ast.Call | None:
        values: list[ast.expr] = []
        if isinstance(expr, ast.Name):
            binding = self.lookup(expr.id, expr)
            if binding is not None and binding.how == "assign" and binding.index is None:
                if binding.value is not None:
                    values.append(binding.value)
        elif (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
        ):
            cls = self.enclosing_class(expr)
            if cls is not None:
                values.extend(self.self_attr_values.get((cls, expr.attr), ()))
        elif isinstance(expr, ast.Call):
            values.append(expr)
        calls = [v for v in values if isinstance(v, ast.Call)]
        return calls[0] if len(calls) == 1 and len(values) == 1 else None

    def is_optimizer(self, expr: ast.AST) -> bool:
        """An optimizer by construction, or (kind unknown) by its name (``optimizer``, ``opt``)."""
        kind = self.kind(expr)
        if kind is not None:
            return kind is Kind.OPTIMIZER
        name = terminal_name(expr) or ""
        return bool(_OPTIMIZER_NAME.search(name)) and not _SCHEDULER_NAME.search(name)

    def is_scheduler(self, expr: ast.AST) -> bool:
        """A learning-rate scheduler by construction, or (kind unknown) by its name."""
        kind = self.kind(expr)
        if kind is not None:
            return kind is Kind.SCHEDULER
        return bool(_SCHEDULER_NAME.search(terminal_name(expr) or ""))

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


# Methods whose result is plain data (a dict, a number, a list), never a module.
_DATA_METHODS = frozenset(
    {"state_dict", "item", "tolist", "numpy", "keys", "values", "items", "copy", "detach"}
)


def _plain_data(value: ast.expr | None) -> bool:
    """A value that cannot be a module: a literal, or a method call returning plain data."""
    if isinstance(value, ast.Constant | ast.Dict | ast.List | ast.Tuple | ast.Set | ast.JoinedStr):
        return True
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _DATA_METHODS
    )


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
