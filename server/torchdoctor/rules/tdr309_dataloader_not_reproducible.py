from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, data, fixes, summaries
from ..core.context import Context
from ..core.data import is_literal
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import FUNCTION_NODES, Semantic, argument, is_false, is_true
from .base import Invalid, Rule, Valid

_SEEDERS = ("torch.manual_seed", "torch.random.manual_seed")
_HEAD = "import torch\nfrom torch.utils.data import DataLoader\n"
# A loader builder whose callers are in other modules (the multi-file examples): the class is
# chosen by a flag, `shuffle` comes from the caller.
_BUILDER = (
    _HEAD + "class InfiniteLoader(DataLoader):\n    pass\n"
    "def make_loader(ds, workers=8, shuffle=False, weighted=False):\n"
    "    loader = DataLoader if weighted else InfiniteLoader\n"
    "    return loader(ds, batch_size=16, shuffle=shuffle and not weighted, num_workers=workers)\n"
)
_SEEDING_PY = "import torch\ndef init_seeds(seed):\n    torch.manual_seed(seed)\n"


class DataLoaderNotReproducible(Rule):
    """## What it does
    Checks, in a file that calls `torch.manual_seed`, for a `DataLoader` with `shuffle=True`
    and `num_workers` other than 0 that has no `generator=`. The loader may be a subclass of
    `DataLoader` (also one chosen by a flag), and may be built by a helper whose callers,
    in this file or in other modules of the project, pass `shuffle=True` and workers and
    seed the global generator (`init_seeds(...)` in `train.py`, then
    `create_dataloader(..., shuffle=True)` of `utils/dataloaders.py`).

    ## Why is this bad?
    Without a generator, the loader takes its randomness from the global torch generator: each
    epoch the sampler draws a fresh seed for the shuffle order from it, and the iterator draws
    the base seed of the workers (which seeds `random`, `torch` and `np.random` in each worker).
    `torch.manual_seed` makes that repeatable only as long as every other draw from the global
    generator stays the same. Add a layer, change an initialisation, draw a random number in the
    main process, resume from a checkpoint, and the order of the data and every worker's
    augmentation change too. Checked with PyTorch 2.13: after `torch.manual_seed(0)`, building
    one more `nn.Linear` before the loader changes the shuffled order; with
    `generator=torch.Generator().manual_seed(0)` the order stays the same. PyTorch's
    reproducibility notes recommend a dedicated generator for the loader.

    The rule is off by default: it matters when runs are compared with each other.

    ## Example
    ```python
    torch.manual_seed(42)
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
    ```

    ## Use instead
    ```python
    torch.manual_seed(42)
    loader = DataLoader(
        train_set,
        batch_size=64,
        shuffle=True,
        num_workers=4,
        generator=torch.Generator().manual_seed(42),
    )
    ```

    ## Fix safety
    The fix adds `generator=torch.Generator().manual_seed(SEED)`, reusing the seed given to
    `torch.manual_seed` (a literal, or a name visible at the loader). It is unsafe: the data
    order and the seeds of the workers change compared with earlier runs, and the loader no
    longer draws from the global generator, so what the program draws from it afterwards (an
    initialisation, dropout) changes too. No fix is offered when the file seeds with
    several different values, or the seed's name is not visible where the loader is built
    (nor when the seed is set in another module).

    ## References
    - [Reproducibility: DataLoader](https://pytorch.org/docs/stable/notes/randomness.html#dataloader)
    - [Randomness in multi-process data loading](https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading)
    """

    code = "TDR309"
    name = "dataloader-not-reproducible"
    severity = Severity.INFO
    default = False
    fix_safety = Applicability.UNSAFE

    VALID = (
        # The script does not seed.
        _HEAD + "loader = DataLoader(ds, shuffle=True, num_workers=4)\n",
        # A generator is given.
        _HEAD + "torch.manual_seed(0)\ng = torch.Generator()\ng.manual_seed(0)\n"
        "loader = DataLoader(ds, shuffle=True, num_workers=4, generator=g)\n",
        # No shuffling, or no workers.
        _HEAD + "torch.manual_seed(0)\nloader = DataLoader(ds, shuffle=False, num_workers=4)\n",
        _HEAD + "torch.manual_seed(0)\nloader = DataLoader(ds, batch_size=8, num_workers=4)\n",
        _HEAD + "torch.manual_seed(0)\nloader = DataLoader(ds, shuffle=True)\n",
        _HEAD + "torch.manual_seed(0)\nloader = DataLoader(ds, shuffle=True, num_workers=0)\n",
        # Options from a dict may hold a generator.
        _HEAD + "torch.manual_seed(0)\nloader = DataLoader(ds, shuffle=True, **opts)\n",
        # Another library's manual_seed, and a local class named DataLoader.
        "import torch\nfrom mylib import manual_seed\nfrom torch.utils.data import DataLoader\n"
        "manual_seed(0)\nloader = DataLoader(ds, shuffle=True, num_workers=4)\n",
        "import torch\nclass DataLoader:\n    def __init__(self, ds, **kw):\n        pass\n"
        "torch.manual_seed(0)\nloader = DataLoader(ds, shuffle=True, num_workers=4)\n",
        # A builder whose every call leaves `num_workers=0` (its default).
        _HEAD + "torch.manual_seed(0)\ndef make(ds, shuffle=True, workers=0):\n"
        "    return DataLoader(ds, shuffle=shuffle, num_workers=workers)\nloader = make(ds)\n",
        # The callers of the builder seed but never ask it to shuffle, or shuffle unseeded.
        Valid(
            _BUILDER,
            files=(
                ("seeding.py", _SEEDING_PY),
                (
                    "val.py",
                    "from seeding import init_seeds\nfrom example import make_loader\n"
                    "init_seeds(0)\nloader = make_loader(ds, workers=4)\n",
                ),
            ),
        ),
        Valid(
            _BUILDER,
            files=(
                (
                    "train.py",
                    "from example import make_loader\nloader = make_loader(ds, shuffle=True)\n",
                ),
            ),
        ),
    )
    INVALID = (
        # A builder of the file asked to shuffle with workers by its caller.
        Invalid(
            _HEAD + "torch.manual_seed(0)\ndef make(ds, shuffle=False, workers=0):\n"
            "    return DataLoader(ds, shuffle=shuffle, num_workers=workers)\n"
            "loader = make(ds, shuffle=True, workers=4)\n",
            fixed=_HEAD + "torch.manual_seed(0)\ndef make(ds, shuffle=False, workers=0):\n"
            "    return DataLoader(ds, shuffle=shuffle, num_workers=workers, "
            "generator=torch.Generator().manual_seed(0))\n"
            "loader = make(ds, shuffle=True, workers=4)\n",
            lines=(5,),
        ),
        # A builder of the project: the training script (another module) seeds through a
        # helper, then asks it for a shuffling loader. No edit: the seed is not in this file.
        Invalid(
            _BUILDER,
            fixed=None,
            files=(
                ("seeding.py", _SEEDING_PY),
                (
                    "train.py",
                    "from seeding import init_seeds\nfrom example import make_loader\n"
                    "init_seeds(0)\nloader = make_loader(ds, shuffle=True)\n",
                ),
            ),
            lines=(7,),
        ),
        Invalid(
            _HEAD + "torch.manual_seed(42)\n"
            "loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)\n",
            fixed=_HEAD + "torch.manual_seed(42)\n"
            "loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4, "
            "generator=torch.Generator().manual_seed(42))\n",
            lines=(4,),
        ),
        # The seed's name, an alias of torch, positional shuffle.
        Invalid(
            "import torch as T\nimport torch.utils.data as tud\nSEED = 3\n"
            "def main(ds):\n    T.manual_seed(SEED)\n"
            "    return tud.DataLoader(ds, 32, True, num_workers=2)\n",
            fixed="import torch as T\nimport torch.utils.data as tud\nSEED = 3\n"
            "def main(ds):\n    T.manual_seed(SEED)\n"
            "    return tud.DataLoader(ds, 32, True, num_workers=2, "
            "generator=T.Generator().manual_seed(SEED))\n",
            lines=(6,),
        ),
        # Seeded in a helper called with a literal.
        Invalid(
            _HEAD + "def set_seed(seed):\n    torch.manual_seed(seed)\n"
            "set_seed(7)\nloader = DataLoader(ds, shuffle=True, num_workers=8)\n",
            fixed=_HEAD + "def set_seed(seed):\n    torch.manual_seed(seed)\n"
            "set_seed(7)\nloader = DataLoader(ds, shuffle=True, num_workers=8, "
            "generator=torch.Generator().manual_seed(7))\n",
            lines=(6,),
        ),
        # args.seed is not visible where the loader is built: reported without a fix.
        Invalid(
            _HEAD + "def main(args):\n    torch.manual_seed(args.seed)\n"
            "def make(ds):\n    return DataLoader(ds, shuffle=True, num_workers=2)\n",
            fixed=None,
            lines=(6,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        seeds = list(sem.calls_to(*_SEEDERS))
        for call in data.loader_constructions(sem):
            if not data.uses_workers(call):
                continue
            if data.passes(call, "generator") or len(call.args) > 12:
                continue
            shuffle = data.loader_argument(call, "shuffle")
            # A builder of the project: its callers (also in other modules) pass `shuffle`
            # and `num_workers`, and may seed before calling it.
            func = sem.enclosing_function(call)
            workers_arg = data.loader_argument(call, "num_workers")
            reads = [_param(sem, e, func) for e in (shuffle, workers_arg)]
            if not (is_true(shuffle) or reads[0]):
                continue  # `shuffle` is not true, nor read from the builder's parameter
            asks = any(reads) or not seeds
            sites = sem.calls_from_project(func) if asks and func is not None else []
            if not (is_true(shuffle) or _may_shuffle(sem, shuffle, func, sites)):
                continue
            workers = _passed(sem, workers_arg, func, sites)
            if workers is not None and all(is_literal(v, 0) for v in workers):
                continue  # every call of the builder leaves `num_workers=0`
            if not seeds and not any(_seeds(other) for other, _ in sites):
                continue
            ctx.report(
                call.func,
                Text(
                    "This shuffling `DataLoader` has no `generator=`: its order and its workers' "
                    "seeds change whenever anything else draws from the global RNG first",
                    "该打乱数据的 `DataLoader` 没有 `generator=`：只要有其他代码先从全局随机数生成器"
                    "中抽取，它的顺序和 worker 的种子就会改变",
                ),
                fixes=partial(_fix, ctx, call, seeds) if seeds else (),
                related=[
                    ctx.related(s, Text("The script seeds here", "脚本在此设置种子"))
                    for s in seeds[:1]
                ],
            )


def _seeds(sem: Semantic) -> bool:
    """The module seeds the global generator: ``torch.manual_seed``, or a project helper
    that calls it (``init_seeds(opt.seed)``)."""
    if any(sem.calls_to(*_SEEDERS)):
        return True
    for call in sem.calls:
        if not (sem.qualname(call.func) or "").startswith("torch."):
            helper = summaries.called_summary(sem, call.func)
            if helper is not None and helper.qualnames & set(_SEEDERS):
                return True
    return False


def _may_shuffle(
    sem: Semantic,
    expr: ast.expr | None,
    func: ast.AST | None,
    sites: list[tuple[Semantic, ast.Call]],
) -> bool:
    """``shuffle=`` is true in some call: a parameter of the builder that a call site passes
    ``True`` for (or defaults to ``True``), also inside ``shuffle and sampler is None``."""
    if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And):
        return not any(is_false(v) for v in expr.values) and any(
            _may_shuffle(sem, v, func, sites) for v in expr.values
        )
    return any(is_true(v) for v in _passed(sem, expr, func, sites) or ())


def _param(sem: Semantic, expr: ast.expr | None, func: ast.AST | None) -> bool:
    """``expr`` reads a parameter of ``func`` (also as an operand of ``and``)."""
    if isinstance(expr, ast.BoolOp):
        return any(_param(sem, v, func) for v in expr.values)
    return isinstance(expr, ast.Name) and any(
        b.how == "param" and b.scope is func for b in sem.reaching(expr.id, expr)
    )


def _passed(
    sem: Semantic,
    expr: ast.expr | None,
    func: ast.AST | None,
    sites: list[tuple[Semantic, ast.Call]],
) -> list[ast.expr] | None:
    """What a parameter of the builder may hold where ``expr`` reads it (past a reassignment
    in one branch too): the values its call sites pass, in this file and in other modules,
    and its default. None when ``expr`` reads no parameter, or nothing is known."""
    if not isinstance(expr, ast.Name) or not isinstance(func, FUNCTION_NODES):
        return None
    params = [b for b in sem.reaching(expr.id, expr) if b.how == "param" and b.scope is func]
    if not params:
        return None
    signature = arguments.signature_of(func)
    values = list(data.param_values(sem, params[0]) or ())
    values += [v for _, c in sites if (v := arguments.bind(c, signature).value(expr.id))]
    default = _default(func, expr.id)
    values += [default] if default is not None else []
    return values or None


def _default(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.expr | None:
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    ]
    return next((d for a, d in pairs if a.arg == name), None)


def _fix(ctx: Context, call: ast.Call, seeds: list[ast.Call]) -> Fix | None:
    texts = set()
    for seed_call in seeds:
        text = _seed_text(ctx, argument(seed_call, "seed", 0), call)
        if text is None:
            return None
        texts.add(text)
    torch_ref = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
    if len(texts) != 1 or torch_ref is None:
        return None
    seed = texts.pop()
    torch_name, edits = torch_ref
    code = f"generator={torch_name}.Generator().manual_seed({seed})"
    return Fix(
        Text(f"Add `{code}`", f"添加 `{code}`"),
        (*edits, fixes.add_keyword(ctx.source, call, code)),
        Applicability.UNSAFE,
    )


def _seed_text(ctx: Context, seed: ast.expr | None, at: ast.AST, depth: int = 0) -> str | None:
    """How to spell the seed where the loader is built: a literal, or a name (``SEED``,
    ``args.seed``) bound to the same thing there; a helper's parameter is followed to the
    values its call sites pass."""
    sem: Semantic = ctx.sem
    if seed is None or depth > 3:
        return None
    if isinstance(seed, ast.Constant) and isinstance(seed.value, int):
        return ctx.segment(seed)
    root = seed
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return None
    binding = sem.lookup(root.id, root)
    if binding is None:
        return None
    if sem.lookup(root.id, at) is binding:
        return ctx.segment(seed)
    if binding.how == "param" and seed is root:
        values = data.param_values(sem, binding)
        texts = {_seed_text(ctx, v, at, depth + 1) for v in values or ()}
        if len(texts) == 1:
            return texts.pop()
    return None
