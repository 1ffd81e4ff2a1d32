from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, fixes
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Pos, Text
from ..core.semantic import FUNCTION_NODES, is_main_guard
from .base import Invalid, Rule, Valid

# Calls that start worker processes as soon as they run.
_PROCESS_STARTERS = frozenset(
    {
        "multiprocessing.Pool",
        "multiprocessing.pool.Pool",
        "torch.multiprocessing.Pool",
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
    }
)
_PROCESS_CLASSES = frozenset({"multiprocessing.Process", "torch.multiprocessing.Process"})
_MAX_DEPTH = 8
Func = ast.FunctionDef | ast.AsyncFunctionDef


# Words without which no worker process can be started (a cheap first filter).


class DataLoaderWithoutMainGuard(Rule):
    """## What it does
    Checks for scripts whose module-level code starts worker processes outside an
    `if __name__ == "__main__":` block: a `DataLoader` with `num_workers` other than `0`
    that is created and used there (directly, or through a local function called there), or a
    `multiprocessing` / `torch.multiprocessing` start (`Process(...).start()`, `Pool(...)`,
    `mp.spawn(...)`).

    ## Why is this bad?
    With the `spawn` start method, the default on Windows and macOS, every worker process
    starts a fresh interpreter and imports your script. Unguarded module-level code then runs
    again in each worker, creates the loader again and tries to start workers of its own,
    which fails with `RuntimeError: An attempt has been made to start a new process before the
    current process has finished its bootstrapping phase.` The same script works on Linux
    (`fork`), so the bug shows up only when someone else runs it. Notebooks are not checked:
    their code is not re-imported by workers.

    The guide mentions the guard for Windows only; the same failure happens on macOS, where
    `spawn` is the default since Python 3.8, and on Linux with `forkserver`, which also
    re-imports the script in its workers and is the default start method since Python 3.14.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(torch.randn(100, 3))
    loader = DataLoader(dataset, batch_size=10, num_workers=4)
    for (batch,) in loader:
        print(batch.shape)
    ```

    ## Use instead
    ```python
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def main():
        dataset = TensorDataset(torch.randn(100, 3))
        loader = DataLoader(dataset, batch_size=10, num_workers=4)
        for (batch,) in loader:
            print(batch.shape)


    if __name__ == "__main__":
        main()
    ```

    ## Fix safety
    The fix moves the executable statements after the last top-level import, `def` or
    `class` into `def main():` and calls it under `if __name__ == "__main__":`; names those
    statements assign and functions above read are declared `global` in `main`. The
    alternative fix indents the same statements under `if __name__ == "__main__":`. Both are
    unsafe: code that imports the file no longer runs those statements or gets those names,
    and with `main()` the other names become local. No fix is offered when the offending
    statement comes before a later import, `def` or `class`.

    ## References
    - [Multiprocessing best practices: the main guard](https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods)
    - [`torch.utils.data.DataLoader`: platform-specific behaviours](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    """

    code = "TDR301"
    name = "dataloader-without-main-guard"
    fix_safety = Applicability.UNSAFE
    notebooks = False

    VALID = (
        # Already guarded.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def main():\n    loader = DataLoader(ds, num_workers=4)\n    for b in loader:\n"
        "        pass\n"
        'if __name__ == "__main__":\n    main()\n',
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "if __name__ == '__main__':\n    for b in DataLoader(ds, num_workers=2):\n        pass\n",
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "if '__main__' == __name__ and True:\n    loader = DataLoader(ds, num_workers=2)\n"
        "    list(loader)\n",
        # No workers: nothing is spawned.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, batch_size=4)\nfor b in loader:\n    pass\n",
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, num_workers=0)\nfor b in loader:\n    pass\n",
        "import torch\nfrom torch.utils.data import DataLoader\nWORKERS = 0\n"
        "loader = DataLoader(ds, num_workers=WORKERS)\nfor b in loader:\n    pass\n",
        # Unknown keyword arguments.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, **cfg)\nfor b in loader:\n    pass\n",
        # A loader defined at module level but only used from the guarded main.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, num_workers=4)\n"
        "def main():\n    for b in loader:\n        pass\n"
        "if __name__ == '__main__':\n    main()\n",
        # A helper that only builds and returns the loader, never called at module level.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def make_loader(ds):\n    return DataLoader(ds, num_workers=8)\n",
        # A local class named DataLoader is not torch's.
        "import torch\nclass DataLoader:\n    def __init__(self, ds, num_workers=0):\n"
        "        self.ds = ds\nloader = DataLoader([1], num_workers=4)\nfor b in loader:\n"
        "    pass\n",
        # Threads are not processes.
        "import torch\nfrom multiprocessing.pool import ThreadPool\npool = ThreadPool(4)\n",
        # A function that starts processes but is only called from the guard.
        "import torch\nimport torch.multiprocessing as mp\n"
        "def worker(rank):\n    pass\n"
        "def launch():\n    mp.spawn(worker, nprocs=2)\n"
        "if __name__ == '__main__':\n    launch()\n",
        # Notebooks are not re-imported by workers.
        Valid(
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, num_workers=4)\nfor b in loader:\n    pass\n",
            notebook=True,
        ),
        # `num_workers` passed by position: 0, no worker processes.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, 8, True, None, None, 0)\nfor b in loader:\n    pass\n",
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader, TensorDataset\n"
            "\n"
            "dataset = TensorDataset(torch.randn(100, 3))\n"
            "loader = DataLoader(dataset, batch_size=10, num_workers=4)\n"
            "for (batch,) in loader:\n"
            "    print(batch.shape)\n",
            fixed="import torch\n"
            "from torch.utils.data import DataLoader, TensorDataset\n"
            "\n"
            "def main():\n"
            "    dataset = TensorDataset(torch.randn(100, 3))\n"
            "    loader = DataLoader(dataset, batch_size=10, num_workers=4)\n"
            "    for (batch,) in loader:\n"
            "        print(batch.shape)\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(5,),
        ),
        # The class imported under another name.
        Invalid(
            "from torch.utils.data import DataLoader as Loader\n"
            "for batch in Loader(ds, num_workers=4):\n"
            "    print(batch)\n",
            fixed="from torch.utils.data import DataLoader as Loader\n"
            "def main():\n"
            "    for batch in Loader(ds, num_workers=4):\n"
            "        print(batch)\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(2,),
        ),
        # Aliased import, loader iterated inline, a multi-line string left as it is.
        Invalid(
            "import torch.utils.data as tud\n"
            "HELP = '''usage:\n"
            "  python train.py'''\n"
            "for b in tud.DataLoader(ds, num_workers=2):\n"
            "    print('''batch\n"
            "done''')\n",
            fixed="import torch.utils.data as tud\n"
            "def main():\n"
            "    HELP = '''usage:\n"
            "  python train.py'''\n"
            "    for b in tud.DataLoader(ds, num_workers=2):\n"
            "        print('''batch\n"
            "done''')\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(4,),
        ),
        # A local function that creates and iterates the loader, called at module level; the
        # global it reads is declared global in main().
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def train():\n"
            "    loader = DataLoader(ds, num_workers=args_workers)\n"
            "    for b in loader:\n"
            "        pass\n"
            "ds = list(range(10))\n"
            "train()",
            fixed="import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def train():\n"
            "    loader = DataLoader(ds, num_workers=args_workers)\n"
            "    for b in loader:\n"
            "        pass\n"
            "def main():\n"
            "    global ds\n"
            "    ds = list(range(10))\n"
            "    train()\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()",
            lines=(8,),
        ),
        # A parameter of the same name in a function above is not a global.
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def show(loader):\n"
            "    print(loader)\n"
            "loader = DataLoader(ds, num_workers=2)\n"
            "for b in loader:\n"
            "    show(b)\n",
            fixed="import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def show(loader):\n"
            "    print(loader)\n"
            "def main():\n"
            "    loader = DataLoader(ds, num_workers=2)\n"
            "    for b in loader:\n"
            "        show(b)\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(5,),
        ),
        # Transitively, through two local functions; a torch.multiprocessing start.
        Invalid(
            "import torch.multiprocessing as mp\n"
            "def worker(rank):\n"
            "    pass\n"
            "def launch():\n"
            "    mp.spawn(worker, nprocs=2)\n"
            "def run():\n"
            "    launch()\n"
            "run()\n",
            fixed="import torch.multiprocessing as mp\n"
            "def worker(rank):\n"
            "    pass\n"
            "def launch():\n"
            "    mp.spawn(worker, nprocs=2)\n"
            "def run():\n"
            "    launch()\n"
            "def main():\n"
            "    run()\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(8,),
        ),
        # multiprocessing.Process(...).start() through a name.
        Invalid(
            "import torch\n"
            "from multiprocessing import Process\n"
            "p = Process(target=print)\n"
            "p.start()\n",
            fixed="import torch\n"
            "from multiprocessing import Process\n"
            "def main():\n"
            "    p = Process(target=print)\n"
            "    p.start()\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(4,),
        ),
        # A helper returns the loader; the module iterates it.
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def make_loader():\n"
            "    return DataLoader(ds, 32, True, None, None, 4)\n"
            "loader = make_loader()\n"
            "for b in loader:\n"
            "    pass\n",
            fixed="import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def make_loader():\n"
            "    return DataLoader(ds, 32, True, None, None, 4)\n"
            "def main():\n"
            "    loader = make_loader()\n"
            "    for b in loader:\n"
            "        pass\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(5,),
        ),
        # main() already exists and is called unguarded: the call goes under the guard.
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def main():\n"
            "    for b in DataLoader(ds, num_workers=4):\n"
            "        pass\n"
            "main()\n",
            fixed="import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def main():\n"
            "    for b in DataLoader(ds, num_workers=4):\n"
            "        pass\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(6,),
        ),
        # The offending statement comes before a def: no fix.
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "for b in DataLoader(ds, num_workers=4):\n"
            "    pass\n"
            "def helper():\n"
            "    pass\n",
            fixed=None,
            lines=(3,),
        ),
        # An existing main guard after the offending statement: no fix.
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, num_workers=4)\n"
            "batch = next(iter(loader))\n"
            "if __name__ == '__main__':\n"
            "    print(batch)\n",
            fixed=None,
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        if not _may_start_workers(ctx):
            return
        # The calls each module-level statement runs on import (walked once for both uses).
        running = [
            (top, _walk_running(ctx, top))
            for top in ctx.tree.body
            if not (is_main_guard(top) or isinstance(top, (*FUNCTION_NODES, ast.ClassDef)))
        ]
        reachable = self._reachable_functions(ctx, running)
        reported: set[ast.stmt] = set()
        fix_cache: list[list[Fix]] = []
        for top, calls in running:
            for node in calls:
                found = self._offense(ctx, node, reachable)
                if found is None or top in reported:
                    continue
                reported.add(top)
                where, cause = found
                related = []
                if cause is not None:
                    related.append(
                        ctx.related(
                            cause,
                            Text(
                                "worker processes are started here",
                                "工作进程在这里启动",
                            ),
                        )
                    )
                ctx.report(
                    where,
                    Text(
                        "Worker processes are started by module-level code outside "
                        '`if __name__ == "__main__":`; with the `spawn` start method (Windows, '
                        "macOS) each worker re-runs it and fails",
                        '模块级代码在 `if __name__ == "__main__":` 之外启动了工作进程；使用 `spawn` '
                        "启动方式（Windows、macOS）时每个工作进程都会重新运行它并失败",
                    ),
                    fixes=partial(self._offered, ctx, top, fix_cache),
                    related=related,
                )

    # -- detection -------------------------------------------------------------------------
    def _offense(
        self, ctx: Context, node: ast.AST, reachable: set[ast.AST]
    ) -> tuple[ast.AST, ast.AST | None] | None:
        """(where to report, what starts the workers) for a node of module-level code."""
        if not isinstance(node, ast.Call):
            return None
        if _starts_processes(ctx, node):
            return node, None
        if _is_worker_loader(ctx, node):
            return (node, None) if _used_here(ctx, node, node, reachable) else None
        func = ctx.sem.local_function(node.func)
        if func is None:
            return None
        cause = _function_starts(ctx, func, set())
        if cause is not None:
            return node, cause
        returned = _returned_loader(ctx, func)
        if returned is not None and _used_here(ctx, node, node, reachable):
            return node, returned
        return None

    def _reachable_functions(
        self, ctx: Context, running: list[tuple[ast.stmt, list[ast.Call]]]
    ) -> set[ast.AST]:
        """Local functions called (directly or through each other) by module-level code
        (``running``: the calls of each module-level statement)."""
        seen: set[ast.AST] = set()
        todo: list[ast.AST] = []
        for _top, calls in running:
            todo.extend(_called_functions(ctx, calls))
        while todo:
            func = todo.pop()
            if func in seen:
                continue
            seen.add(func)
            todo.extend(_called_functions(ctx, ctx.sem.walk(func)))
        return seen

    # -- fixes -----------------------------------------------------------------------------
    def _offered(self, ctx: Context, top: ast.stmt, fix_cache: list[list[Fix]]) -> list[Fix]:
        """The fixes of a finding in ``top``: those of the file's script code when ``top`` is
        part of it (built once per file, in ``fix_cache``)."""
        if top not in _trailing_run(ctx):
            return []
        if not fix_cache:
            fix_cache.append(self._fixes(ctx))
        return fix_cache[0]

    def _fixes(self, ctx: Context) -> list[Fix]:
        trailing = _trailing_run(ctx)
        if not trailing or any(is_main_guard(s) for s in trailing):
            return []
        source = ctx.source
        if not fixes.starts_line(source, trailing[0]) or not fixes.ends_line(source, trailing[-1]):
            return []
        out: list[Fix] = []
        main = _main_fix(ctx, trailing)
        if main is not None:
            out.append(
                Fix(
                    Text(
                        'Move the script code into `main()` under `if __name__ == "__main__":`',
                        '把脚本代码移入 `main()`，并在 `if __name__ == "__main__":` 下调用',
                    ),
                    tuple(main),
                    Applicability.UNSAFE,
                )
            )
        guard = fixes.wrap_statements(source, trailing, 'if __name__ == "__main__"')
        if guard is not None:
            out.append(
                Fix(
                    Text(
                        'Indent the script code under `if __name__ == "__main__":`',
                        '把脚本代码缩进到 `if __name__ == "__main__":` 之下',
                    ),
                    tuple(guard),
                    Applicability.UNSAFE,
                )
            )
        return out


