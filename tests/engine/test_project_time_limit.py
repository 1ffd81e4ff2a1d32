"""Each name resolution through jedi has a time limit: past it the name is unknown (the check
goes on without the fact), and after a few such queries the run stops asking. (A star import
re-exports the builder: the files alone do not say where it is, jedi is asked.)"""

from __future__ import annotations

from pathlib import Path

from torchdoctor.linter.projects import Projects
from torchdoctor.linter.runner import check_text

DATA = (
    "from torch.utils.data import DataLoader, DistributedSampler\n"
    "def build_loader(ds):\n"
    "    return DataLoader(ds, sampler=DistributedSampler(ds))\n"
)
TRAIN = (
    "import torch\nfrom pkg import build_loader\nloader = build_loader(None)\n"
    "for epoch in range(3):\n    for batch in loader:\n        pass\n"
)


def _codes(tmp_path: Path, projects: Projects) -> list[str]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .data import *\n")
    (tmp_path / "pkg" / "data.py").write_text(DATA)
    path = tmp_path / "train.py"
    result = check_text(TRAIN, str(path), codes=frozenset({"TDR502"}), projects=projects)
    assert result.errors == []
    return [f.code for f in result.findings]


def test_a_query_within_its_time_limit_gives_the_fact(tmp_path: Path) -> None:
    projects = Projects(query_seconds=60)
    try:
        assert _codes(tmp_path, projects) == ["TDR502"]
    finally:
        projects.close()


def test_a_query_past_its_time_limit_leaves_the_name_unknown(tmp_path: Path) -> None:
    # No jedi query answers within a microsecond; an answer that arrives after the limit (the
    # wait can return one that came just too late) is not used either, so this holds every run.
    projects = Projects(query_seconds=1e-6)
    try:
        assert _codes(tmp_path, projects) == []
    finally:
        projects.close()
