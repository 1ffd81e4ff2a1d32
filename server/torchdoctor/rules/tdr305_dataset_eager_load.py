from __future__ import annotations

import ast

from ..core import data
from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import FUNCTION_NODES, Semantic, dotted, terminal_name
from .base import Invalid, Rule

_HEAD = "import torch\nfrom PIL import Image\nfrom torch.utils.data import Dataset\n"
# Calls that turn a list of samples into one array or tensor (one object, no per-sample refcount).
_STACKERS = frozenset(
    {
        "numpy.stack",
        "numpy.array",
        "numpy.asarray",
        "numpy.concatenate",
        "numpy.vstack",
        "numpy.hstack",
        "torch.stack",
        "torch.cat",
        "torch.tensor",
        "torch.as_tensor",
    }
)
# Methods that keep a sample's data (``Image.open(p).convert("RGB")``); others such as
# ``.mean()`` or ``.size`` turn it into metadata.
_KEEPING_METHODS = frozenset(
    {
        "convert",
        "copy",
        "clone",
        "astype",
        "float",
        "half",
        "double",
        "long",
        "int",
        "to",
        "numpy",
        "load",
        "transpose",
        "permute",
        "resize",
        "crop",
        "rotate",
        "reshape",
        "view",
        "squeeze",
        "unsqueeze",
        "contiguous",
        "flatten",
        "decode",
        "tobytes",
    }
)
# Functions whose result is a number or a flag, not the sample.
_REDUCERS = frozenset(
    {
        "len",
        "int",
        "float",
        "bool",
        "str",
        "round",
        "hash",
        "id",
        "type",
        "isinstance",
        "print",
        "sum",
        "mean",
        "max",
        "min",
        "std",
        "var",
        "median",
        "any",
        "all",
        "count_nonzero",
        "getsize",
        "exists",
    }
)
_STORE_METHODS = frozenset({"append", "extend", "add", "insert", "appendleft"})
_MAX_DEPTH = 5


