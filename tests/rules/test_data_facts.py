"""The DataLoader facts of ``engine/data.py`` that the TDR3xx rules share."""

from __future__ import annotations

import ast

import pytest

from torchdoctor.core import data, training
from torchdoctor.core.semantic import Semantic

_HEAD = "import torch\nfrom torch.utils.data import DataLoader\n"


def _sem(code: str) -> Semantic:
    return Semantic(ast.parse(code))


def _call(sem: Semantic, attr: str) -> ast.Call:
    return sem.calls_by_attr[attr][-1]


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("device = 'cuda'", "cuda"),
        ("device = 'cuda:1'", "cuda"),
        ("device = f'cuda:{rank}'", "cuda"),
        ("device = torch.device('cuda', 0)", "cuda"),
        ("device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')", "cuda"),
        ("device = 'cuda' if torch.cuda.is_available() else 'cpu'", "cuda"),
        ("device = torch.cuda.current_device()", "cuda"),
        ("device = 'cpu'", "host"),
        ("device = torch.device('mps') if mps else 'cpu'", "host"),
        ("device = args.device", None),
        ("device = pick_device()", None),
        ("def get():\n    return torch.device('cuda')\ndevice = get()", "cuda"),
    ],
)
def test_device_kind(setup: str, expected: str | None) -> None:
    sem = _sem(f"import torch\n{setup}\nx.to(device)\n")
    assert data.device_kind(sem, data.transfer_device(_call(sem, "to"))) == expected


def test_device_kind_follows_parameters_to_call_sites() -> None:
    sem = _sem(
        "import torch\ndef run(x, device):\n    x.to(device)\n"
        "run(a, 'cuda:0')\nrun(b, torch.device('cuda'))\n"
    )
    assert data.device_kind(sem, data.transfer_device(_call(sem, "to"))) == "cuda"
    sem = _sem("import torch\ndef run(x, device):\n    x.to(device)\nrun(a, 'cuda')\nrun(b, d)\n")
    assert data.device_kind(sem, data.transfer_device(_call(sem, "to"))) is None


@pytest.mark.parametrize(
    ("loop", "moved", "loader"),
    [
        ("for x, y in la:", "x", "la"),
        ("for i, (x, y) in enumerate(tqdm(lb)):", "x", "lb"),
        ("for (xa, ya), (xb, yb) in zip(la, lb):", "xb", "lb"),
        ("for (xa, ya), (xb, yb) in zip(la, lb):", "ya", "la"),
        ("for batch in lb:\n    v = batch['image']\n    z = v.float()", "z", "lb"),
    ],
)
def test_batch_loader(loop: str, moved: str, loader: str) -> None:
    sem = _sem(_HEAD + f"la = DataLoader(a)\nlb = DataLoader(b)\n{loop}\n    {moved}.cuda()\n")
    found = data.batch_loader(sem, _call(sem, "cuda").func.value)  # type: ignore[attr-defined]
    assert isinstance(found, ast.Name) and found.id == loader


def test_batch_loader_in_a_comprehension() -> None:
    sem = _sem(
        _HEAD
        + "la = DataLoader(a)\nfor batch in la:\n    {k: v.cuda() for k, v in batch.items()}\n"
    )
    found = data.batch_loader(sem, _call(sem, "cuda").func.value)  # type: ignore[attr-defined]
    assert isinstance(found, ast.Name) and found.id == "la"


@pytest.mark.parametrize(
    "code",
    [
        # The enumerate counter, a tensor not taken from a batch, a loop over a list.
        "la = DataLoader(a)\nfor i, batch in enumerate(la):\n    i.cuda()\n",
        "la = DataLoader(a)\nw = torch.ones(3)\nfor batch in la:\n    w.cuda()\n",
        "for x in [torch.ones(1)]:\n    x.cuda()\n",
    ],
)
def test_not_a_batch(code: str) -> None:
    sem = _sem(_HEAD + code)
    assert data.batch_loader(sem, _call(sem, "cuda").func.value) is None  # type: ignore[attr-defined]


def test_loader_calls_through_parameters_and_builders() -> None:
    sem = _sem(
        _HEAD + "def build(ds):\n    return DataLoader(ds, batch_size=2)\n"
        "def train(loader):\n    for x in loader:\n        pass\n"
        "train(build(a))\ntrain(DataLoader(b))\n"
    )
    loop = next(iter(training.all_loops(sem)))
    calls, unknown = data.loader_calls(sem, loop.loader)
    assert len(calls) == 2 and not unknown
    sem = _sem(_HEAD + "def train(loader):\n    for x in loader:\n        pass\n")
    calls, unknown = data.loader_calls(sem, next(iter(training.all_loops(sem))).loader)
    assert calls == [] and unknown


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("DataLoader(ds)", False),
        ("DataLoader(ds, num_workers=0)", False),
        ("DataLoader(ds, num_workers=4)", True),
        ("DataLoader(ds, 8, True, None, None, 2)", True),
        ("DataLoader(ds, num_workers=args.workers)", True),
    ],
)
def test_uses_workers(call: str, expected: bool) -> None:
    sem = _sem(_HEAD + call + "\n")
    assert data.uses_workers(next(sem.calls_to(data.DATALOADER))) is expected
