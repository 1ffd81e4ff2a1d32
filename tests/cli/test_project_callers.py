"""A loader builder of a package is judged by its callers in other modules: the training script
seeds, then asks it for a shuffling loader with workers (TDR309). The callers' modules are among
what the check read, so a cached result goes when one of them changes."""

from __future__ import annotations

from pathlib import Path

import pytest

BUILDER = (
    "from torch.utils.data import DataLoader\n"
    "\n"
    "\n"
    "def create_dataloader(dataset, workers=8, shuffle=False):\n"
    "    return DataLoader(dataset, batch_size=16, shuffle=shuffle, num_workers=workers)\n"
)
SEEDING = "import torch\n\n\ndef init_seeds(seed):\n    torch.manual_seed(seed)\n"
TRAIN = (
    "from utils.loaders import create_dataloader\n"
    "from utils.seeding import init_seeds\n"
    "\n"
    "init_seeds(0)\n"
    "loader = create_dataloader(dataset, shuffle=True)\n"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "utils").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "utils" / "__init__.py").write_text("")
    (root / "utils" / "loaders.py").write_text(BUILDER)
    (root / "utils" / "seeding.py").write_text(SEEDING)
    (root / "train.py").write_text(TRAIN)
    return root


def _rows(run) -> list[tuple[str, int]]:
    return [(f["code"], f["location"]["row"]) for f in run.json()]


def test_the_callers_in_other_modules_decide(td, project: Path) -> None:
    args = ("check", "--output-format", "json", "--select", "TDR309", "utils/loaders.py")
    assert _rows(td(*args, cwd=project)) == [("TDR309", 5)]
    assert _rows(td(*args, cwd=project)) == [("TDR309", 5)]  # from the cache
    train = project / "train.py"
    train.write_text(TRAIN.replace("shuffle=True", "shuffle=False"))
    assert _rows(td(*args, cwd=project)) == []
    train.write_text(TRAIN.replace("init_seeds(0)\n", ""))
    assert _rows(td(*args, "--no-cache", cwd=project)) == []
