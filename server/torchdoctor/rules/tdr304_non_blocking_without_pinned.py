from __future__ import annotations

import ast

from ..core import data, fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule

_HEAD = "import torch\nfrom torch.utils.data import DataLoader\n"


class NonBlockingWithoutPinned(Rule):
    """## What it does
    Checks for `.to(..., non_blocking=True)` and `.cuda(non_blocking=True)` on the batches of a
    `DataLoader` created without `pin_memory=`.

    Not reported: a loader with `pin_memory=False` written out (pinning was turned off on
    purpose), a loader whose options come from `**kwargs`, batches pinned by hand
    (`x.pin_memory().to(...)`) or by a `collate_fn` of the file that calls `.pin_memory()`,
    and copies to a device known to be the CPU.

    ## Why is this bad?
    `non_blocking=True` only makes a host-to-device copy asynchronous when the source tensor is
    in pinned (page-locked) memory. From pageable memory the driver first copies into a pinned
    staging buffer, and the call returns only after that: the flag promises an overlap of copy
    and compute that does not happen. Measured on an H200 (512 MiB copy): pageable 20.9 GB/s,
    pageable with `non_blocking=True` 20.7 GB/s, pinned with `non_blocking=True` 55.0 GB/s;
    copying 512 MiB then running an 8192² matmul took 46.5 ms per round from pageable memory
    (blocking) and 31.6 ms from pinned memory with `non_blocking=True`, because the copy
    overlaps the compute.

    ## Example
    ```python
    loader = DataLoader(train_set, batch_size=256, num_workers=8)
    for x, y in loader:
        x = x.to(device, non_blocking=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(train_set, batch_size=256, num_workers=8, pin_memory=True)
    for x, y in loader:
        x = x.to(device, non_blocking=True)
    ```

    ## Fix safety
    The fix adds `pin_memory=True` to the `DataLoader` call. It is safe: the batches hold the
    same values; the copies become asynchronous, and PyTorch orders them before the kernels
    that read them on the same stream.

    ## References
    - [Memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    """

    code = "TDR304"
    name = "non-blocking-without-pinned"
    severity = Severity.INFO
    fix_safety = Applicability.SAFE

    VALID = (
        _HEAD + "loader = DataLoader(ds, pin_memory=True)\n"
        "for x, y in loader:\n    x = x.to('cuda', non_blocking=True)\n",
        # Pinning turned off on purpose, or decided at run time.
        _HEAD + "loader = DataLoader(ds, pin_memory=False)\n"
        "for x, y in loader:\n    x = x.cuda(non_blocking=True)\n",
        _HEAD + "loader = DataLoader(ds, pin_memory=args.pin)\n"
        "for x, y in loader:\n    x = x.cuda(non_blocking=True)\n",
        _HEAD + "loader = DataLoader(ds, **kw)\n"
        "for x, y in loader:\n    x = x.cuda(non_blocking=True)\n",
        # Pinned by hand, or by the collate function.
        _HEAD + "loader = DataLoader(ds)\n"
        "for x, y in loader:\n    x = x.pin_memory().to('cuda', non_blocking=True)\n",
        _HEAD + "def collate(batch):\n    return torch.stack(batch).pin_memory()\n"
        "loader = DataLoader(ds, collate_fn=collate)\n"
        "for x in loader:\n    x = x.to('cuda', non_blocking=True)\n",
        # Blocking copies (TDR303's business), and copies to the CPU.
        _HEAD + "loader = DataLoader(ds)\nfor x, y in loader:\n"
        "    x = x.to('cuda', non_blocking=False)\n",
        _HEAD + "loader = DataLoader(ds)\nfor x, y in loader:\n"
        "    x = x.to('cpu', non_blocking=True)\n",
        # Not a batch of a loader.
        _HEAD + "w = torch.randn(3)\nw = w.to('cuda', non_blocking=True)\n",
        # Two loaders zipped: the batch moved comes from the pinned one.
        _HEAD + "la = DataLoader(ds_a)\nlb = DataLoader(ds_b, pin_memory=True)\n"
        "for (xa, ya), (xb, yb) in zip(la, lb):\n"
        "    xb = xb.to('cuda', non_blocking=True)\n",
        # A loader whose origin is unknown.
        _HEAD + "def train(loader):\n    for x, y in loader:\n"
        "        x = x.cuda(non_blocking=True)\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "device = torch.device('cuda')\n"
            "loader = DataLoader(ds, batch_size=64, num_workers=4)\n"
            "for x, y in loader:\n"
            "    x = x.to(device, non_blocking=True)\n",
            fixed=_HEAD + "device = torch.device('cuda')\n"
            "loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)\n"
            "for x, y in loader:\n"
            "    x = x.to(device, non_blocking=True)\n",
            lines=(6,),
        ),
        # An unknown device is enough: non_blocking says the target is an accelerator.
        Invalid(
            "import torch.utils.data as tud\n"
            "def run(model, ds, args):\n"
            "    loader = tud.DataLoader(ds, 8)\n"
            "    for i, (x, y) in enumerate(loader):\n"
            "        y = y.cuda(args.gpu, True)\n",
            fixed="import torch.utils.data as tud\n"
            "def run(model, ds, args):\n"
            "    loader = tud.DataLoader(ds, 8, pin_memory=True)\n"
            "    for i, (x, y) in enumerate(loader):\n"
            "        y = y.cuda(args.gpu, True)\n",
            lines=(5,),
        ),
        Invalid(
            _HEAD + "loader = DataLoader(ds)\nfor batch in loader:\n"
            "    batch = [t.to(args.device, non_blocking=True) for t in batch]\n",
            fixed=_HEAD + "loader = DataLoader(ds, pin_memory=True)\nfor batch in loader:\n"
            "    batch = [t.to(args.device, non_blocking=True) for t in batch]\n",
            notebook=True,
            lines=(5,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for transfer, loader in data.batch_transfers(sem):
            if not data.non_blocking(transfer) or _pinned_by_hand(transfer):
                continue
            if not data.is_cuda_call(transfer):
                if data.device_kind(sem, data.transfer_device(transfer)) == "host":
                    continue
            calls, unknown = data.loader_calls(sem, loader)
            if unknown or not calls or any(_may_pin(sem, c) for c in calls):
                continue
            edits = tuple(fixes.add_keyword(ctx.source, c, "pin_memory=True") for c in calls)
            ctx.report(
                transfer,
                Text(
                    "`non_blocking=True` on a batch of a `DataLoader` without `pin_memory=True`: "
                    "the copy from pageable memory is not asynchronous",
                    "对未设置 `pin_memory=True` 的 `DataLoader` 的 batch 使用 `non_blocking=True`："
                    "从可分页内存的拷贝并不是异步的",
                ),
                fixes=[
                    Fix(
                        Text(
                            "Add `pin_memory=True` to the `DataLoader`",
                            "给 `DataLoader` 添加 `pin_memory=True`",
                        ),
                        edits,
                        Applicability.SAFE,
                    )
                ],
                related=[
                    ctx.related(
                        c.func, Text("The `DataLoader` is created here", "`DataLoader` 在此创建")
                    )
                    for c in calls
                ],
            )


def _pinned_by_hand(transfer: ast.Call) -> bool:
    """``x.pin_memory().to(...)``."""
    assert isinstance(transfer.func, ast.Attribute)
    receiver = transfer.func.value
    return (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and receiver.func.attr == "pin_memory"
    )


def _may_pin(sem: Semantic, call: ast.Call) -> bool:
    """The loader sets ``pin_memory`` (to anything), may set it through ``**kwargs``, or has a
    ``collate_fn`` of this file that pins its batches."""
    if data.passes(call, "pin_memory") or len(call.args) > 7:
        return True
    if data.dataset_on_device(sem, call):
        return True  # pinning CUDA tensors fails
    collate = data.loader_argument(call, "collate_fn")
    func = sem.local_function(collate) if collate is not None else None
    return func is not None and any(
        isinstance(n, ast.Attribute) and n.attr == "pin_memory" for n in sem.walk(func)
    )
