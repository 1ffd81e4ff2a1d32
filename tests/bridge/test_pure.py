"""Bridge pieces that need no kernel: requests, names, hovers, notebook matching."""

from __future__ import annotations

import json

import pytest

from torchdoctor.bridge.discovery import connection_files, notebook_matches
from torchdoctor.bridge.markdown import hover_markdown
from torchdoctor.core.config import Settings
from torchdoctor.core.live_facts import LiveFacts, ProbeRequest, parse_view_shape, tensor_facts
from torchdoctor.linter.probing import collect_names, collect_request, live_findings


def test_collect_request_names_and_views() -> None:
    text = (
        "import torch\nimport torch.nn.functional as F\n"
        "flat = b.view(-1)\n"
        "rows = c.view(c.size(0), -1)\n"
        "y = model(x)\n"
        "z = F.linear(h, w)\n"
        "def f(q):\n    return q.view(-1)\n"
        "n = len(items)\n"
    )
    request = collect_request(text, "a.py")
    assert set(request.names) == {"b", "c", "model", "x", "h", "w"}
    assert request.views == (("b", (-1,)), ("c", (("c", 0), -1)))
    assert collect_names(text, "a.py") == list(request.names)
    # Modules (imports) and function locals are never asked for.
    assert "F" not in request.names and "torch" not in request.names and "q" not in request.names


def test_collect_names_of_a_notebook_and_of_non_torch_text() -> None:
    nb = json.dumps(
        {
            "cells": [{"cell_type": "code", "metadata": {}, "source": "import torch\ny = a @ b",
                       "outputs": [], "execution_count": None}],
            "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5,
        }
    )  # fmt: skip
    assert collect_names(nb, "n.ipynb") == ["a", "b"]
    assert collect_names("y = a @ b", "plain.py") == []
    assert collect_names("import torch\ndef (:", "bad.py") == []


def test_live_findings_respects_settings_and_plain_mappings() -> None:
    facts = {
        "x": tensor_facts([2, 2], dtype="torch.float64"),
        "w": tensor_facts([2, 2], dtype="torch.float32"),
    }
    text = "import torch\ny = x @ w\n"
    found = live_findings(text, "a.py", facts, execution_count=9)
    assert [f.code for f in found] == ["TDR904"]
    assert "Live (after In [9])" in found[0].message.en and "In [9]" in found[0].message.zh
    assert live_findings(text, "a.py", facts, settings=Settings(ignore=["TDR904"])) == []
    # A rebinding in the same "# %%" cell makes the live value stale; another cell does not.
    stale = "import torch\n# %%\nx = x.float()\ny = x @ w\n"
    assert live_findings(stale, "a.py", facts) == []
    other_cell = "import torch\n# %%\nx = x.float()\n# %%\ny = x @ w\n"
    assert [f.code for f in live_findings(other_cell, "a.py", facts)] == ["TDR904"]


def test_request_round_trip_and_view_shapes() -> None:
    request = ProbeRequest.of(["a"], [("b", (8, -1)), ("a", (("b", 0), -1))])
    data = json.loads(request.to_json())
    assert data["names"] == ["a", "b"] and data["views"] == [["b", [8, -1]], ["a", [["b", 0], -1]]]
    assert parse_view_shape("8,-1") == (8, -1) and parse_view_shape("(2, 3)") == (2, 3)
    for bad in ("", "a", "-2", "1.5", ",".join(["1"] * 17)):
        with pytest.raises(ValueError):
            parse_view_shape(bad)
    live = LiveFacts({"a": tensor_facts([2])}, 3, {"start_method": "fork"})
    assert LiveFacts.from_dict(live.to_dict()) == live


def test_hover_markdown_tensor_and_module() -> None:
    facts = tensor_facts(
        [6, 4], stride=[1, 6], is_contiguous=False, is_view=True, nbytes=96, storage_nbytes=96,
        requires_grad=True, is_leaf=False, grad_fn="TBackward0", is_pinned=True,
    )  # fmt: skip
    en = hover_markdown(facts, "en", name="b", execution_count=4)
    assert en.startswith("**`b` live** (after In [4])")
    assert "`Tensor(6, 4)` · `float32` · `cpu`" in en and "strides: `(1, 6)`" in en
    assert "contiguous: no" in en and "grad_fn: `TBackward0`" in en and "pinned memory" in en
    zh = hover_markdown(facts, "zh-CN", name="b", execution_count=4)
    assert "实时" in zh and "步长: `(1, 6)`" in zh and "连续: 否" in zh and "锁页内存" in zh
    module = {"kind": "module", "type": "Net", "num_parameters": 1234567, "devices": ["cuda:0"],
              "dtypes": ["torch.bfloat16"], "training": False}  # fmt: skip
    text = hover_markdown(module, "en")
    assert "parameters: 1,234,567" in text and "`cuda:0`" in text and "`bfloat16`" in text
    assert "eval mode" in text
    assert "评估模式" in hover_markdown(module, "zh")
    assert "not defined" in hover_markdown({"kind": "missing"}, "en")
    assert "torch" in hover_markdown({"kind": "no-torch"}, "zh")


def test_notebook_matching(tmp_path) -> None:
    nb = tmp_path / "work" / "train.ipynb"
    nb.parent.mkdir()
    nb.write_text("{}")
    assert notebook_matches({"vscode_notebook": str(nb)}, str(nb))
    assert notebook_matches({"session_name": "work/train.ipynb"}, str(nb))
    assert notebook_matches({"session_name": str(nb)}, str(nb))
    assert not notebook_matches({"session_name": "other/train.ipynb"}, str(nb))
    assert not notebook_matches({"session_name": "rain.ipynb"}, str(nb))
    assert not notebook_matches({}, str(nb))
    (tmp_path / "kernel-1.json").write_text("{}")
    (tmp_path / "other.json").write_text("{}")
    assert [p.name for p in connection_files(tmp_path)] == ["kernel-1.json"]


def test_notebook_from_editor_cells() -> None:
    from torchdoctor.core.notebook import Notebook

    nb = Notebook.from_cells(["import torch", "%matplotlib inline\ny = x @ w"])
    assert collect_names("", "nb.ipynb", notebook=nb) == ["x", "w"]
    facts = {
        "x": tensor_facts([2, 2], dtype="torch.float64"),
        "w": tensor_facts([2, 2], dtype="torch.float32"),
    }
    found = live_findings("", "nb.ipynb", facts, 2, notebook=nb)
    assert [(f.code, f.cell) for f in found] == [("TDR904", 2)]
    assert found[0].cell_range is not None and found[0].cell_range.start.row == 2