# ---- helpers ---------------------------------------------------------------------------------
_STARTER_NAMES = frozenset({"DataLoader", "Process", "Pool", "spawn", "start_processes"})


def _may_start_workers(ctx: Context) -> bool:
    """Whether anything in the file may start worker processes: it calls one of the starters
    by name, or imports one under another name."""
    sem = ctx.sem
    return (
        not _STARTER_NAMES.isdisjoint(sem.calls_by_name)
        or not _STARTER_NAMES.isdisjoint(sem.calls_by_attr)
        or any(alias.name.rsplit(".", 1)[-1] in _STARTER_NAMES for _n, alias, _q in sem.imports)
    )


def _walk_running(ctx: Context, top: ast.stmt) -> list[ast.Call]:
    """Calls in a module-level statement that run on import, in source order: not inside
    nested defs, lambdas or classes, nor under a nested ``if __name__ == "__main__":``."""
    sem = ctx.sem
    calls: list[ast.Call] = []
    guards: list[ast.If] = []
    for node in sem.walk(top):  # nested defs, lambdas and classes are not entered
        kind = type(node)
        if kind is ast.Call:
            calls.append(node)  # type: ignore[arg-type]
        elif kind is ast.If and is_main_guard(node):
            guards.append(node)  # type: ignore[arg-type]
    if guards:
        calls = [
            call
            for call in calls
            if not any(sem.is_inside(call, stmt) for guard in guards for stmt in guard.body)
        ]
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def _called_functions(ctx: Context, nodes: object) -> list[Func]:
    out = []
    for node in nodes:  # type: ignore[attr-defined]
        if isinstance(node, ast.Call):
            func = ctx.sem.local_function(node.func)
            if func is not None:
                out.append(func)
    return out


