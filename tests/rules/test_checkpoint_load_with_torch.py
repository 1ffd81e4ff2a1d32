"""TDR603 against the installed torch: a checkpoint the code writes with a refused object in it
fails to load with the default ``weights_only=True`` whatever key the code reads, and the rule
reports exactly those loads (an error); the same checkpoint with the arguments saved as a dict
loads, and the rule is quiet. (The linter never imports torch; tests may.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchdoctor.core.model import Severity
from torchdoctor.linter.runner import check_text

torch = pytest.importorskip("torch")

SCRIPT = textwrap.dedent(
    """\
    import argparse
    import torch

    args = argparse.ArgumentParser().parse_args([])
    model = torch.nn.Linear(2, 2)
    torch.save({{"model": model.state_dict(), "epoch": 3, "args": {args}}}, "ckpt.pt")
    checkpoint = torch.load("ckpt.pt", map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    print("epoch", checkpoint["epoch"])
    """
)


def _run(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    (folder / "prog.py").write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "prog.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(("saved", "fails"), [("args", True), ("vars(args)", False)])
def test_load_fails_for_what_the_file_holds(saved: str, fails: bool, tmp_path: Path) -> None:
    code = SCRIPT.format(args=saved)
    ran = _run(code, tmp_path)
    findings = [
        f
        for f in check_text(code, str(tmp_path / "prog.py"), codes=frozenset({"TDR603"})).findings
        if f.code == "TDR603"
    ]
    if fails:
        # The key read ("model", "epoch") does not matter: the whole file is refused.
        assert ran.returncode != 0
        assert "UnpicklingError" in ran.stderr and "Namespace" in ran.stderr
        assert [(f.range.start.row, f.severity) for f in findings] == [(7, Severity.ERROR)]
    else:
        assert ran.returncode == 0, ran.stderr
        assert "epoch 3" in ran.stdout
        assert findings == []
