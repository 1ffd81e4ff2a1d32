"""Summing loss tensors keeps every iteration's autograd graph alive; summing ``loss.item()``
does not (rule TDR103).

Runs 50 forward passes of an MLP (1024 -> 4096 -> 10, batch 512, cross-entropy) and accumulates
the loss either as a tensor or as a Python float, then counts the bytes the surviving graphs hold
(tensors saved for backward, read with ``torch.autograd.graph.saved_tensors_hooks``, parameters
excluded) and the growth of peak resident memory (each variant in a fresh process).

    python bench/cpu_loss_accumulation.py [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch import nn

from saved_memory import SavedTensors

ITERATIONS, BATCH = 50, 512
VARIANTS = ("tensor", "item")


def setup() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 10))
    return net, torch.randn(BATCH, 1024), torch.randint(0, 10, (BATCH,))


def accumulate(net: nn.Module, x: torch.Tensor, y: torch.Tensor, variant: str) -> object:
    total: object = torch.zeros(()) if variant == "tensor" else 0.0
    for _ in range(ITERATIONS):
        loss = F.cross_entropy(net(x), y)
        total = total + (loss if variant == "tensor" else loss.item())  # type: ignore[operator]
    return total


def graph_bytes(variant: str) -> int:
    net, x, y = setup()
    with SavedTensors(exclude=net.parameters()) as saved:
        total = accumulate(net, x, y, variant)
    held = saved.nbytes()
    del total
    return held


def child(variant: str) -> None:
    torch.set_num_threads(2)
    net, x, y = setup()
    with torch.no_grad():
        net(x)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    total = accumulate(net, x, y, variant)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del total
    print((after - before) * 1024)  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    torch.set_num_threads(2)
    results = {}
    for variant in VARIANTS:
        rss = int(
            subprocess.run(
                [sys.executable, __file__, "--child", variant],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()[-1]
        )
        results[variant] = {
            "graph_held_MiB": round(graph_bytes(variant) / 2**20, 1),
            "peak_rss_growth_MiB": round(rss / 2**20, 1),
        }
    info = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "iterations": ITERATIONS,
        "results": results,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"torch {info['torch']}, {info['threads']} threads, {ITERATIONS} iterations")
    labels = {"tensor": "total += loss", "item": "total += loss.item()"}
    for variant, r in results.items():
        print(
            f"{labels[variant]:22} graphs hold {r['graph_held_MiB']:7.1f} MiB   "
            f"peak RSS growth {r['peak_rss_growth_MiB']:7.1f} MiB"
        )


if __name__ == "__main__":
    main()
