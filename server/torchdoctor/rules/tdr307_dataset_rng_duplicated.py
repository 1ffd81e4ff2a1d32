from __future__ import annotations

import ast
from functools import partial

from ..core import data, fixes
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule

# RNG constructors -> how the worker_init_fn reseeds the copy (``{rng}`` is the attribute,
# ``{ctor}`` the constructor as spelled in the file).
_RESEED = {
    "numpy.random.default_rng": "{rng} = {ctor}(info.seed)",
    "numpy.random.Generator": "{rng} = {numpy}.random.default_rng(info.seed)",
    "numpy.random.RandomState": "{rng}.seed(info.seed % 2**32)",
    "random.Random": "{rng}.seed(info.seed)",
    "torch.Generator": "{rng}.manual_seed(info.seed)",
}
_RESEED_METHODS = frozenset({"seed", "manual_seed", "set_state", "setstate", "bit_generator"})
_HELPER = "seed_worker"
_HEAD = "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, Dataset\n"
_CLASS = (
    "class Noisy(Dataset):\n"
    "    def __init__(self, n):\n"
    "        self.n = n\n"
    "        self.rng = np.random.default_rng(0)\n"
    "    def __getitem__(self, i):\n"
    "        return i + self.rng.normal()\n"
)


class DatasetRngDuplicated(Rule):
    """## What it does
    Checks for a torch `Dataset` that stores an RNG object in `__init__`
    (`np.random.default_rng(...)`, `np.random.RandomState(...)`, `random.Random(...)`,
    `torch.Generator()`), uses it in `__getitem__`/`__iter__` (or a method they call), and is
    given to a `DataLoader` with `num_workers` other than 0 and no `worker_init_fn`.

    Not reported: datasets that reseed their RNG themselves (they call `get_worker_info()`, or
    assign or reseed the RNG outside `__init__`), loaders with a `worker_init_fn` or options
    from `**kwargs`, and loaders without workers.

    ## Why is this bad?
    Each worker starts with a copy of the dataset, and its RNG object is copied with the same
    state (by `fork`, or by pickling under `spawn`). All workers then draw the same "random"
    numbers: worker 0's first sample gets the same crop, flip and noise as worker 1's, and the
    augmentation has `num_workers` times less variety than intended. PyTorch reseeds only the
    global generators in each worker: in its worker loop (`torch/utils/data/_utils/worker.py`,
    2.13) it calls `random.seed(seed)`, `torch.manual_seed(seed)` and, since PyTorch 1.9,
    `np.random.seed(...)` with a per-worker seed; RNG objects you created are not touched.
    Checked with PyTorch 2.13 under both `fork` and `spawn`: two workers draw identical values
    from a `random.Random` and a `torch.Generator` stored in the dataset, while the global
    `random.random()` differs between them; with the `worker_init_fn` below they differ too.

    The guide says to give each worker its own random seed with a `worker_init_fn`; since
    PyTorch 1.9 the global `random`, `torch` and `np.random` generators are reseeded per worker
    without one, so in PyTorch 2.13 only RNG objects stored in the dataset still need it.

    ## Example
    ```python
    class Noisy(Dataset):
        def __init__(self, n):
            self.n = n
            self.rng = np.random.default_rng(0)

        def __getitem__(self, i):
            return i + self.rng.normal()


    loader = DataLoader(Noisy(100), batch_size=8, num_workers=4)
    ```

    ## Use instead
    ```python
    def seed_worker(worker_id):
        info = torch.utils.data.get_worker_info()
        info.dataset.rng = np.random.default_rng(info.seed)


    loader = DataLoader(Noisy(100), batch_size=8, num_workers=4, worker_init_fn=seed_worker)
    ```
    `info.seed` differs per worker and per epoch, and is reproducible when the script calls
    `torch.manual_seed` (or passes `generator=` to the loader).

    ## Fix safety
    The fix adds a module-level `seed_worker` function after the dataset class (a nested
    function or a lambda could not be pickled under `spawn`, see TDR308) that reseeds each RNG
    attribute of the worker's copy from `get_worker_info().seed`, and passes
    `worker_init_fn=seed_worker` to every such loader. It is unsafe: the random streams change,
    so results differ from earlier runs. No fix is offered when the dataset class is not at
    module level, when a loader may get another dataset (such as a `Subset`), or when the name
    `seed_worker` is taken.

    ## References
    - [Randomness in multi-process data loading](https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading)
    - [Reproducibility: DataLoader](https://pytorch.org/docs/stable/notes/randomness.html#dataloader)
    """

    code = "TDR307"
    name = "dataset-rng-duplicated"
    fix_safety = Applicability.UNSAFE

    VALID = (
        # A worker_init_fn is given.
        _HEAD + _CLASS + "def init(worker_id):\n    pass\n"
        "loader = DataLoader(Noisy(10), num_workers=4, worker_init_fn=init)\n",
        # No workers: one process, one RNG.
        _HEAD + _CLASS + "loader = DataLoader(Noisy(10), batch_size=4)\n",
        _HEAD + _CLASS + "loader = DataLoader(Noisy(10), num_workers=0)\n",
        # Global np.random is reseeded per worker by PyTorch.
        _HEAD + "class Noisy(Dataset):\n"
        "    def __getitem__(self, i):\n        return i + np.random.normal()\n"
        "loader = DataLoader(Noisy(), num_workers=4)\n",
        # The dataset reseeds per worker itself.
        _HEAD + "from torch.utils.data import get_worker_info\n"
        "class Noisy(Dataset):\n"
        "    def __init__(self):\n        self.rng = np.random.default_rng(0)\n"
        "    def __getitem__(self, i):\n"
        "        info = get_worker_info()\n"
        "        if info is not None and not self.seeded:\n"
        "            self.rng = np.random.default_rng(info.seed)\n"
        "        return self.rng.normal()\n"
        "loader = DataLoader(Noisy(), num_workers=4)\n",
        # An RNG created lazily in __getitem__.
        _HEAD + "class Noisy(Dataset):\n"
        "    def __init__(self):\n        self.rng = None\n"
        "    def __getitem__(self, i):\n"
        "        if self.rng is None:\n            self.rng = np.random.default_rng()\n"
        "        return self.rng.normal()\n"
        "loader = DataLoader(Noisy(), num_workers=4)\n",
        # Used only while the dataset is built (a split drawn once, in the main process).
        _HEAD + "class Split(Dataset):\n"
        "    def __init__(self, n):\n        self.rng = np.random.default_rng(0)\n"
        "        self.order = self._shuffle(n)\n"
        "    def _shuffle(self, n):\n        return self.rng.permutation(n)\n"
        "    def __getitem__(self, i):\n        return self.order[i]\n"
        "loader = DataLoader(Split(10), num_workers=4)\n",
        # Stored but never used.
        _HEAD + "class Quiet(Dataset):\n"
        "    def __init__(self):\n        self.rng = np.random.default_rng(0)\n"
        "    def __getitem__(self, i):\n        return i\n"
        "loader = DataLoader(Quiet(), num_workers=4)\n",
        # Not a torch Dataset.
        _HEAD + "class Noisy:\n"
        "    def __init__(self):\n        self.rng = np.random.default_rng(0)\n"
        "    def __getitem__(self, i):\n        return self.rng.normal()\n"
        "loader = DataLoader(Noisy(), num_workers=4)\n",
        # Options from a dict may hold a worker_init_fn.
        _HEAD + _CLASS + "loader = DataLoader(Noisy(10), **opts)\n",
    )
    INVALID = (
        Invalid(
            _HEAD + _CLASS + "loader = DataLoader(Noisy(100), batch_size=8, num_workers=4)\n",
            fixed=_HEAD + _CLASS + "\n\ndef seed_worker(worker_id):\n"
            "    info = torch.utils.data.get_worker_info()\n"
            "    info.dataset.rng = np.random.default_rng(info.seed)\n\n\n"
            "loader = DataLoader(Noisy(100), batch_size=8, num_workers=4, "
            "worker_init_fn=seed_worker)\n",
            lines=(7,),
        ),
        # Two RNG objects, aliases, the dataset bound to a name, a loader inside main().
        Invalid(
            "import random\nimport torch as T\nfrom torch.utils import data as tud\n"
            "class Aug(tud.Dataset):\n"
            "    def __init__(self):\n"
            "        self.gen = T.Generator().manual_seed(1)\n"
            "        self.py = random.Random(3)\n"
            "    def __getitem__(self, i):\n"
            "        return T.rand(2, generator=self.gen), self.py.random()\n"
            "\n"
            "def main():\n"
            "    ds = Aug()\n"
            "    return tud.DataLoader(ds, num_workers=2)\n",
            fixed="import random\nimport torch as T\nfrom torch.utils import data as tud\n"
            "class Aug(tud.Dataset):\n"
            "    def __init__(self):\n"
            "        self.gen = T.Generator().manual_seed(1)\n"
            "        self.py = random.Random(3)\n"
            "    def __getitem__(self, i):\n"
            "        return T.rand(2, generator=self.gen), self.py.random()\n"
            "\n\ndef seed_worker(worker_id):\n"
            "    info = T.utils.data.get_worker_info()\n"
            "    info.dataset.gen.manual_seed(info.seed)\n"
            "    info.dataset.py.seed(info.seed)\n"
            "\n"
            "def main():\n"
            "    ds = Aug()\n"
            "    return tud.DataLoader(ds, num_workers=2, worker_init_fn=seed_worker)\n",
            lines=(6,),
        ),
        # RandomState, two loaders of the same dataset: one fix for both.
        Invalid(
            "import torch\nfrom numpy.random import RandomState\n"
            "from torch.utils.data import DataLoader, Dataset\n"
            "class Crops(Dataset):\n"
            "    def __init__(self):\n        self.state = RandomState(7)\n"
            "    def __getitem__(self, i):\n        return self.state.randint(0, 10)\n"
            "train = DataLoader(Crops(), num_workers=8)\n"
            "val = DataLoader(Crops(), num_workers=8)\n",
            fixed="import torch\nfrom numpy.random import RandomState\n"
            "from torch.utils.data import DataLoader, Dataset\n"
            "class Crops(Dataset):\n"
            "    def __init__(self):\n        self.state = RandomState(7)\n"
            "    def __getitem__(self, i):\n        return self.state.randint(0, 10)\n"
            "\n\ndef seed_worker(worker_id):\n"
            "    info = torch.utils.data.get_worker_info()\n"
            "    info.dataset.state.seed(info.seed % 2**32)\n\n\n"
            "train = DataLoader(Crops(), num_workers=8, worker_init_fn=seed_worker)\n"
            "val = DataLoader(Crops(), num_workers=8, worker_init_fn=seed_worker)\n",
            lines=(6,),
        ),
        # In a notebook cell; torch is imported by the fix.
        Invalid(
            "import numpy as np\nfrom torch.utils.data import DataLoader, Dataset\n"
            + _CLASS
            + "loader = DataLoader(Noisy(4), num_workers=2)\n",
            fixed="import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, Dataset\n"
            + _CLASS
            + "\n\ndef seed_worker(worker_id):\n"
            "    info = torch.utils.data.get_worker_info()\n"
            "    info.dataset.rng = np.random.default_rng(info.seed)\n\n\n"
            "loader = DataLoader(Noisy(4), num_workers=2, worker_init_fn=seed_worker)\n",
            notebook=True,
            lines=(6,),
        ),
        # A Subset in between: reported, no fix (info.dataset is the Subset).
        Invalid(
            _HEAD + "from torch.utils.data import Subset\n" + _CLASS + "ds = Noisy(100)\n"
            "loader = DataLoader(ds if full else Subset(ds, idx), num_workers=4)\n",
            fixed=None,
            lines=(8,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for cls in data.dataset_classes(sem):
            rngs = _stored_rngs(sem, cls)
            if not rngs or _reseeds_itself(sem, cls, rngs):
                continue
            loaders, unknown = data.loaders_of_class(sem, cls)
            loaders = [
                c for c in loaders if data.uses_workers(c) and not data.passes(c, "worker_init_fn")
            ]
            if not loaders:
                continue
            attr, creation = next(iter(rngs.items()))
            ctx.report(
                creation,
                Text(
                    f"`self.{attr}` is copied into every DataLoader worker with the same state: "
                    "all workers draw the same random numbers; reseed it in a `worker_init_fn`",
                    f"`self.{attr}` 以相同的状态被复制到每个 DataLoader worker 中：所有 worker "
                    "抽到相同的随机数；请在 `worker_init_fn` 中重设它的种子",
                ),
                fixes=() if unknown else partial(_fix, ctx, cls, rngs, loaders),
                related=[
                    ctx.related(
                        c.func,
                        Text(
                            "This `DataLoader` uses workers and no `worker_init_fn`",
                            "该 `DataLoader` 使用了 worker 且没有 `worker_init_fn`",
                        ),
                    )
                    for c in loaders
                ],
            )


def _rng_constructor(sem: Semantic, value: ast.expr) -> ast.Call | None:
    """The RNG constructor call a value is (``torch.Generator().manual_seed(1)`` included)."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "manual_seed"
        and isinstance(value.func.value, ast.Call)
    ):
        value = value.func.value
    if isinstance(value, ast.Call) and sem.qualname(value.func) in _RESEED:
        return value
    return None


def _stored_rngs(sem: Semantic, cls: ast.ClassDef) -> dict[str, ast.Call]:
    """``self.attr = <RNG>`` in ``__init__`` for attributes read by another method."""
    init = data.method(cls, "__init__")
    if init is None:
        return {}
    out: dict[str, ast.Call] = {}
    assigns = [n for n in sem.walk(init) if isinstance(n, ast.Assign)]
    for node in sorted(assigns, key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            attr = data.self_attribute(node.targets[0])
            ctor = _rng_constructor(sem, node.value)
            if attr and ctor is not None and attr not in out:
                out[attr] = ctor
    used = {
        node.attr
        for func in _per_sample_methods(cls)
        for node in ast.walk(func)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and data.self_attribute(node)
    }
    return {a: c for a, c in out.items() if a in used}


def _per_sample_methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """``__getitem__``/``__iter__`` (what runs in the workers) and the methods of the class
    they call on ``self``, transitively."""
    methods = {s.name: s for s in cls.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    todo: list[str] = [
        n for n in ("__getitem__", "__getitems__", "__iter__", "__next__") if n in methods
    ]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name == "__init__":
            continue
        seen.add(name)
        for node in ast.walk(methods[name]):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and data.self_attribute(node.func) in methods
            ):
                todo.append(node.func.attr)
    return [methods[n] for n in sorted(seen)]


def _reseeds_itself(sem: Semantic, cls: ast.ClassDef, rngs: dict[str, ast.Call]) -> bool:
    """The class asks for its worker (``get_worker_info()``), or assigns or reseeds one of its
    RNG attributes outside ``__init__``."""
    init = data.method(cls, "__init__")
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and sem.qualname(node.func) == (
            "torch.utils.data.get_worker_info"
        ):
            return True
        if init is not None and sem.is_inside(node, init):
            continue
        if isinstance(node, ast.Attribute) and data.self_attribute(node) in rngs:
            if isinstance(node.ctx, ast.Store):
                return True
            parent = sem.parent(node)
            if isinstance(parent, ast.Attribute) and parent.attr in _RESEED_METHODS:
                return True
    return False


def _fix(
    ctx: Context, cls: ast.ClassDef, rngs: dict[str, ast.Call], loaders: list[ast.Call]
) -> Fix | None:
    sem = ctx.sem
    if sem.parent(cls) is not sem.tree or any(_HELPER in s.bindings for s in sem.scopes.values()):
        return None
    torch_ref = fixes.module_ref(sem, ctx.source, "torch", ctx.notebook)
    if torch_ref is None:
        return None
    torch_name, edits = torch_ref[0], list(torch_ref[1])
    lines = [
        "",
        "",
        f"def {_HELPER}(worker_id):",
        f"    info = {torch_name}.utils.data.get_worker_info()",
    ]
    for attr, ctor in rngs.items():
        qual = sem.qualname(ctor.func) or ""
        numpy = ""
        if "{numpy}" in _RESEED[qual]:
            numpy_ref = fixes.module_ref(sem, ctx.source, "numpy", ctx.notebook)
            if numpy_ref is None:
                return None
            numpy, more = numpy_ref
            edits += more
        spelled = ctx.segment(ctor.func)
        if not _module_level_name(sem, ctor.func):
            return None
        lines.append(
            "    " + _RESEED[qual].format(rng=f"info.dataset.{attr}", ctor=spelled, numpy=numpy)
        )
    after = (cls.end_lineno or cls.lineno) + 1
    if ctx.source.line(after).strip():
        lines += ["", "", ""]  # two blank lines before the next statement
    helper = fixes.insert_statement_after(ctx.source, cls, "\n".join(lines))
    if helper is None:
        return None
    edits.append(helper)
    edits += [fixes.add_keyword(ctx.source, c, f"worker_init_fn={_HELPER}") for c in loaders]
    return Fix(
        Text(
            f"Add a module-level `{_HELPER}` that reseeds the dataset's RNG in each worker",
            f"添加模块级的 `{_HELPER}`，在每个 worker 中重设数据集随机数生成器的种子",
        ),
        tuple(_dedupe(edits)),
        Applicability.UNSAFE,
    )


def _module_level_name(sem: Semantic, func: ast.expr) -> bool:
    """The callee's first name refers to a module-level binding (so the helper can use it)."""
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    binding = sem.lookup(root.id, root)
    return binding is not None and binding.scope is sem.tree


def _dedupe(edits: list[Edit]) -> list[Edit]:
    out: list[Edit] = []
    for edit in edits:
        if edit not in out:
            out.append(edit)
    return out
