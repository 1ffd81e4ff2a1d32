from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial

from ..core import arguments, fixes, kinds, summaries, training
from ..core.context import Context
from ..core.model import Applicability, Fix, Range, Text
from ..core.semantic import Binding, Semantic, dotted, terminal_name
from ..core.training import LoopInfo
from .base import Invalid, Rule, Valid

DISTRIBUTED_SAMPLER = "torch.utils.data.DistributedSampler"
# Loaders whose order does not matter (evaluation) are left alone.
_EVAL_LOADER = re.compile(r"(^|_)(val|valid|validation|test|eval)", re.I)
_EPOCH_NAME = re.compile(r"epoch|^ep$|^e$", re.I)
_COUNTER_WRAPPERS = frozenset({"tqdm", "track", "progress_bar"})
_HEAD = "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
# A builder of another module (the multi-file examples' data.py).
_DATA_PY = (
    _HEAD + "def build_loader(ds):\n"
    "    sampler = DistributedSampler(ds)\n"
    "    return DataLoader(ds, sampler=sampler), sampler\n"
)
_COUNTERS = frozenset({"tqdm.trange", "tqdm.auto.trange", "itertools.count"})


@dataclass
class _Loader:
    target: ast.Name | ast.Attribute | ast.Subscript  # where the loader is kept
    binding: Binding | None  # for names; None for ``self.attr``
    cls: ast.ClassDef | None  # for ``self.attr``
    sampler_ref: ast.expr | None  # the sampler name usable next to the loader, if any
    sampler_binding: Binding | None
    creation: ast.Call  # the DistributedSampler(...) call
    inline_with_loader: ast.AST  # the DataLoader call (a fix must not precede it)
    guard_none: bool  # the sampler name may hold None (``... if distributed else None``)
    fixable: bool  # False when the sampler may be something else than a DistributedSampler


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
        "loader = DataLoader(ds, sampler=sampler)\n"
        "for epoch in range(10):\n"
        "    sampler.set_epoch(epoch)\n"
        "    for batch in loader:\n"
        "        step(batch)\n",
        # Through the loader, inside a helper called from the loop.
        _HEAD + "def train_one_epoch(loader, epoch):\n"
        "    loader.sampler.set_epoch(epoch)\n"
        "    for batch in loader:\n"
        "        step(batch)\n"
        "def main():\n"
        "    loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
        "    for epoch in range(10):\n"
        "        train_one_epoch(loader, epoch)\n",
        # A method of a trainer that sets the epoch.
        _HEAD + "class Trainer:\n"
        "    def __init__(self, ds):\n"
        "        self.sampler = DistributedSampler(ds)\n"
        "        self.loader = DataLoader(ds, sampler=self.sampler)\n"
        "    def run_epoch(self, epoch):\n"
        "        self.sampler.set_epoch(epoch)\n"
        "        for batch in self.loader:\n"
        "            step(batch)\n"
        "    def fit(self, epochs):\n"
        "        for epoch in range(epochs):\n"
        "            self.run_epoch(epoch)\n",
        # No epoch loop: one pass over the loader.
        _HEAD + "sampler = DistributedSampler(ds)\n"
        "loader = DataLoader(ds, sampler=sampler)\n"
        "for batch in loader:\n"
        "    step(batch)\n",
        # Not a distributed sampler.
        "import torch\nfrom torch.utils.data import DataLoader, RandomSampler\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds))\n"
        "for epoch in range(10):\n"
        "    for batch in loader:\n"
        "        step(batch)\n",
        # A sampler that does not shuffle, and an evaluation loader.
        _HEAD + "sampler = DistributedSampler(ds, shuffle=False)\n"
        "loader = DataLoader(ds, sampler=sampler)\n"
        "for epoch in range(10):\n"
        "    for batch in loader:\n"
        "        step(batch)\n",
        _HEAD + "val_loader = DataLoader(val_ds, sampler=DistributedSampler(val_ds))\n"
        "for epoch in range(10):\n"
        "    evaluate(model, val_loader)\n",
        # A local class named DistributedSampler is not torch's.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "class DistributedSampler:\n    pass\n"
        "loader = DataLoader(ds, sampler=DistributedSampler())\n"
        "for epoch in range(3):\n"
        "    for batch in loader:\n"
        "        step(batch)\n",
        # Another loader of the same name in another function.
        _HEAD + "def setup(ds):\n"
        "    loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
        "    return len(loader)\n"
        "def train(loader):\n"
        "    for epoch in range(3):\n"
        "        for batch in loader:\n"
        "            step(batch)\n",
        # set_epoch in a notebook cell.
        Valid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\n"
            "for epoch in range(2):\n"
            "    sampler.set_epoch(epoch)\n"
            "    for batch in loader:\n"
            "        pass\n",
            notebook=True,
        ),
        # Across modules: the loader comes from data.py, and a helper of engine.py seeds it.
        Valid(
            "from data import build_loader\n"
            "from engine import train_one_epoch\n"
            "loader, sampler = build_loader(ds)\n"
            "for epoch in range(3):\n"
            "    train_one_epoch(loader, epoch)\n",
            files=(
                ("data.py", _DATA_PY),
                (
                    "engine.py",
                    "def train_one_epoch(loader, epoch):\n"
                    "    loader.sampler.set_epoch(epoch)\n"
                    "    for batch in loader:\n"
                    "        pass\n",
                ),
            ),
        ),
        # The helper of another module builds the sampler with shuffle=False.
        Valid(
            "import torch\nfrom data import build_loader\n"
            "loader = build_loader(ds)\n"
            "for epoch in range(3):\n"
            "    for batch in loader:\n"
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
        "    def __init__(self, ds):\n"
        "        self.sampler = DistributedSampler(ds)\n"
        "        self.loader = DataLoader(ds, batch_size=8, sampler=self.sampler)\n"
        "    def train_epoch(self, epoch):\n"
        "        self.sampler.set_epoch(epoch)\n"
        "        for batch in self.loader:\n"
        "            self.step(batch)\n"
        "    def fit(self, epochs):\n"
        "        for epoch in range(epochs):\n"
        "            self.train_epoch(epoch)\n",
        # The function the epoch loop calls iterates a loader of its own with the same name.
        _HEAD + "def train_epoch(ds):\n"
        "    train_loader = DataLoader(ds, batch_size=8)\n"
        "    for batch in train_loader:\n"
        "        step(batch)\n"
        "train_loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
        "for epoch in range(3):\n"
        "    train_epoch(ds)\n",
        # Loaders kept in a dict: the training one is seeded, the validation one is not trained.
        _HEAD + "loaders = {\n"
        "    'train': DataLoader(ds, sampler=DistributedSampler(ds)),\n"
        "    'val': DataLoader(vs, sampler=DistributedSampler(vs)),\n"
        "}\n"
        "for epoch in range(3):\n"
        "    loaders['train'].sampler.set_epoch(epoch)\n"
        "    for batch in loaders['train']:\n"
        "        step(batch)\n"
        "    for batch in loaders['val']:\n"
        "        evaluate(batch)\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, batch_size=32, sampler=sampler)\n"
            "for epoch in range(10):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=_HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, batch_size=32, sampler=sampler)\n"
            "for epoch in range(10):\n"
            "    sampler.set_epoch(epoch)\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            lines=(5,),
        ),
        # Two loaders in one epoch loop: one finding, one fix seeding both.
        Invalid(
            _HEAD + "texts = DataLoader(a, sampler=DistributedSampler(a))\n"
            "images = DataLoader(b, sampler=DistributedSampler(b))\n"
            "for epoch in range(3):\n"
            "    for x, y in zip(texts, images):\n"
            "        step(x, y)\n",
            fixed=_HEAD + "texts = DataLoader(a, sampler=DistributedSampler(a))\n"
            "images = DataLoader(b, sampler=DistributedSampler(b))\n"
            "for epoch in range(3):\n"
            "    texts.sampler.set_epoch(epoch)\n"
            "    images.sampler.set_epoch(epoch)\n"
            "    for x, y in zip(texts, images):\n"
            "        step(x, y)\n",
            lines=(5,),
        ),
        # Inline sampler, loader passed to a helper, aliases.
        Invalid(
            "import torch.utils.data as tud\n"
            "from torch.utils.data.distributed import DistributedSampler as DS\n"
            "def train_one_epoch(model, loader):\n"
            "    for x, y in loader:\n"
            "        model(x)\n"
            "def main(model, ds, epochs):\n"
            "    train_loader = tud.DataLoader(ds, batch_size=8, sampler=DS(ds), num_workers=4)\n"
            "    for epoch in range(1, epochs + 1):\n"
            "        train_one_epoch(model, train_loader)\n"
            "        print(epoch)\n",
            fixed="import torch.utils.data as tud\n"
            "from torch.utils.data.distributed import DistributedSampler as DS\n"
            "def train_one_epoch(model, loader):\n"
            "    for x, y in loader:\n"
            "        model(x)\n"
            "def main(model, ds, epochs):\n"
            "    train_loader = tud.DataLoader(ds, batch_size=8, sampler=DS(ds), num_workers=4)\n"
            "    for epoch in range(1, epochs + 1):\n"
            "        train_loader.sampler.set_epoch(epoch)\n"
            "        train_one_epoch(model, train_loader)\n"
            "        print(epoch)\n",
            lines=(8,),
        ),
        # The documented idiom without the call: guarded by `is not None`.
        Invalid(
            _HEAD + "def main(ds, distributed):\n"
            "    sampler = DistributedSampler(ds) if distributed else None\n"
            "    loader = DataLoader(ds, sampler=sampler, shuffle=sampler is None)\n"
            "    for epoch in tqdm(range(5)):\n"
            "        for step, batch in enumerate(loader):\n"
            "            run(batch)\n",
            fixed=_HEAD + "def main(ds, distributed):\n"
            "    sampler = DistributedSampler(ds) if distributed else None\n"
            "    loader = DataLoader(ds, sampler=sampler, shuffle=sampler is None)\n"
            "    for epoch in tqdm(range(5)):\n"
            "        if sampler is not None:\n"
            "            sampler.set_epoch(epoch)\n"
            "        for step, batch in enumerate(loader):\n"
            "            run(batch)\n",
            lines=(6,),
        ),
        # A trainer class.
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.sampler = DistributedSampler(ds, seed=1)\n"
            "        self.loader = DataLoader(ds, sampler=self.sampler)\n"
            "    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            for batch in self.loader:\n"
            "                self.step(batch)\n",
            fixed=_HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.sampler = DistributedSampler(ds, seed=1)\n"
            "        self.loader = DataLoader(ds, sampler=self.sampler)\n"
            "    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            self.sampler.set_epoch(epoch)\n"
            "            for batch in self.loader:\n"
            "                self.step(batch)\n",
            lines=(8,),
        ),
        # The loader comes from a local builder function.
        Invalid(
            _HEAD + "def build_loader(ds):\n"
            "    sampler = DistributedSampler(ds)\n"
            "    return DataLoader(ds, batch_size=16, sampler=sampler)\n"
            "loader = build_loader(ds)\n"
            "for ep, lr in enumerate(schedule):\n"
            "    for batch in loader:\n"
            "        step(batch, lr)\n",
            fixed=_HEAD + "def build_loader(ds):\n"
            "    sampler = DistributedSampler(ds)\n"
            "    return DataLoader(ds, batch_size=16, sampler=sampler)\n"
            "loader = build_loader(ds)\n"
            "for ep, lr in enumerate(schedule):\n"
            "    loader.sampler.set_epoch(ep)\n"
            "    for batch in loader:\n"
            "        step(batch, lr)\n",
            lines=(7,),
        ),
        # The loader is rebuilt inside the loop: reported, no fix.
        Invalid(
            _HEAD + "def build_loader(ds):\n"
            "    return DataLoader(ds, sampler=DistributedSampler(ds))\n"
            "for epoch in range(3):\n"
            "    loader = build_loader(ds)\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(5,),
        ),
        # The sampler may be another kind of sampler: reported, no fix.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler, RandomSampler\n"
            "sampler = DistributedSampler(ds) if distributed else RandomSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\n"
            "for epoch in range(3):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(5,),
        ),
        # No epoch counter to pass: reported without a fix.
        Invalid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\n"
            "for _ in range(3):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(5,),
        ),
        Invalid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\n"
            "epoch = 0\n"
            "while epoch < 3:\n"
            "    for batch in loader:\n"
            "        step(batch)\n"
            "    epoch += 1\n",
            fixed=None,
            lines=(6,),
        ),
        # Sampler re-created inside the loop (still seeded with epoch 0): no fix.
        Invalid(
            _HEAD + "for epoch in range(3):\n"
            "    sampler = DistributedSampler(ds)\n"
            "    loader = DataLoader(ds, sampler=sampler)\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            _HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\n"
            "for epoch in range(2):\n"
            "    for batch in loader:\n"
            "        pass\n",
            fixed=_HEAD + "sampler = DistributedSampler(ds)\n"
            "loader = DataLoader(ds, sampler=sampler)\n"
            "for epoch in range(2):\n"
            "    sampler.set_epoch(epoch)\n"
            "    for batch in loader:\n"
            "        pass\n",
            notebook=True,
            lines=(5,),
        ),
        # Across modules: the sampler is built in data.py, the epoch loop is here.
        Invalid(
            "import torch\nfrom data import build_loader\n"
            "loader, sampler = build_loader(ds)\n"
            "for epoch in range(3):\n"
            "    for batch in loader:\n"
            "        pass\n",
            fixed="import torch\nfrom data import build_loader\n"
            "loader, sampler = build_loader(ds)\n"
            "for epoch in range(3):\n"
            "    sampler.set_epoch(epoch)\n"
            "    for batch in loader:\n"
            "        pass\n",
            files=(("data.py", _DATA_PY),),
            lines=(4,),
        ),
        # A package that re-exports the builder; only the loader is returned.
        Invalid(
            "import torch\nfrom pkg import make_loader\n"
            "train_loader = make_loader(ds)\n"
            "for epoch in range(3):\n"
            "    for batch in train_loader:\n"
            "        pass\n",
            fixed="import torch\nfrom pkg import make_loader\n"
            "train_loader = make_loader(ds)\n"
            "for epoch in range(3):\n"
            "    train_loader.sampler.set_epoch(epoch)\n"
            "    for batch in train_loader:\n"
            "        pass\n",
            files=(
                ("pkg/__init__.py", "from .loaders import make_loader\n"),
                (
                    "pkg/loaders.py",
                    _HEAD + "def make_loader(ds):\n"
                    "    sampler = DistributedSampler(ds)\n"
                    "    return DataLoader(ds, sampler=sampler, batch_size=8)\n",
                ),
            ),
            lines=(4,),
        ),
        # The loader is bound in both branches of an `if`: the distributed one reaches the
        # epoch loop. No fix: the other branch's loader has no `set_epoch`.
        Invalid(
            _HEAD + "if distributed:\n"
            "    loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))\n"
            "else:\n"
            "    loader = DataLoader(ds, batch_size=32, shuffle=True)\n"
            "for epoch in range(10):\n"
            "    for batch in loader:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(7,),
        ),
        # The loader is kept on `self` and iterated by another method the epoch loop calls.
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.sampler = DistributedSampler(ds)\n"
            "        self.loader = DataLoader(ds, batch_size=8, sampler=self.sampler)\n"
            "    def train_epoch(self):\n"
            "        for batch in self.loader:\n"
            "            self.step(batch)\n"
            "    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            self.train_epoch()\n",
            fixed=_HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.sampler = DistributedSampler(ds)\n"
            "        self.loader = DataLoader(ds, batch_size=8, sampler=self.sampler)\n"
            "    def train_epoch(self):\n"
            "        for batch in self.loader:\n"
            "            self.step(batch)\n"
            "    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            self.sampler.set_epoch(epoch)\n"
            "            self.train_epoch()\n",
            lines=(11,),
        ),
        # A module-level loader read as a global by the function the epoch loop calls.
        Invalid(
            _HEAD + "def train_epoch(epoch):\n"
            "    for x, y in train_loader:\n"
            "        step(x, y)\n"
            "if __name__ == '__main__':\n"
            "    sampler = DistributedSampler(ds) if ddp else None\n"
            "    train_loader = DataLoader(ds, batch_size=8, sampler=sampler)\n"
            "    for epoch in range(3):\n"
            "        train_epoch(epoch)\n",
            fixed=_HEAD + "def train_epoch(epoch):\n"
            "    for x, y in train_loader:\n"
            "        step(x, y)\n"
            "if __name__ == '__main__':\n"
            "    sampler = DistributedSampler(ds) if ddp else None\n"
            "    train_loader = DataLoader(ds, batch_size=8, sampler=sampler)\n"
            "    for epoch in range(3):\n"
            "        if sampler is not None:\n"
            "            sampler.set_epoch(epoch)\n"
            "        train_epoch(epoch)\n",
            lines=(9,),
        ),
        # The loader is handed to the trainer's constructor and kept on `self` (no fix: other
        # modules may make the trainer with another loader).
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, model, train_data):\n"
            "        self.model = model\n"
            "        self.train_data = train_data\n"
            "    def run_epoch(self):\n"
            "        for x, y in self.train_data:\n"
            "            self.model(x).sum().backward()\n"
            "    def train(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            self.run_epoch()\n"
            "def main(ds, model):\n"
            "    loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))\n"
            "    Trainer(model, loader).train(10)\n",
            fixed=None,
            lines=(11,),
        ),
        # A method of the trainer builds the loader it keeps on `self`.
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, dataset):\n"
            "        self.train_loader = self._make_loader(dataset)\n"
            "    def _make_loader(self, dataset):\n"
            "        return DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))\n"
            "    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            for batch in self.train_loader:\n"
            "                self.step(batch)\n",
            fixed=_HEAD + "class Trainer:\n"
            "    def __init__(self, dataset):\n"
            "        self.train_loader = self._make_loader(dataset)\n"
            "    def _make_loader(self, dataset):\n"
            "        return DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))\n"
            "    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n"
            "            self.train_loader.sampler.set_epoch(epoch)\n"
            "            for batch in self.train_loader:\n"
            "                self.step(batch)\n",
            lines=(9,),
        ),
        # Loaders kept in a dict (no fix: the item may be replaced by another loader).
        Invalid(
            _HEAD + "loaders = {\n"
            "    'train': DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds)),\n"
            "    'val': DataLoader(vs, batch_size=8),\n"
            "}\n"
            "for epoch in range(3):\n"
            "    for batch in loaders['train']:\n"
            "        step(batch)\n",
            fixed=None,
            lines=(7,),
        ),
        Invalid(
            _HEAD + "loaders = {}\n"
            "loaders['train'] = DataLoader(ds, sampler=DistributedSampler(ds))\n"
            "def train_epoch():\n"
            "    for batch in loaders['train']:\n"
            "        step(batch)\n"
            "for epoch in range(3):\n"
            "    train_epoch()\n",
            fixed=None,
            lines=(8,),
        ),
    )

    def check(self, ctx: Context) -> None:
        # One finding per epoch loop, naming every loader whose sampler it leaves unseeded.
        by_loop: dict[ast.AST, tuple[LoopInfo, list[_Loader]]] = {}
        for loader, loop in self._unseeded(ctx):
            by_loop.setdefault(loop.node, (loop, []))[1].append(loader)
        for loop, loaders in by_loop.values():
            self._report(ctx, loaders, loop)

    def _unseeded(self, ctx: Context) -> Iterator[tuple[_Loader, LoopInfo]]:
        setters = _functions_setting_epoch(ctx)
        made_here = (
            loader
            for call in ctx.sem.calls_to("torch.utils.data.DataLoader")
            for loader in self._loaders(ctx, call)
        )
        for loader in _and_kept(ctx, (*made_here, *_built_elsewhere(ctx))):
            target = loader.target
            name = terminal_name(target) or ""
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                name = str(target.slice.value)  # loaders["val"]
            if _EVAL_LOADER.search(name):
                continue
            for chain in self._epoch_loops(ctx, loader):
                top = chain[0]
                if _sets_epoch(ctx, top.node.body, setters):
                    continue
                chosen = next((c for c in chain if _EPOCH_NAME.search(c.target_name or "")), top)
                yield loader, chosen

    # -- finding the loaders --------------------------------------------------------------
    def _loaders(self, ctx: Context, call: ast.Call) -> list[_Loader]:
        sem = ctx.sem
        sampler = arguments.value(call, arguments.DATALOADER, "sampler")
        if sampler is None:
            return []
        created, other = kinds.constructions(
            sem, sampler, lambda c: sem.qualname(c.func) == DISTRIBUTED_SAMPLER
        )
        if not created or any(_no_shuffle(c) for c in created):
            return []
        # When the sampler may be something else (None, another sampler...), a fix is only
        # offered for ``name = DistributedSampler(...) if cond else None``, guarded.
        guard = (
            isinstance(sampler, ast.Name)
            and other
            and _none_or_sampler(sem, sem.lookup(sampler.id, sampler))
        )
        fixable = not other or guard
        ref: ast.expr | None = None
        sampler_binding = None
        if isinstance(sampler, ast.Name):
            ref, sampler_binding = sampler, sem.lookup(sampler.id, sampler)
        elif isinstance(sampler, ast.Attribute) and dotted(sampler) is not None:
            ref = sampler
        out: list[_Loader] = []
        for target in self._targets(ctx, call):
            returned = isinstance(target, _Returned)
            own = target.target if isinstance(target, _Returned) else target
            base = _base_name(own)
            binding = sem.lookup(base.id, base) if isinstance(base, ast.Name) else None
            cls = sem.enclosing_class(own) if isinstance(own, ast.Attribute) else None
            if isinstance(own, ast.Attribute) and cls is None:
                continue
            # A sampler name from inside a builder function is not visible at the caller.
            usable = None if returned else ref
            out.append(
                _Loader(
                    own,
                    binding,
                    cls,
                    usable,
                    sampler_binding,
                    created[0],
                    call,
                    guard,
                    # An item of a dict may be replaced by another loader: no fix.
                    fixable and not (returned and guard) and not isinstance(own, ast.Subscript),
                )
            )
        return out

    def _targets(
        self, ctx: Context, call: ast.Call
    ) -> list[ast.Name | ast.Attribute | ast.Subscript | _Returned]:
        """Where the DataLoader lands: ``loader = DataLoader(...)``, ``self.loader = ...``,
        or a name assigned from a local function that returns it."""
        sem = ctx.sem
        parent = sem.parent(call)
        if isinstance(parent, ast.Assign | ast.AnnAssign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if len(targets) != 1:
                return []
            target = targets[0]
            if isinstance(target, ast.Name):
                function = sem.enclosing_function(call)
                returned = _returned_name(sem, function, target.id) if function else []
                return [target, *returned]
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                return [target]
            if training.reference(target) is not None and isinstance(target, ast.Subscript):
                return [target]  # loaders["train"] = DataLoader(...)
            return []
        if isinstance(parent, ast.Dict) and call in parent.values:
            return [*_dict_item(sem, parent, parent.keys[parent.values.index(call)])]
        if isinstance(parent, ast.Return):
            function = sem.enclosing_function(call)
            return list(_call_sites(sem, function)) if function else []
        return []

    # -- finding the epoch loops ----------------------------------------------------------
    def _epoch_loops(self, ctx: Context, loader: _Loader) -> list[list[LoopInfo]]:
        sem = ctx.sem
        want = training.reference(loader.target)
        candidates: list[LoopInfo] = []
        for info in training.all_loops(sem):
            if info.is_batch_loop:
                continue
            if loader.binding is not None:
                name = _base_name(loader.target)
                assert isinstance(name, ast.Name)
                if loader.binding not in sem.reaching(name.id, info.node):
                    continue  # (a binding in one branch of an `if` before the loop reaches it)
            elif sem.enclosing_class(info.node) is not loader.cls:
                continue
            if training.loop_uses_loader(sem, info, loader.target) and want:
                candidates.append(info)
        chosen = set(map(id, candidates))
        chains: list[list[LoopInfo]] = []
        for info in candidates:
            parent = info.parent
            nested = False
            while parent is not None:
                if id(parent) in chosen:
                    nested = True
                    break
                parent = parent.parent
            if nested:
                continue
            chain = [info] + [
                c for c in candidates if c is not info and sem.is_inside(c.node, info.node)
            ]
            chains.append(chain)
        return chains

    # -- reporting ------------------------------------------------------------------------
    def _report(self, ctx: Context, loaders: list[_Loader], loop: LoopInfo) -> None:
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

    def _fixes(self, ctx: Context, loaders: list[_Loader], loop: LoopInfo) -> Fix | None:
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

    def _fix(self, ctx: Context, loader: _Loader, loop: LoopInfo) -> Fix | None:
        sem = ctx.sem
        epoch = _epoch_counter(ctx, loop)
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


@dataclass
class _Returned:
    """A name bound to the result of a local function that returns the DataLoader."""

    target: ast.Name | ast.Attribute


def _call_sites(
    sem: Semantic, function: ast.FunctionDef | ast.AsyncFunctionDef, index: int | None = None
) -> Iterator[_Returned]:
    """``x = function(...)`` (or ``x, y = ...`` at ``index``) anywhere in the file; for a
    method, ``self.loader = self.build(...)`` in its class too."""
    calls = [
        c
        for c in sem.calls_by_name.get(function.name, ())
        if sem.local_function(c.func) is function
    ]
    owner = sem.parent(function)
    if isinstance(owner, ast.ClassDef):
        calls += [
            c
            for c in sem.calls_by_attr.get(function.name, ())
            if isinstance(c.func, ast.Attribute)
            and isinstance(c.func.value, ast.Name)
            and c.func.value.id == "self"
            and sem.enclosing_class(c) is owner
        ]
    for call in calls:
        parent = sem.parent(call)
        if not isinstance(parent, ast.Assign) or len(parent.targets) != 1:
            continue
        target = parent.targets[0]
        kept = isinstance(target, ast.Attribute) and dotted(target) == f"self.{target.attr}"
        if index is None and (isinstance(target, ast.Name) or kept):
            assert isinstance(target, ast.Name | ast.Attribute)
            yield _Returned(target)
        elif (
            index is not None
            and isinstance(target, ast.Tuple | ast.List)
            and index < len(target.elts)
            and isinstance(target.elts[index], ast.Name)
        ):
            elt = target.elts[index]
            assert isinstance(elt, ast.Name)
            yield _Returned(elt)


def _returned_name(
    sem: Semantic, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> list[_Returned]:
    """Call sites receiving ``name`` when ``function`` returns it (alone or in a tuple)."""
    out: list[_Returned] = []
    for node in sem.walk(function):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id == name:
            out += _call_sites(sem, function)
        elif isinstance(value, ast.Tuple):
            for i, elt in enumerate(value.elts):
                if isinstance(elt, ast.Name) and elt.id == name:
                    out += _call_sites(sem, function, i)
    return out


def _no_shuffle(sampler: ast.Call) -> bool:
    value = arguments.value(sampler, arguments.DISTRIBUTED_SAMPLER, "shuffle")
    return isinstance(value, ast.Constant) and not value.value


def _none_or_sampler(sem: Semantic, binding: Binding | None) -> bool:
    """``sampler = DistributedSampler(ds) if cond else None`` (its only assignment)."""
    if binding is None or binding.how != "assign" or not isinstance(binding.value, ast.IfExp):
        return False
    scope = sem.scopes.get(binding.scope)
    if scope is None or len(scope.bindings.get(binding.name, [])) != 1:
        return False
    branches = (binding.value.body, binding.value.orelse)
    nones = [b for b in branches if isinstance(b, ast.Constant) and b.value is None]
    calls = [
        b
        for b in branches
        if isinstance(b, ast.Call) and sem.qualname(b.func) == DISTRIBUTED_SAMPLER
    ]
    return len(nones) == 1 and len(calls) == 1


def _epoch_counter(ctx: Context, loop: LoopInfo) -> str | None:
    """The loop's integer counter (``epoch`` in ``for epoch in range(n)``), if it has one."""
    node = loop.node
    name = loop.target_name
    if name is None or not isinstance(node, ast.For | ast.AsyncFor):
        return None
    expr: ast.expr = node.iter
    tuple_target = isinstance(node.target, ast.Tuple)
    for _ in range(3):
        if not isinstance(expr, ast.Call):
            return None
        func = expr.func
        callee = terminal_name(func)
        builtin = isinstance(func, ast.Name) and ctx.sem.lookup(func.id, func) is None
        if builtin and callee == "range":
            return None if tuple_target else name
        if builtin and callee == "enumerate":
            return name if tuple_target else None
        if ctx.qualname(func) in _COUNTERS:
            return None if tuple_target else name
        if callee in _COUNTER_WRAPPERS and expr.args:
            expr = expr.args[0]
            continue
        return None
    return None


def _base_name(target: ast.expr) -> ast.expr:
    """The name a loader is kept under: ``loaders`` for ``loaders["train"]``."""
    return target.value if isinstance(target, ast.Subscript) else target


def _dict_item(sem: Semantic, made: ast.Dict, key: ast.expr | None) -> list[ast.Subscript]:
    """``loaders["train"]`` as the file reads it, for a DataLoader made as the item ``key`` of
    the dict assigned to ``loaders``."""
    stmt = sem.parent(made)
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(key, ast.Constant)
    ):
        return []
    name = stmt.targets[0]
    binding = sem.lookup(name.id, name)
    for load in sem.names.get(name.id, ()):
        item = sem.parent(load)
        if (
            isinstance(item, ast.Subscript)
            and item.value is load
            and isinstance(item.slice, ast.Constant)
            and item.slice.value == key.value
            and sem.lookup(name.id, load) is binding
        ):
            return [item]
    return []


def _and_kept(ctx: Context, loaders: Iterable[_Loader]) -> Iterator[_Loader]:
    """The loaders, and for a loader name handed to a class of the file, the ``self.attr`` its
    ``__init__`` keeps it in (iterated by the class's methods)."""
    for loader in loaders:
        yield loader
        if isinstance(loader.target, ast.Name):
            for kept in summaries.kept_on_self(ctx.sem, loader.target):
                yield replace(
                    loader,
                    target=kept,
                    binding=None,
                    cls=ctx.sem.enclosing_class(kept),
                    sampler_ref=None,
                    sampler_binding=None,
                    # Other modules may make the class with a loader of another sampler.
                    fixable=False,
                )


def _functions_setting_epoch(ctx: Context) -> set[str]:
    """Names of the file's functions that call ``set_epoch`` (directly or through each other)."""
    sem = ctx.sem
    found: set[str] = set()
    if not sem.calls_by_attr.get("set_epoch"):
        return found
    changed = True
    while changed:
        changed = False
        for function in sem.functions:
            if function.name not in found and _sets_epoch(ctx, function.body, found):
                found.add(function.name)
                changed = True
    return found


def _sets_epoch(ctx: Context, body: list[ast.stmt], setters: set[str]) -> bool:
    for node in ctx.sem.walk_body(body):
        if isinstance(node, ast.Call):
            callee = terminal_name(node.func)
            if callee == "set_epoch" and isinstance(node.func, ast.Attribute):
                return True
            if callee in setters:
                return True
            called = summaries.summary(ctx.sem, node.func)
            if called is not None and "set_epoch" in called.methods:
                return True  # a helper (of another module too) that seeds the sampler
    return False


def _built_elsewhere(ctx: Context) -> Iterator[_Loader]:
    """Loaders that a function of another project module builds with a ``DistributedSampler``
    and returns (alone, or with the sampler in a tuple): ``loader, sampler = build(ds)``."""
    sem = ctx.sem
    if sem.project is None:
        return
    for stmt in sem.assigns:
        call = stmt.value
        if len(stmt.targets) != 1 or not isinstance(call, ast.Call):
            continue
        defined = sem.function_def(call.func)
        if defined is None or defined[0] is sem:
            continue
        owner, func = defined
        target = stmt.targets[0]
        for index, creation, sampler_index, other in _returned_loaders(owner, func):
            if index is None:
                own = target if isinstance(target, ast.Name) else None
                sampler_ref = None
            elif isinstance(target, ast.Tuple | ast.List) and index < len(target.elts):
                elt = target.elts[index]
                own = elt if isinstance(elt, ast.Name) else None
                ref = target.elts[sampler_index] if sampler_index is not None else None
                sampler_ref = ref if isinstance(ref, ast.Name) else None
            else:
                continue
            if own is None:
                continue
            sampler_binding = sem.lookup(sampler_ref.id, sampler_ref) if sampler_ref else None
            yield _Loader(
                own,
                sem.lookup(own.id, own),
                None,
                sampler_ref,
                sampler_binding,
                creation,
                call,
                False,
                not other,
            )


def _returned_loaders(
    sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef
) -> list[tuple[int | None, ast.Call, int | None, bool]]:
    """What ``func`` returns that is a DataLoader over a shuffling ``DistributedSampler``: the
    position in the returned tuple (None: returned alone), the sampler's creation, the position
    of the sampler itself in the tuple, and whether the sampler may be something else."""
    out: list[tuple[int | None, ast.Call, int | None, bool]] = []

    def is_loader(c: ast.Call) -> bool:
        return sem.qualname(c.func) == "torch.utils.data.DataLoader"

    def is_sampler(c: ast.Call) -> bool:
        return sem.qualname(c.func) == DISTRIBUTED_SAMPLER

    for value in sem.returns(func):
        parts = list(enumerate(value.elts)) if isinstance(value, ast.Tuple) else [(None, value)]
        for index, part in parts:
            made, _other = kinds.constructions(sem, part, is_loader)
            for loader in made:
                sampler = arguments.value(loader, arguments.DATALOADER, "sampler")
                created, other = kinds.constructions(sem, sampler, is_sampler)
                if not created or any(_no_shuffle(c) for c in created):
                    continue
                sampler_index = None
                for j, elt in parts:
                    if j is not None and j != index:
                        found, _ = kinds.constructions(sem, elt, is_sampler)
                        if any(c in created for c in found):
                            sampler_index = j
                out.append((index, created[0], sampler_index, other))
    return out
