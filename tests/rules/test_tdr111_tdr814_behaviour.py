"""Behaviour proofs for the fixes of TDR814 (``torch.logsumexp``) and TDR111 (drop
``set_to_none=False``), through the command line on small CPU torch programs.

Both fixes are unsafe: ``check --fix`` leaves the file alone, ``--unsafe-fixes`` applies them,
and the program's output then differs only in what the rules' docs name: TDR814 gives the same
values to float32 rounding, and finite values where ``exp`` overflowed; TDR111 leaves every
trained weight the same while ``.grad`` reads ``None`` instead of zeros after ``zero_grad``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import torchdoctor

pytest.importorskip("torch")

SERVER = str(Path(torchdoctor.__file__).resolve().parents[1])


def _env() -> dict[str, str]:
    env = {**os.environ, "TORCHDOCTOR_LOCALE": ""}
    env["PYTHONPATH"] = os.pathsep.join([SERVER, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _fix(path: Path, code: str, *, unsafe: bool = False) -> str:
    args = ["check", "--no-cache", "--fix", "--select", code, path.name]
    if unsafe:
        args.insert(3, "--unsafe-fixes")
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args],
        cwd=path.parent, capture_output=True, text=True, env=_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return path.read_text()


def _run(path: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=path.parent, capture_output=True, text=True, env=_env(), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


SCRIPT_814 = """\
import torch

torch.manual_seed(0)
x = torch.randn(4, 6)
y = torch.log(torch.sum(torch.exp(x), 1, keepdim=True))
print(" ".join(f"{v:.5f}" for v in y.flatten().tolist()))
big = torch.tensor([[100.0, 90.0], [1.0, 2.0]])
z = torch.log(torch.sum(torch.exp(big), dim=1))
print(" ".join(str(v) for v in z.tolist()))
"""


def test_tdr814_logsumexp_keeps_the_values_and_fixes_the_overflow(tmp_path: Path) -> None:
    path = tmp_path / "lse.py"
    path.write_text(SCRIPT_814)
    before = _run(path)
    assert _fix(path, "TDR814") == SCRIPT_814  # unsafe: `--fix` alone leaves it
    fixed = _fix(path, "TDR814", unsafe=True)
    assert "torch.logsumexp(x, 1, keepdim=True)" in fixed
    assert "torch.logsumexp(big, dim=1)" in fixed
    after = _run(path)
    assert after[0] == before[0]  # same values to five decimals
    assert before[1].split()[0] == "inf"  # exp(100) overflows in float32
    assert float(after[1].split()[0]) == pytest.approx(100.0000454, abs=1e-4)
    assert after[1].split()[1] == before[1].split()[1]


SCRIPT_111 = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad(set_to_none=False)
    model(torch.randn(5, 3)).pow(2).mean().backward()
    optimizer.step()
print(" ".join(f"{w:.6f}" for w in model.weight.flatten().tolist()))
optimizer.zero_grad(set_to_none=False)
print(model.weight.grad is None)
"""


def test_tdr111_fix_keeps_training_and_leaves_grad_none(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT_111)
    before = _run(path)
    assert _fix(path, "TDR111") == SCRIPT_111
    fixed = _fix(path, "TDR111", unsafe=True)
    assert "set_to_none" not in fixed
    after = _run(path)
    assert after[0] == before[0]  # the same weights after training
    assert (before[1], after[1]) == ("False", "True")  # the difference the docs name
