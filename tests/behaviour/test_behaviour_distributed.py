"""Fixes of distributed training and checkpoints (TDR502, TDR503, TDR504, TDR505, TDR604,
TDR704), run before and after. A one-process `gloo` group stands in for a real job."""

from __future__ import annotations

from pathlib import Path

import pytest
from behaviour_harness import ANY, Case, Programs, exercise

SET_EPOCH = """\
import torch
from torch.utils.data import DataLoader, DistributedSampler
ds = list(range(8))
sampler = DistributedSampler(ds, num_replicas=2, rank=0, seed=0)
loader = DataLoader(ds, batch_size=4, sampler=sampler)
# %%
for epoch in range(3):
    seen = []
    for batch in loader:
        seen.append(batch.tolist())
    print(f"epoch {epoch}:", seen)
"""

# Only distributed runs have the sampler: on the other path nothing changes.
SET_EPOCH_OPTIONAL = """\
import torch
from torch.utils.data import DataLoader, DistributedSampler
def main(ds, distributed):
    torch.manual_seed(0)
    sampler = DistributedSampler(ds, num_replicas=2, rank=0) if distributed else None
    loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=sampler is None)
    for epoch in range(2):
        seen = []
        for batch in loader:
            seen.append(batch.tolist())
        print(f"distributed={distributed} epoch {epoch}:", seen)
main(list(range(8)), False)
main(list(range(8)), True)
"""

SET_EPOCH_INLINE = """\
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler as DS
ds = list(range(8))
loader = DataLoader(ds, batch_size=4, sampler=DS(ds, num_replicas=1, rank=0))
def train_one_epoch(loader):
    return [batch.tolist() for batch in loader]
for epoch in range(1, 3):
    print(f"epoch {epoch}:", train_one_epoch(loader))
"""

# The loader call raised with the conflicting keywords; the fixed one shuffles as the
# sampler's default does.
SHUFFLE = """\
import torch
from torch.utils.data import DataLoader, DistributedSampler
ds = list(range(8))
sampler = DistributedSampler(ds, num_replicas=1, rank=0)
try:
    loader = DataLoader(ds, batch_size=4, shuffle=True, sampler=sampler)
    print("order:", [b.tolist() for b in loader])
except ValueError as exc:
    print("order:", type(exc).__name__)
"""

SHUFFLE_OPTIONAL = """\
import torch
from torch.utils.data import DataLoader, DistributedSampler
def make(ds, distributed):
    torch.manual_seed(0)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0) if distributed else None
    loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=True)
    return [b.tolist() for b in loader]
# %%
print("single process:", make(list(range(8)), False))
try:
    print("distributed:", make(list(range(8)), True))
except ValueError as exc:
    print("distributed:", type(exc).__name__)
"""

BATCH_SAMPLER = """\
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
ds = list(range(6))
bs = BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=True)
try:
    loader = DataLoader(ds, batch_sampler=bs, batch_size=4, shuffle=False, drop_last=True)
    print("batches:", [b.tolist() for b in loader])
except ValueError as exc:
    print("batches:", type(exc).__name__)
"""

_GROUP = """\
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(0)
"""

# DistributedDataParallel refuses SyncBatchNorm layers in a CPU module.
SYNC_BATCHNORM = (
    _GROUP
    + """\
model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
try:
    model = DDP(model)
    print("output:", [round(v, 4) for v in model(torch.randn(4, 4)).sum(0).tolist()])
except ValueError as exc:
    print("output:", exc)
dist.destroy_process_group()
"""
)

SAVE = (
    _GROUP
    + """\
model = nn.Linear(2, 1)
def main():
    torch.save(model.state_dict(), "m.pt")
main()
print("saved keys:", sorted(torch.load("m.pt")))
dist.destroy_process_group()
"""
)

# The group exists only in distributed runs, which the fix's test allows for.
SAVE_CONDITIONAL = """\
import torch
import torch.distributed as dist
def main(distributed):
    if distributed:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    torch.save({"epoch": 1}, "c.pt")
    print(f"distributed={distributed} saved:", torch.load("c.pt"))
    if distributed:
        dist.destroy_process_group()
# %%
main(False)
main(True)
"""

# A helper starts the group; the plain `get_rank()` test raises where it never ran.
SAVE_HELPER = """\
import torch
from torch.distributed import init_process_group
def setup():
    init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
def main(distributed):
    if distributed:
        setup()
    torch.save({"epoch": 1}, "c.pt")
    print("saved:", torch.load("c.pt"))
try:
    main(False)
except ValueError as exc:
    print("saved:", type(exc).__name__)
"""

