from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import partial

from ..core import epochs, fixes
from ..core.context import Context
from ..core.epochs import SampledLoader
from ..core.model import Applicability, Fix, Range, Text
from ..core.semantic import terminal_name
from ..core.training import LoopInfo
from .base import Invalid, Rule, Valid

# Loaders whose order does not matter (evaluation) are left alone.
_EVAL_LOADER = re.compile(r"(^|_)(val|valid|validation|test|eval)", re.I)
_EPOCH_NAME = re.compile(r"epoch|^ep$|^e$", re.I)
_HEAD = "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
# A builder of another module (the multi-file examples' data.py).
_DATA_PY = (
    _HEAD + "def build_loader(ds):\n"
    "    sampler = DistributedSampler(ds)\n"
    "    return DataLoader(ds, sampler=sampler), sampler\n"
)


class SamplerWithoutSetEpoch(Rule):
    """## What it does
    Checks for a `DistributedSampler` whose `DataLoader` is iterated in a loop over epochs that
    never calls `set_epoch` on the sampler (directly, as `loader.sampler.set_epoch(...)`, or
    inside a function called from the loop, of the file or of another module of the project).
    The loader and its sampler may come from a function of another module
    (`loader, sampler = build_loader(ds)` with `build_loader` in `data.py`); the finding then
    says where the sampler is created.

    ## Why is this bad?
    A `DistributedSampler` shuffles with a generator seeded by `seed + epoch`, and its epoch
    only changes when you call `set_epoch`. Without it every rank gets the same share of the
    data, in the same order, in every epoch: the training silently loses the reshuffling that
    single-process training gets from `shuffle=True`, which often costs accuracy. Nothing warns
    about it. As
    PyTorch's documentation puts it, calling `set_epoch` "at the beginning of each epoch
    before creating the DataLoader iterator is necessary to make shuffling work properly".

    torchdata's `StatefulDataLoader` and `StatefulDistributedSampler` (subclasses with the
    same contract) count as well, and the loader may be read with `iter()` and `next()`.

    Loaders whose name says they are for evaluation (`val`, `test`, `eval`) and samplers created
    with `shuffle=False` are not reported: their order does not matter.

    ## Example
    ```python
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        for images, labels in loader:
            train_step(images, labels)
    ```

    ## Use instead
    ```python
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            train_step(images, labels)
    ```

    ## Fix safety
    The fix inserts `sampler.set_epoch(epoch)` (or `loader.sampler.set_epoch(epoch)` when the
    sampler has no name there) as the first statement of the epoch loop, guarded by
    `if sampler is not None:` when the sampler exists only in distributed runs. It is safe: it
    restores the per-epoch shuffling the sampler was created for. No fix is offered when the
    loop has no epoch counter to pass (`for _ in ...`, a `while` loop, a loop over something
    other than `range`/`enumerate`), or when the sampler is created inside the loop.

    ## References
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
    - [Getting started with distributed data parallel](https://pytorch.org/tutorials/intermediate/ddp_tutorial.html)
    """

    code = "TDR502"
    name = "sampler-without-set-epoch"
    fix_safety = Applicability.SAFE

    VALID = (
        # set_epoch called.
        _HEAD + "sampler = DistributedSampler(ds)\n"
        "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(10):\n"
        "    sampler.set_epoch(epoch)\n    for batch in loader:\n"
        "        step(batch)\n",
        # Through the loader, inside a helper called from the loop.
        _HEAD + "def train_one_epoch(loader, epoch):\n"
        "    loader.sampler.set_epoch(epoch)\n    for batch in loader:\n        step(batch)\n"
        "def main():\n    loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
        "    for epoch in range(10):\n"
        "        train_one_epoch(loader, epoch)\n",
        # A method of a trainer that sets the epoch.
        _HEAD + "class Trainer:\n"
        "    def __init__(self, ds):\n        self.sampler = DistributedSampler(ds)\n"
        "        self.loader = DataLoader(ds, sampler=self.sampler)\n"
        "    def run_epoch(self, epoch):\n        self.sampler.set_epoch(epoch)\n"
        "        for batch in self.loader:\n            step(batch)\n    def fit(self, epochs):\n"
        "        for epoch in range(epochs):\n"
        "            self.run_epoch(epoch)\n",
        # No epoch loop: one pass over the loader.
        _HEAD + "sampler = DistributedSampler(ds)\n"
        "loader = DataLoader(ds, sampler=sampler)\nfor batch in loader:\n"
        "    step(batch)\n",
        # Not a distributed sampler.
        "import torch\nfrom torch.utils.data import DataLoader, RandomSampler\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds))\nfor epoch in range(10):\n"
        "    for batch in loader:\n"
        "        step(batch)\n",
        # A sampler that does not shuffle, and an evaluation loader.
        _HEAD + "sampler = DistributedSampler(ds, shuffle=False)\n"
        "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(10):\n"
        "    for batch in loader:\n"
        "        step(batch)\n",
        _HEAD + "val_loader = DataLoader(val_ds, sampler=DistributedSampler(val_ds))\n"
        "for epoch in range(10):\n"
        "    evaluate(model, val_loader)\n",
        # A local class named DistributedSampler is not torch's.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "class DistributedSampler:\n    pass\n"
        "loader = DataLoader(ds, sampler=DistributedSampler())\nfor epoch in range(3):\n"
        "    for batch in loader:\n"
        "        step(batch)\n",
        # Another loader of the same name in another function.
        _HEAD + "def setup(ds):\n"
        "    loader = DataLoader(ds, sampler=DistributedSampler(ds))\n    return len(loader)\n"
        "def train(loader):\n    for epoch in range(3):\n        for batch in loader:\n"
        "            step(batch)\n",
        # set_epoch in a notebook cell.
        Valid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(2):\n"
            "    sampler.set_epoch(epoch)\n    for batch in loader:\n"
            "        pass\n",
            notebook=True,
        ),
        # Across modules: the loader comes from data.py, and a helper of engine.py seeds it.
        Valid(
            "from data import build_loader\nfrom engine import train_one_epoch\n"
            "loader, sampler = build_loader(ds)\nfor epoch in range(3):\n"
            "    train_one_epoch(loader, epoch)\n",
            files=(
                ("data.py", _DATA_PY),
                (
                    "engine.py",
                    "def train_one_epoch(loader, epoch):\n    loader.sampler.set_epoch(epoch)\n"
                    "    for batch in loader:\n"
                    "        pass\n",
                ),
            ),
        ),
        # The helper of another module builds the sampler with shuffle=False.
        Valid(
            "import torch\nfrom data import build_loader\nloader = build_loader(ds)\n"
            "for epoch in range(3):\n    for batch in loader:\n"
            "        pass\n",
            files=(
                (
                    "data.py",
                    _HEAD + "def build_loader(ds):\n"
                    "    return DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))\n",
                ),
            ),
        ),
        # The loader is kept on `self`; the method iterating it seeds the sampler.
        _HEAD + "class Trainer:\n"
        "    def __init__(self, ds):\n        self.sampler = DistributedSampler(ds)\n"
        "        self.loader = DataLoader(ds, batch_size=8, sampler=self.sampler)\n"
        "    def train_epoch(self, epoch):\n        self.sampler.set_epoch(epoch)\n"
        "        for batch in self.loader:\n            self.step(batch)\n"
        "    def fit(self, epochs):\n        for epoch in range(epochs):\n"
        "            self.train_epoch(epoch)\n",
        # The function the epoch loop calls iterates a loader of its own with the same name.
        _HEAD + "def train_epoch(ds):\n"
        "    train_loader = DataLoader(ds, batch_size=8)\n    for batch in train_loader:\n"
        "        step(batch)\ntrain_loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
        "for epoch in range(3):\n"
        "    train_epoch(ds)\n",
        # Loaders kept in a dict: the training one is seeded, the validation one is not trained.
        _HEAD + "loaders = {\n"
        "    'train': DataLoader(ds, sampler=DistributedSampler(ds)),\n"
        "    'val': DataLoader(vs, sampler=DistributedSampler(vs)),\n}\nfor epoch in range(3):\n"
        "    loaders['train'].sampler.set_epoch(epoch)\n    for batch in loaders['train']:\n"
        "        step(batch)\n    for batch in loaders['val']:\n"
        "        evaluate(batch)\n",
        # torchdata's stateful sampler made without shuffling.
        "import torch\nfrom torchdata.stateful_dataloader import StatefulDataLoader\n"
        "from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler\n"
        "sampler = StatefulDistributedSampler(ds, num_replicas=1, rank=0, shuffle=False)\n"
        "loader = StatefulDataLoader(ds, batch_size=8, sampler=sampler)\n"
        "for epoch in range(3):\n    it = iter(loader)\n    for batch in it:\n        step(batch)\n",
    )
    INVALID = (
        Invalid.inserting(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, batch_size=32, sampler=sampler)\nfor epoch in range(10):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            at=6,
            lines="    sampler.set_epoch(epoch)\n",
            rows=(5,),
        ),
        # Two loaders in one epoch loop: one finding, one fix seeding both.
        Invalid.inserting(
            _HEAD + "texts = DataLoader(a, sampler=DistributedSampler(a))\n"
            "images = DataLoader(b, sampler=DistributedSampler(b))\nfor epoch in range(3):\n"
            "    for x, y in zip(texts, images):\n"
            "        step(x, y)\n",
            at=6,
            lines="    texts.sampler.set_epoch(epoch)\n    images.sampler.set_epoch(epoch)\n",
            rows=(5,),
        ),
        # Inline sampler, loader passed to a helper, aliases.
        Invalid.inserting(
            "import torch.utils.data as tud\n"
            "from torch.utils.data.distributed import DistributedSampler as DS\n"
            "def train_one_epoch(model, loader):\n    for x, y in loader:\n        model(x)\n"
            "def main(model, ds, epochs):\n"
            "    train_loader = tud.DataLoader(ds, batch_size=8, sampler=DS(ds), num_workers=4)\n"
            "    for epoch in range(1, epochs + 1):\n"
            "        train_one_epoch(model, train_loader)\n"
            "        print(epoch)\n",
            at=9,
            lines="        train_loader.sampler.set_epoch(epoch)\n",
            rows=(8,),
        ),
        # The documented idiom without the call: guarded by `is not None`.
        Invalid.inserting(
            _HEAD + "def main(ds, distributed):\n"
            "    sampler = DistributedSampler(ds) if distributed else None\n"
            "    loader = DataLoader(ds, sampler=sampler, shuffle=sampler is None)\n"
            "    for epoch in tqdm(range(5)):\n        for step, batch in enumerate(loader):\n"
            "            run(batch)\n",
            at=7,
            lines="        if sampler is not None:\n            sampler.set_epoch(epoch)\n",
            rows=(6,),
        ),
        # A trainer class.
        Invalid.inserting(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n        self.sampler = DistributedSampler(ds, seed=1)\n"
            "        self.loader = DataLoader(ds, sampler=self.sampler)\n"
            "    def fit(self, epochs):\n        for epoch in range(epochs):\n"
            "            for batch in self.loader:\n"
            "                self.step(batch)\n",
            at=9,
            lines="            self.sampler.set_epoch(epoch)\n",
            rows=(8,),
        ),
        # The loader comes from a local builder function.
        Invalid.inserting(
            _HEAD + "def build_loader(ds):\n"
            "    sampler = DistributedSampler(ds)\n"
            "    return DataLoader(ds, batch_size=16, sampler=sampler)\n"
            "loader = build_loader(ds)\nfor ep, lr in enumerate(schedule):\n"
            "    for batch in loader:\n"
            "        step(batch, lr)\n",
            at=8,
            lines="    loader.sampler.set_epoch(ep)\n",
            rows=(7,),
        ),
        # The loader is rebuilt inside the loop: reported, no fix.
        Invalid(
            _HEAD + "def build_loader(ds):\n"
            "    return DataLoader(ds, sampler=DistributedSampler(ds))\nfor epoch in range(3):\n"
            "    loader = build_loader(ds)\n    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(5,),
        ),
        # The sampler may be another kind of sampler: reported, no fix.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler, RandomSampler\n"
            "sampler = DistributedSampler(ds) if distributed else RandomSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(3):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(5,),
        ),
        # No epoch counter to pass: reported without a fix.
        Invalid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\nfor _ in range(3):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(5,),
        ),
        Invalid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\nepoch = 0\nwhile epoch < 3:\n"
            "    for batch in loader:\n        step(batch)\n"
            "    epoch += 1\n",
            fixed=None,
            lines=(6,),
        ),
        # Sampler re-created inside the loop (still seeded with epoch 0): no fix.
        Invalid(
            _HEAD + "for epoch in range(3):\n"
            "    sampler = DistributedSampler(ds)\n    loader = DataLoader(ds, sampler=sampler)\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid.inserting(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(2):\n"
            "    for batch in loader:\n"
            "        pass\n",
            at=6,
            lines="    sampler.set_epoch(epoch)\n",
            notebook=True,
            rows=(5,),
        ),
        # Across modules: the sampler is built in data.py, the epoch loop is here.
        Invalid.inserting(
            "import torch\nfrom data import build_loader\nloader, sampler = build_loader(ds)\n"
            "for epoch in range(3):\n    for batch in loader:\n"
            "        pass\n",
            at=5,
            lines="    sampler.set_epoch(epoch)\n",
            files=(("data.py", _DATA_PY),),
            rows=(4,),
        ),
        # A package that re-exports the builder; only the loader is returned.
        Invalid.inserting(
            "import torch\nfrom pkg import make_loader\ntrain_loader = make_loader(ds)\n"
            "for epoch in range(3):\n    for batch in train_loader:\n"
            "        pass\n",
            at=5,
            lines="    train_loader.sampler.set_epoch(epoch)\n",
            files=(
                ("pkg/__init__.py", "from .loaders import make_loader\n"),
                (
                    "pkg/loaders.py",
                    _HEAD + "def make_loader(ds):\n"
                    "    sampler = DistributedSampler(ds)\n"
                    "    return DataLoader(ds, sampler=sampler, batch_size=8)\n",
                ),
            ),
            rows=(4,),
        ),
        # The loader is bound in both branches of an `if`: the distributed one reaches the
        # epoch loop. No fix: the other branch's loader has no `set_epoch`.
        Invalid(
            _HEAD + "if distributed:\n"
            "    loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))\nelse:\n"
            "    loader = DataLoader(ds, batch_size=32, shuffle=True)\nfor epoch in range(10):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(7,),
        ),
        # The loader is kept on `self` and iterated by another method the epoch loop calls.
        Invalid.inserting(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n        self.sampler = DistributedSampler(ds)\n"
            "        self.loader = DataLoader(ds, batch_size=8, sampler=self.sampler)\n"
            "    def train_epoch(self):\n        for batch in self.loader:\n"
            "            self.step(batch)\n    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            self.train_epoch()\n",
            at=12,
            lines="            self.sampler.set_epoch(epoch)\n",
            rows=(11,),
        ),
        # A module-level loader read as a global by the function the epoch loop calls.
        Invalid.inserting(
            _HEAD + "def train_epoch(epoch):\n"
            "    for x, y in train_loader:\n        step(x, y)\nif __name__ == '__main__':\n"
            "    sampler = DistributedSampler(ds) if ddp else None\n"
            "    train_loader = DataLoader(ds, batch_size=8, sampler=sampler)\n"
            "    for epoch in range(3):\n"
            "        train_epoch(epoch)\n",
            at=10,
            lines="        if sampler is not None:\n            sampler.set_epoch(epoch)\n",
            rows=(9,),
        ),
        # The loader is handed to the trainer's constructor and kept on `self` (no fix: other
        # modules may make the trainer with another loader).
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, model, train_data):\n        self.model = model\n"
            "        self.train_data = train_data\n    def run_epoch(self):\n"
            "        for x, y in self.train_data:\n            self.model(x).sum().backward()\n"
            "    def train(self, epochs):\n        for epoch in range(epochs):\n"
            "            self.run_epoch()\ndef main(ds, model):\n"
            "    loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))\n"
            "    Trainer(model, loader).train(10)\n",
            fixed=None,
            lines=(11,),
        ),
        # A method of the trainer builds the loader it keeps on `self`.
        Invalid.inserting(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, dataset):\n"
            "        self.train_loader = self._make_loader(dataset)\n"
            "    def _make_loader(self, dataset):\n"
            "        return DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))\n"
            "    def fit(self, epochs):\n        for epoch in range(epochs):\n"
            "            for batch in self.train_loader:\n"
            "                self.step(batch)\n",
            at=10,
            lines="            self.train_loader.sampler.set_epoch(epoch)\n",
            rows=(9,),
        ),
        # Loaders kept in a dict (no fix: the item may be replaced by another loader).
        Invalid(
            _HEAD + "loaders = {\n"
            "    'train': DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds)),\n"
            "    'val': DataLoader(vs, batch_size=8),\n}\nfor epoch in range(3):\n"
            "    for batch in loaders['train']:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(7,),
        ),
        Invalid(
            _HEAD + "loaders = {}\n"
            "loaders['train'] = DataLoader(ds, sampler=DistributedSampler(ds))\n"
            "def train_epoch():\n    for batch in loaders['train']:\n        step(batch)\n"
            "for epoch in range(3):\n"
            "    train_epoch()\n",
            fixed=None,
            lines=(8,),
        ),
        # torchdata's stateful loader and sampler, built by a method and read with `next()`.
        Invalid.inserting(
            "import torch\nfrom torchdata.stateful_dataloader import StatefulDataLoader\n"
            "from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler\n"
            "class Recipe:\n    def setup(self, ds):\n        self.loader = self._setup_data(ds)\n"
            "    def _setup_data(self, ds):\n"
            "        sampler = StatefulDistributedSampler(ds, num_replicas=1, rank=0, seed=0)\n"
            "        return StatefulDataLoader(ds, batch_size=8, sampler=sampler)\n"
            "    def train(self):\n        for epoch in range(self.epochs_run, self.total_epochs):\n"
            "            it = iter(self.loader)\n            while True:\n"
            "                try:\n                    batch = next(it)\n"
            "                except StopIteration:\n                    break\n"
            "                self.step(batch)\n",
            at=12,
            lines="            self.loader.sampler.set_epoch(epoch)\n",
            rows=(11,),
        ),
    )

    def check(self, ctx: Context) -> None:
        # One finding per epoch loop, naming every loader whose sampler it leaves unseeded.
        by_loop: dict[ast.AST, tuple[LoopInfo, list[SampledLoader]]] = {}
        for loader, loop in self._unseeded(ctx):
            by_loop.setdefault(loop.node, (loop, []))[1].append(loader)
        for loop, loaders in by_loop.values():
            self._report(ctx, loaders, loop)

    def _unseeded(self, ctx: Context) -> Iterator[tuple[SampledLoader, LoopInfo]]:
        setters = epochs.functions_setting_epoch(ctx.sem)
        for loader in epochs.shuffled_loaders(ctx.sem):
            target = loader.target
            name = terminal_name(target) or ""
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                name = str(target.slice.value)  # loaders["val"]
            if _EVAL_LOADER.search(name):
                continue
            for chain in epochs.epoch_loops(ctx.sem, loader):
                top = chain[0]
                if epochs.sets_epoch(ctx.sem, top.node.body, setters):
                    continue
                chosen = next((c for c in chain if _EPOCH_NAME.search(c.target_name or "")), top)
                yield loader, chosen

    # -- reporting ------------------------------------------------------------------------
    def _report(self, ctx: Context, loaders: list[SampledLoader], loop: LoopInfo) -> None:
        node = loop.node
        header_end = node.iter if isinstance(node, ast.For | ast.AsyncFor) else node.test
        rng = Range(ctx.source.start(node), ctx.source.end(header_end))
        names = "`, `".join(ctx.segment(loader.target) for loader in loaders)
        samplers = "`DistributedSampler`" + ("s" if len(loaders) > 1 else "")
        related = []
        origins: list[str] = []
        for loader in loaders:
            where = ctx.elsewhere(loader.creation)
            if where is not None:
                origins.append(where)
            if where is None:
                related.append(
                    ctx.related(
                        loader.creation,
                        Text(
                            "The `DistributedSampler` is created here",
                            "`DistributedSampler` 在此创建",
                        ),
                    )
                )
            else:  # built by a helper of another module: say where, at the call of the helper
                related.append(
                    ctx.related(
                        loader.inline_with_loader,
                        Text(
                            f"`DistributedSampler` created in {where}",
                            f"`DistributedSampler` 创建于 {where}",
                        ),
                    )
                )
        ctx.report(
            rng,
            Text(
                f"This epoch loop never calls `set_epoch` on the {samplers} of "
                f"`{names}`: every epoch sees the samples in the same order"
                + (f" (`DistributedSampler` created in {', '.join(origins)})" if origins else ""),
                f"该 epoch 循环从未调用 `{names}` 的 `DistributedSampler` 的 `set_epoch`："
                "每个 epoch 的样本顺序都相同"
                + (f"（`DistributedSampler` 创建于 {'、'.join(origins)}）" if origins else ""),
            ),
            fixes=partial(self._fixes, ctx, loaders, loop),
            related=related,
        )

    def _fixes(self, ctx: Context, loaders: list[SampledLoader], loop: LoopInfo) -> Fix | None:
        """One fix seeding every loader of the loop (those that can be fixed)."""
        found = [f for f in (self._fix(ctx, loader, loop) for loader in loaders) if f is not None]
        if len(found) <= 1:
            return found[0] if found else None
        return Fix(
            Text(
                " ".join(f.title.en.removesuffix(" first in the loop") for f in found[:1])
                + "".join(
                    " and " + f.title.en.removeprefix("Call ").removesuffix(" first in the loop")
                    for f in found[1:]
                )
                + " first in the loop",
                "；".join(f.title.zh for f in found),
            ),
            tuple(edit for f in found for edit in f.edits),
            Applicability.SAFE,
        )

    def _fix(self, ctx: Context, loader: SampledLoader, loop: LoopInfo) -> Fix | None:
        sem = ctx.sem
        epoch = epochs.epoch_counter(ctx.sem, loop)
        if epoch is None or not loader.fixable:
            return None
        for made in (loader.creation, loader.inline_with_loader, loader.target):
            if sem.is_inside(made, loop.node):
                return None
        if isinstance(loader.target, ast.Name) and loader.binding is not None:
            if sem.lookup(loader.target.id, loop.node) is not loader.binding:
                return None  # built in one branch of an `if`: the other's loader may differ
        ref = loader.sampler_ref
        if isinstance(ref, ast.Name) and (
            loader.sampler_binding is None
            or sem.lookup(ref.id, loop.node) is not loader.sampler_binding
        ):
            ref = None
        if ref is not None:
            owner = ctx.segment(ref)
        elif loader.guard_none:
            return None
        else:
            owner = f"{ctx.segment(loader.target)}.sampler"
        code = f"{owner}.set_epoch({epoch})"
        if loader.guard_none and ref is not None:
            code = f"if {owner} is not None:\n    {code}"
        edit = fixes.insert_statement_before(ctx.source, loop.node.body[0], code)
        if edit is None:
            return None
        return Fix(
            Text(
                f"Call `{owner}.set_epoch({epoch})` first in the loop",
                f"在循环开头调用 `{owner}.set_epoch({epoch})`",
            ),
            (edit,),
            Applicability.SAFE,
        )
