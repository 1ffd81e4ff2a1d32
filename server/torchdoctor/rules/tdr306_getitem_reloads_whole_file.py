from __future__ import annotations

import ast

from ..core import data
from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import Semantic, terminal_name
from .base import Invalid, Rule

_HEAD = "import pandas as pd\nimport torch\nfrom torch.utils.data import Dataset\n"
# Arguments that make a reader read part of the file, or map it instead of reading it.
_PARTIAL = frozenset({"nrows", "skiprows", "chunksize", "iterator", "mmap_mode", "mmap"})
# Calls that build a path from their arguments.
_PATH_BUILDERS = frozenset(
    {"os.path.join", "pathlib.Path", "pathlib.PurePath", "os.fspath", "os.path.expanduser"}
)
_MAX_DEPTH = 6


class GetitemReloadsWholeFile(Rule):
    """## What it does
    Checks for `__getitem__` of a torch `Dataset` that parses a whole file whose path is the
    same for every index: `pd.read_csv(self.csv)`, `json.load(open(self.path))`,
    `torch.load(self.file)`, `np.load(self.path)`, `open(self.path).read()`.

    "The same for every index" is read strictly: the path is built only from constants, `self`
    attributes and module-level names, so a path picked at random or computed by a helper is
    not reported, even when it does not use the index. Also left alone: reads under an
    `if` (the usual lazy cache, `if self.df is None: self.df = pd.read_csv(...)`), partial or
    memory-mapped reads (`nrows=`, `skiprows=`, `chunksize=`, `np.load(..., mmap_mode="r")`,
    `torch.load(..., mmap=True)`), and files opened with `h5py`/`lmdb`, which read only what
    is indexed.

    ## Why is this bad?
    `__getitem__` runs once per sample: a file parsed in it is parsed again for every sample of
    every epoch. Data loading becomes the bottleneck while the GPU waits, and the cost grows
    with the size of the file, not of the sample. Measured on a 2-core CPU
    (`bench/cpu_dataset_reads.py`): parsing a 2.8 MiB JSON file of 20,000 records in
    `__getitem__` took 35 to 56 ms per sample, 12 to 19 minutes per epoch of parsing alone,
    against 0.2 µs per sample when parsed once in `__init__`. The guide's first Dataset mistake is exactly this: "re-reading the file every time
    a sample is fetched".

    ## Example
    ```python
    class Table(Dataset):
        def __init__(self, csv):
            self.csv = csv

        def __getitem__(self, i):
            df = pd.read_csv(self.csv)
            return torch.tensor(df.iloc[i].values)
    ```

    ## Use instead
    Read it once in `__init__`:
    ```python
    class Table(Dataset):
        def __init__(self, csv):
            self.values = pd.read_csv(csv).to_numpy()

        def __getitem__(self, i):
            return torch.tensor(self.values[i])
    ```
    or once per worker, lazily, when the object cannot be shared or pickled:
    ```python
        def __getitem__(self, i):
            if self.df is None:
                self.df = pd.read_csv(self.csv)
            return torch.tensor(self.df.iloc[i].values)
    ```

    ## Fix safety
    No fix is offered: where to cache (in `__init__`, per worker, memory-mapped) depends on the
    file's size.

    ## References
    - [`torch.utils.data.Dataset`](https://pytorch.org/docs/stable/data.html#torch.utils.data.Dataset)
    - [Writing custom datasets](https://pytorch.org/tutorials/beginner/data_loading_tutorial.html)
    """

    code = "TDR306"
    name = "getitem-reloads-whole-file"
    severity = Severity.WARNING

    VALID = (
        # Read once in __init__.
        _HEAD + "class Table(Dataset):\n"
        "    def __init__(self, csv):\n        self.df = pd.read_csv(csv)\n"
        "    def __getitem__(self, i):\n        return self.df.iloc[i]\n",
        # The path depends on the index.
        _HEAD + "class Files(Dataset):\n"
        "    def __getitem__(self, idx):\n        return torch.load(self.files[idx])\n",
        "import json, os\nimport torch\nfrom torch.utils.data import Dataset\n"
        "class Docs(Dataset):\n"
        "    def __getitem__(self, idx):\n"
        "        path = os.path.join(self.root, f'{idx:06d}.json')\n"
        "        with open(path) as f:\n            return json.load(f)\n",
        # A path picked at random, not from the index: not a constant path.
        "import random\n" + _HEAD + "class Mix(Dataset):\n"
        "    def __getitem__(self, idx):\n        return torch.load(random.choice(self.files))\n",
        # The lazy per-worker cache.
        _HEAD + "class Table(Dataset):\n"
        "    def __getitem__(self, i):\n        if self.df is None:\n"
        "            self.df = pd.read_csv(self.csv)\n        return self.df.iloc[i]\n",
        # Partial and memory-mapped reads.
        _HEAD + "class Table(Dataset):\n"
        "    def __getitem__(self, i):\n"
        "        return pd.read_csv(self.csv, skiprows=i + 1, nrows=1)\n",
        "import numpy as np\nfrom torch.utils.data import Dataset\nclass Arr(Dataset):\n"
        "    def __getitem__(self, i):\n        return np.load(self.path, mmap_mode='r')[i]\n",
        # h5py reads only what is indexed.
        "import h5py\nfrom torch.utils.data import Dataset\nclass H5(Dataset):\n"
        "    def __getitem__(self, i):\n"
        "        with h5py.File(self.path, 'r') as f:\n            return f['x'][i]\n",
        # Not a torch Dataset.
        _HEAD + "class Report:\n"
        "    def __getitem__(self, key):\n        return pd.read_csv(self.csv)[key]\n",
        # Another method, not __getitem__.
        _HEAD + "class Table(Dataset):\n"
        "    def reload(self):\n        self.df = pd.read_csv(self.csv)\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "class Table(Dataset):\n"
            "    def __init__(self, csv):\n        self.csv = csv\n"
            "    def __getitem__(self, i):\n        df = pd.read_csv(self.csv)\n"
            "        return torch.tensor(df.iloc[i].values)\n",
            fixed=None,
            lines=(8,),
        ),
        # json.load(open(...)) with aliases and a path built from self and a constant.
        Invalid(
            "import json as js\nimport os\nimport torch.utils.data as tud\n"
            "class Captions(tud.Dataset):\n"
            "    def __getitem__(self, index):\n"
            "        captions = js.load(open(os.path.join(self.root, 'captions.json')))\n"
            "        return captions[index]\n",
            fixed=None,
            lines=(6,),
        ),
        # torch.load of one file, and a with-block read.
        Invalid(
            "import torch\nfrom torch.utils.data import Dataset\nLABELS = 'labels.txt'\n"
            "class Pairs(Dataset):\n"
            "    def __getitem__(self, i):\n        x = torch.load(self.file)[i]\n"
            "        with open(LABELS) as f:\n            y = f.readlines()[i]\n"
            "        return x, y\n",
            fixed=None,
            lines=(6, 8),
        ),
        Invalid(
            _HEAD + "class Table(Dataset):\n"
            "    def __getitem__(self, i):\n        return pd.read_parquet(self.path).iloc[i]\n",
            fixed=None,
            notebook=True,
            lines=(6,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for cls in data.dataset_classes(sem):
            getitem = data.method(cls, "__getitem__")
            if getitem is None:
                continue
            for node in sem.walk(getitem):
                if not isinstance(node, ast.Call) or _conditional(sem, node, getitem):
                    continue
                path = data.file_read(sem, node, data.WHOLE_FILE_READERS)
                if path is None or any(k.arg in _PARTIAL for k in node.keywords):
                    continue
                if not _same_for_every_index(sem, path, getitem, 0):
                    continue
                if not all(_same_for_every_index(sem, a, getitem, 0) for a in node.args[1:]):
                    continue
                what = terminal_name(node.func) or "read"
                ctx.report(
                    node,
                    Text(
                        f"`__getitem__` reads the whole file `{ctx.segment(path)}` with "
                        f"`{what}` for every sample: read it once in `__init__` (or once per "
                        "worker)",
                        f"`__getitem__` 每取一个样本都用 `{what}` 读取整个文件 "
                        f"`{ctx.segment(path)}`：请在 `__init__` 中读取一次（或每个 worker 读取一次）",
                    ),
                )


def _conditional(sem: Semantic, node: ast.AST, func: ast.AST) -> bool:
    """Under an ``if`` (or a conditional expression, ``a or b``) inside ``func``."""
    for anc in sem.ancestors(node):
        if anc is func:
            return False
        if isinstance(anc, ast.If | ast.IfExp | ast.BoolOp):
            return True
    return False


def _same_for_every_index(sem: Semantic, expr: ast.AST, func: ast.AST, depth: int) -> bool:
    """Built only from constants, ``self`` attributes that ``__getitem__`` does not assign,
    module-level names and path-building calls of those."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.JoinedStr):
        return all(_same_for_every_index(sem, v, func, depth + 1) for v in expr.values)
    if isinstance(expr, ast.FormattedValue):
        return _same_for_every_index(sem, expr.value, func, depth + 1)
    if isinstance(expr, ast.BinOp):
        return _same_for_every_index(sem, expr.left, func, depth + 1) and _same_for_every_index(
            sem, expr.right, func, depth + 1
        )
    if isinstance(expr, ast.Attribute):
        root: ast.expr = expr
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id == "self":
            attr = data.self_attribute(expr) if isinstance(expr.value, ast.Name) else None
            return attr is None or not _assigned_in(func, attr)
        return isinstance(root, ast.Name) and _module_level(sem, root)
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None:
            return False
        if binding.scope is sem.tree:
            return binding.how in ("import", "assign")
        if binding.how == "assign" and binding.index is None and binding.value is not None:
            scope = sem.scopes.get(binding.scope)
            if scope is not None and len(scope.bindings.get(expr.id, [])) == 1:
                return _same_for_every_index(sem, binding.value, func, depth + 1)
        return False
    if isinstance(expr, ast.Call):
        qual = sem.qualname(expr.func)
        if qual in _PATH_BUILDERS or (
            qual is None and terminal_name(expr.func) in ("str", "format", "joinpath")
        ):
            if isinstance(expr.func, ast.Attribute) and qual is None:
                if not _same_for_every_index(sem, expr.func.value, func, depth + 1):
                    return False
            parts = [*expr.args, *(k.value for k in expr.keywords)]
            return all(_same_for_every_index(sem, p, func, depth + 1) for p in parts)
        return False
    return False


def _module_level(sem: Semantic, name: ast.Name) -> bool:
    binding = sem.lookup(name.id, name)
    return binding is not None and binding.scope is sem.tree


def _assigned_in(func: ast.AST, attr: str) -> bool:
    return any(
        isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and data.self_attribute(node) == attr
        for node in ast.walk(func)
    )
