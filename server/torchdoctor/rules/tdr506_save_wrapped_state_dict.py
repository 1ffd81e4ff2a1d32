from __future__ import annotations

import ast
import os
from functools import partial

from ..core import checkpoints, fixes, kinds, wrapped
from ..core.context import Context
from ..core.distributed import wrapper_call
from ..core.model import Applicability, Fix, Text
from ..core.semantic import Semantic, dotted
from .base import Invalid, Rule, Valid

# Wrapping helpers of another module (the multi-file examples' dist_utils.py).
_WRAP_PY = (
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    "def wrap(model, rank):\n"
    "    return DDP(model.cuda(rank), device_ids=[rank])\n"
    "def maybe_wrap(model, rank):\n"
    "    if rank < 0:\n"
    "        return model\n"
    "    return DDP(model.cuda(rank), device_ids=[rank])\n"
)
# A training script that wraps its model on multi-GPU runs and saves it through io_utils.py.
_TRAIN_PY = (
    "import torch\nfrom io_utils import save_model\n"
    "def prepare(model):\n    model.train()\n    return model\n"
    "def fit(model, path):\n    save_model(model, path)\n"
    "def main(n_gpus):\n"
    "    model = torch.nn.Linear(2, 2)\n"
    "    if n_gpus > 1:\n        model = torch.nn.DataParallel(model)\n"
    "    model = prepare(model)\n    fit(model, 'c.pt')\n"
)
_HEAD = (
    "import torch\nfrom torch import nn\n"
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
)


