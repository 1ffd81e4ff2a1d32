"""Fixes that add an import put it where isort (``ruff check --select I``) would, through the CLI:
into the block of its section at its sorted place, in a new section block when there is none,
after the docstring and leading comments when the file has no imports, after the file's own
imports when they are not sorted (which stay as they are). Each case checks the exact text and,
when the input passes Ruff's isort rules, that the fixed file passes them too.

Rules used: TDR302 (``import os``), TDR701 (``import random``, ``import torch`` and a seeding
block after the imports), TDR105 (``import torch``) and TDR505 (``import torch.distributed as
dist``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Ruff is a test dependency: next to this Python, else on the PATH.
_NEXT = Path(sys.executable).parent / "ruff"
RUFF = str(_NEXT) if _NEXT.exists() else (shutil.which("ruff") or "ruff")


def _isort_clean(path: Path) -> bool:
    proc = subprocess.run(
        [RUFF, "check", "--select", "I", "--isolated", "--no-cache", path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode == 0


@pytest.fixture
def fix(td, tmp_path: Path):
    """Write ``text`` to ``name`` (next to a first-party package ``myproj``), fix it with
    ``--fix --unsafe-fixes --select CODES``; the new text, and whether Ruff's isort accepted
    the file before."""
    package = tmp_path / "myproj"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text("")

    def run(text: str, codes: str, name: str = "train.py") -> tuple[str, bool]:
        path = tmp_path / name
        path.write_text(text)
        clean = _isort_clean(path)
        result = td("check", "--fix", "--unsafe-fixes", "--no-cache", "--select", codes, name)
        assert "Fixed" in result.out, result.out + result.err
        if clean:
            assert _isort_clean(path), path.read_text()
        return path.read_text(), clean

    return run


pytestmark = pytest.mark.skipif(shutil.which(RUFF) is None, reason="ruff is not installed")


# A script with every section: docstring, `__future__`, standard library, third party, first party.
GROUPS = '''\
"""Train a small model."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from myproj.models import Net


def main() -> None:
    args = argparse.ArgumentParser().parse_args(sys.argv[1:])
    ds = TensorDataset(torch.from_numpy(np.zeros((8, 3), dtype=np.float32)))
    loader = DataLoader(ds, batch_size=4, num_workers=64)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for (x,) in loader:
        model(x).sum().backward()
        optimizer.step()
    return args


if __name__ == "__main__":
    main()
