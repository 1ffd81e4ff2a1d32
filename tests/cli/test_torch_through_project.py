"""A file that never names torch is torch code when a module of its project that it imports
does, directly or through a package's ``__init__.py``: it is checked, and its cached result
depends on those modules."""

from __future__ import annotations

import os
from pathlib import Path

TRAINER = (
    "import pkg.inputs as inputs\n"
    "\n"
    "class Trainer(object):\n"
    "    def __init__(self, model):\n"
    "        self.model = model\n"
    "\n"
    "    def validate(self, valid_iter):\n"
    "        self.model.eval()\n"
    "        outs = []\n"
    "        for batch in valid_iter:\n"
    "            outs.append(self.model(inputs.features(batch)))\n"
    "        self.model.train()\n"
    "        return outs\n"
)
FEATURES_TORCH = "import torch\n\ndef features(batch):\n    return torch.stack(batch)\n"
FEATURES_PLAIN = "def features(batch):\n    return list(batch)\n"


def _project(root: Path, features: str) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "pkg" / "inputs").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "inputs" / "__init__.py").write_text(
        "from pkg.inputs.features import features\n"
    )
    (root / "pkg" / "inputs" / "features.py").write_text(features)
    (root / "trainer.py").write_text(TRAINER)


def _codes(run) -> list[tuple[str, int]]:
    return [(f["code"], f["location"]["row"]) for f in run.json()]


def test_a_file_of_a_torch_project_is_checked(td, tmp_path: Path) -> None:
    _project(tmp_path, FEATURES_TORCH)
    run = td("check", "--output-format", "json", "--no-cache", "trainer.py")
    assert _codes(run) == [("TDR105", 11)], run.err
    # The folder too: the file is checked with the others.
    run = td("check", "--output-format", "json", "--no-cache", ".")
    assert _codes(run) == [("TDR105", 11)], run.err


def test_a_file_of_a_project_without_torch_is_not(td, tmp_path: Path) -> None:
    _project(tmp_path, FEATURES_PLAIN)
    run = td("check", "--output-format", "json", "--no-cache", "trainer.py")
    assert run.code == 0 and _codes(run) == [], run.err
    # Checked alone (stdin, no project), the file is not torch code either.
    run = td("check", "--output-format", "json", "-", stdin=TRAINER)
    assert _codes(run) == []


def test_the_cached_result_follows_the_modules_it_rests_on(td, tmp_path: Path) -> None:
    _project(tmp_path, FEATURES_PLAIN)
    features = tmp_path / "pkg" / "inputs" / "features.py"
    assert _codes(td("check", "--output-format", "json", "trainer.py")) == []
    features.write_text(FEATURES_TORCH)
    _bump(features)
    assert _codes(td("check", "--output-format", "json", "trainer.py")) == [("TDR105", 11)]
    features.write_text(FEATURES_PLAIN)
    _bump(features)
    assert _codes(td("check", "--output-format", "json", "trainer.py")) == []


def _bump(path: Path) -> None:
    """A new modification time, whatever the file system's clock resolution."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
