"""Fixes of pitfalls found in real code (TDR607, TDR815), run before and after: a DataLoader
iterator's removed `.next()` (the fix makes the failing call work and changes nothing else),
and inference after `load_state_dict` without `eval()` (the fix turns dropout off: the
predictions change, and only they)."""

from __future__ import annotations

from pathlib import Path

import pytest
from behaviour_harness import Case, Programs, exercise

# `it.next()` raises AttributeError on torch >= 1.13; the program reports what it got.
ITERATOR_NEXT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.arange(6.0)), batch_size=2)
dataiter = iter(loader)
# %%
try:
    (first,) = dataiter.next()
    print("first batch:", first.tolist())
except AttributeError:
    print("first batch:", "AttributeError")
print("batches:", len(loader))
"""

# A model with dropout loaded for inference: in training mode two forward passes differ.
LOAD_FOR_INFERENCE = """\
import io
import torch
from torch import nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.drop = nn.Dropout(0.5)
    def forward(self, x):
        return self.fc(self.drop(x))
buffer = io.BytesIO()
torch.save(Net().state_dict(), buffer)
buffer.seek(0)
x = torch.ones(4, 8)
# %%
model = Net()
model.load_state_dict(torch.load(buffer, map_location="cpu"))
with torch.no_grad():
    first = model(x)
    second = model(x)
print("repeatable:", torch.equal(first, second))
print("shape:", tuple(first.shape))
"""

CASES = [
    Case(
        "next", "TDR815", ITERATOR_NEXT, changes={"first batch": ("AttributeError", "[0.0, 1.0]")}
    ),
    Case(
        "next",
        "TDR815",
        ITERATOR_NEXT,
        notebook=True,
        changes={"first batch": ("AttributeError", "[0.0, 1.0]")},
    ),
    Case(
        "eval", "TDR607", LOAD_FOR_INFERENCE, unsafe=True, changes={"repeatable": ("False", "True")}
    ),
    Case(
        "eval",
        "TDR607",
        LOAD_FOR_INFERENCE,
        unsafe=True,
        notebook=True,
        changes={"repeatable": ("False", "True")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.param_id for c in CASES])
def test_fix(case: Case, tmp_path: Path, programs: Programs) -> None:
    exercise(case, tmp_path, programs)
