"""Facts about distributed training, shared by the TDR5xx rules.

Which code runs in every rank of a process group, which statements a rank check guards
(``if rank == 0:``, an early ``return`` on the other ranks, ``@rank_zero_only``), which names
certainly hold a ``DistributedDataParallel``/``DataParallel`` wrapper at a given point, and how
to spell ``torch.distributed`` in new code. All of it is read from ``Semantic`` facts.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from . import fixes, kinds, summaries
from .kinds import MODEL_WRAPPERS
from .model import Edit
from .semantic import FUNCTION_NODES, Semantic, argument, dotted, terminal_name
from .source import Source

if TYPE_CHECKING:
    from .notebook import Notebook

INIT_PROCESS_GROUP = "torch.distributed.init_process_group"
# Collectives: every process of the group must call them, or the others wait forever.
COLLECTIVES = frozenset(
    f"torch.distributed.{name}"
    for name in (
        "barrier",
        "monitored_barrier",
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_to_all",
        "all_to_all_single",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
    )
)
# Names that say "which process is this": rank variables, main-process predicates.
_RANK_NAME = re.compile(
    r"rank|main_proc|is_main|master|primary|global_zero|process_zero|should_save|is_chief|"
    r"leader|^(local_)?gpu(_id)?$",
    re.I,
)
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def mentions_rank(expr: ast.AST | None) -> bool:
    """Whether an expression reads a rank or a main-process predicate: ``rank == 0``,
    ``dist.get_rank() == 0``, ``is_main_process()``, ``local_rank in (-1, 0)``,
    ``accelerator.is_main_process``, ``self.trainer.is_global_zero``."""
    if expr is None:
        return False
    for node in ast.walk(expr):
        name = terminal_name(node)
        if name and _RANK_NAME.search(name):
            return True
    return False


_LAUNCHED = frozenset(
    {INIT_PROCESS_GROUP, "torch.nn.parallel.DistributedDataParallel", "accelerate.Accelerator"}
)


def multi_process(sem: Semantic) -> bool:
    """Whether the file runs as one of several processes on one machine's GPUs: it sets up a
    process group (``init_process_group``), wraps a model in ``DistributedDataParallel``, makes
    an Accelerate ``Accelerator``, or reads the local rank a launcher hands each process
    (``local_rank``, ``LOCAL_RANK``)."""
    cached = sem.memo.get("distributed-multi-process")
    if cached is None:
        cached = (
            any(sem.calls_to(*_LAUNCHED))
            or bool(sem.names.get("local_rank") or sem.attributes.get("local_rank"))
            or any(
                isinstance(n, ast.Constant) and n.value in ("LOCAL_RANK", "--local_rank")
                for call in sem.calls
                for n in (*call.args, *(kw.value for kw in call.keywords))
            )
            or any(
                isinstance(sub := sem.parent(a), ast.Subscript)
                and isinstance(sub.slice, ast.Constant)
                and sub.slice.value == "LOCAL_RANK"
                for a in sem.attributes.get("environ", ())
            )
        )
        sem.memo["distributed-multi-process"] = cached
    return bool(cached)


def _exits(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, _EXITS):
        return True
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and terminal_name(last.value.func) in ("exit", "_exit")
    )


def rank_test(sem: Semantic, test: ast.expr) -> bool:
    """Whether a condition tests the rank (``depends_on_rank``)."""
    return depends_on_rank(sem, test)


def depends_on_rank(sem: Semantic, expr: ast.AST | None, _depth: int = 0) -> bool:
    """Whether a value differs from rank to rank: it reads a rank (``mentions_rank``), or a
    name or attribute the code set from such a value (``args.save_logs = args.logs and
    is_master(args)``; ``for i in self._indices`` after ``self._indices = mapping[rank]``), or
    the result of a function that returns early on some ranks (``if local_rank != 0: return``)."""
    if expr is None:
        return False
    if mentions_rank(expr):
        return True
    if _depth > 3:
        return False
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            binding = sem.lookup(node.id, node)
            if binding is None:
                continue
            value: ast.AST | None = None
            if binding.how == "assign":
                value = binding.value
                if binding.index is not None and isinstance(value, ast.Tuple | ast.List):
                    elements = value.elts  # `path, rank = args.path, args.rank`: its element
                    value = elements[binding.index] if binding.index < len(elements) else None
            elif binding.how == "loop":
                loop = sem.parent(binding.node)
                while isinstance(loop, ast.Tuple | ast.List):
                    loop = sem.parent(loop)
                if isinstance(loop, ast.For | ast.AsyncFor | ast.comprehension):
                    value = loop.iter
            if value is not None and value is not expr:
                if depends_on_rank(sem, value, _depth + 1):
                    return True
                if isinstance(value, ast.Call) and _returns_by_rank(sem, value):
                    return True
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            target = dotted(node)
            if target is None or "." not in target:
                continue
            for assign in _assigns_to(sem).get(target, ()):
                if depends_on_rank(sem, assign.value, _depth + 1):
                    return True
    return False


def _assigns_to(sem: Semantic) -> dict[str, list[ast.Assign]]:
    """The assignments of the file by the dotted names they assign (``args.save_logs``), each
    once, in source order; made once per file."""
    key = "distributed-assigns-to"
    known = sem.memo.get(key)
    if isinstance(known, dict):
        return known
    found: dict[str, list[ast.Assign]] = {}
    for assign in sem.assigns:
        for name in dict.fromkeys(dotted(t) for t in assign.targets):
            if name is not None:
                found.setdefault(name, []).append(assign)
    sem.memo[key] = found
    return found


def _returns_by_rank(sem: Semantic, call: ast.Call) -> bool:
    """A call of a function that returns early on some ranks (``if local_rank != 0: return``):
    its result tells the ranks apart."""
    defined = summaries.called_function(sem, call.func)
    if defined is None:
        return False
    owner, func = defined
    for node in owner.walk(func):
        if isinstance(node, ast.If) and mentions_rank(node.test) and _exits(node.body):
            return isinstance(node.body[-1], ast.Return)
    return False


def _guarded_here(sem: Semantic, node: ast.AST) -> bool:
    """A rank check around ``node`` within its function: an enclosing ``if``/``else`` or
    conditional expression on a rank, or an earlier ``if <rank test>: return``."""
    child: ast.AST = node
    for anc in sem.ancestors(node):
        if isinstance(anc, ast.If | ast.IfExp) and child is not anc.test:
            if rank_test(sem, anc.test):
                return True
        if isinstance(child, ast.stmt):
            try:
                block, index = sem.block_of(child)
            except ValueError:
                block, index = [], 0
            for prev in block[:index]:
                if isinstance(prev, ast.If) and rank_test(sem, prev.test):
                    if _exits(prev.body) or _exits(prev.orelse):
                        return True
        if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            return False
        child = anc
    return False


def callers(sem: Semantic, func: ast.AST) -> list[ast.Call] | None:
    """Calls of a function of this file: by its name, or for a method any ``x.name(...)``
    that is not an imported function (``self.save()``, ``trainer.save()``, not
    ``torch.save()`` nor ``self.plot.save()``). None when a function's name is also used
    other than by calling it (passed to ``mp.spawn``...)."""
    if not isinstance(func, FUNCTION_NODES):
        return None
    cls = sem.parent(func)
    if isinstance(cls, ast.ClassDef):
        return [
            c
            for c in sem.calls_by_attr.get(func.name, ())
            if sem.qualname(c.func) is None and not _other_object(c.func)
        ]
    calls = [c for c in sem.calls_by_name.get(func.name, ()) if sem.local_function(c.func) is func]
    if len(calls) != len(sem.names.get(func.name, ())):
        return None
    return calls


def _other_object(func: ast.expr) -> bool:
    """``self.plot.save``: a method of an object the instance holds, not of the instance."""
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Attribute)
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "self"
    )


def rank_guarded(sem: Semantic, node: ast.AST, _depth: int = 0) -> bool:
    """Whether ``node`` runs only on some ranks: under a rank check in its function, in a
    function named or decorated as main-process-only (``save_on_master``, ``@rank_zero_only``),
    or in a function of this file every call of which is so guarded."""
    if _guarded_here(sem, node):
        return True
    func = sem.enclosing_function(node)
    if func is None or _depth > 3:
        return False
    if _RANK_NAME.search(func.name) or any(mentions_rank(d) for d in func.decorator_list):
        return True
    calls = callers(sem, func)
    if not calls:
        return False
    return all(rank_guarded(sem, c, _depth + 1) for c in calls)


def group_calls(sem: Semantic) -> list[ast.Call]:
    """The calls that show the code around them runs in every process of a group: it sets the
    group up (``init_process_group``), or takes part in a collective (``barrier``,
    ``all_reduce``... outside a rank check: every rank must call it), or calls a function of
    another project module that does either (``utils.init_distributed_mode(args)``,
    ``comm.synchronize()``), as its summary tells."""
    key = "distributed-group-calls"
    known = sem.memo.get(key)
    if isinstance(known, list):
        return known
    found: list[ast.Call] = []
    for call in sem.calls:
        qual = sem.qualname(call.func)
        if qual == INIT_PROCESS_GROUP:
            found.append(call)
        elif qual in COLLECTIVES:
            if not _guarded_here(sem, call):
                found.append(call)
        elif sem.project is not None and not (qual or "").startswith("torch."):
            helper = summaries.called_summary(sem, call.func)
            if helper is None or helper.sem is sem:
                continue
            if INIT_PROCESS_GROUP in helper.qualnames or helper.qualnames & COLLECTIVES:
                if not _guarded_here(sem, call):  # asked last: it reads every enclosing test
                    found.append(call)
    sem.memo[key] = found
    return found


# Calls that choose the process's current CUDA device, and context managers that choose it
# for the code they enter (made without ``with``, they choose nothing).
SET_DEVICE = frozenset({"torch.cuda.set_device", "torch.accelerator.set_device_index"})
DEVICE_CONTEXTS = frozenset({"torch.cuda.device", "torch.accelerator.device_index"})


def nccl_group(sem: Semantic) -> bool:
    """Whether the file sets up a process group on the NCCL backend (a literal ``"nccl"``):
    NCCL needs a GPU of its own in every process."""
    for call in sem.calls_to(INIT_PROCESS_GROUP):
        backend = argument(call, "backend", 0)
        if isinstance(backend, ast.Constant) and backend.value == "nccl":
            return True
    return False


def chooses_cuda_device(sem: Semantic) -> bool:
    """Whether the file chooses the process's current CUDA device: it calls
    ``torch.cuda.set_device`` (``torch.accelerator.set_device_index``) or enters
    ``torch.cuda.device(...)`` (``torch.accelerator.device_index(...)``) in a ``with``, calls a
    function of the project that does either (its summary), or names ``CUDA_VISIBLE_DEVICES``
    (setting the variable per process). Without any of these, a plain ``.cuda()`` means GPU 0
    in every process."""
    key = "distributed-chooses-cuda-device"
    known = sem.memo.get(key)
    if isinstance(known, bool):
        return known
    found = any(
        isinstance(node, ast.Constant) and node.value == "CUDA_VISIBLE_DEVICES"
        for node in ast.walk(sem.tree)
    )
    for call in sem.calls if not found else ():
        qual = sem.qualname(call.func) or ""
        if qual in SET_DEVICE:
            found = True
        elif qual in DEVICE_CONTEXTS:
            found = isinstance(sem.parent(call), ast.withitem)
        elif sem.project is not None and not qual.startswith("torch."):
            helper = summaries.called_summary(sem, call.func)
            found = helper is not None and bool(helper.qualnames & (SET_DEVICE | DEVICE_CONTEXTS))
        if found:
            break
    sem.memo[key] = found
    return found


def joins_group(sem: Semantic, func: ast.AST) -> bool:
    """Whether a function itself sets up the group or takes part in a collective
    (``group_calls``): every rank runs it, so its callers cannot all be rank-checked."""
    return any(sem.enclosing_function(c) is func for c in group_calls(sem))


def rank_functions(sem: Semantic) -> set[ast.AST]:
    """The functions (and the module, for top-level code) that run in a process of a group:
    those that set the group up or take part in its collectives (``group_calls``; also through
    a function of this file that does), the functions they call, and the methods of classes
    whose instances they make or that hold one of them."""
    roots: set[ast.AST] = set()
    for call in group_calls(sem):
        roots.add(sem.enclosing_function(call) or sem.tree)
    if not roots:
        return roots
    calls = {region: _own_calls(sem, region) for region in (*sem.functions, sem.tree)}
    targets: dict[ast.AST, list[tuple[ast.Call, ast.AST | None]]] = {
        region: [(c, _target(sem, c)) for c in region_calls]
        for region, region_calls in calls.items()
    }
    grew = True
    while grew:  # upward: callers of a function that sets the group up set it up too
        new = {
            r
            for r, pairs in targets.items()
            if r not in roots and any(t in roots for _, t in pairs)
        }
        roots |= new
        grew = bool(new)
    found = set(roots)
    todo = list(roots)
    while todo:  # downward: what those functions call runs in the group
        region = todo.pop()
        reached: list[ast.AST] = []
        for call, target in targets.get(region, []):
            if target is not None:
                reached.append(target)
            cls = sem.local_class(call.func)
            if cls is not None:  # an instance made here runs its methods here
                reached.extend(s for s in cls.body if isinstance(s, FUNCTION_NODES))
        owner = sem.parent(region)
        if isinstance(owner, ast.ClassDef):
            reached.extend(s for s in owner.body if isinstance(s, FUNCTION_NODES))
        for item in reached:
            if item not in found:
                found.add(item)
                todo.append(item)
    return found


def _target(sem: Semantic, call: ast.Call) -> ast.AST | None:
    """The function of this file a call runs: ``helper(...)`` or ``self.method(...)``."""
    target = sem.local_function(call.func)
    if target is None and isinstance(call.func, ast.Attribute):
        cls = sem.enclosing_class(call)
        if cls is not None and terminal_name(call.func.value) == "self":
            return next(
                (s for s in cls.body if isinstance(s, FUNCTION_NODES) and s.name == call.func.attr),
                None,
            )
    return target


def _own_calls(sem: Semantic, region: ast.AST) -> list[ast.Call]:
    return [n for n in sem.walk(region) if isinstance(n, ast.Call)]


def in_rank_process(sem: Semantic, node: ast.AST, regions: set[ast.AST]) -> bool:
    """Whether ``node`` runs in every process of a group: in one of ``regions``
    (``rank_functions``); top-level code only after the group was set up above it."""
    func = sem.enclosing_function(node)
    if func is not None:
        return func in regions
    if sem.tree not in regions:
        return False
    pos = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    joined = set(group_calls(sem))
    return any(
        (c.lineno, c.col_offset) < pos
        and sem.enclosing_function(c) is None
        and (c in joined or sem.local_function(c.func) in regions)
        for c in sem.calls
    )


def wrapper_call(sem: Semantic, expr: ast.AST, _depth: int = 0) -> ast.Call | None:
    """The ``DistributedDataParallel(...)``/``DataParallel(...)`` call that ``expr`` certainly
    holds where it is read: the call itself, a name whose latest assignment before the use is
    one and runs on every path to it, or a ``self.attr`` only ever assigned such calls. A call
    of a function of another project module that always returns such a wrapper
    (``model = wrap_ddp(model, rank)``) stands for the wrapper it makes."""
    if isinstance(expr, ast.Call):
        if sem.qualname(expr.func) in MODEL_WRAPPERS:
            return expr
        defined = sem.function_def(expr.func) if sem.project is not None else None
        if defined is None or defined[0] is sem or _depth > 3:
            return None
        owner, func = defined
        returned = owner.returns(func)
        if returned and all(
            isinstance(r, ast.Call | ast.Name) and wrapper_call(owner, r, _depth + 1) is not None
            for r in returned
        ):
            return expr
        return None
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return None
        if not isinstance(binding.value, ast.Call) or binding.pos > (expr.lineno, expr.col_offset):
            return None
        stmt = sem.statement_of(binding.node)
        try:
            block, _ = sem.block_of(stmt)
        except ValueError:
            return None
        # The assignment sits in a block that also holds the use, or every assignment that
        # reaches the use makes a wrapper (each branch of `if gpu: ... else: ...`).
        if any(sem.in_block(node, block) for node in (expr, *sem.ancestors(expr))):
            return wrapper_call(sem, binding.value, _depth)
        return _assigned_wrapper(sem, expr, _depth)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        if expr.value.id == "self":
            calls, other = kinds.constructions(
                sem, expr, lambda c: sem.qualname(c.func) in MODEL_WRAPPERS
            )
            if calls and not other:
                return calls[0]
        return _assigned_wrapper(sem, expr, _depth)
    return None


def _pos(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _assigned_wrapper(sem: Semantic, expr: ast.Name | ast.Attribute, depth: int) -> ast.Call | None:
    """The wrapper a name or ``x.attr`` holds where it is read, from the assignments of its own
    function before the read: going back from the read through the statements of its block and
    of the blocks around it, the first statement that assigns it decides, when it assigns a
    wrapper on every path through it (``self.model = DDP(...)``, or in each branch of ``if
    use_gpu: ... else: ...``). A loop around the read must not assign it after the read."""
    func = sem.enclosing_function(expr)  # None: the module's top level
    target = dotted(expr)
    if target is None:
        return None
    node: ast.AST = sem.statement_of(expr)
    while node is not func:
        if not isinstance(node, ast.stmt):
            return None
        try:
            block, index = sem.block_of(node)
        except ValueError:
            return None
        for prev in reversed(block[:index]):
            found = _assigns(sem, prev, target, depth)
            if found is not None:
                return found if isinstance(found, ast.Call) else None
        owner = sem.parent(node)
        if owner is None:
            return None
        if isinstance(owner, ast.For | ast.AsyncFor | ast.While) and any(
            _assigns(sem, later, target, depth) is not None for later in block[index:]
        ):
            return None  # a later statement of the loop assigns it for the next iteration
        node = owner
    return None


def _assigns(sem: Semantic, stmt: ast.stmt, target: str, depth: int) -> ast.Call | bool | None:
    """What ``stmt`` does to the attribute ``target``: None when it assigns nothing to it, the
    wrapper call when it assigns a wrapper on every path through it, False otherwise."""
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(_is_target(t, target) for t in targets):
            value = stmt.value
            return (wrapper_call(sem, value, depth + 1) if value is not None else None) or False
    if isinstance(stmt, ast.If):
        branches = [_block_assigns(sem, b, target, depth) for b in (stmt.body, stmt.orelse)]
        if all(b is None for b in branches):
            return None
        if all(isinstance(b, ast.Call) for b in branches):
            return min(branches, key=_pos)  # type: ignore[arg-type]
        return False
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return _block_assigns(sem, stmt.body, target, depth)
    for node in sem.walk(stmt):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_target(t, target) for t in targets):
                return False  # assigned in a loop, a `try`, a tuple...: not on every path
        if isinstance(node, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith | ast.NamedExpr):
            bound = (
                node.target
                if isinstance(node, ast.For | ast.AsyncFor | ast.NamedExpr)
                else [i.optional_vars for i in node.items if i.optional_vars is not None]
            )
            if any(_is_target(t, target) for t in (bound if isinstance(bound, list) else [bound])):
                return False
    return None


def _block_assigns(
    sem: Semantic, block: list[ast.stmt], target: str, depth: int
) -> ast.Call | bool | None:
    for stmt in reversed(block):
        found = _assigns(sem, stmt, target, depth)
        if found is not None:
            return found
    return None


def _is_target(node: ast.expr, target: str) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Starred):
        parts = node.elts if isinstance(node, ast.Tuple | ast.List) else [node.value]
        return any(_is_target(e, target) for e in parts)
    return dotted(node) == target


def dist_ref(
    sem: Semantic, source: Source, notebook: Notebook | None = None
) -> tuple[str, list[Edit]] | None:
    """How to call ``get_rank`` in new code: ``dist.get_rank`` through an existing alias of
    ``torch.distributed``, an imported ``get_rank``, ``torch.distributed.get_rank`` through an
    imported ``torch``, else ``dist.get_rank`` plus ``import torch.distributed as dist`` when
    the name ``dist`` is free everywhere. None when none of these is possible."""
    top = sem.scopes[sem.tree].bindings
    for name, bindings in top.items():
        if bindings and all(b.how == "import" for b in bindings):
            quals = {b.qualname for b in bindings}
            if quals == {"torch.distributed"}:
                return f"{name}.get_rank", []
            if quals == {"torch.distributed.get_rank"}:
                return name, []
    for name, bindings in top.items():
        if bindings and all(b.how == "import" and b.qualname == "torch" for b in bindings):
            return f"{name}.distributed.get_rank", []
    if "dist" in sem.names or any("dist" in s.bindings for s in sem.scopes.values()):
        return None
    return "dist.get_rank", fixes.import_edits(
        sem, source, ["import torch.distributed as dist"], notebook
    )
