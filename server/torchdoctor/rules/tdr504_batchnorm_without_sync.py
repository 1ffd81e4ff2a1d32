from __future__ import annotations

import ast
import re
from functools import partial

from ..core import arguments, fixes
from ..core.context import Context
from ..core.kinds import MODULE_SELF_METHODS
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import FUNCTION_NODES, argument, dotted
from .base import Invalid, Rule, Valid

DDP = "torch.nn.parallel.DistributedDataParallel"
_BATCH_NORMS = frozenset(f"torch.nn.BatchNorm{d}d" for d in (1, 2, 3)) | {
    "torch.nn.LazyBatchNorm2d"
}
# torchvision builders whose models hold BatchNorm layers (detection models use
# FrozenBatchNorm2d, ViT/Swin/ConvNeXt use LayerNorm: not listed).
_TORCHVISION_BN = re.compile(
    r"^torchvision\.models\.(segmentation\.)?("
    r"resnet\d+|resnext\d+_\w+|wide_resnet\d+_\d+|densenet\d+|mobilenet_v[23]\w*|"
    r"efficientnet_\w+|regnet_\w+|inception_v3|googlenet|shufflenet_v2_\w+|mnasnet\w+|"
    r"vgg\d+_bn|deeplabv3_\w+|fcn_resnet\d+|lraspp_\w+)$"
)
_HEAD = "import torch\nfrom torch import nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
# Model classes and factories of another module (the multi-file examples' models.py).
_MODELS_PY = (
    "from torch import nn\n"
    "class Backbone(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.bn = nn.BatchNorm2d(8)\n"
    "def build_model():\n"
    "    return Backbone()\n"
    "def build_synced():\n"
    "    return nn.SyncBatchNorm.convert_sync_batchnorm(Backbone())\n"
)
# A helper of another module returning the model in a tuple; the model's class builds a
# torchvision ResNet (BatchNorm) or holds only LayerNorm (the multi-file examples' model.py).
_LOAD_PY = (
    "import torch\nimport torchvision\nfrom torch import nn\n"
    "class Encoder(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.backbone = self.get_resnet()\n"
    "    def get_resnet(self):\n"
    "        return torchvision.models.resnet18()\n"
    "class Head(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.norm = nn.LayerNorm(128)\n"
    "def load_model(args):\n"
    "    model = Encoder()\n"
    "    model = model.to(args.device)\n"
    "    return model, torch.optim.Adam(model.parameters())\n"
    "def load_head(args):\n"
    "    head = Head().to(args.device)\n"
    "    return head, torch.optim.Adam(head.parameters())\n"
)
_NET = "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"