CHECKPOINT = """\
import torch
from torch import nn
def train(model, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        optimizer.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        torch.save({"model": model.state_dict()}, "c.pt")
torch.manual_seed(0)
model = nn.Linear(2, 1)
train(model, 2)
# %%
ckpt = torch.load("c.pt")
print("keys:", sorted(ckpt))
restored = nn.Linear(2, 1)
restored.load_state_dict(ckpt["model"])
print("restored weight:", [round(v, 4) for v in restored.weight.flatten().tolist()])
"""

SCHEDULER_STATE = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(2, 1)
opt = torch.optim.AdamW(model.parameters())
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
for _ in range(2):
    opt.step()
    sched.step()
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, "c.pt")
# %%
ckpt = torch.load("c.pt")
print("keys:", sorted(ckpt))
print("lr:", ckpt["optimizer"]["param_groups"][0]["lr"])
"""

CASES = [
    # The per-epoch order the sampler was created for, as the docs say; epoch 0 is unchanged.
    Case("named", "TDR502", SET_EPOCH, changes={"epoch 1": (ANY, ANY), "epoch 2": (ANY, ANY)}),
    Case(
        "named",
        "TDR502",
        SET_EPOCH,
        notebook=True,
        changes={"epoch 1": (ANY, ANY), "epoch 2": (ANY, ANY)},
    ),
    Case(
        "optional",
        "TDR502",
        SET_EPOCH_OPTIONAL,
        changes={"distributed=True epoch 1": (ANY, ANY)},
    ),
    Case(
        "inline", "TDR502", SET_EPOCH_INLINE, changes={"epoch 1": (ANY, ANY), "epoch 2": (ANY, ANY)}
    ),
    Case("shuffle", "TDR503", SHUFFLE, changes={"order": ("ValueError", ANY)}),
    Case(
        "optional",
        "TDR503",
        SHUFFLE_OPTIONAL,
        changes={"distributed": ("ValueError", ANY)},
    ),
    Case(
        "optional",
        "TDR503",
        SHUFFLE_OPTIONAL,
        notebook=True,
        changes={"distributed": ("ValueError", ANY)},
    ),
    Case(
        "batch-sampler",
        "TDR503",
        BATCH_SAMPLER,
        changes={"batches": ("ValueError", "[[0, 1, 2, 3]]")},
    ),
    Case(
        "cpu",
        "TDR504",
        SYNC_BATCHNORM,
        unsafe=True,
        changes={"output": (ANY, "SyncBatchNorm layers only work with GPU modules")},
    ),
    # Rank 0 of a one-process group saves what every rank saved before.
    Case("rank0", "TDR505", SAVE, unsafe=True),
    Case("rank0", "TDR505", SAVE, unsafe=True, notebook=True),
    Case("conditional", "TDR505", SAVE_CONDITIONAL, unsafe=True),
    Case("conditional", "TDR505", SAVE_CONDITIONAL, unsafe=True, notebook=True),
    Case(
        "helper",
        "TDR505",
        SAVE_HELPER,
        unsafe=True,
        changes={"saved": ("{'epoch': 1}", "ValueError")},
    ),
    # The checkpoint gains keys; what the loading side read is unchanged.
    Case(
        "keys",
        "TDR604",
        CHECKPOINT,
        unsafe=True,
        changes={"keys": ("['model']", "['epoch', 'model', 'optimizer']")},
    ),
    Case(
        "keys",
        "TDR604",
        CHECKPOINT,
        unsafe=True,
        notebook=True,
        changes={"keys": ("['model']", "['epoch', 'model', 'optimizer']")},
    ),
    Case(
        "keys",
        "TDR704",
        SCHEDULER_STATE,
        unsafe=True,
        changes={"keys": ("['model', 'optimizer']", "['model', 'optimizer', 'scheduler']")},
    ),
    Case(
        "keys",
        "TDR704",
        SCHEDULER_STATE,
        unsafe=True,
        notebook=True,
        changes={"keys": ("['model', 'optimizer']", "['model', 'optimizer', 'scheduler']")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.param_id for c in CASES])
def test_fix(case: Case, tmp_path: Path, programs: Programs) -> None:
    exercise(case, tmp_path, programs)
