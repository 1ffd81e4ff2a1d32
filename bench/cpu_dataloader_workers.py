"""DataLoader throughput against ``num_workers`` on this machine's CPU (rules TDR302, TDR310).

Each sample costs a fixed amount of CPU work (small matrix products, one thread); the script
times one epoch (best of 3, starting the workers included) of 512 samples, batch 16, for several
worker counts. Past the number of cores, the workers compete for the same cores.

    python bench/cpu_dataloader_workers.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import torch
from torch.utils.data import DataLoader, Dataset

SAMPLES, BATCH = 512, 16


class Busy(Dataset):
    """A dataset whose ``__getitem__`` does a fixed amount of CPU work."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(index)
        a = torch.randn(160, 160, generator=g)
        for _ in range(12):
            a = torch.tanh(a @ a) * 0.5
        return a[0]


def epoch_seconds(workers: int) -> float:
    loader = DataLoader(Busy(), batch_size=BATCH, num_workers=workers)
    t0 = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # PyTorch itself warns when num_workers exceeds the CPU count; that case is measured here.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.set_num_threads(1)  # workers run one thread each; keep the main process comparable
    cores = os.cpu_count() or 1
    counts = sorted({0, 1, cores, 2 * cores, 4 * cores})
    epoch_seconds(0)  # warm-up
    results = {}
    for n in counts:
        best = min(epoch_seconds(n) for _ in range(3))
        results[str(n)] = {"epoch_s": round(best, 2), "samples_per_s": round(SAMPLES / best, 1)}
    info = {"torch": torch.__version__, "cpu_count": cores, "results": results}
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"torch {info['torch']}, {cores} CPUs, {SAMPLES} samples per epoch")
    for n, r in results.items():
        print(
            f"num_workers={n:>3}  {r['epoch_s']:6.2f} s/epoch  {r['samples_per_s']:7.1f} samples/s"
        )


if __name__ == "__main__":
    main()
