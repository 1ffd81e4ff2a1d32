"""The parsed modules a run keeps are bounded (``core.project.MAX_KEPT_TEXT``), whatever the
size of the project, and dropping and parsing them again changes no finding."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from torchdoctor.core import project
from torchdoctor.core.semantic import Semantic
from torchdoctor.linter.projects import Projects
from torchdoctor.linter.runner import check_text

MODULES = 40


def _make(tmp_path: Path) -> list[Path]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    scripts = []
    for i in range(MODULES):
        (pkg / f"data{i}.py").write_text(
            "from torch.utils.data import DataLoader, DistributedSampler\n"
            f"def build_loader{i}(ds):\n"
            "    return DataLoader(ds, sampler=DistributedSampler(ds))\n"
            + "".join(f"def helper{i}_{k}(x):\n    return x * {k}\n" for k in range(30))
        )
        script = tmp_path / f"train{i}.py"
        # Each script reads its own module and the one before it.
        script.write_text(
            "import torch\n"
            f"from pkg.data{i} import build_loader{i}\n"
            f"from pkg.data{max(i - 1, 0)} import helper{max(i - 1, 0)}_1\n"
            f"loader = build_loader{i}(None)\n"
            "for epoch in range(3):\n    for batch in loader:\n        pass\n"
        )
        scripts.append(script)
    return scripts


def _alive() -> int:
    gc.collect()
    return sum(isinstance(o, Semantic) for o in gc.get_objects())


def _run(scripts: list[Path]) -> tuple[list[list[tuple[str, int]]], int]:
    """The findings of each script, and how many parsed modules the run keeps (beyond those
    other tests of this process keep)."""
    before = _alive()
    projects = Projects()
    try:
        found = []
        for script in scripts:
            result = check_text(
                script.read_text(), str(script), codes=frozenset({"TDR502"}), projects=projects
            )
            found.append([(f.code, f.range.start.row) for f in result.findings])
        return found, _alive() - before
    finally:
        projects.close()


def test_a_small_bound_keeps_few_modules_and_changes_no_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = _make(tmp_path)
    unbounded, alive_unbounded = _run(scripts)
    assert all(found == [("TDR502", 5)] for found in unbounded)
    assert alive_unbounded >= MODULES  # every module read is kept
    one_module = len((tmp_path / "pkg" / "data0.py").read_text())
    monkeypatch.setattr(project, "MAX_KEPT_TEXT", 4 * one_module)
    bounded, alive_bounded = _run(scripts)
    assert bounded == unbounded
    assert alive_bounded <= 6  # the bound holds four modules; half of it after each drop
