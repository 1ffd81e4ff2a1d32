from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# A tiny seeded model, optimizer and loader every script starts from.
PRELUDE = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
dataset = TensorDataset(torch.randn(32, 8), torch.randn(32, 1))
loader = DataLoader(dataset, batch_size=4)
"""


@dataclass
class Run:
    code: int
    out: str
    err: str
    cwd: Path

    def json(self) -> list[dict[str, Any]]:
        return json.loads(self.out)

    def codes(self) -> set[str]:
        return {f["code"] for f in self.json()}

    def finding(self, code: str) -> dict[str, Any]:
        found = [f for f in self.json() if f["code"] == code]
        assert len(found) == 1, (code, self.out, self.err)
        return found[0]


@pytest.fixture
def script(tmp_path: Path):
    """Write a script (the prelude, then ``body``) into ``tmp_path``; returns its path."""

    def write(body: str, name: str = "train.py", prelude: bool = True) -> Path:
        path = tmp_path / name
        text = (PRELUDE if prelude else "") + textwrap.dedent(body)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def td(tmp_path: Path):
    """Run the real CLI (``python -m torchdoctor ...``) in a subprocess, in ``tmp_path``."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Run:
        full_env = {**os.environ, "TORCHDOCTOR_LOCALE": "", **(env or {})}
        full_env.pop("CI", None)
        proc = subprocess.run(
            [sys.executable, "-m", "torchdoctor", *args],
            cwd=cwd or tmp_path,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=180,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr, cwd or tmp_path)

    return run


def row_of(path: Path, needle: str) -> int:
    """The 1-based row of the first line of ``path`` containing ``needle``."""
    for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return row
    raise AssertionError(f"{needle!r} not in {path}")


@pytest.fixture
def row():
    return row_of