def _is_worker_loader(ctx: Context, call: ast.Call) -> bool:
    """A ``DataLoader(...)`` whose ``num_workers`` is set and not literally 0."""
    if ctx.qualname(call.func) != arguments.DATALOADER:
        return False
    value = arguments.value(call, arguments.DATALOADER, "num_workers")
    if value is None:
        return False
    return not _is_zero(ctx, value)


def _is_zero(ctx: Context, expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant):
        return bool(expr.value == 0)
    if isinstance(expr, ast.Name):
        binding = ctx.sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        bindings = ctx.sem.scopes[binding.scope].bindings.get(expr.id, [])
        if len(bindings) == 1 and binding.value is not None:
            return isinstance(binding.value, ast.Constant) and binding.value.value == 0
    return False


def _process_start(ctx: Context, call: ast.Call) -> bool:
    """``Process(...).start()`` or ``p.start()`` with ``p = Process(...)``."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr != "start":
        return False
    owner = func.value
    if isinstance(owner, ast.Name):
        binding = ctx.sem.lookup(owner.id, owner)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        owner = binding.value  # type: ignore[assignment]
    return isinstance(owner, ast.Call) and ctx.qualname(owner.func) in _PROCESS_CLASSES


def _starts_processes(ctx: Context, call: ast.Call) -> bool:
    return ctx.qualname(call.func) in _PROCESS_STARTERS or _process_start(ctx, call)


def _function_starts(ctx: Context, func: Func, seen: set[ast.AST]) -> ast.AST | None:
    """The call inside ``func`` (or a local function it calls) that starts worker processes."""
    if func in seen or len(seen) > _MAX_DEPTH:
        return None
    seen.add(func)
    for node in ctx.sem.walk(func):
        if not isinstance(node, ast.Call):
            continue
        if _starts_processes(ctx, node):
            return node
        if _is_worker_loader(ctx, node) and not _only_returned(ctx, node, func):
            return node
        callee = ctx.sem.local_function(node.func)
        if callee is None:
            continue
        inner = _function_starts(ctx, callee, seen)
        if inner is not None:
            return inner
        returned = _returned_loader(ctx, callee)
        if returned is not None and not _only_returned(ctx, node, func):
            return returned
    return None


def _returned_loader(ctx: Context, func: Func) -> ast.Call | None:
    """The worker ``DataLoader(...)`` a local function returns, if any."""
    for node in ctx.sem.walk(func):
        if (
            isinstance(node, ast.Call)
            and _is_worker_loader(ctx, node)
            and _only_returned(ctx, node, func)
        ):
            return node
    return None


def _only_returned(ctx: Context, value: ast.expr, func: Func) -> bool:
    """Whether ``value`` is returned by ``func`` without being used there."""
    parent = ctx.sem.parent(value)
    if isinstance(parent, ast.Return):
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        if isinstance(target, ast.Name):
            loads = [
                n
                for n in ctx.sem.walk(func)
                if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)
            ]
            return bool(loads) and all(isinstance(ctx.sem.parent(n), ast.Return) for n in loads)
    return False


def _used_here(ctx: Context, value: ast.expr, at: ast.AST, reachable: set[ast.AST]) -> bool:
    """Whether a loader made at module level is used by code that runs on import: iterated or
    passed on right there, or bound to a name that running code (or a function it calls) reads."""
    sem = ctx.sem
    parent = sem.parent(value)
    if isinstance(parent, ast.For | ast.Call | ast.keyword | ast.comprehension):
        return True
    if not (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return False
    name = parent.targets[0].id
    start = (parent.lineno, parent.col_offset)
    for load in sem.names.get(name, ()):
        binding = sem.lookup(name, load)
        if binding is None or binding.node is not parent.targets[0]:
            continue
        if sem.runs_on_import(load) and (load.lineno, load.col_offset) > start:
            return True
        func = sem.enclosing_function(load)
        if func is not None and func in reachable:
            return True
    return False


def _trailing_run(ctx: Context) -> list[ast.stmt]:
    """The module-level statements after the last top-level import, def or class."""
    body = ctx.tree.body
    last = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.ClassDef, *FUNCTION_NODES)):
            last = i
    return body[last + 1 :]


def _main_fix(ctx: Context, trailing: list[ast.stmt]) -> list[Edit] | None:
    sem, source = ctx.sem, ctx.source
    module = sem.scopes[sem.tree]
    if "main" in module.bindings:
        return None
    first, last = fixes.block_rows(trailing)
    for stmt in trailing:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return None
            if isinstance(node, ast.Global | ast.Nonlocal):
                return None
    unit = "\t" if any(source.line(r).startswith("\t") for r in range(first, last + 1)) else "    "
    body = fixes.reindent_rows(source, first, last, add=unit)
    if body is None:
        return None
    nl = source.newline
    # Names the moved code assigns and code elsewhere (functions above) reads stay global.
    assigned = {
        b.name
        for bindings in module.bindings.values()
        for b in bindings
        if first <= b.pos[0] <= last
    }
    read_elsewhere = sorted(
        name
        for name in assigned
        if any(
            not first <= n.lineno <= last and _module_binding(ctx, n)
            for n in sem.names.get(name, ())
        )
    )
    header = f"def main():{nl}"
    if read_elsewhere:
        header += f"{unit}global {', '.join(read_elsewhere)}{nl}"
    guard = f'if __name__ == "__main__":{nl}{unit}main()'
    line = source.line(last)
    if line.endswith(("\n", "\r")):
        tail = fixes.insert(Pos(last + 1, 0), f"{nl}{nl}{guard}{nl}")
    else:
        tail = fixes.insert(Pos(last, len(line)), f"{nl}{nl}{nl}{guard}")
    return [fixes.insert(Pos(first, 0), header), *body, tail]


def _module_binding(ctx: Context, name: ast.Name) -> bool:
    """Whether a read of ``name`` refers to a module-level (global) binding."""
    binding = ctx.sem.lookup(name.id, name)
    return binding is not None and binding.scope is ctx.sem.tree
