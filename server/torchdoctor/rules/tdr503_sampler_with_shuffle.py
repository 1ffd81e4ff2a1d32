from __future__ import annotations

import ast

from ..core import arguments, fixes, kinds
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import has_star_kwargs, is_none, keyword
from .base import Invalid, Rule

DISTRIBUTED_SAMPLER = "torch.utils.data.DistributedSampler"
GIVEN = ("batch_size", "shuffle", "sampler", "batch_sampler", "drop_last")


def _truthy(expr: ast.expr | None) -> bool:
    return (
        isinstance(expr, ast.Constant) and isinstance(expr.value, bool | int) and bool(expr.value)
    )


def _not_one(expr: ast.expr | None) -> bool:
    """A literal ``batch_size`` other than 1 (``None`` included: the check is ``!= 1``)."""
    if not isinstance(expr, ast.Constant):
        return False
    return expr.value is None or (isinstance(expr.value, int) and expr.value != 1)


class SamplerWithShuffle(Rule):
    """## What it does
    Checks for `DataLoader(..., sampler=..., shuffle=True)`, and for `batch_sampler=` combined
    with `shuffle=True`, `sampler=`, a `batch_size` other than 1, or `drop_last=True`.

    ## Why is this bad?
    A sampler decides the order of the samples, so `shuffle` has nothing left to do, and the
    `DataLoader` refuses the combination when it is created:
    `ValueError: sampler option is mutually exclusive with shuffle`. A batch sampler decides the
    batches as well, and fails with `ValueError: batch_sampler option is mutually exclusive
    with batch_size, shuffle, sampler, and drop_last`.

    In distributed training the mistake is easy to make: `shuffle=True` is moved from the
    `DataLoader` to the `DistributedSampler` (which shuffles by default), and the old keyword
    stays behind. The error then appears only when the job starts on the cluster.

    ## Example
    ```python
    from torch.utils.data import DataLoader, DistributedSampler

    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, shuffle=True)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader, DistributedSampler

    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    ```
    When the sampler is only used in distributed runs, let the `DataLoader` shuffle otherwise:
    `DataLoader(dataset, sampler=sampler, shuffle=sampler is None)`.

    ## Fix safety
    The fix removes the conflicting keywords (the call raised with them), and passes
    `shuffle=True` to a `DistributedSampler(...)` created in this file without `shuffle=`
    (its default, written out). When the sampler may be `None`, `shuffle=True` becomes
    `shuffle=sampler is None`, which keeps both paths as they were. It is safe. No fix is
    offered when a batch sampler may be `None`, or when the conflicting values are positional.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
    """

    code = "TDR503"
    name = "sampler-with-shuffle"
    severity = Severity.ERROR
    fix_safety = Applicability.SAFE

    VALID = (
        "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, sampler=sampler, shuffle=False)",
        "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, batch_size=8, sampler=sampler)",
        # The documented idiom.
        "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "sampler = DistributedSampler(ds) if distributed else None\n"
        "loader = DataLoader(ds, sampler=sampler, shuffle=(sampler is None))",
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, sampler=None, shuffle=True)",
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, 32, True)",
        # A parameter may well be None: not reported.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def make_loader(ds, sampler=None):\n"
        "    return DataLoader(ds, sampler=sampler, shuffle=True)\n",
        # A batch sampler alone, or with the default batch_size.
        "import torch\nfrom torch.utils.data import BatchSampler, DataLoader, RandomSampler\n"
        "bs = BatchSampler(RandomSampler(ds), batch_size=32, drop_last=False)\n"
        "loader = DataLoader(ds, batch_sampler=bs, batch_size=1, num_workers=4)",
        # Other libraries' DataLoader and a local class of the same name.
        "import torch\nfrom torch_geometric.loader import DataLoader\n"
        "from torch.utils.data import RandomSampler\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)",
        "import torch\nfrom torch.utils.data import RandomSampler\n"
        "class DataLoader:\n    def __init__(self, ds, sampler=None, shuffle=False):\n        pass\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)",
        "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, sampler=sampler, shuffle=False)",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
            "loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds), shuffle=True)",
            fixed="import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
            "loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds, shuffle=True))",
            lines=(3,),
        ),
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "sampler = DistributedSampler(ds, num_replicas=2, rank=0)\n"
            "loader = DataLoader(ds, shuffle=True, sampler=sampler, num_workers=4)",
            fixed="from torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "sampler = DistributedSampler(ds, num_replicas=2, rank=0, shuffle=True)\n"
            "loader = DataLoader(ds, sampler=sampler, num_workers=4)",
            lines=(4,),
        ),
        # The sampler already says how to shuffle: only the DataLoader's keyword goes.
        Invalid(
            "import torch.utils.data as tud\n"
            "sampler = tud.DistributedSampler(ds, shuffle=False)\n"
            "loader = tud.DataLoader(ds, sampler=sampler, shuffle=True)",
            fixed="import torch.utils.data as tud\n"
            "sampler = tud.DistributedSampler(ds, shuffle=False)\n"
            "loader = tud.DataLoader(ds, sampler=sampler)",
            lines=(3,),
        ),
        Invalid(
            "from torch.utils.data import DataLoader as DL, WeightedRandomSampler\n"
            "weights = [1.0, 2.0]\n"
            "loader = DL(ds, batch_size=4,\n"
            "            sampler=WeightedRandomSampler(weights, num_samples=2),\n"
            "            shuffle=True)\n",
            fixed="from torch.utils.data import DataLoader as DL, WeightedRandomSampler\n"
            "weights = [1.0, 2.0]\n"
            "loader = DL(ds, batch_size=4,\n"
            "            sampler=WeightedRandomSampler(weights, num_samples=2))\n",
            lines=(5,),
        ),
        # A sampler that exists only in distributed runs.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(ds) if distributed else None\n"
            "loader = DataLoader(ds, sampler=sampler, shuffle=True)",
            fixed="import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(ds, shuffle=True) if distributed else None\n"
            "loader = DataLoader(ds, sampler=sampler, shuffle=sampler is None)",
            lines=(4,),
        ),
        # A sampler class defined in the file.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, Sampler\n"
            "class LengthSampler(Sampler):\n    pass\n"
            "def make(ds):\n"
            "    return DataLoader(ds, sampler=LengthSampler(), shuffle=True, num_workers=2)\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader, Sampler\n"
            "class LengthSampler(Sampler):\n    pass\n"
            "def make(ds):\n"
            "    return DataLoader(ds, sampler=LengthSampler(), num_workers=2)\n",
            lines=(6,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import BatchSampler, DataLoader, RandomSampler\n"
            "bs = BatchSampler(RandomSampler(ds), batch_size=32, drop_last=True)\n"
            "loader = DataLoader(ds, batch_sampler=bs, batch_size=32, shuffle=True, drop_last=True)",
            fixed="import torch\nfrom torch.utils.data import BatchSampler, DataLoader, RandomSampler\n"
            "bs = BatchSampler(RandomSampler(ds), batch_size=32, drop_last=True)\n"
            "loader = DataLoader(ds, batch_sampler=bs)",
            lines=(4,),
        ),
        # batch_size=None is not 1 either.
        Invalid(
            "import torch\nfrom torch.utils.data import BatchSampler, DataLoader, SequentialSampler\n"
            "loader = DataLoader(\n"
            "    ds,\n"
            "    batch_size=None,\n"
            "    batch_sampler=BatchSampler(SequentialSampler(ds), 8, False),\n"
            ")\n",
            fixed="import torch\nfrom torch.utils.data import BatchSampler, DataLoader, SequentialSampler\n"
            "loader = DataLoader(\n"
            "    ds,\n"
            "    batch_sampler=BatchSampler(SequentialSampler(ds), 8, False),\n"
            ")\n",
            lines=(5,),
        ),
        # The batch sampler may be None: removing batch_size would change that path.
        Invalid(
            "import torch\nfrom torch.utils.data import BatchSampler, DataLoader, RandomSampler\n"
            "bs = BatchSampler(RandomSampler(ds), 16, False) if bucketing else None\n"
            "loader = DataLoader(ds, batch_size=16, batch_sampler=bs)",
            fixed=None,
            lines=(4,),
        ),
        # Positional shuffle: reported, no fix.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, 32, True, sampler)",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "from torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler, shuffle=True)",
            fixed="from torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(ds, shuffle=True)\n"
            "loader = DataLoader(ds, sampler=sampler)",
            notebook=True,
            lines=(3,),
        ),
        # `shuffle` and `sampler` passed by position (third and fourth parameters).
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, 8, True, sampler)\n",
            fixed=None,
            lines=(5,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to("torch.utils.data.DataLoader"):
            bound = arguments.bind(call, arguments.DATALOADER)
            given = {name: bound.value(name) for name in GIVEN}
            samplers, sampler_other = self._samplers(ctx, given["sampler"])
            batch_samplers, batch_other = self._samplers(ctx, given["batch_sampler"])
            if batch_samplers:
                conflicts = [
                    name
                    for name, bad in (
                        ("batch_size", _not_one(given["batch_size"])),
                        ("shuffle", _truthy(given["shuffle"])),
                        ("sampler", bool(samplers)),
                        ("drop_last", _truthy(given["drop_last"])),
                    )
                    if bad
                ]
                if conflicts:
                    self._report_batch_sampler(ctx, call, conflicts, given, batch_other)
                continue
            if samplers and _truthy(given["shuffle"]):
                self._report_sampler(ctx, call, given, samplers, sampler_other)

    @staticmethod
    def _samplers(ctx: Context, expr: ast.expr | None) -> tuple[list[ast.Call], bool]:
        """Sampler constructions the argument may hold, and whether it may hold other values."""
        if expr is None or is_none(expr):
            return [], True
        sem = ctx.sem
        return kinds.constructions(sem, expr, lambda c: kinds.kind(sem, c) is Kind.SAMPLER)

    def _report_sampler(
        self,
        ctx: Context,
        call: ast.Call,
        given: dict[str, ast.expr | None],
        samplers: list[ast.Call],
        maybe_none: bool,
    ) -> None:
        sampler, shuffle = given["sampler"], given["shuffle"]
        assert sampler is not None and shuffle is not None
        kw = keyword(call, "shuffle")
        fix = None
        if kw is not None and keyword(call, "sampler") is not None:
            fix = self._shuffle_fix(ctx, call, kw, sampler, samplers, maybe_none)
        ctx.report(
            kw if kw is not None else shuffle,
            Text(
                "`DataLoader` with both `sampler=` and `shuffle=True` raises `ValueError: "
                "sampler option is mutually exclusive with shuffle`",
                "`DataLoader` 同时指定 `sampler=` 与 `shuffle=True` 会抛出 `ValueError: "
                "sampler option is mutually exclusive with shuffle`",
            ),
            fixes=[fix],
            related=[ctx.related(sampler, Text("The sampler is passed here", "采样器在此传入"))],
        )

    def _shuffle_fix(
        self,
        ctx: Context,
        call: ast.Call,
        kw: ast.keyword,
        sampler: ast.expr,
        samplers: list[ast.Call],
        maybe_none: bool,
    ) -> Fix | None:
        extra = self._distributed_shuffle(ctx, samplers)
        if maybe_none:
            # The sampler may be None: shuffle exactly when it is.
            if not isinstance(sampler, ast.Name | ast.Attribute):
                return None
            value = f"{ctx.segment(sampler)} is None"
            return Fix(
                Text(f"Replace with `shuffle={value}`", f"改为 `shuffle={value}`"),
                (fixes.replace(ctx.source, kw.value, value), *extra),
                Applicability.SAFE,
            )
        title = Text("Remove `shuffle=True`", "删除 `shuffle=True`")
        if extra:
            title = Text(
                "Remove `shuffle=True` and pass it to the `DistributedSampler`",
                "删除 `shuffle=True`，改为传给 `DistributedSampler`",
            )
        edit = fixes.remove_argument(ctx.source, call, kw)
        return Fix(title, (edit, *extra), Applicability.SAFE)

    def _report_batch_sampler(
        self,
        ctx: Context,
        call: ast.Call,
        conflicts: list[str],
        given: dict[str, ast.expr | None],
        maybe_none: bool,
    ) -> None:
        batch_sampler = given["batch_sampler"]
        assert batch_sampler is not None
        keywords = [keyword(call, name) for name in conflicts]
        fix: Fix | None = None
        if not maybe_none and all(kw is not None for kw in keywords):
            names = ", ".join(f"`{name}=`" for name in conflicts)
            edits = [fixes.remove_argument(ctx.source, call, kw) for kw in keywords if kw]
            fix = Fix(Text(f"Remove {names}", f"删除 {names}"), tuple(edits), Applicability.SAFE)
        first = min(
            (
                kw if kw is not None else given[name]
                for kw, name in zip(keywords, conflicts, strict=True)
            ),
            key=lambda n: (n.lineno, n.col_offset),  # type: ignore[union-attr]
        )
        listed = ", ".join(f"`{name}`" for name in conflicts)
        assert first is not None
        ctx.report(
            first,
            Text(
                f"`DataLoader` with `batch_sampler=` and {listed} raises `ValueError: batch_sampler "
                "option is mutually exclusive with batch_size, shuffle, sampler, and drop_last`",
                f"`DataLoader` 同时指定 `batch_sampler=` 与 {listed} 会抛出 `ValueError: batch_sampler "
                "option is mutually exclusive with batch_size, shuffle, sampler, and drop_last`",
            ),
            fixes=[fix],
            related=[
                ctx.related(
                    batch_sampler, Text("The batch sampler is passed here", "批采样器在此传入")
                )
            ],
        )

    @staticmethod
    def _distributed_shuffle(ctx: Context, samplers: list[ast.Call]) -> list[Edit]:
        """Write out ``shuffle=True`` in ``DistributedSampler(...)`` calls that leave it implicit."""
        edits = []
        for sampler in samplers:
            if ctx.qualname(sampler.func) != DISTRIBUTED_SAMPLER or has_star_kwargs(sampler):
                continue
            if arguments.value(sampler, arguments.DISTRIBUTED_SAMPLER, "shuffle") is not None:
                continue
            edits.append(fixes.add_keyword(ctx.source, sampler, "shuffle=True"))
        return edits
