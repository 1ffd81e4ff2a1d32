from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, checkpoints, fixes, kinds
from ..core.context import Context
from ..core.kinds import MODEL_WRAPPERS, Kind
from ..core.model import Applicability, Fix, Text
from .base import Invalid, Rule, Valid

# Results whose state dict is not the plain model's (``_orig_mod.`` keys) or that have their own
# format (TorchScript: ``torch.jit.save``).
# A model factory of another module (the multi-file examples' models.py).
_MODELS_PY = (
    "from torch import nn\n"
    "def build_model():\n"
    "    return nn.Sequential(nn.Linear(2, 2), nn.ReLU())\n"
    "def weights(model):\n"
    "    return model.state_dict()\n"
)
NO_FIX = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})


# Allowing classes for `torch.load` (weights_only=True): the whole-module pickle then loads.
SAFE_GLOBALS = ("torch.serialization.add_safe_globals", "torch.serialization.safe_globals")


class SaveWholeModel(Rule):
    """## What it does
    Checks for `torch.save(model, ...)` where `model` is an `nn.Module`, not its `state_dict()`,
    and for a module saved as a value of a checkpoint dict (`{"model": deepcopy(model).half()}`).
    The model may be held on `self` or built by a factory or class of another module.
    A round trip is not reported: a function that saves the module to a temporary file or an
    in-memory buffer and loads it back with `torch.load` (tests of pickling itself).

    Not reported in a file that allows classes for loading (`torch.serialization.safe_globals` or
    `add_safe_globals`): the project loads its whole-module pickle on purpose.

    ## Why is this bad?
    Saving the module pickles the object: the file stores a reference to the model's class by
    its import path (`models.resnet.MyNet`), not its code. Loading it later needs that exact
    class at that exact path; renaming a file, moving a class or changing `__init__` makes old
    checkpoints unloadable. That is the guide's reason to prefer `state_dict`; since PyTorch 2.6
    there is one more: `torch.load` defaults to `weights_only=True`, so such a file fails to
    load with `UnpicklingError: Weights only load failed` unless you pass
    `weights_only=False`, which lets the file run arbitrary code (see TDR603).

    A `state_dict()` is a plain mapping from parameter names to tensors: it loads with the safe
    default, into any version of the code whose parameter names still match.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 2))
    torch.save(model, "model.pt")
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 2))
    torch.save(model.state_dict(), "model.pt")

    # Loading: build the model, then load the weights.
    model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 2))
    model.load_state_dict(torch.load("model.pt", map_location="cpu", weights_only=True))
    ```

    ## Fix safety
    The fix saves `model.state_dict()` instead (`model.module.state_dict()` for a
    `DistributedDataParallel`/`DataParallel` wrapper). It is unsafe: the file changes format,
    and the code that loads it must now build the model and call `load_state_dict`. No fix is
    offered for a `torch.compile` result, whose state dict keys carry an `_orig_mod.` prefix,
    nor for a TorchScript module, which `torch.save` cannot pickle at all (save it with
    `torch.jit.save`), nor when this file loads the path back and uses what it loads as a
    module (`model = torch.load(path)` then `model.eval()`, `model(x)` or any attribute a
    state dict lacks, such as `model.predict(x)`; the same path by literal, format string,
    variable or `os.path.join` of the same parts): that code would receive a state dict and
    fail, so the loading side has to change with the save.

    ## References
    - [Saving and loading models](https://pytorch.org/tutorials/beginner/saving_loading_models.html)
    - [`torch.save`](https://pytorch.org/docs/stable/generated/torch.save.html)
    - [Serialization semantics](https://pytorch.org/docs/stable/notes/serialization.html)
    """

    code = "TDR601"
    name = "save-whole-model"
    fix_safety = Applicability.UNSAFE

    VALID = (
        # A round trip: a test of whole-module pickling reads back what it saved.
        "import io\nimport torch\nfrom torch import nn\ndef check():\n"
        "    model = nn.Linear(2, 2)\n    b = io.BytesIO()\n    torch.save(model, b)\n"
        "    b.seek(0)\n    return torch.load(b, weights_only=False)\n",
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "torch.save(model.state_dict(), 'm.pt')",
        # A checkpoint dict.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "torch.save({'model': model.state_dict(), 'optimizer': opt.state_dict()}, 'ckpt.pt')",
        # Tensors and optimizers are not modules.
        "import torch\nx = torch.randn(3)\ntorch.save(x, 'x.pt')",
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "optimizer = torch.optim.AdamW(model.parameters())\ntorch.save(optimizer, 'o.pt')",
        # torch.jit.save of a scripted module is the intended format.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "scripted = torch.jit.script(model)\ntorch.jit.save(scripted, 'm.pt')",
        # A local function named save.
        "import torch\nfrom torch import nn\ndef save(obj, path):\n    pass\n"
        "model = nn.Linear(2, 2)\nsave(model, 'm.pt')",
        # torch.save shadowed by a parameter.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "def export(save):\n    save(model, 'm.pt')\n",
        # The project allows its module classes where it loads them back.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
        "with torch.serialization.safe_globals([nn.Linear]):\n    model = torch.load('m.pt')\n",
        # A round trip through a temporary directory, at module level.
        "import os\nimport tempfile\nimport torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "with tempfile.TemporaryDirectory() as tmp:\n"
        "    torch.save(model, os.path.join(tmp, 'm.pt'))\n"
        "    copy = torch.load(os.path.join(tmp, 'm.pt'), weights_only=False)\n",
        # A name of unknown kind.
        "import torch\ndef dump(obj, path):\n    torch.save(obj, path)\n",
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "state = model.state_dict()\ntorch.save(state, 'm.pt')",
        # An exported program is not a module.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "ep = torch.export.export(model, (torch.randn(1, 2),))\ntorch.save(ep, 'ep.pt2')",
        # A module's `save` method is not torch.save.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "class Store:\n    def save(self, obj, path):\n        pass\n"
        "Store().save(model, 'm.pt')",
        # What a factory of another module returns is a state dict, not a module.
        Valid(
            "import torch\nfrom models import build_model, weights\n"
            "model = build_model()\n"
            "torch.save({'model': weights(model), 'epoch': 3}, 'last.pt')\n",
            files=(("models.py", _MODELS_PY),),
        ),
    )
    INVALID = (
        # Saved to a lasting file, then read back: the file outlives the script.
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "torch.save(model, 'model.ckpt')\nmodel = torch.load('model.ckpt', weights_only=False)",
            fixed="import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "torch.save(model.state_dict(), 'model.ckpt')\n"
            "model = torch.load('model.ckpt', weights_only=False)",
            lines=(4,),
        ),
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')",
            fixed="import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "torch.save(model.state_dict(), 'm.pt')",
            lines=(4,),
        ),
        Invalid(
            "import torch as T\nimport torch.nn as nn\n"
            "class Net(nn.Module):\n    pass\n"
            "net = Net()\nT.save(obj=net, f='net.pt')",
            fixed="import torch as T\nimport torch.nn as nn\n"
            "class Net(nn.Module):\n    pass\n"
            "net = Net()\nT.save(obj=net.state_dict(), f='net.pt')",
            lines=(6,),
        ),
        Invalid(
            "from torch import save\nimport torchvision\n"
            "model = torchvision.models.resnet18()\nsave(model, 'r18.pt')",
            fixed="from torch import save\nimport torchvision\n"
            "model = torchvision.models.resnet18()\nsave(model.state_dict(), 'r18.pt')",
            lines=(4,),
        ),
        # The file reads the path back and uses it as a module: no fix (that load would break).
        Invalid(
            "import torch\nimport torchvision\nnet = torchvision.models.resnet18()\n"
            "torch.save(net, 'net.ckpt')\nnet2 = torch.load('net.ckpt', weights_only=False)\n"
            "net2.eval()\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import os\nimport torch\nfrom torch import nn\n"
            "def export(model, out):\n    model.eval()\n"
            "    torch.save(model, os.path.join(out, 'model.pt'))\n"
            "def serve(out, x):\n    model = torch.load(os.path.join(out, 'model.pt'))\n"
            "    return model(x)\n"
            "export(nn.Linear(2, 2), 'runs')\nprint(serve('runs', inputs))\n",
            fixed=None,
            lines=(6,),
        ),
        # The load of that path uses only what a state dict also has: the fix is offered.
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
            "other = torch.load('other.pt', weights_only=False)\nother.eval()\n",
            fixed="import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "torch.save(model.state_dict(), 'm.pt')\n"
            "other = torch.load('other.pt', weights_only=False)\nother.eval()\n",
            lines=(4,),
        ),
        # A name known as a model from how it is used.
        Invalid(
            "import torch\ndef finish(model, path):\n    model.eval()\n    torch.save(model, path)\n",
            fixed="import torch\ndef finish(model, path):\n    model.eval()\n"
            "    torch.save(model.state_dict(), path)\n",
            lines=(4,),
        ),
        Invalid(
            "import torch\nfrom torch import nn\n"
            "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = nn.Linear(4, 2)\n"
            "    def save(self, path):\n"
            "        torch.save(self.model, path)\n",
            fixed="import torch\nfrom torch import nn\n"
            "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = nn.Linear(4, 2)\n"
            "    def save(self, path):\n"
            "        torch.save(self.model.state_dict(), path)\n",
            lines=(7,),
        ),
        # A DDP wrapper: save the inner module's weights.
        Invalid(
            "import torch\nfrom torch import nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
            "model = DDP(nn.Linear(2, 2).cuda())\ntorch.save(model, 'm.pt')",
            fixed="import torch\nfrom torch import nn\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "model = DDP(nn.Linear(2, 2).cuda())\ntorch.save(model.module.state_dict(), 'm.pt')",
            lines=(5,),
        ),
        # A compiled model: reported, no fix (its keys carry an `_orig_mod.` prefix).
        Invalid(
            "import torch\nfrom torch import nn\nmodel = torch.compile(nn.Linear(2, 2))\n"
            "torch.save(model, 'm.pt')",
            fixed=None,
            lines=(4,),
        ),
        # TorchScript: torch.save raises; reported without a fix.
        Invalid(
            "import torch\nfrom torch import nn\nscripted = torch.jit.script(nn.Linear(2, 2))\n"
            "torch.save(scripted, 'm.pt')",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')",
            fixed="import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "torch.save(model.state_dict(), 'm.pt')",
            notebook=True,
            lines=(4,),
        ),
        # A module inside a checkpoint dict (a copy in half precision, as some trainers do).
        Invalid(
            "import copy\nimport torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "torch.save({'model': copy.deepcopy(model).half(), 'epoch': 3}, 'last.pt')\n",
            fixed=None,
            lines=(5,),
        ),
        # A model built by a factory of another module, held on `self`, inside a dict.
        Invalid(
            "import torch\nfrom models import build_model\n"
            "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = build_model()\n"
            "    def save(self, epoch):\n"
            "        torch.save({'model': self.model, 'epoch': epoch}, 'last.pt')\n",
            fixed="import torch\nfrom models import build_model\n"
            "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = build_model()\n"
            "    def save(self, epoch):\n"
            "        torch.save({'model': self.model.state_dict(), 'epoch': epoch}, 'last.pt')\n",
            files=(("models.py", _MODELS_PY),),
            lines=(7,),
        ),
    )

    def check(self, ctx: Context) -> None:
        if any(ctx.sem.calls_to(*SAFE_GLOBALS)):
            return  # the project allows its classes where it loads: the pickle is its choice
        for call in ctx.sem.calls_to("torch.save"):
            obj = arguments.value(call, arguments.SAVE, "obj")
            if (
                obj is None
                or ctx.kind(obj) is not Kind.MODULE
                or checkpoints.round_trip(ctx.sem, call)
            ):
                continue
            ctx.report(
                obj,
                Text(
                    "`torch.save` pickles the whole module; save its `state_dict()` instead",
                    "`torch.save` 会 pickle 整个模块；请改为保存它的 `state_dict()`",
                ),
                fixes=partial(self._fix, ctx, obj, call),
            )
        for call, data in checkpoints.saved_dicts(ctx.sem):
            if checkpoints.round_trip(ctx.sem, call):
                continue
            for key, value in zip(data.keys, data.values, strict=True):
                if key is None or ctx.kind(value) is not Kind.MODULE:
                    continue
                ctx.report(
                    value,
                    Text(
                        f"the checkpoint pickles the whole module under `{ctx.segment(key)}`; "
                        "save its `state_dict()` instead",
                        f"检查点在 `{ctx.segment(key)}` 下 pickle 了整个模块；"
                        "请改为保存它的 `state_dict()`",
                    ),
                    fixes=partial(self._fix, ctx, value, call),
                )

    @staticmethod
    def _fix(ctx: Context, obj: ast.expr, save: ast.Call) -> Fix | None:
        if not isinstance(obj, ast.Name | ast.Attribute):
            return None
        sem = ctx.sem
        compiled, _ = kinds.constructions(sem, obj, lambda c: sem.qualname(c.func) in NO_FIX)
        if compiled:
            return None
        wrapped, other = kinds.constructions(
            sem, obj, lambda c: sem.qualname(c.func) in MODEL_WRAPPERS
        )
        if wrapped and other:
            return None
        if any(
            checkpoints.object_use(sem, load) is not None
            for load in checkpoints.loads_reading(sem, save)
        ):
            return None  # the file loads this path back as a module: that load would break
        suffix = ".module.state_dict()" if wrapped else ".state_dict()"
        text = ctx.segment(obj) + suffix
        return Fix(
            Text(f"Save `{text}`", f"改为保存 `{text}`"),
            (fixes.replace(ctx.source, obj, text),),
            Applicability.UNSAFE,
        )