class BatchnormWithoutSync(Rule):
    """## What it does
    Checks for a model with BatchNorm layers (a class of the file that uses `nn.BatchNorm1d/2d/
    3d`, an `nn.Sequential` holding one, or a torchvision model built with them, such as
    `resnet50`) wrapped in `DistributedDataParallel` when the file never calls
    `nn.SyncBatchNorm.convert_sync_batchnorm`. The model may be held on `self` or unpacked
    from the tuple a helper returns (`model, optimizer = load_model(args)`); its class (which
    may build such a torchvision model or another class with BatchNorm inside), or the
    helper that builds it, may be in another module of the project.

    ## Why is this bad?
    DDP synchronises gradients, not BatchNorm statistics: each process normalises with the
    mean and variance of its own per-GPU batch. With the small per-GPU batches that large
    models force (2 to 16 images in detection and segmentation), those statistics are noisy
    and training is worse than the global batch size suggests; the running statistics used
    in evaluation come from rank 0's batches only (DDP broadcasts rank 0's buffers). As the
    guide says, `SyncBatchNorm` computes the statistics over the global batch, at the cost of
    one all-reduce per BatchNorm layer in every forward pass, so it pays off when per-GPU
    batches are small. This is a hint, not an error: with large per-GPU batches plain
    BatchNorm is fine and faster.

    Models without BatchNorm, models built with `SyncBatchNorm` already, and files that call
    `convert_sync_batchnorm` anywhere (often under a `--sync-bn` flag) are not reported.

    ## Example
    ```python
    model = torchvision.models.resnet50().cuda(local_rank)
    model = DDP(model, device_ids=[local_rank])
    ```

    ## Use instead
    ```python
    model = torchvision.models.resnet50().cuda(local_rank)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = DDP(model, device_ids=[local_rank])
    ```

    ## Fix safety
    The fix inserts `model = nn.SyncBatchNorm.convert_sync_batchnorm(model)` before the
    statement that wraps the model (or converts the argument in place when the model is
    built inside the call). It is unsafe: it changes the numerics of training and adds
    communication to every forward pass; and SyncBatchNorm works only on GPUs:
    `DistributedDataParallel` of a CPU module with SyncBatchNorm layers raises
    `ValueError: SyncBatchNorm layers only work with GPU modules`.

    ## References
    - [`torch.nn.SyncBatchNorm`](https://pytorch.org/docs/stable/generated/torch.nn.SyncBatchNorm.html)
    - [`DistributedDataParallel`](https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html)
    """

    code = "TDR504"
    name = "batchnorm-without-sync"
    severity = Severity.INFO
    fix_safety = Applicability.UNSAFE

    VALID = (
        # Converted already (also under a flag).
        _HEAD + "import torchvision\nmodel = torchvision.models.resnet50().cuda()\n"
        "model = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
        "model = DDP(model, device_ids=[0])\n",
        _HEAD + "import torchvision\nmodel = torchvision.models.resnet50().cuda()\n"
        "if args.sync_bn:\n    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
        "model = DDP(model, device_ids=[0])\n",
        # No BatchNorm: LayerNorm, a ViT, a detection model with frozen BatchNorm.
        _HEAD + _NET + "        self.norm = nn.LayerNorm(8)\nmodel = DDP(Net().cuda())\n",
        _HEAD + "import torchvision\nmodel = DDP(torchvision.models.vit_b_16().cuda())\n",
        _HEAD + "from torchvision.models.detection import fasterrcnn_resnet50_fpn\n"
        "model = DDP(fasterrcnn_resnet50_fpn().cuda())\n",
        # Built with SyncBatchNorm directly.
        _HEAD + _NET + "        self.bn = nn.SyncBatchNorm(8)\nmodel = DDP(Net().cuda())\n",
        # DataParallel (single process: BatchNorm statistics are per replica anyway).
        _HEAD + "import torchvision\nmodel = nn.DataParallel(torchvision.models.resnet18())\n",
        # A torchvision model built with another normalisation layer.
        _HEAD + "import torchvision\n"
        "model = torchvision.models.resnet50(norm_layer=nn.SyncBatchNorm).cuda()\n"
        "model = DDP(model, device_ids=[0])\n",
        # A model of unknown make.
        _HEAD + "from mymodels import build\nmodel = DDP(build(cfg).cuda())\n",
        # A local class named like torchvision's builder.
        _HEAD + "def resnet50():\n    return nn.Linear(2, 2)\nmodel = DDP(resnet50())\n",
        # The factory of another module converts the layers itself.
        Valid(
            _HEAD + "from models import build_synced\n"
            "net = DDP(build_synced().cuda(), device_ids=[0])\n",
            files=(("models.py", _MODELS_PY),),
        ),
        # The tuple element a helper of another module returns holds no BatchNorm.
        Valid(
            _HEAD + "from model import load_head\n"
            "def main(gpu, args):\n"
            "    head, optimizer = load_head(args)\n"
            "    head = DDP(head, device_ids=[gpu])\n",
            files=(("model.py", _LOAD_PY),),
        ),
    )
    INVALID = (
        Invalid(
            _HEAD + "import torchvision\n"
            "def main(rank):\n"
            "    model = torchvision.models.resnet50().cuda(rank)\n"
            "    model = DDP(model, device_ids=[rank])\n",
            fixed=_HEAD + "import torchvision\n"
            "def main(rank):\n"
            "    model = torchvision.models.resnet50().cuda(rank)\n"
            "    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
            "    model = DDP(model, device_ids=[rank])\n",
            lines=(7,),
        ),
        # A class of the file, `import torch.nn as tnn`, the wrapper under its full name.
        Invalid(
            "import torch\nimport torch.nn as tnn\n"
            "class Block(tnn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.bn = tnn.BatchNorm2d(8)\n"
            "class Net(Block):\n    pass\n"
            "net = Net()\nnet.to(device)\n"
            "ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0])\n",
            fixed="import torch\nimport torch.nn as tnn\n"
            "class Block(tnn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.bn = tnn.BatchNorm2d(8)\n"
            "class Net(Block):\n    pass\n"
            "net = Net()\nnet.to(device)\n"
            "net = tnn.SyncBatchNorm.convert_sync_batchnorm(net)\n"
            "ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0])\n",
            lines=(11,),
        ),
        # Built inside the call: the argument is converted in place; nn through torch.
        Invalid(
            "import torch\nfrom torch.nn.parallel import DistributedDataParallel\n"
            "model = DistributedDataParallel(\n"
            "    torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)).cuda()\n)\n",
            fixed="import torch\nfrom torch.nn.parallel import DistributedDataParallel\n"
            "model = DistributedDataParallel(\n"
            "    torch.nn.SyncBatchNorm.convert_sync_batchnorm(torch.nn.Sequential("
            "torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)).cuda())\n)\n",
            lines=(3,),
        ),
        # A trainer attribute.
        Invalid(
            _HEAD + "from torchvision.models import mobilenet_v2\n"
            "class Trainer:\n    def __init__(self, rank):\n"
            "        self.model = mobilenet_v2().to(rank)\n"
            "        self.model = DDP(self.model, device_ids=[rank])\n",
            fixed=_HEAD + "from torchvision.models import mobilenet_v2\n"
            "class Trainer:\n    def __init__(self, rank):\n"
            "        self.model = mobilenet_v2().to(rank)\n"
            "        self.model = nn.SyncBatchNorm.convert_sync_batchnorm(self.model)\n"
            "        self.model = DDP(self.model, device_ids=[rank])\n",
            lines=(8,),
        ),
        # A model class of another module, held on `self`.
        Invalid(
            _HEAD + "from models import Backbone\n"
            "class Trainer:\n"
            "    def __init__(self, rank):\n"
            "        self.model = Backbone().cuda(rank)\n"
            "        self.ddp = DDP(self.model, device_ids=[rank])\n",
            fixed=_HEAD + "from models import Backbone\n"
            "class Trainer:\n"
            "    def __init__(self, rank):\n"
            "        self.model = Backbone().cuda(rank)\n"
            "        self.model = nn.SyncBatchNorm.convert_sync_batchnorm(self.model)\n"
            "        self.ddp = DDP(self.model, device_ids=[rank])\n",
            files=(("models.py", _MODELS_PY),),
            lines=(8,),
        ),
        # A factory of another module that returns such a model.
        Invalid(
            _HEAD + "from models import build_model\n"
            "net = DDP(build_model().cuda(), device_ids=[0])\n",
            fixed=_HEAD + "from models import build_model\n"
            "net = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(build_model().cuda()), "
            "device_ids=[0])\n",
            files=(("models.py", _MODELS_PY),),
            lines=(5,),
        ),
        # Unpacked from the tuple a helper of another module returns; the model's class
        # builds a torchvision ResNet in a method.
        Invalid(
            _HEAD + "from model import load_model\n"
            "def main(gpu, args):\n"
            "    model, optimizer = load_model(args)\n"
            "    model = DDP(model, device_ids=[gpu])\n",
            fixed=_HEAD + "from model import load_model\n"
            "def main(gpu, args):\n"
            "    model, optimizer = load_model(args)\n"
            "    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
            "    model = DDP(model, device_ids=[gpu])\n",
            files=(("model.py", _LOAD_PY),),
            lines=(7,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        if "convert_sync_batchnorm" in sem.attributes or "convert_sync_batchnorm" in sem.names:
            return
        for call in sem.calls_to(DDP):
            model = arguments.value(call, arguments.DDP, "module")
            if model is None or not _has_batchnorm(ctx, model, call):
                continue
            ctx.report(
                call,
                Text(
                    "BatchNorm layers under `DistributedDataParallel` normalise each GPU's "
                    "batch separately; convert them with `nn.SyncBatchNorm.convert_sync_batchnorm`",
                    "`DistributedDataParallel` 下的 BatchNorm 层只按各自 GPU 的批次归一化；请用 "
                    "`nn.SyncBatchNorm.convert_sync_batchnorm` 转换",
                ),
                fixes=partial(_fix, ctx, call, model),
            )


def _has_batchnorm(ctx: Context, expr: ast.AST, at: ast.AST, depth: int = 0) -> bool:
    """Whether the module ``expr`` holds BatchNorm layers, following ``.to()``/``.cuda()``
    chains, assignments of names and ``self.attr``, classes and factories of this file and of
    the project's other modules, and their bases."""
    sem = ctx.sem.owner(expr)
    if depth > 6:
        return False
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in MODULE_SELF_METHODS:
            return _has_batchnorm(ctx, func.value, at, depth + 1)
        qual = sem.qualname(func) or ""
        if _TORCHVISION_BN.match(qual):
            return argument(expr, "norm_layer") is None  # GroupNorm or SyncBatchNorm chosen
        if qual in _BATCH_NORMS:
            return True
        if qual in ("torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"):
            return any(_mentions_batchnorm(ctx, a) for a in (*expr.args, *expr.keywords))
        defined = sem.definition(func)
        if defined is not None and isinstance(defined[1], ast.ClassDef):
            return _class_has_batchnorm(ctx, defined[1])
        if defined is not None and defined[0] is not sem and isinstance(defined[1], FUNCTION_NODES):
            # a model factory of another module: what it returns
            return any(
                _has_batchnorm(ctx, r, at, depth + 1) for r in defined[0].returns(defined[1])
            )
        return False
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.value is None:
            return False
        if binding.index is None:
            return _has_batchnorm(ctx, binding.value, at, depth + 1)
        # `model, optimizer = load_model(...)`: that element of what the helper returns
        elements = sem.unpacked_values(binding) or []
        return any(_has_batchnorm(ctx, e, at, depth + 1) for e in elements)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        cls = sem.enclosing_class(expr) if expr.value.id == "self" else None
        values = sem.self_attr_values.get((cls, expr.attr), []) if cls else []
        return any(
            v is not at and not sem.is_inside(at, v) and _has_batchnorm(ctx, v, at, depth + 1)
            for v in values
        )
    return False


def _mentions_batchnorm(ctx: Context, node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Name | ast.Attribute) and ctx.qualname(n) in _BATCH_NORMS
        for n in ast.walk(node)
    )


def _class_has_batchnorm(ctx: Context, cls: ast.ClassDef, depth: int = 0) -> bool:
    if depth > 5:
        return False
    if _mentions_batchnorm(ctx, cls):
        return True
    sem = ctx.sem.owner(cls)
    for node in ast.walk(cls):  # a torchvision model or a class with BatchNorm built inside
        if not isinstance(node, ast.Call):
            continue
        if _TORCHVISION_BN.match(sem.qualname(node.func) or ""):
            if argument(node, "norm_layer") is None:
                return True
            continue
        built = sem.class_def(node.func)
        if built is not None and built[1] is not cls:
            if _class_has_batchnorm(ctx, built[1], depth + 1):
                return True
    for base in cls.bases:
        defined = ctx.sem.owner(base).class_def(base)
        if defined is not None and defined[1] is not cls:
            if _class_has_batchnorm(ctx, defined[1], depth + 1):
                return True
    return False


def _nn_name(ctx: Context) -> tuple[str, list[Edit]] | None:
    """``nn`` when ``torch.nn`` is imported under a name, else ``torch.nn`` through torch."""
    for name, bindings in ctx.sem.scopes[ctx.sem.tree].bindings.items():
        if bindings and all(b.how == "import" and b.qualname == "torch.nn" for b in bindings):
            return name, []
    ref = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
    return (f"{ref[0]}.nn", ref[1]) if ref is not None else None


def _fix(ctx: Context, call: ast.Call, model: ast.expr) -> Fix | None:
    ref = _nn_name(ctx)
    if ref is None:
        return None
    nn, edits = ref
    convert = f"{nn}.SyncBatchNorm.convert_sync_batchnorm"
    stmt = ctx.sem.statement_of(call)
    name = dotted(model)
    edit: Edit | None
    if name is not None and isinstance(stmt, ast.Assign | ast.Expr) and stmt.value is call:
        edit = fixes.insert_statement_before(ctx.source, stmt, f"{name} = {convert}({name})")
    else:
        edit = fixes.replace(ctx.source, model, f"{convert}({ctx.segment(model)})")
    if edit is None:
        return None
    return Fix(
        Text(
            "Convert BatchNorm layers to `SyncBatchNorm`", "把 BatchNorm 层转换为 `SyncBatchNorm`"
        ),
        (*edits, edit),
        Applicability.UNSAFE,
    )
