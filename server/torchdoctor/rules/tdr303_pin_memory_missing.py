from __future__ import annotations

import ast

from ..core import data, fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid

_HEAD = "import torch\nfrom torch.utils.data import DataLoader\n"


class PinMemoryMissing(Rule):
    """## What it does
    Checks for a `DataLoader` without `pin_memory=` whose batches are moved to a CUDA device:
    `.cuda()` or `.to(device)` on a batch of a loop over that loader, where `device` is
    `"cuda"`, `"cuda:N"`, `torch.device("cuda", ...)`, or a name assigned one of those
    (`"cuda" if torch.cuda.is_available() else "cpu"` counts).

    Only loaders whose own batches are seen moving to CUDA in the same file are reported, not
    every loader of a file that uses CUDA: a model moved with `model.cuda()` is not a batch,
    and a loader built in another file, or a device the file does not spell out
    (`args.device`), is not reported.

    Off by default (`extend-select = ["TDR303"]` turns it on): on real training code most loaders it matches have no workers or small in-memory data, where pinning gains nothing.

    ## Why is this bad?
    A copy from ordinary (pageable) host memory to the GPU goes through a staging buffer of
    pinned memory that the driver fills first, so the copy is slow and `non_blocking=True`
    cannot make it asynchronous. With `pin_memory=True` the loader puts each batch in
    page-locked memory, from which the GPU copies directly by DMA. Measured on an H200 with a
    512 MiB batch: pageable 20.9 GB/s, pageable with `non_blocking=True` 20.7 GB/s (no gain),
    pinned with `non_blocking=True` 55.0 GB/s (2.6x). The gain matters when the copies are a
    visible part of the step; with heavy compute per batch it is small, and pinned memory is a
    limited resource (the guide notes both).

    A loader given `pin_memory=` explicitly, `False` included, is left alone: that is a choice.

    ## Example
    ```python
    loader = DataLoader(train_set, batch_size=256, shuffle=True, num_workers=8)
    for images, labels in loader:
        images, labels = images.to("cuda"), labels.to("cuda")
    ```

    ## Use instead
    ```python
    loader = DataLoader(
        train_set, batch_size=256, shuffle=True, num_workers=8, pin_memory=True
    )
    for images, labels in loader:
        images = images.to("cuda", non_blocking=True)
        labels = labels.to("cuda", non_blocking=True)
    ```

    ## Fix safety
    The fix adds `pin_memory=True` to the `DataLoader` call. It is safe: the batches hold the
    same values, only the host memory they live in changes. On a machine without a GPU PyTorch
    warns once and does not pin.

    ## References
    - [Memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    """

    code = "TDR303"
    default = False
    name = "pin-memory-missing"
    severity = Severity.INFO
    fix_safety = Applicability.SAFE

    VALID = (
        # The progress bar wraps a list of tensors, not a loader.
        _HEAD + "loader = DataLoader(ds, batch_size=8)\n"
        "pbar = tqdm(enumerate(items)) if verbose else enumerate(items)\n"
        "for it, (x, y) in pbar:\n"
        "    x = x.to('cuda')\n",
        # Already pinned, or pinning turned off on purpose.
        _HEAD + "loader = DataLoader(ds, batch_size=8, pin_memory=True)\n"
        "for x, y in loader:\n    x = x.cuda()\n",
        _HEAD + "loader = DataLoader(ds, batch_size=8, pin_memory=False)\n"
        "for x, y in loader:\n    x = x.cuda()\n",
        _HEAD + "loader = DataLoader(ds, batch_size=8, pin_memory=torch.cuda.is_available())\n"
        "for x, y in loader:\n    x = x.cuda()\n",
        # Options from a dict may hold pin_memory.
        _HEAD + "loader = DataLoader(ds, **loader_kwargs)\nfor x, y in loader:\n    x = x.cuda()\n",
        # The file never moves batches to CUDA: only the model, or batches stay on the CPU.
        _HEAD + "model = Net().cuda()\nloader = DataLoader(ds, batch_size=8)\n"
        "for x, y in loader:\n    out = model(x)\n",
        _HEAD + "device = torch.device('cpu')\nloader = DataLoader(ds, batch_size=8)\n"
        "for x, y in loader:\n    x = x.to(device)\n",
        _HEAD + "device = 'mps' if torch.backends.mps.is_available() else 'cpu'\n"
        "loader = DataLoader(ds)\nfor x, y in loader:\n    x = x.to(device)\n",
        # A device we cannot see, and a cast that is not a device.
        _HEAD + "loader = DataLoader(ds)\nfor x, y in loader:\n"
        "    x = x.to(args.device)\n    y = y.to(torch.float16)\n",
        # A tensor that is not a batch of the loader.
        _HEAD + "loader = DataLoader(ds)\nweights = torch.ones(10).cuda()\n"
        "for x, y in loader:\n    pass\n",
        # The loop counter of enumerate is not a batch.
        _HEAD + "loader = DataLoader(ds)\nfor i, batch in enumerate(loader):\n"
        "    step = torch.tensor(i).cuda()\n",
        # A loader rebuilt later (for a plot) is not the one the training loop moved to CUDA.
        Valid(
            _HEAD + "loader = DataLoader(ds, batch_size=256, pin_memory=True)\n"
            "for x, y in loader:\n    x = x.cuda()\n"
            "loader = DataLoader(ds, batch_size=15)\nfor x, y in loader:\n    break\n",
            notebook=True,
        ),
        # A local class named DataLoader is not torch's.
        "import torch\nclass DataLoader:\n    def __init__(self, ds):\n        self.ds = ds\n"
        "    def __iter__(self):\n        return iter(self.ds)\n"
        "loader = DataLoader([torch.ones(2)])\nfor x in loader:\n    x = x.cuda()\n",
        # The dataset's tensors are already on the GPU: pinning them would fail.
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "x = torch.randn(100, 3).cuda()\nds = TensorDataset(x, torch.zeros(100, device='cuda'))\n"
        "loader = DataLoader(ds, batch_size=10)\nfor xb, yb in loader:\n    xb = xb.cuda()\n",
        Valid(
            _HEAD + "loader = DataLoader(ds, batch_size=8, pin_memory=True)\n"
            "for x, y in loader:\n    x = x.to('cuda')\n",
            notebook=True,
        ),
    )
    INVALID = (
        # The loop iterates a progress bar over the loader, picked in either branch of a
        # conditional; the device is kept on `self`.
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.device = 'cpu'\n"
            "        if torch.cuda.is_available():\n"
            "            self.device = torch.cuda.current_device()\n"
            "    def run(self, ds, verbose):\n"
            "        loader = DataLoader(ds, batch_size=8, num_workers=2)\n"
            "        pbar = tqdm(enumerate(loader)) if verbose else enumerate(loader)\n"
            "        for it, (x, y) in pbar:\n"
            "            x = x.to(self.device)\n",
            fixed=_HEAD + "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.device = 'cpu'\n"
            "        if torch.cuda.is_available():\n"
            "            self.device = torch.cuda.current_device()\n"
            "    def run(self, ds, verbose):\n"
            "        loader = DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True)\n"
            "        pbar = tqdm(enumerate(loader)) if verbose else enumerate(loader)\n"
            "        for it, (x, y) in pbar:\n"
            "            x = x.to(self.device)\n",
            lines=(9,),
        ),
        Invalid(
            _HEAD + "loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)\n"
            "for images, labels in loader:\n"
            "    images, labels = images.to('cuda'), labels.to('cuda')\n",
            fixed=_HEAD + "loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4, "
            "pin_memory=True)\n"
            "for images, labels in loader:\n"
            "    images, labels = images.to('cuda'), labels.to('cuda')\n",
            lines=(3,),
        ),
        # A module-level device string with a CPU fallback, loops in functions.
        Invalid(
            _HEAD + "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "trainloader = torch.utils.data.DataLoader(\n"
            "    trainset, batch_size=128, shuffle=True, num_workers=2)\n"
            "def train(epoch):\n"
            "    for batch_idx, (inputs, targets) in enumerate(trainloader):\n"
            "        inputs, targets = inputs.to(device), targets.to(device)\n",
            fixed=_HEAD + "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "trainloader = torch.utils.data.DataLoader(\n"
            "    trainset, batch_size=128, shuffle=True, num_workers=2, pin_memory=True)\n"
            "def train(epoch):\n"
            "    for batch_idx, (inputs, targets) in enumerate(trainloader):\n"
            "        inputs, targets = inputs.to(device), targets.to(device)\n",
            lines=(4,),
        ),
        # The usual device idiom, an alias, tqdm and enumerate.
        Invalid(
            "import torch\nimport torch.utils.data as tud\nfrom tqdm import tqdm\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "train_loader = tud.DataLoader(train_set, 32, True)\n"
            "for step, (x, y) in enumerate(tqdm(train_loader)):\n"
            "    x = x.to(device)\n",
            fixed="import torch\nimport torch.utils.data as tud\nfrom tqdm import tqdm\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "train_loader = tud.DataLoader(train_set, 32, True, pin_memory=True)\n"
            "for step, (x, y) in enumerate(tqdm(train_loader)):\n"
            "    x = x.to(device)\n",
            lines=(5,),
        ),
        # A dict batch moved in a comprehension, inside a function given the loader and device.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader as DL\n"
            "def train(model, loader, device):\n"
            "    for batch in loader:\n"
            "        batch = {k: v.to(device) for k, v in batch.items()}\n"
            "        model(**batch)\n"
            "def main(model, ds, rank):\n"
            "    train(model, DL(ds, batch_size=16), f'cuda:{rank}')\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader as DL\n"
            "def train(model, loader, device):\n"
            "    for batch in loader:\n"
            "        batch = {k: v.to(device) for k, v in batch.items()}\n"
            "        model(**batch)\n"
            "def main(model, ds, rank):\n"
            "    train(model, DL(ds, batch_size=16, pin_memory=True), f'cuda:{rank}')\n",
            lines=(8,),
        ),
        # A trainer class, `.cuda()` on an element of the batch.
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.loader = DataLoader(ds, batch_size=8)\n"
            "    def fit(self):\n"
            "        for batch in self.loader:\n"
            "            x = batch[0].cuda()\n",
            fixed=_HEAD + "class Trainer:\n"
            "    def __init__(self, ds):\n"
            "        self.loader = DataLoader(ds, batch_size=8, pin_memory=True)\n"
            "    def fit(self):\n"
            "        for batch in self.loader:\n"
            "            x = batch[0].cuda()\n",
            lines=(5,),
        ),
        Invalid(
            _HEAD + "loader = DataLoader(ds)\nfor x, y in loader:\n    x = x.cuda()\n",
            fixed=_HEAD + "loader = DataLoader(ds, pin_memory=True)\n"
            "for x, y in loader:\n    x = x.cuda()\n",
            notebook=True,
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        reported: set[ast.Call] = set()
        for transfer, loader in data.batch_transfers(sem):
            if not data.moves_to_cuda(sem, transfer):
                continue
            calls, _unknown = data.loader_calls(sem, loader)
            for call in calls:
                if call in reported or data.passes(call, "pin_memory") or len(call.args) > 7:
                    continue
                if data.dataset_on_device(sem, call):
                    continue
                reported.add(call)
                ctx.report(
                    call.func,
                    Text(
                        "This `DataLoader`'s batches are copied to the GPU from pageable memory: "
                        "pass `pin_memory=True` for faster (and asynchronous) copies",
                        "该 `DataLoader` 的 batch 从可分页内存拷贝到 GPU：传入 `pin_memory=True` "
                        "可以让拷贝更快（并且可以异步）",
                    ),
                    fixes=[
                        Fix(
                            Text("Add `pin_memory=True`", "添加 `pin_memory=True`"),
                            (fixes.add_keyword(ctx.source, call, "pin_memory=True"),),
                            Applicability.SAFE,
                        )
                    ],
                    related=[
                        ctx.related(
                            transfer,
                            Text("A batch is moved to the GPU here", "batch 在此被移到 GPU"),
                        )
                    ],
                )
