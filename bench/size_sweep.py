"""Time and peak memory of ``torchdoctor check`` as one file grows: 250 KB, 1 MB, 4 MB, 10 MB.

The file is realistic training and evaluation code in the shape long scripts and exported
notebooks have: module-level blocks that rebind the same names (``model``, ``optimizer``,
``loader``, ``loss``, ``x``) hundreds or thousands of times, with an evaluation after each
training loop, helper functions, dataset classes and a ``__main__`` guard. Each size is checked
in a fresh process (default rules, no cache); the script prints seconds, seconds per MB, peak
memory (RSS) and findings, and the spread of seconds per MB (goal: within 1.5x; a 10 MB file
within 60 s and 1 GB).

    python bench/size_sweep.py [--torchdoctor EXE] [--sizes 0.25,1,4,10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAD = """import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""

# Each block is what one cell or one section of a long script holds; {i} makes its own names.
BLOCKS = [
    """
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=8)
total = 0
for x, y in loader:
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    total += loss.item()
model.eval()
hits = 0
for x, y in loader:
    hits += (model(x).argmax(1) == y).sum().item()
x = torch.tensor(hits)
print(total, x)
""",
    """

class Squares{i}(Dataset):
    def __init__(self, n):
        self.data = torch.arange(n, dtype=torch.float32)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index], self.data[index] ** 2


def evaluate{i}(net, data):
    net.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in data:
            outputs = net(inputs.view(-1, 1))
            correct += (outputs.squeeze(1) - targets).abs().lt(0.5).sum().item()
    return correct / max(len(data.dataset), 1)

""",
    """
x = torch.randn(16, 3, 8, 8)
x = x.permute(0, 2, 3, 1).contiguous()
x = x.reshape(16, -1)
model = nn.Linear(192, 10)
loss = F.cross_entropy(model(x), torch.randint(0, 10, (16,)))
loss.backward()
scheduler = torch.optim.lr_scheduler.StepLR(torch.optim.Adam(model.parameters()), step_size=10)
losses = []
for step in range(3):
    loss = model(x).pow(2).mean()
    losses.append(loss.item())
state = {{"model": model.state_dict(), "step": step}}
torch.save(state, "checkpoint_{i}.pt")
state = torch.load("checkpoint_{i}.pt")
model.load_state_dict(state["model"])
""",
    """
ds = Squares{i}(32)
loader = DataLoader(ds, batch_size=4, shuffle=True)
net = nn.Linear(1, 1)
print(evaluate{i}(net, loader))
values = np.array([random.random() for _ in range(8)])
x = torch.from_numpy(values).float()
print(x.mean())
""",
]

TAIL = """

def main():
    loader = DataLoader(TensorDataset(torch.randn(8, 8)), batch_size=2, num_workers=2)
    for (batch,) in loader:
        print(batch.shape)


if __name__ == "__main__":
    main()
"""


def make_source(size: int) -> str:
    """About ``size`` bytes of code."""
    parts = [HEAD]
    total = len(HEAD) + len(TAIL)
    i = 0
    while total < size:
        for block in BLOCKS:
            text = block.format(i=i)
            parts.append(text)
            total += len(text)
        i += 1
    parts.append(TAIL)
    return "".join(parts)


def run_one(exe: str, path: Path) -> tuple[float, float, int, int]:
    """Seconds, CPU seconds, peak RSS (bytes) and number of findings of one check in a fresh
    process."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    done = subprocess.run(
        [exe, "check", "--no-cache", "--output-format", "json", "--exit-zero", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    if done.returncode != 0:
        sys.exit(f"torchdoctor failed on {path}:\n{done.stderr}")
    # ru_maxrss of the children is the largest of them so far: sizes run smallest first.
    return seconds, cpu, max(usage.ru_maxrss, before) * 1024, len(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_exe = str(Path(sys.executable).with_name("torchdoctor"))
    parser.add_argument("--torchdoctor", default=default_exe)
    parser.add_argument("--sizes", default="0.25,1,4,10", help="sizes in MB (1 MB = 10^6 bytes)")
    parser.add_argument("--keep", type=Path, help="write the generated files here")
    args = parser.parse_args()
    sizes = sorted(float(s) for s in args.sizes.split(","))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="td-size-sweep-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"{'size':>8} {'lines':>8} {'seconds':>8} {'s/MB':>7} {'CPU s':>7} {'CPU s/MB':>8} "
        f"{'peak MB':>8} {'findings':>8}"
    )
    per_mb, cpu_per_mb = [], []
    for mb in sizes:
        # Each in a folder of its own: the others would be read as scripts of its project.
        path = folder / f"{mb:g}mb" / "sweep.py"
        path.parent.mkdir(exist_ok=True)
        text = make_source(int(mb * 1_000_000))
        path.write_text(text, encoding="utf-8")
        seconds, cpu, peak, findings = run_one(args.torchdoctor, path)
        real_mb = len(text.encode()) / 1_000_000
        per_mb.append(seconds / real_mb)
        cpu_per_mb.append(cpu / real_mb)
        print(
            f"{real_mb:7.2f}M {text.count(chr(10)):8d} {seconds:8.2f} {seconds / real_mb:7.2f} "
            f"{cpu:7.2f} {cpu / real_mb:8.2f} {peak / 1e6:8.0f} {findings:8d}"
        )
    # The smallest file carries the start-up (about a second) over fewer bytes: compare from 1 MB.
    big = [i for i, mb in enumerate(sizes) if mb >= 1] or list(range(len(sizes)))
    for label, values in (("s/MB", per_mb), ("CPU s/MB", cpu_per_mb)):
        chosen = [values[i] for i in big]
        print(
            f"spread of {label} from 1 MB up (largest / smallest): "
            f"{max(chosen) / min(chosen):.2f}x (goal <= 1.5x)"
        )
    if not args.keep:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
