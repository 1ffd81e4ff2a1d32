"""Names as ``named_parameters()`` and ``state_dict()`` spell them (``model.0.weight``): read by
the bridge, ``torchdoctor probe`` and the hover."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from torchdoctor.bridge.client import KernelBridge, parse_expression_reply
from torchdoctor.core.live_facts import ProbeRequest, is_valid_name

SETUP = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.BatchNorm1d(3), nn.Linear(3, 4)))
layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 5)])
plist = nn.ParameterList([nn.Parameter(torch.ones(7))])
spelled = [n for n, _ in model.named_parameters()] + list(model.state_dict())
"""

SHAPES = {
    "model.0.weight": [3, 2],
    "model.0.bias": [3],
    "model.2.0.weight": [3],
    "model.2.0.running_mean": [3],
    "model.2.1.weight": [4, 3],
    "layers.1.weight": [5, 4],
    "plist.0": [7],
}


@pytest.fixture(scope="module", autouse=True)
def _cells(kernel) -> None:
    kernel.run(SETUP)


def test_the_bridge_reads_state_dict_names(kernel, bridge: KernelBridge) -> None:
    facts = bridge.probe(
        ProbeRequest.of([*SHAPES, "model.0", "model.2", "model.9.weight", "layers.10"])
    )
    for name, shape in SHAPES.items():
        assert facts.tensor(name)["shape"] == shape, name  # type: ignore[index]
    assert facts.module("model.0")["type"].endswith("Linear")  # type: ignore[index]
    assert facts.module("model.2")["num_parameters"] == 6 + 16  # type: ignore[index]
    assert facts.get("model.9.weight") == {"kind": "missing"}
    assert facts.get("layers.10") == {"kind": "missing"}
    # Every name the model itself spells resolves.
    spelled = bridge._execute({"s": "__import__('json').dumps(spelled)"}, 10)
    names = parse_expression_reply(spelled["user_expressions"]["s"])
    assert "0.weight" in names and "2.0.num_batches_tracked" in names
    read = bridge.probe(ProbeRequest.of([f"model.{n}" for n in names]))
    assert all(read.tensor(f"model.{n}") is not None for n in names), read.names


def test_torchdoctor_probe_accepts_them(kernel) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "probe", "-f", kernel.connection_file,
         "model.0.weight", "layers.1.bias", "--view", "model.2.1.weight=-1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["model.0.weight"]["shape"] == [3, 2]
    assert data["layers.1.bias"]["shape"] == [5]
    assert data["model.2.1.weight"]["view_ok"] is True


@pytest.mark.parametrize(
    ("line", "col", "name"),
    [
        ("# model.0.weight is frozen", 12, "model.0.weight"),
        ("# model.0.weight is frozen", 8, "model.0"),
        ("# model.2.0.running_mean", 18, "model.2.0.running_mean"),
        ("x = 1.5", 6, None),
        ("x = 1.5.real", 9, None),
        ("n = 12", 4, None),
        ("# 0.weight", 4, None),
        ("# model.0x.weight", 12, None),
    ],
)
def test_the_hover_reads_them(line: str, col: int, name: str | None) -> None:
    from torchdoctor.lsp.kernels import name_at

    assert name_at(line, col) == name


def test_valid_names() -> None:
    assert is_valid_name("model.0.weight") and is_valid_name("a.10")
    for bad in ("0.weight", "model.-1", "model.0x", "model..0", "model.0 ", "model.१"):
        assert not is_valid_name(bad), bad
