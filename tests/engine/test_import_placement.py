"""``fixes.import_edits``: where a new import goes (``core.imports``), for what no rule's fix
shows through the CLI (``tests/cli/test_fix_imports.py`` has those): a name added to an existing
``from`` import, a wrapped statement, an import already there, CRLF files. When the input passes
``ruff check --select I``, the result must too."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.core import fixes
from torchdoctor.core.semantic import Semantic
from torchdoctor.core.source import Source

_NEXT = Path(sys.executable).parent / "ruff"
RUFF = str(_NEXT) if _NEXT.exists() else (shutil.which("ruff") or "ruff")


def _add(text: str, *lines: str) -> str:
    sem, source = Semantic(ast.parse(text)), Source(text)
    return fixes.apply_edits(text, fixes.import_edits(sem, source, list(lines)))


def _isort_clean(text: str, tmp_path: Path) -> bool:
    path = tmp_path / "case.py"
    path.write_bytes(text.encode())
    proc = subprocess.run(
        [RUFF, "check", "--select", "I", "--isolated", "--no-cache", path.name],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )
    return proc.returncode == 0


LOADER = "from torch.utils.data import DataLoader\n\nloader = DataLoader(ds)\n"
CASES = [
    # A name from a module already imported from: into that statement, sorted.
    (
        LOADER,
        ["from torch.utils.data import DistributedSampler"],
        LOADER.replace("DataLoader\n", "DataLoader, DistributedSampler\n"),
    ),
    (
        "from torch.utils.data import DataLoader, TensorDataset\n",
        ["from torch.utils.data import DistributedSampler"],
        "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n",
    ),
    # Parenthesised, one name per row: a row of its own.
    (
        "from torch.utils.data import (\n    DataLoader,\n    TensorDataset,\n)\n",
        ["from torch.utils.data import DistributedSampler"],
        "from torch.utils.data import (\n    DataLoader,\n    DistributedSampler,\n"
        "    TensorDataset,\n)\n",
    ),
    (
        "from torch.utils.data import (\n    DataLoader,\n    DistributedSampler,\n)\n",
        ["from torch.utils.data import default_collate"],
        "from torch.utils.data import (\n    DataLoader,\n    DistributedSampler,\n"
        "    default_collate,\n)\n",
    ),
    # Too long for one row: wrapped as Ruff wraps it.
    (
        "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n",
        ["from torch.utils.data import default_collate"],
        "from torch.utils.data import (\n    DataLoader,\n    DistributedSampler,\n"
        "    TensorDataset,\n    default_collate,\n)\n",
    ),
    # Names not sorted: the new one goes last, the others stay.
    (
        "from torch.utils.data import TensorDataset, DataLoader\n",
        ["from torch.utils.data import DistributedSampler"],
        "from torch.utils.data import TensorDataset, DataLoader, DistributedSampler\n",
    ),
    # An `as` import is a statement of its own (Ruff keeps them apart): a new statement.
    (
        "from torch.utils.data import DataLoader as DL\n",
        ["from torch.utils.data import DistributedSampler"],
        "from torch.utils.data import DataLoader as DL\n"
        "from torch.utils.data import DistributedSampler\n",
    ),
    # Constants, then classes, then the rest.
    (
        "from m import CONST, Alpha, beta\n",
        ["from m import Gamma", "from m import ALPHA"],
        "from m import ALPHA, CONST, Alpha, Gamma, beta\n",
    ),
    # Already imported: nothing added, however it is asked for.
    (LOADER, ["from torch.utils.data import DataLoader"], LOADER),
    ("import os\n\nimport torch\n", ["import torch", "import os"], "import os\n\nimport torch\n"),
    # Several at once: each in its section, one new block per section.
    (
        '"""Doc."""\n\nfrom __future__ import annotations\n\nx = 1\n',
        ["import torch", "import os", "import numpy", "import contextlib"],
        '"""Doc."""\n\nfrom __future__ import annotations\n\n'
        "import contextlib\nimport os\n\nimport numpy\nimport torch\n\nx = 1\n",
    ),
    # Natural, case-insensitive order; `torch.nn` sorts before `torch_geometric`.
    (
        "import Alpha\nimport m10\nimport torch_geometric\n",
        ["import m2", "import beta", "import torch.nn as nn"],
        "import Alpha\nimport beta\nimport m2\nimport m10\nimport torch.nn as nn\n"
        "import torch_geometric\n",
    ),
    # Relative imports are the last section.
    (
        "import os\n\nfrom . import utils\n",
        ["import torch"],
        "import os\n\nimport torch\n\nfrom . import utils\n",
    ),
    # A file's last row without a line break.
    ("import torch", ["import os"], "import os\n\nimport torch"),
    ("import os", ["import torch"], "import os\n\nimport torch"),
]


@pytest.mark.parametrize(("text", "lines", "expected"), CASES)
def test_placement(text: str, lines: list[str], expected: str, tmp_path: Path) -> None:
    got = _add(text, *lines)
    assert got == expected
    if shutil.which(RUFF) and _isort_clean(text, tmp_path):
        assert _isort_clean(got, tmp_path), got


def test_crlf_rows_keep_their_line_breaks(tmp_path: Path) -> None:
    text = '"""Doc."""\r\n\r\nimport os\r\n\r\nfrom myproj import x\r\n\r\ny = 1\r\n'
    got = _add(text, "import torch", "import random")
    assert got == (
        '"""Doc."""\r\n\r\nimport os\r\nimport random\r\n\r\nimport torch\r\n\r\n'
        "from myproj import x\r\n\r\ny = 1\r\n"
    )