'''


def test_stdlib_import_goes_to_its_sorted_place(fix) -> None:
    fixed, clean = fix(GROUPS, "TDR302")
    assert clean
    assert fixed == GROUPS.replace("import argparse\n", "import argparse\nimport os\n").replace(
        "num_workers=64", "num_workers=min(64, os.cpu_count() or 1)"
    )


def test_two_rules_in_one_run_each_in_its_place(fix) -> None:
    fixed, clean = fix(GROUPS, "TDR302,TDR701")
    assert clean
    assert fixed.startswith(
        '"""Train a small model."""\n\n'
        "from __future__ import annotations\n\n"
        "import argparse\nimport os\nimport random\nimport sys\n\n"
        "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
        "from myproj.models import Net\n\n"
        "random.seed(0)\nnp.random.seed(0)\ntorch.manual_seed(0)\n\n\n"
        "def main() -> None:\n"
    )


def test_missing_section_is_created_in_section_order(fix) -> None:
    # No standard library block: `import random` gets one, after `__future__`, before torch.
    text = GROUPS.replace("import argparse\nimport sys\n\n", "").replace(
        "    args = argparse.ArgumentParser().parse_args(sys.argv[1:])\n", "    args = None\n"
    )
    fixed, clean = fix(text, "TDR701")
    assert clean
    assert fixed.startswith(
        '"""Train a small model."""\n\n'
        "from __future__ import annotations\n\n"
        "import random\n\n"
        "import numpy as np\nimport torch\n"
    )


def test_third_party_block_is_created_before_first_party(fix) -> None:
    text = (
        '"""Evaluate."""\n\n'
        "import os\n\n"
        "from myproj.models import Net\n\n"
        "for x in loader:\n"
        "    model = torch.nn.Linear(3, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    model(x).sum().backward()\n"
        "    optimizer.step()\n"
    )
    fixed, clean = fix(text, "TDR701")
    assert clean
    assert fixed.startswith(
        '"""Evaluate."""\n\n'
        "import os\nimport random\n\n"
        "import torch\n\n"
        "from myproj.models import Net\n\n"
        "random.seed(0)\ntorch.manual_seed(0)\n\n"
        "for x in loader:\n"
    )


LOOP = (
    "model = torch.nn.Linear(3, 1)\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for x in loader:\n"
    "    model(x).sum().backward()\n"
    "    optimizer.step()\n"
)
SEEDED = "import random\n\nimport torch\n\nrandom.seed(0)\ntorch.manual_seed(0)\n\n" + LOOP


def test_file_without_imports(fix) -> None:
    fixed, clean = fix(LOOP, "TDR701")
    assert clean
    assert fixed == SEEDED


def test_file_with_only_a_docstring(fix) -> None:
    fixed, clean = fix('"""Fine-tune."""\n' + LOOP, "TDR701")
    assert clean
    assert fixed == '"""Fine-tune."""\n\n' + SEEDED


def test_shebang_cookie_and_leading_comments_stay_first(fix) -> None:
    head = "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n# Copyright the authors.\n\n"
    fixed, clean = fix(head + "# The loop.\n" + LOOP, "TDR701")
    assert clean
    assert fixed == head + SEEDED.replace("\n\nmodel =", "\n\n# The loop.\nmodel =")


def test_plain_import_goes_before_the_from_imports_of_its_module(fix) -> None:
    text = (
        "from torch import nn\n"
        "from torch.utils.data import DataLoader\n\n"
        "model = nn.Linear(4, 2).cuda()\n"
        "model.eval()\n"
        "test_loader = DataLoader(ds, batch_size=8)\n"
        "for batch in test_loader:\n"
        "    preds = model(batch.cuda())\n"
        "    print(preds.argmax(1).tolist())\n"
    )
    fixed, clean = fix(text, "TDR105")
    assert clean
    assert fixed.startswith(
        "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n\n"
        "model = nn.Linear(4, 2).cuda()\nmodel.eval()\ntest_loader = DataLoader(ds, batch_size=8)\n"
        "with torch.no_grad():\n"
    )


def test_submodule_import_joins_the_block_of_its_package(fix) -> None:
    text = (
        "import os\n\n"
        "from torch import save\n"
        "from torch.distributed import init_process_group\n\n\n"
        "def main():\n"
        "    init_process_group('nccl', rank=int(os.environ['RANK']))\n"
        "    save({}, 'c.pt')\n"
    )
    fixed, clean = fix(text, "TDR505")
    assert clean
    assert fixed.startswith(
        "import os\n\n"
        "import torch.distributed as dist\n"
        "from torch import save\n"
        "from torch.distributed import init_process_group\n\n\n"
    )


def test_an_alias_is_used_and_nothing_is_imported(fix) -> None:
    text = (
        "import torch as th\n\n"
        "model = th.nn.Linear(4, 2).cuda()\n"
        "model.eval()\n"
        "for batch in loader:\n"
        "    print(model(batch.cuda()).argmax(1).tolist())\n"
    )
    fixed, clean = fix(text, "TDR105")
    assert clean
    assert fixed == text.replace("for batch", "with th.no_grad():\n    for batch").replace(
        "    print(", "        print("
    )


def test_unsorted_imports_are_left_in_their_order(fix) -> None:
    text = (
        "import torch\n"
        "import sys\n"
        "from torch.utils.data import DataLoader\n"
        "import argparse\n\n"
        "loader = DataLoader(ds, num_workers=64)\n"
    )
    fixed, clean = fix(text, "TDR302")
    assert not clean
    # After the last standard library import; the others are not moved.
    assert fixed == text.replace("import argparse\n", "import argparse\nimport os\n").replace(
        "num_workers=64", "num_workers=min(64, os.cpu_count() or 1)"
    )


def test_imports_in_try_and_type_checking_blocks_are_not_the_block(fix) -> None:
    text = (
        "from typing import TYPE_CHECKING\n\n"
        "try:\n    import numpy as np\nexcept ImportError:\n    np = None\n\n"
        "if TYPE_CHECKING:\n    import os\n\n"
        "for x in loader:\n"
        "    model = torch.nn.Linear(3, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    model(x).sum().backward()\n"
        "    optimizer.step()\n"
    )
    fixed, clean = fix(text, "TDR701")
    assert clean
    assert fixed.startswith(
        "import random\nfrom typing import TYPE_CHECKING\n\nimport torch\n\n"
        "random.seed(0)\ntorch.manual_seed(0)\n\ntry:\n    import numpy as np\n"
    )


def test_notebook_imports_go_into_the_first_cells_block(fix, notebook) -> None:
    cells = (
        "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader\n",
        "loader = DataLoader(ds, num_workers=64)\n",
        LOOP,
    )
    fixed, clean = fix(notebook(*cells), "TDR302,TDR701", name="train.ipynb")
    assert clean
    sources = ["".join(c["source"]) for c in json.loads(fixed)["cells"]]
    assert sources == [
        "import os\nimport random\n\n"
        "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader\n\n"
        "random.seed(0)\nnp.random.seed(0)\ntorch.manual_seed(0)\n",
        "loader = DataLoader(ds, num_workers=min(64, os.cpu_count() or 1))\n",
        LOOP,
    ]
