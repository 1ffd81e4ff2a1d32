"""Fixes that migrate an API (TDR401, TDR805, TDR806, TDR807, TDR810, TDR811, TDR812), run
before and after. Deprecated spellings warn; the programs count those warnings, and the fix
removes them: that is the change their docs name."""

from __future__ import annotations

from pathlib import Path

import pytest
from behaviour_harness import Case, Programs, exercise

# The objects built by the old and the new spelling hold the same settings.
AMP = """\
import warnings
{imports}
# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    obj = {expr}
print("type:", type(obj).__name__)
print("deprecated:", sum(issubclass(w.category, FutureWarning) for w in caught))
for attr in {attrs}:
    print(attr + ":", getattr(obj, attr))
"""

AUTOCAST = ("device", "fast_dtype", "_enabled", "_cache_enabled")
SCALER = (
    "_device",
    "_enabled",
    "_init_scale",
    "_growth_factor",
    "_backoff_factor",
    "_growth_interval",
)


def amp(
    case_id: str, expr: str, attrs: tuple[str, ...], imports: str = "import torch", **kw
) -> Case:
    program = AMP.format(imports=imports, expr=expr, attrs=attrs)
    return Case(case_id, "TDR401", program, changes={"deprecated": ("1", "0")}, **kw)


CUSTOM_FWD = """\
import warnings
import torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    class Double(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            return x * 2
        @staticmethod
        @torch.cuda.amp.custom_bwd
        def backward(ctx, g):
            return g * 2
print("deprecated:", sum(issubclass(w.category, FutureWarning) for w in caught))
x = torch.ones(3, requires_grad=True)
y = Double.apply(x)
y.sum().backward()
print("y:", y.tolist())
print("grad:", x.grad.tolist())
"""

# Every name TDR805 rewrites: functorch's are thin wrappers that warn and call torch.func's.
FUNCTORCH = """\
import warnings
warnings.simplefilter("ignore")
import torch
from functorch import vmap as v, grad, vjp, jvp
from functorch import jacrev, jacfwd, hessian, functionalize
xs = torch.arange(3.0)
def cube(t):
    return (t ** 3).sum()
print("vmap:", v(lambda t: t * 2)(xs).tolist())
print("grad:", grad(cube)(xs).tolist())
print("vjp:", vjp(torch.sin, xs)[1](torch.ones(3))[0].tolist())
print("jvp:", jvp(torch.sin, (xs,), (torch.ones(3),))[1].tolist())
print("jacrev:", jacrev(torch.sin)(xs).tolist())
print("jacfwd:", jacfwd(torch.sin)(xs).tolist())
print("hessian:", hessian(cube)(xs).tolist())
def add_one(t):
    t.add_(1)
    return t
print("functionalize:", functionalize(add_one)(xs.clone()).tolist())
"""

STATELESS = """\
import warnings
warnings.simplefilter("ignore")
import torch
from torch.nn.utils.stateless import functional_call
lin = torch.nn.Linear(2, 1)
params = {"weight": torch.ones(1, 2), "bias": torch.zeros(1)}
print("out:", functional_call(lin, params, (torch.tensor([[1.0, 2.0]]),)).tolist())
"""

COLLATE_USE = """\
import torch
import torch.utils.data._utils.collate as C
samples = [(torch.tensor([1, 2]), 3), (torch.tensor([4, 5]), 6)]
batch = torch.utils.data._utils.collate.default_collate(samples)
print("batch:", [b.tolist() for b in batch])
print("convert:", C.default_convert([1, 2]))
loader = torch.utils.data.DataLoader(samples, batch_size=2, collate_fn=torch.utils.data._utils.collate.default_collate)
print("loaded:", [[b.tolist() for b in x] for x in loader])
"""

COLLATE_IMPORT = """\
import torch
from torch.utils.data._utils.collate import default_convert as conv, default_collate
samples = [{"a": torch.tensor([1]), "b": 2}, {"a": torch.tensor([3]), "b": 4}]
batch = default_collate(samples)
print("batch:", {k: v.tolist() for k, v in batch.items()})
print("convert:", conv((1, 2)))
"""

# torchvision is not installed: a stand-in package records the calls, so the programs check
# that the fixed code runs (every name it uses resolves) and what it passes.
_STUB = """\
def __getattr__(name):
    if name.endswith("_Weights"):
        return type(name, (), {"__getattr__": lambda self, a: f"{name}.{a}"})()
    return lambda *args, **kwargs: (name, args, kwargs)
"""
TORCHVISION = {
    "torchvision/__init__.py": "from . import models, transforms\n",
    "torchvision/models/__init__.py": "from . import detection\n" + _STUB,
    "torchvision/models/resnet.py": _STUB,
    "torchvision/models/detection.py": _STUB,
    "torchvision/transforms/__init__.py": "from . import v2\n",
    "torchvision/transforms/v2.py": _STUB,
}

