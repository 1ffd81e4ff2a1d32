"""Behaviour proofs for the fixes of TDR701, TDR103, TDR804 (``weight_norm``) and TDR203.

Each test writes a small CPU torch program, runs it, applies the fix with the real CLI
(``python -m torchdoctor check --fix [--unsafe-fixes] --select TDRxxx file``), runs it again
and compares what it prints. A safe fix leaves the output as it was, apart from the effect its
docs name; an unsafe fix is not applied by ``--fix``, and with ``--unsafe-fixes`` its difference
is the one its docs describe; where the code relies on what a fix would change, no edit is
made even with ``--unsafe-fixes``. Also here: every fix these rules emit on their examples has
an applicability the rule's declared ``fix_safety`` allows.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import torchdoctor
from torchdoctor.core.model import Applicability
from torchdoctor.linter.registry import all_rules
from torchdoctor.linter.runner import check_any

pytest.importorskip("torch")

SERVER = str(Path(torchdoctor.__file__).resolve().parents[1])
RULES = {r.code: r for r in all_rules()}
# How much each applicability lets the fix loop do: a rule declares the most it allows.


def _env() -> dict[str, str]:
    env = {**os.environ, "TORCHDOCTOR_LOCALE": "", "PYTHONHASHSEED": "random"}
    env["PYTHONPATH"] = os.pathsep.join([SERVER, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("CI", None)
    return env


def _fix(path: Path, code: str, *, unsafe: bool = False) -> str:
    """Run ``check --fix`` on ``path`` with only ``code`` selected; the file's new text."""
    args = ["check", "--no-cache", "--fix", "--select", code, path.name]
    if unsafe:
        args.insert(3, "--unsafe-fixes")
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "error:" not in proc.stderr, proc.stderr
    return path.read_text()


_RUN_NOTEBOOK = """\
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
scope = {"__name__": "__main__"}
for cell in cells:
    if cell["cell_type"] == "code":
        source = cell["source"]
        exec(compile("".join(source) if isinstance(source, list) else source, "cell", "exec"), scope)
"""


def _run(path: Path) -> str:
    """What the program (a script, or a notebook's code cells in order) prints."""
    args = [str(path)] if path.suffix == ".py" else ["-c", _RUN_NOTEBOOK, str(path)]
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": cell.splitlines(keepends=True),
                }
                for cell in cells
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )


# ---------------------------------------------------------------------------- TDR701 -----
SCRIPT_701 = '''\
"""A training script that imports `random` and torch only after other code has run."""
import os
print("start", len(os.sep))
import random
import torch
from torch import nn

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(4, 3) for _ in range(6)]
random.shuffle(data)
for x in data:
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print([round(w, 6) for w in model.weight.flatten().tolist()], round(random.random(), 6))
'''


def test_tdr701_seeded_script_runs_and_repeats(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT_701)
    first, second = _run(path), _run(path)
    assert first != second  # unseeded: every run differs
    assert _fix(path, "TDR701") == SCRIPT_701  # unsafe: `--fix` alone leaves it
    fixed = _fix(path, "TDR701", unsafe=True)
    # The block sits after the header (`import os`), which gains the imports it uses, sorted
    # into their sections as isort would.
    header = (
        '"""A training script that imports `random` and torch only after other code has run."""\n'
    )
    assert fixed.startswith(
        header + "import os\nimport random\n\nimport torch\n\n"
        'random.seed(0)\ntorch.manual_seed(0)\nprint("start"'
    )
    assert _run(path) == _run(path)  # seeded: two runs print the same numbers


NOTEBOOK_701 = (
    "import torch\nfrom torch import nn",
    "model = nn.Linear(3, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
    # `random` is imported in a later cell than torch.
    "import random\ndata = [torch.randn(4, 3) for _ in range(6)]\nrandom.shuffle(data)\n",
    "for x in data:\n    loss = model(x).pow(2).mean()\n    optimizer.zero_grad()\n"
    "    loss.backward()\n    optimizer.step()\n"
    "print([round(w, 6) for w in model.weight.flatten().tolist()], round(random.random(), 6))\n",
)