class SaveWrappedStateDict(Rule):
    """## What it does
    Checks for `torch.save(m.state_dict(), ...)` (also as a value of a checkpoint dict, or
    through a name such as `sd = m.state_dict()`) where `m` is a `DistributedDataParallel` or
    `DataParallel` wrapper rather than the model inside it. The wrapper may be held on `self`,
    or made by a helper of another module of the project that always returns one
    (`model = wrap_ddp(model, rank)`); a checkpoint dict may be handed to a saving helper.

    ## Why is this bad?
    A wrapper holds the model as its `module` attribute, so every key of its state dict starts
    with `module.`: `module.fc.weight` instead of `fc.weight`. Loading the file into a plain
    model (for evaluation, export, or a single-GPU run) fails with PyTorch's error:

    ```
    RuntimeError: Error(s) in loading state_dict for Linear:
        Missing key(s) in state_dict: "weight", "bias".
        Unexpected key(s) in state_dict: "module.weight", "module.bias".
    ```

    People then strip the prefix by hand or load with `strict=False`, which silently loads
    nothing (see TDR605). The guide notes the prefix and suggests adjusting the keys when
    loading; saving `m.module.state_dict()` avoids it at the source: the file holds the plain
    model's keys, which load into the model with or without a wrapper around it.

    A model wrapped on some runs only (`if n_gpu > 1: model = nn.DataParallel(model)`,
    `model = DDP(model) if distributed else model`) is reported too: the checkpoint's keys then
    depend on how many GPUs the run had, and one written on several GPUs does not load into a
    model on one. The model is followed from the wrap to the save: through its function
    (`model = model.to(device)` keeps the wrapper), `self.model` assigned in another method of
    the class, and the calls of the function or class that saves it, also from other modules
    of the project (a training script that wraps the model it hands to `save_checkpoint` of
    `utils.py`, or to a trainer's constructor). Such a model is not reported when it is
    unwrapped again before the save (`model = model.module if hasattr(model, "module") else
    model`), when the save sits in a branch that tells the two apart (`if isinstance(model,
    nn.DataParallel): ... else: ...`), or when it is saved as `getattr(model, "module", model)`.
    A model wrapped in each branch of `if use_gpu: ... else: ...` (a name, or `self.model` in
    the method that saves it) is a wrapper on every run, and so is reported with the fix
    below, as is a copy of its state dict (`copy.deepcopy(self.model.state_dict())`). Nor is
    a checkpoint reported that the file resumes from into the wrapper itself (a load of the
    path it saves into the wrapper's `load_state_dict`, or a call that receives both the wrapper and that path, such as
    `restart_from_checkpoint(path, state_dict=model)`): the file's own format keeps the
    prefix on both sides.

    ## Example
    ```python
    model = DDP(model, device_ids=[local_rank])
    ...
    torch.save(model.state_dict(), "model.pt")
    ```

    ## Use instead
    ```python
    model = DDP(model, device_ids=[local_rank])
    ...
    torch.save(model.module.state_dict(), "model.pt")
    ```

    ## Fix safety
    The fix inserts `.module` before `.state_dict()`. It is safe when nothing in the file can
    load a state dict into the wrapper: the weights saved are the same tensors, only without
    the wrapper's `module.` prefix. It is unsafe when the file loads a state dict into the
    wrapper itself (`ddp_model.load_state_dict(torch.load(path))`, as PyTorch's DDP tutorial
    does to resume), directly or in a function of this file that receives the wrapper: that
    load would now miss the `module.` keys (load into `ddp_model.module` instead). It is also
    unsafe when the wrapper goes where the analysis cannot follow: passed to a function of
    another module (`utils.restart_from_checkpoint(path, state_dict=ddp_model)`), put in a
    container or returned. No edit is offered when such a load has `strict=False`: after the
    fix it would silently load nothing on every resume.

    For a model wrapped on some runs only, `.module` would fail on the others: the fix saves
    `getattr(m, "module", m).state_dict()` instead, the plain model's keys on every run. It is
    unsafe: the wrapper comes from other branches, functions or modules, and a load of these
    checkpoints into the wrapper there (a resume on several GPUs) would miss the `module.`
    keys. No edit is offered when a load into it in the file has `strict=False`, or when the
    file rebinds `getattr`.

    ## References
    - [Saving and loading models: `DataParallel`](https://pytorch.org/tutorials/beginner/saving_loading_models.html#saving-torch-nn-dataparallel-models)
    - [`DistributedDataParallel`](https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html)
    """

    code = "TDR506"
    name = "save-wrapped-state-dict"
    fix_safety = Applicability.UNSAFE

    VALID = (
        # Already the inner model.
        _HEAD + "model = DDP(nn.Linear(2, 2))\ntorch.save(model.module.state_dict(), 'm.pt')\n",
        _HEAD + "net = nn.Linear(2, 2)\nddp = DDP(net)\ntorch.save(net.state_dict(), 'm.pt')\n",
        # Wrapped in one branch, unwrapped again before the save.
        _HEAD + "model = nn.Linear(2, 2)\nif distributed:\n    model = DDP(model)\n"
        "train(model)\nmodel = model.module if hasattr(model, 'module') else model\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        _HEAD + "model = nn.Linear(2, 2)\nif distributed:\n    model = DDP(model)\n"
        "if isinstance(model, DDP):\n    model = model.module\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        # The branches tell the wrapper from the model; or `getattr` does.
        _HEAD + "model = nn.Linear(2, 2)\nif distributed:\n    model = DDP(model)\n"
        "if hasattr(model, 'module'):\n    sd = model.module.state_dict()\n"
        "else:\n    sd = model.state_dict()\ntorch.save(sd, 'm.pt')\n",
        _HEAD + "model = nn.Linear(2, 2)\nif distributed:\n    model = DDP(model)\n"
        "torch.save(getattr(model, 'module', model).state_dict(), 'm.pt')\n",
        # The wrapper made in one branch is another name: the model saved is never wrapped.
        _HEAD + "model = nn.Linear(2, 2)\nnet = model\nif distributed:\n    net = DDP(model)\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        # The file resumes from the path it saves into the same object: one format per run.
        _HEAD + "model = nn.Linear(2, 2)\nif distributed:\n    model = DDP(model)\n"
        "model.load_state_dict(torch.load('m.pt'))\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        # Unwrapped again before saving.
        _HEAD + "model = DDP(nn.Linear(2, 2))\nmodel = model.module\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        # A compiled wrapper and a local class named like DDP.
        _HEAD + "model = torch.compile(DDP(nn.Linear(2, 2)))\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        "import torch\nfrom torch import nn\nclass DDP(nn.Module):\n    pass\n"
        "model = DDP()\ntorch.save(model.state_dict(), 'm.pt')\n",
        # Saved through another library, not torch.save.
        _HEAD + "model = DDP(nn.Linear(2, 2))\naccelerator.save(model.state_dict(), 'm.pt')\n",
        # Unwrapped through an alias before saving.
        _HEAD + "ddp = DDP(nn.Linear(2, 2))\ninner = ddp.module\n"
        "torch.save(inner.state_dict(), 'm.pt')\n",
        # The file resumes from what it saves into the wrapper: one format on both sides.
        _HEAD + "model = DDP(nn.Linear(2, 2).cuda(), device_ids=[0])\n"
        "model.load_state_dict(torch.load('m.pt', map_location='cuda:0'))\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        _HEAD + "import os\nimport utils\nwrapped = DDP(nn.Linear(2, 2))\n"
        "utils.restart_from_checkpoint(os.path.join(out, 'ckpt.pth'), state_dict=wrapped)\n"
        "torch.save({'state_dict': wrapped.state_dict()}, os.path.join(out, 'ckpt.pth'))\n",
        _HEAD + "def resume(net, path):\n"
        "    net.load_state_dict(torch.load(path)['net'], strict=False)\n"
        "model = DDP(nn.Linear(2, 2))\nresume(model, 'c.pt')\n"
        "torch.save({'net': model.state_dict()}, 'c.pt')\n",
        # The optimizer's state dict is not prefixed.
        _HEAD + "model = DDP(nn.Linear(2, 2))\nopt = torch.optim.SGD(model.parameters())\n"
        "torch.save(opt.state_dict(), 'o.pt')\n",
        # A saving helper whose callers in other modules pass the inner model or a plain one.
        Valid(
            "import torch\n"
            "def save_model(model, path):\n"
            "    torch.save({'model': model.state_dict()}, path)\n",
            filename="io_utils.py",
            files=(
                (
                    "train.py",
                    _TRAIN_PY.replace(
                        "save_model(model,", "save_model(getattr(model, 'module', model),"
                    ),
                ),
            ),
        ),
        Valid(
            "import torch\n"
            "class Trainer:\n"
            "    def __init__(self, model):\n        self.model = model\n"
            "    def save(self, path):\n"
            "        torch.save({'model': self.model.state_dict()}, path)\n",
            filename="trainer.py",
            files=(
                (
                    "train.py",
                    "import torch\nfrom trainer import Trainer\n"
                    "model = torch.nn.Linear(2, 2)\nif torch.cuda.device_count() > 1:\n"
                    "    wrapped = torch.nn.DataParallel(model)\n"
                    "Trainer(model.to('cuda')).save('c.pt')\n",
                ),
            ),
        ),
        # Unwrapped again later in the loop: the next iteration saves the plain model.
        "import torch\nfrom torch import nn\n"
        "class Trainer:\n"
        "    def __init__(self, net):\n        self.net = net\n"
        "    def fit(self):\n"
        "        self.net = nn.DataParallel(self.net)\n"
        "        for epoch in range(3):\n"
        "            torch.save(self.net.state_dict(), 'm.pt')\n"
        "            self.net = self.net.module\n",
    )
    INVALID = (
        # Wrapped in one branch only: the keys depend on the run. The fix works in both.
        Invalid(
            _HEAD + "model = nn.Linear(2, 2)\nmodel = DDP(model) if distributed else model\n"
            "torch.save(model.state_dict(), 'm.pt')\n",
            fixed=_HEAD + "model = nn.Linear(2, 2)\nmodel = DDP(model) if distributed else model\n"
            "torch.save(getattr(model, \"module\", model).state_dict(), 'm.pt')\n",
            lines=(6,),
        ),
        Invalid(
            "import torch\nfrom torch import nn\n"
            "model = nn.Linear(2, 2)\nif torch.cuda.device_count() > 1:\n"
            "    model = nn.DataParallel(model)\nmodel = model.to('cuda')\n"
            "torch.save({'model': model.state_dict()}, 'c.pt')\n",
            fixed="import torch\nfrom torch import nn\n"
            "model = nn.Linear(2, 2)\nif torch.cuda.device_count() > 1:\n"
            "    model = nn.DataParallel(model)\nmodel = model.to('cuda')\n"
            "torch.save({'model': getattr(model, \"module\", model).state_dict()}, 'c.pt')\n",
            lines=(7,),
        ),
        # `self.model` wrapped in one branch of a method; a copy of its state dict is saved.
        Invalid(
            "import copy\nimport torch\nfrom torch import nn\n"
            "class Trainable:\n"
            "    def __init__(self, model):\n        self.model = model\n"
            "    def fit(self, rank, gpu):\n"
            "        if gpu:\n"
            "            self.model = nn.parallel.DistributedDataParallel(self.model.cuda(rank))\n"
            "        best = copy.deepcopy(self.model.state_dict())\n"
            "        torch.save(best, 'best.pt')\n",
            fixed="import copy\nimport torch\nfrom torch import nn\n"
            "class Trainable:\n"
            "    def __init__(self, model):\n        self.model = model\n"
            "    def fit(self, rank, gpu):\n"
            "        if gpu:\n"
            "            self.model = nn.parallel.DistributedDataParallel(self.model.cuda(rank))\n"
            '        best = copy.deepcopy(getattr(self.model, "module", self.model).state_dict())\n'
            "        torch.save(best, 'best.pt')\n",
            lines=(10,),
        ),
        # A helper of another module that may leave the model unwrapped.
        Invalid(
            "import torch\nfrom dist_utils import maybe_wrap\n"
            "model = maybe_wrap(torch.nn.Linear(2, 2), 0)\n"
            "torch.save({'model': model.state_dict(), 'epoch': 1}, 'c.pt')\n",
            fixed="import torch\nfrom dist_utils import maybe_wrap\n"
            "model = maybe_wrap(torch.nn.Linear(2, 2), 0)\n"
            "torch.save({'model': getattr(model, \"module\", model).state_dict(), 'epoch': 1}, "
            "'c.pt')\n",
            files=(("dist_utils.py", _WRAP_PY),),
            lines=(4,),
        ),
        # A saving helper: a training script (another module) wraps the model it passes on
        # multi-GPU runs, through a function of its own.
        Invalid(
            "import torch\n"
            "def save_model(model, path):\n"
            "    torch.save({'model': model.state_dict()}, path)\n",
            fixed="import torch\n"
            "def save_model(model, path):\n"
            "    torch.save({'model': getattr(model, \"module\", model).state_dict()}, path)\n",
            filename="io_utils.py",
            files=(("train.py", _TRAIN_PY),),
            lines=(3,),
        ),
        # A trainer class keeps the model its caller (another module) wrapped on multi-GPU.
        Invalid(
            "import torch\n"
            "class Trainer:\n"
            "    def __init__(self, model):\n        self.model = model\n"
            "    def save(self, path):\n"
            "        torch.save({'model': self.model.state_dict()}, path)\n",
            fixed="import torch\n"
            "class Trainer:\n"
            "    def __init__(self, model):\n        self.model = model\n"
            "    def save(self, path):\n"
            "        torch.save({'model': getattr(self.model, \"module\", self.model).state_dict()}, "
            "path)\n",
            filename="trainer.py",
            files=(
                (
                    "train.py",
                    "import torch\nfrom trainer import Trainer\n"
                    "def make(model):\n    return Trainer(model)\n"
                    "model = torch.nn.Linear(2, 2)\nif torch.cuda.device_count() > 1:\n"
                    "    model = torch.nn.DataParallel(model)\n"
                    "make(model.to('cuda')).save('c.pt')\n",
                ),
            ),
            lines=(6,),
        ),
        # Wrapped in each branch of `if use_gpu: ... else: ...` of the method; a copy of the
        # state dict is saved, and loaded back into the wrapper afterwards (the fix is unsafe).
        Invalid(
            "import copy\nimport torch\nfrom torch import nn\n"
            "class Trainable:\n"
            "    def __init__(self, task):\n        self.model = task.initial_model()\n"
            "    def fit(self, rank, use_gpu):\n"
            "        if use_gpu:\n"
            "            self.model = nn.parallel.DistributedDataParallel(\n"
            "                self.model.cuda(rank), device_ids=[rank])\n"
            "        else:\n"
            "            self.model = nn.parallel.DistributedDataParallel(self.model)\n"
            "        best = copy.deepcopy(self.model.state_dict())\n"
            "        torch.save(best, 'model.pth.tar')\n"
            "        self.model.load_state_dict(best)\n",
            fixed="import copy\nimport torch\nfrom torch import nn\n"
            "class Trainable:\n"
            "    def __init__(self, task):\n        self.model = task.initial_model()\n"
            "    def fit(self, rank, use_gpu):\n"
            "        if use_gpu:\n"
            "            self.model = nn.parallel.DistributedDataParallel(\n"
            "                self.model.cuda(rank), device_ids=[rank])\n"
            "        else:\n"
            "            self.model = nn.parallel.DistributedDataParallel(self.model)\n"
            "        best = copy.deepcopy(self.model.module.state_dict())\n"
            "        torch.save(best, 'model.pth.tar')\n"
            "        self.model.load_state_dict(best)\n",
            lines=(13,),
        ),
        # A name wrapped in both branches.
        Invalid(
            _HEAD + "def main(model, rank, gpu):\n"
            "    if gpu:\n        model = DDP(model.cuda(rank), device_ids=[rank])\n"
            "    else:\n        model = DDP(model)\n"
            "    torch.save(model.state_dict(), 'm.pt')\n",
            fixed=_HEAD + "def main(model, rank, gpu):\n"
            "    if gpu:\n        model = DDP(model.cuda(rank), device_ids=[rank])\n"
            "    else:\n        model = DDP(model)\n"
            "    torch.save(model.module.state_dict(), 'm.pt')\n",
            lines=(9,),
        ),
        Invalid(
            _HEAD + "model = nn.Linear(2, 2).cuda()\nmodel = DDP(model, device_ids=[0])\n"
            "for epoch in range(3):\n    train(model)\n"
            "    torch.save(model.state_dict(), 'm.pt')\n",
            fixed=_HEAD + "model = nn.Linear(2, 2).cuda()\nmodel = DDP(model, device_ids=[0])\n"
            "for epoch in range(3):\n    train(model)\n"
            "    torch.save(model.module.state_dict(), 'm.pt')\n",
            lines=(8,),
        ),
        # Through a name.
        Invalid(
            _HEAD
            + "model = DDP(nn.Linear(2, 2))\nsd = model.state_dict()\ntorch.save(sd, 'm.pt')\n",
            fixed=_HEAD + "model = DDP(nn.Linear(2, 2))\nsd = model.module.state_dict()\n"
            "torch.save(sd, 'm.pt')\n",
            lines=(5,),
        ),
        # A checkpoint dict, DataParallel under another alias.
        Invalid(
            "import torch as T\nimport torch.nn as nn\n"
            "net = nn.DataParallel(nn.Linear(2, 2))\n"
            "T.save({'model': net.state_dict(), 'epoch': 3}, 'ckpt.pt')\n",
            fixed="import torch as T\nimport torch.nn as nn\n"
            "net = nn.DataParallel(nn.Linear(2, 2))\n"
            "T.save({'model': net.module.state_dict(), 'epoch': 3}, 'ckpt.pt')\n",
            lines=(4,),
        ),
        # The dict is built first; a trainer attribute only ever holds the wrapper.
        Invalid(
            "import torch\nimport torch.nn.parallel as par\n"
            "class Trainer:\n"
            "    def __init__(self, model, rank):\n"
            "        self.model = par.DistributedDataParallel(model, device_ids=[rank])\n"
            "    def save(self, path):\n"
            "        state = {'model': self.model.state_dict()}\n"
            "        torch.save(state, path)\n",
            fixed="import torch\nimport torch.nn.parallel as par\n"
            "class Trainer:\n"
            "    def __init__(self, model, rank):\n"
            "        self.model = par.DistributedDataParallel(model, device_ids=[rank])\n"
            "    def save(self, path):\n"
            "        state = {'model': self.model.module.state_dict()}\n"
            "        torch.save(state, path)\n",
            lines=(7,),
        ),
        # The file also loads another checkpoint into the wrapper: the fix is then unsafe.
        Invalid(
            _HEAD + "model = DDP(nn.Linear(2, 2).cuda(), device_ids=[0])\n"
            "model.load_state_dict(torch.load('init.pt', map_location='cuda:0'))\n"
            "torch.save(model.state_dict(), 'm.pt')\n",
            fixed=_HEAD + "model = DDP(nn.Linear(2, 2).cuda(), device_ids=[0])\n"
            "model.load_state_dict(torch.load('init.pt', map_location='cuda:0'))\n"
            "torch.save(model.module.state_dict(), 'm.pt')\n",
            lines=(6,),
        ),
        # Loaded into the wrapper with strict=False: no edit (it would load nothing).
        Invalid(
            _HEAD + "model = DDP(nn.Linear(2, 2))\n"
            "model.load_state_dict(torch.load(args.init), strict=False)\n"
            "torch.save(model.state_dict(), 'm.pt')\n",
            fixed=None,
            lines=(6,),
        ),
        Invalid(
            _HEAD + "def warm(net, path):\n"
            "    net.load_state_dict(torch.load(path)['net'], strict=False)\n"
            "model = DDP(nn.Linear(2, 2))\nwarm(model, args.init)\n"
            "torch.save({'net': model.state_dict()}, 'c.pt')\n",
            fixed=None,
            lines=(8,),
        ),
        # Passed to a helper of another module: it may load into it (unsafe, still offered).
        Invalid(
            _HEAD + "import utils\nmodel = DDP(nn.Linear(2, 2))\n"
            "utils.load_pretrained(model, args.weights)\n"
            "torch.save({'state_dict': model.state_dict()}, 'c.pt')\n",
            fixed=_HEAD + "import utils\nmodel = DDP(nn.Linear(2, 2))\n"
            "utils.load_pretrained(model, args.weights)\n"
            "torch.save({'state_dict': model.module.state_dict()}, 'c.pt')\n",
            lines=(7,),
        ),
        # A local helper that only reads the wrapper: safe.
        Invalid(
            _HEAD
            + "def report(net):\n    print(net)\n    return sum(1 for _ in net.parameters())\n"
            "model = DDP(nn.Linear(2, 2))\nreport(model)\ntorch.save(model.state_dict(), 'm.pt')\n",
            fixed=_HEAD + "def report(net):\n    print(net)\n"
            "    return sum(1 for _ in net.parameters())\n"
            "model = DDP(nn.Linear(2, 2))\nreport(model)\n"
            "torch.save(model.module.state_dict(), 'm.pt')\n",
            lines=(9,),
        ),
        Invalid(
            _HEAD + "model = DDP(nn.Linear(2, 2))\ntorch.save(obj=model.state_dict(), f='m.pt')\n",
            fixed=_HEAD + "model = DDP(nn.Linear(2, 2))\n"
            "torch.save(obj=model.module.state_dict(), f='m.pt')\n",
            notebook=True,
            lines=(5,),
        ),
        # The wrapper is made by a helper of another module.
        Invalid(
            "import torch\nfrom dist_utils import wrap\n"
            "model = wrap(torch.nn.Linear(2, 2), 0)\n"
            "torch.save({'model': model.state_dict(), 'epoch': 1}, 'c.pt')\n",
            fixed="import torch\nfrom dist_utils import wrap\n"
            "model = wrap(torch.nn.Linear(2, 2), 0)\n"
            "torch.save({'model': model.module.state_dict(), 'epoch': 1}, 'c.pt')\n",
            files=(("dist_utils.py", _WRAP_PY),),
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        saved = [(checkpoints.saved_object(c), c) for c in sem.calls_to("torch.save")]
        saved += [(v, call) for call, d in checkpoints.saved_dicts(sem) for v in d.values]
        # `sd = model.state_dict()` then `torch.save(sd, ...)`.
        saved += [(kinds.constructor_call(sem, v), c) for v, c in saved if isinstance(v, ast.Name)]
        for value, save in dict.fromkeys(saved):
            value = _copied(sem, value)
            if not (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "state_dict"
                and not value.args
            ):
                continue
            owner = value.func.value
            wrapper = wrapper_call(sem, owner)
            if wrapper is None:
                self._maybe(ctx, value, owner, save)
                continue
            reads = checkpoints.wrapper_reads(sem, wrapper)
            if checkpoints.resumes_from(sem, save, reads):
                continue  # the file's own resume reads the `module.` keys back into the wrapper
            text = ctx.segment(owner)
            ctx.report(
                value,
                Text(
                    f"`{text}` is a DDP/DataParallel wrapper: its state dict keys start with "
                    f"`module.`; save `{text}.module.state_dict()`",
                    f"`{text}` 是 DDP/DataParallel 包装器：它的 state dict 键都以 `module.` 开头；"
                    f"请保存 `{text}.module.state_dict()`",
                ),
                fixes=partial(_fix, ctx, owner, reads, text),
            )

    def _maybe(self, ctx: Context, value: ast.Call, owner: ast.expr, save: ast.Call) -> None:
        """A model wrapped on some runs only: the checkpoint's keys depend on the run."""
        sem = ctx.sem
        target = dotted(owner)
        if target is None or wrapped.told_apart(sem, value, target):
            return
        site = wrapped.conditionally_wrapped(sem, owner)
        if site is None:
            return
        reads = [r for r in wrapped.reads_alike(sem, owner) if wrapped.may_wrap(sem, r) is not None]
        if checkpoints.resumes_from(sem, save, reads):
            return  # the file's own resume reads its format back into the same object
        text = ctx.segment(owner)
        where = _where(sem, site)
        unwrapped = f'getattr({text}, "module", {text})'
        ctx.report(
            value,
            Text(
                f"`{text}` is a DDP/DataParallel wrapper on some runs ({where}): the keys of "
                f"its state dict then start with `module.`, so the checkpoint depends on the "
                f"run; save `{unwrapped}.state_dict()`",
                f"`{text}` 在部分运行中是 DDP/DataParallel 包装器（{where}）：此时其 state dict "
                f"的键都以 `module.` 开头，检查点的格式取决于运行方式；"
                f"请保存 `{unwrapped}.state_dict()`",
            ),
            fixes=partial(_unwrap_fix, ctx, owner, reads, text, unwrapped),
        )


def _where(sem: Semantic, site: wrapped.Site) -> str:
    other, call = site
    if other is sem:
        return f"line {call.lineno}"
    return f"{os.path.basename(other.path or '')}:{call.lineno}"


def _unwrap_fix(
    ctx: Context, owner: ast.expr, reads: list[ast.expr], text: str, unwrapped: str
) -> Fix | None:
    """Save ``getattr(m, "module", m).state_dict()``, right with and without the wrapper:
    unsafe, since a load elsewhere may read the wrapper's keys back into a wrapper (the model
    comes from code of several branches or modules); no edit when ``getattr`` is rebound, or
    when a load into it has ``strict=False``."""
    if ctx.sem.lookup("getattr", owner) is not None:
        return None
    if checkpoints.state_loading(ctx.sem, reads) == "lenient":
        return None
    return Fix(
        Text(f"Save `{unwrapped}.state_dict()`", f"改为保存 `{unwrapped}.state_dict()`"),
        (fixes.replace(ctx.source, owner, unwrapped),),
        Applicability.UNSAFE,
    )


def _copied(sem: Semantic, value: ast.expr | None) -> ast.expr | None:
    """What a copy holds: ``m.state_dict()`` in ``copy.deepcopy(m.state_dict())``."""
    while (
        isinstance(value, ast.Call)
        and len(value.args) == 1
        and not value.keywords
        and sem.qualname(value.func) in ("copy.deepcopy", "copy.copy")
    ):
        value = value.args[0]
    return value


def _fix(ctx: Context, owner: ast.expr, reads: list[ast.expr], text: str) -> Fix | None:
    """Insert ``.module``: safe when nothing loads a state dict into the wrapper; unsafe when
    the file loads one into it (the load then misses the ``module.`` keys and fails) or passes
    the wrapper where the analysis cannot see; no edit when a load into it has
    ``strict=False``: every resume would silently load nothing."""
    loading = checkpoints.state_loading(ctx.sem, reads)
    if loading == "lenient":
        return None
    return Fix(
        Text(f"Save `{text}.module.state_dict()`", f"改为保存 `{text}.module.state_dict()`"),
        (fixes.insert(ctx.source.end(owner), ".module"),),
        Applicability.SAFE if loading is None else Applicability.UNSAFE,
    )