class DatasetEagerLoad(Rule):
    """## What it does
    Checks for a torch `Dataset` subclass whose `__init__` (or a method it calls on `self`)
    reads every sample into Python objects: a loop that appends what `Image.open`,
    `cv2.imread`, `torch.load`, `np.load`, `open(...).read()`, `decode_image`, `torchaudio.load`
    ... return to a list or dict, or a list/dict comprehension of them.

    Not reported: samples stacked into one array or tensor (`np.stack([...])`,
    `torch.stack(...)`, also after the loop), loops that keep only metadata
    (`Image.open(p).size`), loading under an `if` (an opt-in `preload`/`cache` flag), classes
    that are not torch Datasets, and datasets that every `DataLoader` of the file uses without
    workers.

    ## Why is this bad?
    Every `DataLoader` worker gets its own copy of the dataset object. With `fork`, the copy is
    shared copy-on-write at first, but every Python object carries a reference count that is
    written each time the object is touched, so reading the samples of a list of images or
    arrays copies their memory pages one by one into each worker: memory grows steadily during
    the epoch until it is `num_workers + 1` times the dataset. With `spawn` (macOS, Windows)
    the whole dataset is pickled into each worker at start. Measured on a CPU
    (`bench/cpu_dataset_reads.py`): with 39 MiB of samples held as 40,000 `bytes` objects, each
    of two `fork` workers copied 24.6 MiB of memory in one epoch (the half of the samples it
    read); with the same bytes in one object, 3.5 MiB (the baseline of a worker). The guide puts it as "keep the
    Dataset light, store only metadata, read the data on demand in `__getitem__`".

    ## Example
    ```python
    class Images(Dataset):
        def __init__(self, paths):
            self.images = [Image.open(p).convert("RGB") for p in paths]

        def __getitem__(self, i):
            return self.images[i]
    ```

    ## Use instead
    Read each sample when it is asked for:
    ```python
    class Images(Dataset):
        def __init__(self, paths):
            self.paths = list(paths)

        def __getitem__(self, i):
            return Image.open(self.paths[i]).convert("RGB")
    ```
    or, when the data must stay in memory, keep it in one numpy array (one object, one
    reference count: `self.images = np.stack([...])`), or a memory-mapped file
    (`np.load(path, mmap_mode="r")`).

    ## Fix safety
    No fix is offered: loading lazily changes where the time is spent and how errors show up.

    ## References
    - [DataLoader memory grows with workers (copy-on-read)](https://github.com/pytorch/pytorch/issues/13246)
    - [Multi-process data loading](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    """

    code = "TDR305"
    name = "dataset-eager-load"
    severity = Severity.WARNING

    VALID = (
        # Lazy loading in __getitem__.
        _HEAD + "class Images(Dataset):\n"
        "    def __init__(self, paths):\n        self.paths = list(paths)\n"
        "    def __getitem__(self, i):\n        return Image.open(self.paths[i])\n",
        # One stacked array, inline or after the loop.
        "import numpy as np\nfrom torch.utils.data import Dataset\n"
        "class Arrays(Dataset):\n"
        "    def __init__(self, paths):\n"
        "        self.data = np.stack([np.load(p) for p in paths])\n",
        "import numpy as np\nfrom torch.utils.data import Dataset\n"
        "class Arrays(Dataset):\n"
        "    def __init__(self, paths):\n        self.data = []\n"
        "        for p in paths:\n            self.data.append(np.load(p))\n"
        "        self.data = np.stack(self.data)\n",
        # Only metadata is kept.
        _HEAD + "class Images(Dataset):\n"
        "    def __init__(self, paths):\n        self.paths = paths\n        self.sizes = []\n"
        "        for p in paths:\n            self.sizes.append(Image.open(p).size)\n",
        "import numpy as np\nfrom torch.utils.data import Dataset\n"
        "class Arrays(Dataset):\n    def __init__(self, paths):\n"
        "        self.lengths = [len(np.load(p)) for p in paths]\n"
        "        self.total = sum(np.load(p).sum() for p in paths)\n"
        "        self.mean = np.mean([np.load(p) for p in paths], axis=0)\n",
        # A few fixed files, not every sample.
        "import numpy as np\nfrom torch.utils.data import Dataset\n"
        "class Splits(Dataset):\n    def __init__(self, root):\n        self.parts = {}\n"
        "        for split in ('train', 'val'):\n"
        "            self.parts[split] = np.load(f'{root}/{split}.npy')\n",
        # A part of each file (a label) may be metadata.
        "import torch\nfrom torch.utils.data import Dataset\n"
        "class Labels(Dataset):\n    def __init__(self, paths):\n"
        "        self.labels = [torch.load(p)['label'] for p in paths]\n",
        # An opt-in cache.
        _HEAD + "class Images(Dataset):\n"
        "    def __init__(self, paths, preload=False):\n        self.paths = paths\n"
        "        if preload:\n            self.images = [Image.open(p) for p in paths]\n",
        # Not a torch Dataset.
        "import torch\nfrom PIL import Image\nclass Gallery:\n"
        "    def __init__(self, paths):\n        self.images = [Image.open(p) for p in paths]\n",
        "import torch\nfrom PIL import Image\nclass Dataset:\n    pass\nclass Gallery(Dataset):\n"
        "    def __init__(self, paths):\n        self.images = [Image.open(p) for p in paths]\n",
        # Every loader of the file runs without workers.
        _HEAD + "from torch.utils.data import DataLoader\n"
        "class Images(Dataset):\n"
        "    def __init__(self, paths):\n        self.images = [Image.open(p) for p in paths]\n"
        "loader = DataLoader(Images(paths), batch_size=4, num_workers=0)\n",
        # A local function named like a reader.
        "import torch\nfrom torch.utils.data import Dataset\n"
        "def imread(p):\n    return p\n"
        "class Names(Dataset):\n    def __init__(self, paths):\n"
        "        self.items = [imread(p) for p in paths]\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "class Images(Dataset):\n"
            "    def __init__(self, paths):\n"
            "        self.images = [Image.open(p).convert('RGB') for p in paths]\n"
            "    def __getitem__(self, i):\n        return self.images[i]\n",
            fixed=None,
            lines=(6,),
        ),
        # A loop with a name in between, aliases, a loader with workers.
        Invalid(
            "import cv2\nimport torch.utils.data as tud\n"
            "class Frames(tud.Dataset):\n"
            "    def __init__(self, paths):\n        self.frames = []\n"
            "        for p in paths:\n            img = cv2.imread(p)\n"
            "            self.frames.append((img, p))\n"
            "loader = tud.DataLoader(Frames(paths), num_workers=8)\n",
            fixed=None,
            lines=(7,),
        ),
        # A helper method called from __init__, files read with open(...).read().
        Invalid(
            "import torch\nfrom torch.utils.data import Dataset\n"
            "class Texts(Dataset):\n"
            "    def __init__(self, paths):\n        self.texts = self._load(paths)\n"
            "    def _load(self, paths):\n        out = {}\n"
            "        for p in paths:\n            with open(p) as f:\n"
            "                out[p] = f.read()\n        return out\n",
            fixed=None,
            lines=(10,),
        ),
        # A subclass of a torchvision dataset, torch.load of every tensor file.
        Invalid(
            "import torch\nfrom torchvision.datasets import VisionDataset\n"
            "class Cached(VisionDataset):\n"
            "    def __init__(self, root, files):\n        super().__init__(root)\n"
            "        self.tensors = {f: torch.load(f, map_location='cpu') for f in files}\n",
            fixed=None,
            lines=(6,),
        ),
        Invalid(
            _HEAD + "class Images(Dataset):\n"
            "    def __init__(self, paths):\n"
            "        self.images = [Image.open(p) for p in paths]\n",
            fixed=None,
            notebook=True,
            lines=(6,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for cls in data.dataset_classes(sem):
            init = data.method(cls, "__init__")
            if init is None:
                continue
            loaders, unknown = data.loaders_of_class(sem, cls)
            if loaders and not unknown and not any(data.uses_workers(c) for c in loaders):
                continue
            for func in [init, *_called_methods(cls, init)]:
                for node in sem.walk(func):
                    reader = None
                    if isinstance(node, ast.For | ast.AsyncFor):
                        reader = _loop_store(sem, func, node)
                    elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp):
                        reader = _comprehension_store(sem, node)
                    if reader is None or _under_if(sem, node, func) or _few(node):
                        continue
                    what = terminal_name(reader.func) or "read"
                    ctx.report(
                        reader,
                        Text(
                            f"`{cls.name}` reads every sample into Python objects in `__init__` "
                            f"(`{what}` in a loop): each DataLoader worker ends up with its own "
                            "copy; read samples in `__getitem__` or keep them in one array",
                            f"`{cls.name}` 在 `__init__` 中把每个样本都读进 Python 对象（循环中的 "
                            f"`{what}`）：每个 DataLoader worker 最终都会持有一份拷贝；请在 "
                            "`__getitem__` 中读取样本，或把它们放进一个数组",
                        ),
                        related=[
                            ctx.related(node, Text("The loop over the samples", "遍历样本的循环"))
                        ],
                    )


def _called_methods(
    cls: ast.ClassDef, init: ast.AST
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Methods of ``cls`` that ``__init__`` calls as ``self.name(...)``."""
    names = {
        node.func.attr
        for node in ast.walk(init)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    }
    return [
        s for s in cls.body if isinstance(s, FUNCTION_NODES) and s.name in names and s is not init
    ]


def _few(node: ast.AST) -> bool:
    """A loop over a literal list of items (``for split in ("train", "val")``): a few files,
    not every sample."""
    iters = (
        [g.iter for g in node.generators]
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp)
        else [getattr(node, "iter", None)]
    )
    return any(isinstance(i, ast.List | ast.Tuple | ast.Set | ast.Dict) for i in iters)


def _under_if(sem: Semantic, node: ast.AST, func: ast.AST) -> bool:
    for anc in sem.ancestors(node):
        if anc is func:
            return False
        if isinstance(anc, ast.If | ast.IfExp):
            return True
    return False


def _loop_store(sem: Semantic, func: ast.AST, loop: ast.For | ast.AsyncFor) -> ast.Call | None:
    """The reader call whose result a loop stores in a container (``xs.append(read(p))``,
    ``d[k] = read(p)``, ``xs += [read(p)]``) that is not stacked into one array later."""
    for node in sem.walk_body(loop.body):
        container: ast.expr | None = None
        values: list[ast.expr] = []
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _STORE_METHODS
        ):
            container, values = node.func.value, list(node.args)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            container, values = node.targets[0].value, [node.value]
        elif isinstance(node, ast.AugAssign):
            container, values = node.target, [node.value]
        if container is None:
            continue
        for value in values:
            reader = _read_in(sem, value, 0)
            if reader is not None and not _stacked_later(sem, func, loop, container):
                return reader
    return None


def _comprehension_store(
    sem: Semantic, comp: ast.ListComp | ast.SetComp | ast.DictComp
) -> ast.Call | None:
    """The reader call a comprehension collects, when the collection is kept as it is."""
    parent = sem.parent(comp)
    if isinstance(parent, ast.Call):
        # ``list(...)``/``dict(...)`` keep the samples; stacking or reducing calls do not.
        func = parent.func
        builtin = isinstance(func, ast.Name) and sem.lookup(func.id, func) is None
        if not (builtin and terminal_name(func) in ("list", "dict", "tuple")):
            return None
        parent = sem.parent(parent)
    if not isinstance(parent, ast.Assign | ast.AnnAssign | ast.Return):
        return None
    element = comp.value if isinstance(comp, ast.DictComp) else comp.elt
    return _read_in(sem, element, 0)


def _read_in(sem: Semantic, expr: ast.AST | None, depth: int) -> ast.Call | None:
    """The reader call whose data ``expr`` still holds (through wrapping calls, methods that
    keep the data, tuples and dicts, and names assigned from them). A part of what was read
    (``torch.load(p)["label"]``) may be metadata and does not count."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    if isinstance(expr, ast.Call):
        if data.file_read(sem, expr, data.SAMPLE_READERS) is not None:
            return expr
        func = expr.func
        on_self = isinstance(func, ast.Attribute) and dotted(func.value) == "self"
        if isinstance(func, ast.Attribute) and sem.qualname(func) is None and not on_self:
            if func.attr not in _KEEPING_METHODS:
                return None
            found = _read_in(sem, func.value, depth + 1)
            if found is not None:
                return found
        if terminal_name(func) in _REDUCERS:
            return None
        for arg in expr.args:
            found = _read_in(sem, arg, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(expr, ast.Tuple | ast.List | ast.Set):
        for elt in expr.elts:
            found = _read_in(sem, elt, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(expr, ast.Dict):
        for value in expr.values:
            found = _read_in(sem, value, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is not None and binding.how == "assign" and binding.index is None:
            return _read_in(sem, binding.value, depth + 1)
    return None


def _stacked_later(sem: Semantic, func: ast.AST, loop: ast.AST, container: ast.expr) -> bool:
    """``np.stack(self.data)`` (or another stacking call) on the filled container after the
    loop, in the same function."""
    name = dotted(container)
    if name is None:
        return False
    end = (getattr(loop, "end_lineno", 0) or 0, 0)
    for node in sem.walk(func):
        if (
            isinstance(node, ast.Call)
            and sem.qualname(node.func) in _STACKERS
            and (node.lineno, node.col_offset) > end
            and any(dotted(a) == name for a in node.args)
        ):
            return True
    return False
