"""The live rules on facts read from a real kernel (TDR901-TDR904)."""

from __future__ import annotations

import json

from torchdoctor.bridge.client import KernelBridge, parse_expression_reply
from torchdoctor.core.fixes import apply_edits
from torchdoctor.linter.probing import collect_request, live_findings

CELLS = """
import multiprocessing
import torch
from torch import nn
a = torch.randn(4, 6)
b = a.t()
s = torch.randn(10, 10)[:, ::2]
c = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
on_meta = torch.empty(3, 4, device="meta")
x64 = torch.randn(8, 3, dtype=torch.float64)
model = nn.Linear(3, 2)
def error_of(fn):
    try:
        fn()
    except RuntimeError as exc:
        return str(exc)
errors = {
    "view": error_of(lambda: b.view(-1)),
    "view_c": error_of(lambda: c.view(c.size(0), -1)),
    "device": error_of(lambda: a[:3, :4] + on_meta),
    "dtype": error_of(lambda: model(x64)),
}
"""


def _notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "metadata": {}, "source": c, "outputs": [],
                 "execution_count": None}
                for c in cells
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )  # fmt: skip


def _errors(bridge: KernelBridge) -> dict[str, str]:
    content = bridge._execute({"e": "__import__('json').dumps(errors)"}, 10)
    return parse_expression_reply(content["user_expressions"]["e"])


def test_live_rules_with_real_facts(kernel, bridge: KernelBridge) -> None:
    count = kernel.run(CELLS)["execution_count"]
    errors = _errors(bridge)
    # The kernel really raises what the rules predict.
    assert all(errors.values()), errors
    text = (
        "import torch\n"
        "flat = b.view(-1)\n"
        "ok = s.view(50)\n"
        "fine = a.view(2, -1)\n"
        "rows = c.view(c.size(0), -1)\n"
        "y = model(x64)\n"
        "z = a + on_meta\n"
    )
    request = collect_request(text, "analysis.py")
    assert set(request.names) >= {"a", "b", "s", "c", "model", "x64", "on_meta"}
    facts = bridge.probe(request)
    assert facts.execution_count == count
    findings = live_findings(text, "analysis.py", facts)
    by_row = {(f.code, f.range.start.row): f for f in findings}
    assert sorted(by_row) == [
        ("TDR901", 2), ("TDR901", 5), ("TDR902", 7), ("TDR904", 6),
    ], [f.message.en for f in findings]  # fmt: skip
    view = by_row[("TDR901", 2)]
    assert errors["view"] in view.message.en and errors["view"] in view.message.zh
    assert f"Live (after In [{count}])" in view.message.en
    assert view.extra["execution_count"] == count
    assert errors["view_c"] in by_row[("TDR901", 5)].message.en
    fixed = apply_edits(text, list(view.fix.edits))  # type: ignore[union-attr]
    assert "flat = b.reshape(-1)\n" in fixed
    assert "`on_meta` is on `meta` but `a` is on `cpu`" in by_row[("TDR902", 7)].message.en
    assert "`model` is `float32` but `x64` is `float64`" in by_row[("TDR904", 6)].message.en
    # Without facts the same rules are silent.
    assert live_findings(text, "analysis.py", {}) == []


def test_dataset_with_spawn_in_a_notebook(kernel, bridge: KernelBridge, new_kernel) -> None:
    nb = _notebook(
        "import torch\nfrom torch.utils.data import DataLoader, Dataset",
        "class Squares(Dataset):\n    def __len__(self):\n        return 8\n"
        "    def __getitem__(self, i):\n        return i * i",
        "loader = DataLoader(Squares(), batch_size=4, num_workers=2)",
    )
    facts = bridge.probe(collect_request(nb, "train.ipynb"))
    if facts.kernel["start_method"] == "fork":
        assert live_findings(nb, "train.ipynb", facts) == []
    k = new_kernel()
    try:
        k.run(
            "import multiprocessing, torch\nmultiprocessing.set_start_method('spawn', force=True)"
        )
        with KernelBridge(k.connection_file, timeout=10) as spawn_bridge:
            spawn_facts = spawn_bridge.probe(collect_request(nb, "train.ipynb"))
    finally:
        k.close()
    assert spawn_facts.kernel["start_method"] == "spawn"
    findings = live_findings(nb, "train.ipynb", spawn_facts)
    assert [(f.code, f.cell) for f in findings] == [("TDR903", 3)]
    assert "`Squares`" in findings[0].message.en and "spawn" in findings[0].message.en
    assert findings[0].related and findings[0].related[0].range.start.row == 3
