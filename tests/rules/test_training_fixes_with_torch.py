"""TDR102 and TDR103 against the installed torch: the code they report behaves as their docs say,
and TDR103's fix gives the intended behaviour. (The linter never imports torch; tests may.) The
fixes of TDR107, TDR109 and TDR110 run in tests/behaviour/."""

from __future__ import annotations

import pytest

from torchdoctor.core.fixes import apply_edits
from torchdoctor.linter.runner import check_text

torch = pytest.importorskip("torch")


def _fixed(code: str, rule: str) -> str:
    findings = [f for f in check_text(code, "x.py", codes=frozenset({rule})).findings]
    assert findings and findings[0].fix is not None, code
    return apply_edits(code, list(findings[0].fix.edits))


def _run(code: str) -> dict[str, object]:
    scope: dict[str, object] = {}
    exec(compile(code, "x.py", "exec"), scope)
    return scope


SETUP = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(4, 1, bias=False)
optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
xs = [torch.full((1, 4), float(i + 1)) for i in range(4)]
seen = []
"""

LOSS_TOTAL = (
    SETUP
    + """\
total = 0.0
for x in xs:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), torch.zeros(1, 1))
    loss.backward()
    optimizer.step()
    total += loss
"""
)


def test_tdr103_total_keeps_a_graph_and_the_fix_does_not() -> None:
    total = _run(LOSS_TOTAL)["total"]
    assert isinstance(total, torch.Tensor) and total.requires_grad and total.grad_fn is not None
    fixed = _run(_fixed(LOSS_TOTAL, "TDR103"))["total"]
    # The first fix is the safe `.detach()` (the total is never read as a tensor): the same
    # value, bit for bit, without the graph.
    assert isinstance(fixed, torch.Tensor) and not fixed.requires_grad and fixed.grad_fn is None
    assert torch.equal(fixed, total.detach())


@pytest.mark.parametrize(
    "expr",
    [
        "torch.zeros(3, 4)",
        "torch.ones(3, 4)",
        "torch.empty(3, 4)",
        "torch.full((3, 4), 2.0)",
        "torch.rand(3, 4)",
        "torch.randn(3, 4)",
        "torch.randint(0, 5, (3, 4))",
        "torch.randperm(6)",
        "torch.arange(12)",
        "torch.linspace(0, 1, 5)",
        "torch.logspace(0, 1, 5)",
        "torch.eye(3)",
        "torch.tensor([[1, 2], [3, 4]])",
    ],
)
def test_tdr102_reported_contiguous_returns_its_input(expr: str) -> None:
    code = f"import torch\ny = {expr}.contiguous()\n"
    assert check_text(code, "x.py", codes=frozenset({"TDR102"})).findings
    t = eval(expr, {"torch": torch})
    assert t.is_contiguous() and t.contiguous() is t


@pytest.mark.parametrize(
    "code",
    [
        "import torch\nsrc = torch.randn(3, 4).t()\ny = torch.tensor(src).contiguous()\n",
        "import torch\ny = torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).contiguous()\n",
        "import torch\ny = torch.randn(3, 4).t().contiguous().reshape(4, 3)\n",
    ],
)
def test_tdr102_silent_where_the_call_would_copy(code: str) -> None:
    findings = check_text(code, "x.py", codes=frozenset({"TDR102"})).findings
    assert findings == []
    body = code.replace(".contiguous()", "").replace("y = ", "y_plain = ")
    scope = _run(body)
    assert not scope["y_plain"].is_contiguous()  # type: ignore[attr-defined]
