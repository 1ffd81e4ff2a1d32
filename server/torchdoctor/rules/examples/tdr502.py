"""TDR502's VALID and INVALID examples: the rule (``rules/tdr502_sampler_without_set_epoch.py``)
declares them as its own, and the rule tests run them."""

from __future__ import annotations

from ..base import Invalid, Valid

_HEAD = "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
# A builder of another module (the multi-file examples' data.py).
_DATA_PY = (
    _HEAD + "def build_loader(ds):\n"
    "    sampler = DistributedSampler(ds)\n"
    "    return DataLoader(ds, sampler=sampler), sampler\n"
)


# A backend the project makes through a function: its methods cannot be read from here.
_BACKENDS_PY = (
    "class Local:\n    def distribute(self, model=None, data=None):\n        return model, data\n"
    "BACKENDS = {'local': Local()}\ndef make_backend(name='local'):\n"
    "    return BACKENDS[name]\n"
)
_THROUGH = (
    _HEAD + "from backends import make_backend\nbackend = make_backend()\n"
    "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, batch_size=8, sampler=sampler)\n"
    "model, dl = backend.distribute(model=net, data=ds if streaming else loader)\n"
)


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
    # The loader goes through the project's backend; the epoch loop seeds the sampler.
    Valid(
        _THROUGH + "for epoch in range(3):\n    sampler.set_epoch(epoch)\n    for batch in dl:\n"
        "        step(batch)\n",
        files=(("backends.py", _BACKENDS_PY),),
    ),
    # One pass over what the backend returns: no epoch loop.
    Valid(
        _THROUGH + "for batch in dl:\n    step(batch)\n",
        files=(("backends.py", _BACKENDS_PY),),
    ),
    # A library's wrapper (Accelerate seeds the sampler of the loaders it prepares).
    _HEAD + "from accelerate import Accelerator\naccelerator = Accelerator()\n"
    "loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))\n"
    "model, dl = accelerator.prepare(net, loader)\nfor epoch in range(3):\n"
    "    for batch in dl:\n        step(batch)\n",
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
    # The loader is handed to a method of the project's backend, whose body cannot be read, and
    # the epoch loop iterates what it returns (no fix: that may be another loader).
    Invalid(
        _THROUGH + "for epoch in range(3):\n    for i, batch in enumerate(dl):\n"
        "        step(batch)\n",
        fixed=None,
        lines=(8,),
        files=(("backends.py", _BACKENDS_PY),),
    ),
)
