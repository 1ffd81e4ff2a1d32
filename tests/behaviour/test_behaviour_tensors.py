"""Fixes of tensor code (TDR101, TDR102, TDR802, TDR808, TDR809, TDR814), run before and
after."""

from __future__ import annotations

from pathlib import Path

import pytest
from behaviour_harness import Case, Programs, exercise

VIEW = """\
import torch
def flat(x):
    return x.transpose(0, 1).view(-1)
# %%
row = torch.arange(4.0).reshape(1, 4)
out = flat(row)
out[0] = 100.0
print("writes reach the input:", row[0, 0].item())
grid = torch.arange(6.0).reshape(2, 3)
try:
    print("flat:", flat(grid).tolist())
except RuntimeError as exc:
    print("flat:", type(exc).__name__)
"""

CONTIGUOUS = """\
import torch
def make(n):
    buf = torch.empty(n, 4)
    buf.zero_()
    out = buf.contiguous()
    out[0, 0] = 7.0
    return buf, out
buf, out = make(2)
print("writes reach the buffer:", buf[0, 0].item())
print("stride:", out.stride())
# %%
idx = torch.arange(10).contiguous().view(2, 5)
print("idx:", idx.tolist())
"""

REQUIRE_GRAD = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
for p in model[0].parameters():
    p.require_grad = False
# %%
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
first = model[0].weight.detach().clone()
model(torch.ones(1, 2)).sum().backward()
opt.step()
print("first layer trains:", not torch.equal(first, model[0].weight))
print("first layer grad:", model[0].weight.grad is not None)
print("second layer grad:", model[1].weight.grad is not None)
"""

LOG1P = """\
import torch
x = torch.tensor([1e-8, 0.5, 3.0])
y = torch.log(1 + x)
# %%
print("moderate:", [round(v, 6) for v in y[1:].tolist()])
print("tiny:", y[0].item())
"""

LOGSUMEXP = """\
import torch
torch.manual_seed(0)
x = torch.randn(4, 6)
y = torch.log(torch.sum(torch.exp(x), 1, keepdim=True))
big = torch.tensor([[100.0, 90.0], [1.0, 2.0]])
z = torch.log(torch.sum(torch.exp(big), dim=1))
# %%
print("shape:", tuple(y.shape))
print("moderate:", [round(v, 5) for v in y.flatten().tolist()])
print("small row:", round(z[1].item(), 5))
print("large row:", round(z[0].item(), 4))
"""

EXPM1 = """\
import torch
x = torch.tensor([1e-8, 0.5, 3.0])
y = torch.exp(x) - 1
# %%
print("moderate:", [round(v, 5) for v in y[1:].tolist()])
print("tiny:", y[0].item())
"""

CASES = [
    # A `.view` of a transposed tensor: where it works (size-1 dims), `reshape` is the same
    # view; where it raised, `reshape` copies.
    Case(
        "view", "TDR101", VIEW, changes={"flat": ("RuntimeError", "[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]")}
    ),
    Case(
        "view",
        "TDR101",
        VIEW,
        notebook=True,
        changes={"flat": ("RuntimeError", "[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]")},
    ),
    Case(
        "view-contiguous",
        "TDR101",
        VIEW,
        alternative=1,
        changes={"flat": ("RuntimeError", "[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]")},
    ),
    Case("contiguous", "TDR102", CONTIGUOUS),
    Case("contiguous", "TDR102", CONTIGUOUS, notebook=True),
    # The flag starts to take effect, as the docs say.
    Case(
        "freeze",
        "TDR802",
        REQUIRE_GRAD,
        unsafe=True,
        changes={"first layer trains": ("True", "False"), "first layer grad": ("True", "False")},
    ),
    Case(
        "freeze",
        "TDR802",
        REQUIRE_GRAD,
        unsafe=True,
        notebook=True,
        changes={"first layer trains": ("True", "False"), "first layer grad": ("True", "False")},
    ),
    # Results change in their last bits only: where `1 + x` rounds to 1, log1p is accurate.
    Case("log1p", "TDR808", LOG1P, unsafe=True, changes={"tiny": ("0.0", "9.99999993922529e-09")}),
    Case(
        "log1p",
        "TDR808",
        LOG1P,
        unsafe=True,
        notebook=True,
        changes={"tiny": ("0.0", "9.99999993922529e-09")},
    ),
    Case("expm1", "TDR809", EXPM1, unsafe=True, changes={"tiny": ("0.0", "9.99999993922529e-09")}),
    # The same values to float32 rounding; where exp overflows, a finite result instead of inf.
    Case("logsumexp", "TDR814", LOGSUMEXP, unsafe=True, changes={"large row": ("inf", "100.0")}),
    Case(
        "logsumexp",
        "TDR814",
        LOGSUMEXP,
        unsafe=True,
        notebook=True,
        changes={"large row": ("inf", "100.0")},
    ),
    Case(
        "expm1",
        "TDR809",
        EXPM1,
        unsafe=True,
        notebook=True,
        changes={"tiny": ("0.0", "9.99999993922529e-09")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.param_id for c in CASES])
def test_fix(case: Case, tmp_path: Path, programs: Programs) -> None:
    exercise(case, tmp_path, programs)
