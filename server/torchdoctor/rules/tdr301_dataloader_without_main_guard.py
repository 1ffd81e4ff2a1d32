from __future__ import annotations

import ast
from functools import partial

from ..core import main_guard, workers
from ..core.context import Context
from ..core.model import Applicability, Fix, Text
from ..core.semantic import FUNCTION_NODES, is_main_guard
from .base import Invalid, Rule, Valid

# A project whose experiment classes (picked in either branch of an ``if``) iterate loaders
# that a helper of a third module builds with workers.
_FACTORY_PY = (
    "from torch.utils.data import DataLoader\n"
    "def make_loader(ds, workers):\n"
    "    return DataLoader(ds, batch_size=8, num_workers=workers)\n"
)
_EXP_PY = (
    "from factory import make_loader\n"
    "class ExpA:\n"
    "    def _data(self):\n"
    "        return make_loader(list(range(8)), 4)\n"
    "    def describe(self):\n"
    "        print('experiment A')\n"
    "    def train(self):\n"
    "        for batch in self._data():\n"
    "            print(batch)\n"
    "class ExpB(ExpA):\n"
    "    pass\n"
)
_RUN_HEAD = "import torch\nfrom exp import ExpA, ExpB\n"


class DataLoaderWithoutMainGuard(Rule):
    """## What it does
    Checks for scripts whose module-level code starts worker processes outside an
    `if __name__ == "__main__":` block: a `DataLoader` with `num_workers` other than `0`
    that is created and iterated there, or a `multiprocessing` / `torch.multiprocessing` start
    (`Process(...).start()`, `Pool(...)`, `mp.spawn(...)`). The start may happen in a function
    called there: of this file or of another module of the project, a method of a project class
    (`exp = Exp(args); exp.train()`), or a helper that builds the loader; a loader that a
    constructor keeps on `self` counts where a method iterates it. `num_workers` counts
    when given in a dict spread with `**kwargs` in either branch of a condition; reading the
    loader (`len(loader)`) starts no worker and is not reported.

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
        # `num_workers=` passed by position: 0, no worker processes.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, 8, True, None, None, 0)\nfor b in loader:\n    pass\n",
        # The spread dict sets no `num_workers` in either branch.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "kwargs = {'pin_memory': True} if torch.cuda.is_available() else {}\n"
        "loader = DataLoader(ds, batch_size=8, **kwargs)\nfor b in loader:\n    pass\n",
        # Module-level code only reads the loader's length; the guarded main iterates it.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, num_workers=4)\nsteps = len(loader)\n"
        "def main():\n    for b in loader:\n        pass\n"
        "if __name__ == '__main__':\n    main()\n",
        # The constructor only keeps the loader on `self`; the guarded main iterates it.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "class Trainer:\n    def __init__(self, ds):\n"
        "        self.loader = DataLoader(ds, num_workers=4)\n"
        "        self.steps = len(self.loader)\n"
        "    def fit(self):\n        for b in self.loader:\n            pass\n"
        "trainer = Trainer(list(range(8)))\n"
        "if __name__ == '__main__':\n    trainer.fit()\n",
        # Another module's experiment class, whose called method starts nothing.
        Valid(
            _RUN_HEAD + "Exp = ExpA if torch.cuda.is_available() else ExpB\n"
            "exp = Exp()\nexp.describe()\n",
            files=(("exp.py", _EXP_PY), ("factory.py", _FACTORY_PY)),
        ),
        # The experiment trains only under the guard.
        Valid(
            _RUN_HEAD + "if __name__ == '__main__':\n    ExpB().train()\n",
            files=(("exp.py", _EXP_PY), ("factory.py", _FACTORY_PY)),
        ),
    )
    INVALID = (
        # `num_workers` in the dict that `**kwargs` spreads, in one branch of a conditional.
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "kwargs = {'num_workers': 1} if torch.cuda.is_available() else {}\n"
            "loader = DataLoader(ds, batch_size=8, **kwargs)\n"
            "for b in loader:\n"
            "    pass\n",
            fixed="import torch\n"
            "from torch.utils.data import DataLoader\n"
            "def main():\n"
            "    kwargs = {'num_workers': 1} if torch.cuda.is_available() else {}\n"
            "    loader = DataLoader(ds, batch_size=8, **kwargs)\n"
            "    for b in loader:\n"
            "        pass\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(4,),
        ),
        # The constructor keeps the loader on `self`; the method called at module level
        # iterates it.
        Invalid(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.loader = DataLoader(ds, num_workers=4)\n"
            "    def fit(self):\n"
            "        for b in self.loader:\n"
            "            pass\n"
            "trainer = Trainer(list(range(8)))\n"
            "trainer.fit()\n",
            fixed="import torch\n"
            "from torch.utils.data import DataLoader\n"
            "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.loader = DataLoader(ds, num_workers=4)\n"
            "    def fit(self):\n"
            "        for b in self.loader:\n"
            "            pass\n"
            "def main():\n"
            "    trainer = Trainer(list(range(8)))\n"
            "    trainer.fit()\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            lines=(10,),
        ),
        # A method of another module's class (the class bound in either branch of an `if`)
        # iterates a loader that a helper of a third module builds with workers.
        Invalid(
            _RUN_HEAD + "if torch.cuda.is_available():\n"
            "    Exp = ExpA\n"
            "else:\n"
            "    Exp = ExpB\n"
            "exp = Exp()\n"
            "exp.train()\n",
            fixed=_RUN_HEAD + "def main():\n"
            "    if torch.cuda.is_available():\n"
            "        Exp = ExpA\n"
            "    else:\n"
            "        Exp = ExpB\n"
            "    exp = Exp()\n"
            "    exp.train()\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    main()\n",
            files=(("exp.py", _EXP_PY), ("factory.py", _FACTORY_PY)),
            lines=(8,),
        ),
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
        sem = ctx.sem
        if not workers.may_start_workers(sem):
            return
        # The calls each module-level statement runs on import (walked once for both uses).
        running = [
            (top, workers.running_calls(sem, top))
            for top in ctx.tree.body
            if not (is_main_guard(top) or isinstance(top, (*FUNCTION_NODES, ast.ClassDef)))
        ]
        reachable = workers.reachable_functions(sem, (c for _top, calls in running for c in calls))
        reported: set[ast.stmt] = set()
        fix_cache: list[list[Fix]] = []
        for top, calls in running:
            for node in calls:
                found = workers.offense(sem, node, reachable)
                if found is None or top in reported:
                    continue
                reported.add(top)
                where, cause = found
                related = []
                if cause is not None:
                    related.append(
                        ctx.related(
                            cause,
                            Text("worker processes are started here", "工作进程在这里启动"),
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

    def _offered(self, ctx: Context, top: ast.stmt, fix_cache: list[list[Fix]]) -> list[Fix]:
        """The fixes of a finding in ``top``: those of the file's script code when ``top`` is
        part of it (built once per file, in ``fix_cache``)."""
        trailing = main_guard.trailing_run(ctx.tree)
        if top not in trailing:
            return []
        if not fix_cache:
            fix_cache.append(self._fixes(ctx, trailing))
        return fix_cache[0]

    def _fixes(self, ctx: Context, trailing: list[ast.stmt]) -> list[Fix]:
        if not main_guard.movable(ctx.source, trailing):
            return []
        out: list[Fix] = []
        main = main_guard.main_edits(ctx.sem, ctx.source, trailing)
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
        guard = main_guard.guard_edits(ctx.source, trailing)
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
