"""How names imported from the project's own modules are resolved: relative imports, packages
and re-exports (star imports too, through jedi), `import pkg.mod as m`, a `src/` layout, scripts in a sub-folder importing the
root's packages, a local definition that shadows an import — and that resolving never imports
an installed package (torch, numpy and their compiled extensions stay unloaded)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BUILDER = textwrap.dedent(
    """\
    from torch.utils.data import DataLoader, DistributedSampler


    def build_loader(ds):
        sampler = DistributedSampler(ds)
        return DataLoader(ds, sampler=sampler)
    """
)
LOOP = "for epoch in range(3):\n    for batch in loader:\n        pass\n"


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _codes(td, root: Path, target: str) -> list[str]:
    run = td("check", "--output-format", "json", "--no-cache", "--select", "TDR502", target)
    assert run.code in (0, 1), run.err
    return [f["code"] for f in run.json()]


FROM_DATA = "from .data import build_loader\n"


@pytest.mark.parametrize(
    ("files", "script", "head", "call"),
    [
        pytest.param(
            {"pkg/__init__.py": "", "pkg/data.py": BUILDER},
            "pkg/train.py", FROM_DATA, "build_loader(None)", id="relative",
        ),
        pytest.param(
            {"pkg/__init__.py": "from .loaders.make import build_loader\n",
             "pkg/loaders/__init__.py": "", "pkg/loaders/make.py": BUILDER},
            "train.py", "from pkg import build_loader\n", "build_loader(None)", id="re-exported",
        ),
        pytest.param(
            {"pkg/__init__.py": "from .loaders import *\n", "pkg/loaders.py": BUILDER},
            "train.py", "from pkg import build_loader\n", "build_loader(None)",
            id="star-re-export",
        ),
        pytest.param(
            {"pkg/__init__.py": "", "pkg/data.py": BUILDER},
            "train.py", "import pkg.data as d\n", "d.build_loader(None)", id="module-alias",
        ),
        pytest.param(
            {"src/pkg/__init__.py": "", "src/pkg/data.py": BUILDER},
            "train.py", "from pkg.data import build_loader\n", "build_loader(None)",
            id="src-layout",
        ),
        pytest.param(
            {"common/__init__.py": "", "common/data.py": BUILDER},
            "tools/train.py", "from common.data import build_loader\n", "build_loader(None)",
            id="script-in-a-sub-folder",
        ),
    ],
)  # fmt: skip
def test_the_builder_is_found(
    td, tmp_path: Path, files: dict[str, str], script: str, head: str, call: str
) -> None:
    _write(tmp_path, {**files, script: f"import torch\n{head}loader = {call}\n" + LOOP})
    assert _codes(td, tmp_path, script) == ["TDR502"]


def test_a_local_definition_shadows_the_import(td, tmp_path: Path) -> None:
    script = (
        "import torch\nfrom data import build_loader\n"
        "def build_loader(ds):\n    return [ds]\n"
        "loader = build_loader(None)\n" + LOOP
    )
    _write(tmp_path, {"data.py": BUILDER, "train.py": script})
    assert _codes(td, tmp_path, "train.py") == []


def test_resolving_never_imports_installed_packages(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from numpy import *\nfrom torch.nn import *\n"
            "from .data import build_loader\n",
            "pkg/data.py": BUILDER,
            "train.py": "import torch\nfrom pkg import build_loader, array, Linear\n"
            "loader = build_loader(None)\n" + LOOP,
        },
    )
    program = (
        "import json, sys\n"
        "from torchdoctor.cli.main import main\n"
        "try:\n"
        "    main(['check', '-j', '1', '--no-cache', '--output-format', 'json', 'train.py'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'torch'))\n"
        "print(json.dumps(loaded), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    findings = json.loads(proc.stdout)
    assert [f["code"] for f in findings] == ["TDR502"]
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []


def test_a_file_of_an_installed_package_is_checked_alone(td, tmp_path: Path) -> None:
    # Library code (under site-packages) keeps the engine's own resolution of its imports.
    lib = tmp_path / "lib" / "python3.11" / "site-packages" / "pkg"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    (lib / "data.py").write_text(BUILDER)
    (lib / "train.py").write_text(
        "import torch\nfrom .data import build_loader\nloader = build_loader(None)\n" + LOOP
    )
    assert _codes(td, tmp_path, str(lib / "train.py")) == []
