"""Fixes of data loading (TDR301, TDR302, TDR303, TDR304, TDR307, TDR309), run before and
after."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from behaviour_harness import ABSENT, ANY, Case, Programs, exercise

# The statements the fix moves into `main()` run when the file is a script, and only then.
MAIN_GUARD = """\
import torch
from torch.utils.data import DataLoader
def show(batch):
    return batch.tolist()
data = list(range(6))
loader = DataLoader(data, batch_size=3, num_workers=2)
print("batches:", [show(b) for b in loader])
"""

IMPORTER = """\
import prog
print("names:", sorted(n for n in vars(prog) if not n.startswith("__")))
"""

# Under `spawn` a worker imports the main module: without the guard it runs the training code
# again, and the loader it builds there fails.
SPAWN = """\
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader
name = mp.current_process().name
loader = DataLoader(list(range(6)), batch_size=3, num_workers=1, multiprocessing_context="spawn")
try:
    print(name, "batches:", [b.tolist() for b in loader])
except RuntimeError as exc:
    print(name, "batches:", type(exc).__name__)
"""

OVERSUBSCRIBED = """\
import torch
from torch.utils.data import DataLoader
loader = DataLoader(list(range(6)), batch_size=2, num_workers=33)
# %%
print("workers:", loader.num_workers)
print("batches:", [b.tolist() for b in loader])
"""

# An iterable dataset that splits its items by worker: each worker batches its own share, so
# the batches depend on how many workers there are.
OVERSUBSCRIBED_ITERABLE = """\
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
class Shards(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        return iter(range(info.id, 6, info.num_workers))
loader = DataLoader(Shards(), batch_size=2, num_workers=33)
# %%
print("workers:", loader.num_workers)
print("batches:", [b.tolist() for b in loader])
"""

PINNED = """\
import warnings
warnings.simplefilter("ignore")  # without a GPU, PyTorch warns that it does not pin
import torch
from torch.utils.data import DataLoader, TensorDataset
device = "cuda" if torch.cuda.is_available() else "cpu"
ds = TensorDataset(torch.arange(8.0).reshape(4, 2), torch.arange(4))
loader = DataLoader(ds, batch_size=2, shuffle=False, num_workers=2)
# %%
for x, y in loader:
    x, y = x.to(device), y.to(device)
    print(f"batch {y.tolist()}:", x.tolist(), x.dtype)
"""

NON_BLOCKING = """\
import warnings
warnings.simplefilter("ignore")
import torch
from torch.utils.data import DataLoader
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loader = DataLoader([{"x": torch.tensor([float(i)]), "id": i} for i in range(4)], batch_size=2)
# %%
for batch in loader:
    x = batch["x"].to(device, non_blocking=True)
    print(f"batch {batch['id'].tolist()}:", x.tolist())
"""

# Every worker gets a copy of the dataset's generators, in the same state.
WORKER_RNG = """\
import random
import torch
from torch.utils.data import DataLoader, Dataset
class Noisy(Dataset):
    def __init__(self):
        self.gen = torch.Generator().manual_seed(1)
        self.py = random.Random(3)
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return torch.rand(1, generator=self.gen).item(), self.py.random()
# %%
loader = DataLoader(Noisy(), batch_size=None, num_workers=2)
values = [sample for sample in loader]
# With two workers, samples 0 and 1 come from different workers.
print("torch draws repeat across workers:", values[0][0] == values[1][0])
print("random draws repeat across workers:", values[0][1] == values[1][1])
print("samples:", len(values))
"""

UNREPRODUCIBLE = """\
import torch
from torch import nn
from torch.utils.data import DataLoader
def order(extra_layers):
    torch.manual_seed(42)
    for _ in range(extra_layers):
        nn.Linear(4, 4)
    loader = DataLoader(list(range(8)), batch_size=4, shuffle=True, num_workers=2)
    return [b.tolist() for b in loader]
first = order(0)
print("order:", first)
print("same order with one more layer:", order(1) == first)
"""

UNREPRODUCIBLE_GLOBAL = """\
import torch
from torch.utils.data import DataLoader
torch.manual_seed(42)
loader = DataLoader(list(range(8)), batch_size=4, shuffle=True, num_workers=2)
# %%
print("order:", [b.tolist() for b in loader])
print("next global draw:", torch.randint(0, 10**6, ()).item())
"""

CPUS = str(min(33, os.cpu_count() or 1))
# With 33 cores the cap changes nothing.
BATCHES = "[[0], [1], [2], [3], [4], [5]]" if CPUS == "33" else ANY

CASES = [
    Case("script", "TDR301", MAIN_GUARD, unsafe=True),
    # An importer no longer runs the statements nor gets their names, as the docs say.
    Case(
        "import",
        "TDR301",
        MAIN_GUARD,
        unsafe=True,
        files={"importer.py": IMPORTER},
        entry="importer.py",
        changes={
            "batches": ("[[0, 1, 2], [3, 4, 5]]", ABSENT),
            "names": (
                "['DataLoader', 'data', 'loader', 'show', 'torch']",
                "['DataLoader', 'main', 'show', 'torch']",
            ),
        },
    ),
    Case(
        "spawn",
        "TDR301",
        SPAWN,
        unsafe=True,
        changes={"SpawnProcess-1 batches": ("RuntimeError", ABSENT)},
    ),
    # The alternative fix indents the statements under the guard: names stay global.
    Case("guard-script", "TDR301", MAIN_GUARD, unsafe=True, alternative=1),
    Case(
        "guard-import",
        "TDR301",
        MAIN_GUARD,
        unsafe=True,
        alternative=1,
        files={"importer.py": IMPORTER},
        entry="importer.py",
        changes={
            "batches": ("[[0, 1, 2], [3, 4, 5]]", ABSENT),
            "names": (
                "['DataLoader', 'data', 'loader', 'show', 'torch']",
                "['DataLoader', 'show', 'torch']",
            ),
        },
    ),
    # On a machine with fewer cores, fewer workers: a map-style dataset keeps its order...
    Case("map-style", "TDR302", OVERSUBSCRIBED, unsafe=True, changes={"workers": ("33", CPUS)}),
    # ... an iterable dataset that shards by worker yields other batches.
    Case(
        "iterable",
        "TDR302",
        OVERSUBSCRIBED_ITERABLE,
        unsafe=True,
        notebook=True,
        changes={"workers": ("33", CPUS), "batches": ("[[0], [1], [2], [3], [4], [5]]", BATCHES)},
    ),
    Case("pin", "TDR303", PINNED),
    Case("pin", "TDR303", PINNED, notebook=True),
    Case("pin", "TDR304", NON_BLOCKING),
    Case("pin", "TDR304", NON_BLOCKING, notebook=True),
    Case(
        "reseed",
        "TDR307",
        WORKER_RNG,
        unsafe=True,
        changes={
            "torch draws repeat across workers": ("True", "False"),
            "random draws repeat across workers": ("True", "False"),
        },
    ),
    Case(
        "reseed",
        "TDR307",
        WORKER_RNG,
        unsafe=True,
        notebook=True,
        changes={
            "torch draws repeat across workers": ("True", "False"),
            "random draws repeat across workers": ("True", "False"),
        },
    ),
    # The order no longer depends on other draws from the global generator; it changes once.
    Case(
        "generator",
        "TDR309",
        UNREPRODUCIBLE,
        unsafe=True,
        changes={"order": (ANY, ANY), "same order with one more layer": ("False", "True")},
    ),
    Case(
        "global-draws",
        "TDR309",
        UNREPRODUCIBLE_GLOBAL,
        unsafe=True,
        changes={"order": (ANY, ANY), "next global draw": (ANY, ANY)},
    ),
    Case(
        "global-draws",
        "TDR309",
        UNREPRODUCIBLE_GLOBAL,
        unsafe=True,
        notebook=True,
        changes={"order": (ANY, ANY), "next global draw": (ANY, ANY)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.param_id for c in CASES])
def test_fix(case: Case, tmp_path: Path, programs: Programs) -> None:
    exercise(case, tmp_path, programs)
