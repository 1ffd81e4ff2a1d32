"""TDR301 through local functions: the finding is on the module-level call, `related` on the
statement that starts the workers."""

from __future__ import annotations

from torchdoctor.linter.runner import check_any

CODES = frozenset({"TDR301"})

SCRIPT = """import torch
from torch.utils.data import DataLoader

def make():
    return DataLoader(ds, num_workers=4)

def train():
    for batch in make():
        pass

train()
"""


def test_module_level_call_is_reported_with_the_loader_as_related() -> None:
    result = check_any(SCRIPT, "train.py", codes=CODES)
    assert [(f.range.start.row, f.range.start.col) for f in result.findings] == [(11, 0)]
    (related,) = result.findings[0].related
    assert related.range.start.row == 5


def test_call_under_the_guard_is_not_reported() -> None:
    guarded = SCRIPT.replace("train()\n", 'if __name__ == "__main__":\n    train()\n')
    assert check_any(guarded, "train.py", codes=CODES).findings == []


def test_defining_without_calling_is_not_reported() -> None:
    library = SCRIPT.replace("train()\n", "")
    assert check_any(library, "train.py", codes=CODES).findings == []