def test_tdr701_seeded_notebook_puts_the_block_after_the_imports(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(_notebook(*NOTEBOOK_701))
    _fix(path, "TDR701", unsafe=True)
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    # After the import of torch, in its cell, before the code that draws random numbers;
    # `random` is imported in that cell's import block (its own section), not by cell 3.
    assert cells[0] == (
        "import random\n\nimport torch\nfrom torch import nn\n\nrandom.seed(0)\ntorch.manual_seed(0)"
    )
    assert cells[1:] == list(NOTEBOOK_701[1:])
    assert _run(path) == _run(path)


def test_tdr701_block_stays_in_the_cell_of_the_imports() -> None:
    # The imports end their cell; the next cell is an exercise left blank (it does not parse).
    cells = (
        "import torch\nfrom torch import nn",
        "train_transforms =\n",
        "for x in loader:\n    model(x).sum().backward()\n    optimizer.step()\n",
    )
    result = check_any(_notebook(*cells), "nb.ipynb", codes=frozenset({"TDR701"}))
    [finding] = result.findings
    assert finding.fix is not None and result.notebook is not None
    new = json.loads(result.notebook.apply(list(finding.fix.edits)))["cells"]
    assert "".join(new[0]["source"]) == (
        "import random\n\nimport torch\nfrom torch import nn\n\nrandom.seed(0)\ntorch.manual_seed(0)"
    )
    assert ["".join(c["source"]) for c in new[1:]] == list(cells[1:])


# ---------------------------------------------------------------------------- TDR103 -----
PRELUDE_103 = """\
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(320, 4), torch.randn(320, 1)), batch_size=8)
"""

# A notebook (the whole program) whose totals are only read as numbers: `.detach()` is safe
# and `--fix` applies it.
SAFE_103 = (
    PRELUDE_103,
    """\
def train_epoch():
    total = 0.0
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss
    return total / len(loader)
""",
    """\
best = float("inf")
for epoch in range(2):
    avg = train_epoch()
    if avg < best:
        best = float(avg)
    print(f"epoch {epoch}: {avg:.6f} (best {best:.6f})")
""",
    """\
running = 0
for x, y in loader:
    running = running + F.l1_loss(model(x), y)
    F.l1_loss(model(x), y).backward()
running /= len(loader)
print(running)
print(running.cpu())
""",
)


def _without_graph(text: str) -> str:
    return re.sub(r", grad_fn=<\w+>", "", text)


def test_tdr103_safe_detach_keeps_every_number(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(_notebook(*SAFE_103))
    before = _run(path)
    _fix(path, "TDR103")
    fixed = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    assert fixed.count(".detach()") == 2 and ".item()" not in fixed
    after = _run(path)
    # The printed tensor loses its `grad_fn=`: the graph the finding is about. Nothing else.
    assert "grad_fn=" in before and "grad_fn=" not in after
    assert _without_graph(before) == after


# A script: the total is returned (other modules may call the function) to a caller that keeps
# it as a tensor, and another lives in an attribute: no safe fix; `--unsafe-fixes` applies `.detach()` to the first (`.item()` would
# break `torch.stack`) and `.item()` to the second, with the differences the docs name.
UNSAFE_103 = (
    PRELUDE_103
    + """
def train_epoch():
    total = 0.0
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss
    return total / len(loader)


curve = torch.stack([train_epoch() for _ in range(2)])
print("requires_grad", curve.requires_grad)
print([f"{v:.6f}" for v in curve.tolist()])


class Meter:
    def __init__(self):
        self.total = 0.0

    def run(self):
        for x, y in loader:
            loss = F.mse_loss(model(x) * 1000.0, y)
            loss.backward()
            self.total += loss


meter = Meter()
meter.run()
print(f"{float(meter.total):.10f}")
"""
)


def test_tdr103_unsafe_cases_get_no_safe_edit(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(UNSAFE_103)
    before = _run(path).splitlines()
    assert _fix(path, "TDR103") == UNSAFE_103  # nothing safe to apply
    fixed = _fix(path, "TDR103", unsafe=True)
    assert "total += loss.detach()" in fixed and "self.total += loss.item()" in fixed
    after = _run(path).splitlines()
    assert before[0] == "requires_grad True" and after[0] == "requires_grad False"
    assert before[1] == after[1]  # the values themselves are the same
    # `.item()` sums in double precision: the total's digits change (float32 before).
    assert before[2] != after[2]
    assert float(before[2]) == pytest.approx(float(after[2]), rel=1e-5)


# ---------------------------------------------------------------------------- TDR804 -----
WEIGHT_NORM = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.utils.weight_norm(nn.Linear(3, 4)), nn.ReLU(), nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 3), torch.randn(16, 1)
for _ in range(5):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"{loss.item():.8f}", [f"{v:.8f}" for v in model(x[:2]).flatten().tolist()])
print(sorted(model.state_dict()))
"""


def test_tdr804_weight_norm_migration_is_unsafe_and_changes_only_the_keys(
    tmp_path: Path,
) -> None:
    path = tmp_path / "train.py"
    path.write_text(WEIGHT_NORM)
    before = _run(path).splitlines()
    assert _fix(path, "TDR804") == WEIGHT_NORM  # unsafe: not applied by `--fix`
    fixed = _fix(path, "TDR804", unsafe=True)
    assert "nn.utils.parametrizations.weight_norm(nn.Linear(3, 4))" in fixed
    after = _run(path).splitlines()
    assert before[0] == after[0]  # the same training, step for step
    assert "'0.weight_g'" in before[1] and "'0.parametrizations.weight.original0'" in after[1]


def test_tdr804_weight_norm_not_migrated_where_the_file_uses_weight_g(tmp_path: Path) -> None:
    code = WEIGHT_NORM.replace(
        "optimizer = ", "model[0].weight_g.data.fill_(1.0)\noptimizer = ", 1
    ).replace("print(sorted", "torch.save(model.state_dict(), 'm.pt')\nprint(sorted", 1)
    path = tmp_path / "train.py"
    path.write_text(code)
    assert _fix(path, "TDR804", unsafe=True) == code  # reported, but no edit at all
    assert [f.code for f in check_any(code, "train.py", codes=frozenset({"TDR804"})).findings] == [
        "TDR804"
    ]


# ---------------------------------------------------------------------------- TDR203 -----
EXPORT = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 3), nn.ReLU())
loader = DataLoader(TensorDataset(torch.randn(12, 5), torch.randn(12, 3)), batch_size=4)
for x, y in loader:
    pass
ep = torch.export.export(model, (x,))
probe = torch.randn(3, 5)
print(f"{model(x).sum().item():.6f}")
try:
    print("batch of 3:", tuple(ep.module()(probe).shape))
except Exception as exc:
    print("batch of 3: rejected", type(exc).__name__)
"""


def test_tdr203_batch_of_a_loader_gets_an_unsafe_edit(tmp_path: Path) -> None:
    path = tmp_path / "export.py"
    path.write_text(EXPORT)
    before = _run(path).splitlines()
    assert _fix(path, "TDR203") == EXPORT  # unsafe: not applied by `--fix`
    fixed = _fix(path, "TDR203", unsafe=True)
    assert 'dynamic_shapes=({0: torch.export.Dim("batch")},)' in fixed
    after = _run(path).splitlines()
    assert before[0] == after[0]
    # The difference the docs name: the exported program accepts another batch size.
    assert before[1] == "batch of 3: rejected AssertionError"
    assert after[1] == "batch of 3: (3, 3)"


def test_tdr203_dimension_zero_not_proven_is_only_a_suggestion(tmp_path: Path) -> None:
    # A (C, H, W) image and an RNN input (sequence first) with its hidden state (layers first).
    code = (
        "import torch\nfrom torch import nn\n"
        "image = torch.randn(3, 8, 8)\n"
        "ep = torch.export.export(nn.Conv2d(3, 4, 3), (image,))\n"
        "rnn = nn.GRU(5, 7, num_layers=2)\n"
        "seq, h0 = torch.randn(6, 2, 5), torch.randn(2, 2, 7)\n"
        "torch.export.export(rnn, (seq, h0))\n"
    )
    path = tmp_path / "export.py"
    path.write_text(code)
    assert _fix(path, "TDR203", unsafe=True) == code
    findings = check_any(code, "export.py", codes=frozenset({"TDR203"})).findings
    assert len(findings) == 2
    assert all(
        f.fix is not None and f.fix.applicability is Applicability.SUGGESTION for f in findings
    )
