"""`%torchdoctor run` in a real ipykernel: the user's cell runs with the measurements on, the
findings are printed and written to the notebook's report, where the language server reads
them. The kernel runs only what the test (the user) sends it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Kernel

SETUP = """\
%load_ext torchdoctor.bridge.run_magic
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
model.eval()
batches = [torch.randn(32, 64) for _ in range(10)]
"""
EVAL = "outs = []\nfor b in batches:\n    outs.append(model(b))\n"
TRAIN = """\
opt = torch.optim.SGD(model.parameters(), lr=0.1)
seen = 0
for b in batches:
    seen += 1
    loss = model(b).sum()
    loss.backward()
    opt.step()
"""


def run(kernel: Kernel, code: str) -> tuple[dict[str, Any], str]:
    """Run a cell; its reply and what it printed."""
    printed: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["header"]["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    reply = kernel.client.execute_interactive(code, timeout=120, output_hook=hook)
    return reply["content"], "".join(printed)


def report_of(notebook: Path, root: Path) -> dict[str, Any]:
    key = hashlib.sha256(str(notebook.resolve()).encode()).hexdigest()[:16]
    return json.loads((root / ".torchdoctor_cache" / "runs" / f"{key}.json").read_text())


def value(kernel: Kernel, expr: str) -> str:
    reply = kernel.client.execute_interactive(
        "", user_expressions={"v": expr}, timeout=60, output_hook=lambda m: None
    )
    return reply["content"]["user_expressions"]["v"]["data"]["text/plain"]


@pytest.fixture(scope="module")
def ready(kernel: Kernel) -> Kernel:
    content, _ = run(kernel, SETUP)
    assert content["status"] == "ok"
    return kernel


def test_forwards_never_backpropagated_are_measured_per_line(ready: Kernel, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "nbs").mkdir()
    nb = tmp_path / "nbs" / "eval.ipynb"
    content, printed = run(ready, f"%%torchdoctor run --notebook {nb}\n{EVAL}")
    assert content["status"] == "ok"
    assert "1 finding" in printed
    assert "line 3: TDR105 10 forward calls with gradients on saved 320.0 KB" in printed
    # The cell ran in the notebook's namespace, as it would have.
    assert value(ready, "len(outs)") == "10"

    report = report_of(nb, tmp_path)  # under the project root (the pyproject.toml above)
    assert report["version"] == 1
    assert report["script"] == str(nb.resolve())
    assert report["stopped"] == "exit" and report["exit_code"] == 0
    [finding] = report["findings"]
    assert finding["code"] == "TDR105"
    assert finding["path"] == str(nb.resolve())
    assert (finding["row"], finding["col"]) == (3, 5)
    # ReLU's output (32 x 256 float32) is what each forward saves: 10 x 32 KiB.
    assert finding["measured"]["bytes"] == 10 * 32 * 256 * 4
    assert finding["measured"]["calls"] == 10
    assert finding["summary"] == "320.0 KB of activations over 10 forward calls"
    assert finding["summary_zh"] == "10 次前向调用共 320.0 KB 激活值"
    assert finding["cell"] == hashlib.sha256(EVAL.strip().encode()).hexdigest()[:16]

    # Training (every graph backpropagated) measures nothing; --steps stops the cell; the
    # report keeps the other cell's findings.
    content, printed = run(ready, f"%%torchdoctor run --steps 3 --notebook {nb}\n{TRAIN}")
    assert content["status"] == "ok"
    assert "3 optimizer steps (stopped at --steps); 0 findings" in printed
    assert value(ready, "seen") == "3"
    report = report_of(nb, tmp_path)
    assert report["stopped"] == "steps" and report["steps"] == 3
    assert [f["row"] for f in report["findings"]] == [3]

    # Under no_grad nothing is saved.
    guarded = "with torch.no_grad():\n" + "".join(f"    {line}\n" for line in EVAL.splitlines())
    content, printed = run(ready, f"%%torchdoctor run --notebook {nb}\n{guarded}")
    assert content["status"] == "ok"
    assert "0 findings" in printed


def test_line_magic_and_the_notebook_jupyter_names(ready: Kernel, tmp_path: Path) -> None:
    nb = tmp_path / "named.ipynb"
    # Without a notebook path nothing is written.
    content, printed = run(ready, "%torchdoctor run outs = [model(b) for b in batches]")
    assert content["status"] == "ok"
    assert "line 1: TDR105" in printed and "report:" not in printed
    # Jupyter gives the kernel the notebook's path as __session__.
    run(ready, f"__session__ = {str(nb)!r}")
    content, printed = run(ready, "%torchdoctor run outs = [model(b) for b in batches]")
    assert "report:" in printed
    [finding] = report_of(nb, tmp_path)["findings"]
    assert (finding["row"], finding["measured"]["calls"]) == (1, 10)
    run(ready, "del __session__")


def test_an_error_in_the_cell_is_raised_and_reported(ready: Kernel, tmp_path: Path) -> None:
    nb = tmp_path / "err.ipynb"
    content, _ = run(ready, f"%%torchdoctor run --notebook {nb}\n{EVAL}raise ValueError('boom')\n")
    assert content["status"] == "error" and content["ename"] == "ValueError"
    report = report_of(nb, tmp_path)
    assert report["stopped"] == "error" and report["exit_code"] == 1
    assert [f["code"] for f in report["findings"]] == ["TDR105"]


def test_the_code_of_the_panels_measure_button(ready: Kernel, tmp_path: Path) -> None:
    """JupyterLab's "Measure this cell" sends the cell's code in this form (measure.ts: string
    literals as JSON writes them); the rows are the cell's own."""
    nb = tmp_path / "my notebooks" / "it's.ipynb"
    nb.parent.mkdir()
    quoted = "'" + str(nb).replace("'", "'\"'\"'") + "'"
    code = (
        "get_ipython().run_line_magic('load_ext', 'torchdoctor.bridge.run_magic')\n"
        f"get_ipython().run_cell_magic('torchdoctor', {json.dumps('run --notebook ' + quoted)}, "
        f"{json.dumps(EVAL)})"
    )
    content, printed = run(ready, code)
    assert content["status"] == "ok", content
    assert "line 3: TDR105" in printed
    [finding] = report_of(nb, nb.parent)["findings"]  # no project above: the notebook's folder
    assert finding["row"] == 3
    assert finding["cell"] == hashlib.sha256(EVAL.strip().encode()).hexdigest()[:16]