PRETRAINED = """\
import torchvision
from torchvision import models
from torchvision.models import resnet18
print("resnet50:", models.resnet50(pretrained=True))
print("resnet18:", resnet18(pretrained=True))
print("vgg16:", torchvision.models.vgg16(pretrained=False))
print("detector:", models.detection.fasterrcnn_resnet50_fpn(pretrained=True, pretrained_backbone=True))
"""

TO_TENSOR = """\
from torchvision.transforms import v2
t = v2.ToTensor()
print("transform:", t)
"""

MODULE_IMPORT = """\
import torchvision.models as models
import torchvision.transforms as transforms
print("models:", models.__name__)
print("transforms:", transforms.__name__)
"""

CASES = [
    amp("autocast", "torch.cpu.amp.autocast()", AUTOCAST),
    amp("autocast", "torch.cpu.amp.autocast()", AUTOCAST, notebook=True),
    amp("autocast-disabled", "torch.cpu.amp.autocast(False)", AUTOCAST),
    amp("autocast-positional", "torch.cpu.amp.autocast(True, torch.float16, False)", AUTOCAST),
    amp("autocast-dtype", "torch.cpu.amp.autocast(True, dtype=torch.float16)", AUTOCAST),
    amp(
        "autocast-import",
        "ac(True, torch.float16)",
        AUTOCAST,
        imports="from torch.cpu.amp import autocast as ac\nimport torch",
    ),
    amp("autocast-cuda", "torch.cuda.amp.autocast(dtype=torch.bfloat16)", AUTOCAST),
    amp("scaler", "torch.cpu.amp.GradScaler()", SCALER),
    amp("scaler-positional", "torch.cpu.amp.GradScaler(1024.0, 3.0, 0.25, 7, True)", SCALER),
    amp(
        "scaler-import",
        "GradScaler(8.0, enabled=True)",
        SCALER,
        imports="from torch.cpu.amp import GradScaler",
    ),
    amp("scaler-cuda", "torch.cuda.amp.GradScaler(2.0**10, enabled=False)", SCALER[:2]),
    Case("custom-fwd", "TDR401", CUSTOM_FWD, changes={"deprecated": ("2", "0")}),
    Case("functorch", "TDR805", FUNCTORCH),
    Case("functorch", "TDR805", FUNCTORCH, notebook=True),
    Case("stateless", "TDR805", STATELESS),
    Case("collate", "TDR806", COLLATE_USE),
    Case("collate", "TDR806", COLLATE_USE, notebook=True),
    Case("collate", "TDR807", COLLATE_IMPORT),
    Case("collate", "TDR807", COLLATE_IMPORT, notebook=True),
    # In torchvision, `handle_legacy_interface` turns `pretrained=True` into these same
    # `IMAGENET1K_V1` (`COCO_V1`) weights; the stand-in shows the names resolve and what is
    # passed.
    Case(
        "pretrained",
        "TDR810",
        PRETRAINED,
        files=TORCHVISION,
        changes={
            "resnet50": (
                "('resnet50', (), {'pretrained': True})",
                "('resnet50', (), {'weights': 'ResNet50_Weights.IMAGENET1K_V1'})",
            ),
            "resnet18": (
                "('resnet18', (), {'pretrained': True})",
                "('resnet18', (), {'weights': 'ResNet18_Weights.IMAGENET1K_V1'})",
            ),
            "vgg16": ("('vgg16', (), {'pretrained': False})", "('vgg16', (), {'weights': None})"),
            "detector": (
                "('fasterrcnn_resnet50_fpn', (), {'pretrained': True, 'pretrained_backbone': True})",
                "('fasterrcnn_resnet50_fpn', (), {'weights': 'FasterRCNN_ResNet50_FPN_Weights.COCO_V1',"
                " 'weights_backbone': 'ResNet50_Weights.IMAGENET1K_V1'})",
            ),
        },
    ),
    Case(
        "to-tensor",
        "TDR811",
        TO_TENSOR,
        unsafe=True,
        files=TORCHVISION,
        changes={
            "transform": (
                "('ToTensor', (), {})",
                "('Compose', ([('ToImage', (), {}), ('ToDtype', (torch.float32,), {'scale': True})],), {})",
            )
        },
    ),
    Case("module-import", "TDR812", MODULE_IMPORT, files=TORCHVISION),
    Case("module-import", "TDR812", MODULE_IMPORT, files=TORCHVISION, notebook=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.param_id for c in CASES])
def test_fix(case: Case, tmp_path: Path, programs: Programs) -> None:
    exercise(case, tmp_path, programs)
