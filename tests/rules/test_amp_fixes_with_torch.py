"""TDR401's rewrites, run against the installed torch: the fixed code must build the same objects
as the deprecated code and must not warn. (The linter never imports torch; tests may.)"""

from __future__ import annotations

import warnings

import pytest

from torchdoctor.core.fixes import apply_edits
from torchdoctor.linter.runner import check_text

torch = pytest.importorskip("torch")

CODES = frozenset({"TDR401"})


def _fixed(code: str) -> str:
    findings = [f for f in check_text(code, "x.py", codes=CODES).findings if f.code == "TDR401"]
    assert findings and findings[0].fix is not None, code
    return apply_edits(code, list(findings[0].fix.edits))


def _run(code: str) -> tuple[dict[str, object], list[str]]:
    scope: dict[str, object] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, "x.py", "exec"), scope)
    future = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    return scope, future


AUTOCAST_ATTRS = ("device", "fast_dtype", "_enabled", "_cache_enabled")
SCALER_ATTRS = (
    "_device",
    "_enabled",
    "_init_scale",
    "_growth_factor",
    "_backoff_factor",
    "_growth_interval",
)


@pytest.mark.parametrize(
    ("code", "attrs"),
    [
        ("import torch\nobj = torch.cpu.amp.autocast()\n", AUTOCAST_ATTRS),
        ("import torch\nobj = torch.cpu.amp.autocast(False)\n", AUTOCAST_ATTRS),
        (
            "import torch\nobj = torch.cpu.amp.autocast(True, torch.float16, False)\n",
            AUTOCAST_ATTRS,
        ),
        (
            "import torch\nobj = torch.cpu.amp.autocast(True, dtype=torch.float16)\n",
            AUTOCAST_ATTRS,
        ),
        (
            "from torch.cpu.amp import autocast as ac\nimport torch\nobj = ac(True, torch.float16)\n",
            AUTOCAST_ATTRS,
        ),
        ("import torch\nobj = torch.cpu.amp.GradScaler()\n", SCALER_ATTRS),
        (
            "import torch\nobj = torch.cpu.amp.GradScaler(1024.0, 3.0, 0.25, 7, True)\n",
            SCALER_ATTRS,
        ),
        (
            "from torch.cpu.amp import GradScaler\nobj = GradScaler(8.0, enabled=True)\n",
            SCALER_ATTRS,
        ),
    ],
)
def test_fixed_code_builds_the_same_object_without_warning(
    code: str, attrs: tuple[str, ...]
) -> None:
    before, old_warnings = _run(code)
    assert old_warnings, "the deprecated spelling should warn"
    fixed = _fixed(code)
    after, new_warnings = _run(fixed)
    assert new_warnings == [], fixed
    old, new = before["obj"], after["obj"]
    assert type(new).__module__.startswith("torch.amp"), fixed
    for attr in attrs:
        assert getattr(new, attr) == getattr(old, attr), (attr, fixed)


def test_custom_fwd_and_bwd_decorators_work_after_the_fix() -> None:
    code = (
        "import torch\n"
        "class Double(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)\n"
        "    def forward(ctx, x):\n"
        "        return x * 2\n"
        "    @staticmethod\n"
        "    @torch.cuda.amp.custom_bwd\n"
        "    def backward(ctx, g):\n"
        "        return g * 2\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "Double.apply(x).sum().backward()\n"
        "grad = x.grad\n"
    )
    result = check_text(code, "x.py", codes=CODES)
    assert len(result.findings) == 2
    # Apply every fix (two decorators, two findings).
    fixed = apply_edits(code, [e for f in result.findings if f.fix for e in f.fix.edits])
    before, old_warnings = _run(code)
    after, new_warnings = _run(fixed)
    assert old_warnings and new_warnings == [], fixed
    assert torch.equal(after["grad"], before["grad"])
