"""Evaluation memory on the CPU: a forward pass with autograd enabled, under ``torch.no_grad()``
and under ``torch.inference_mode()`` (rules TDR105, TDR106).

Counts the bytes autograd keeps alive for backward (tensors saved by the graph, read with
``torch.autograd.graph.saved_tensors_hooks``, parameters excluded), the growth of the process's
peak resident memory (each mode in a fresh process) and the best forward time of 9.

    python bench/cpu_eval_memory.py [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch
from torch import nn

from saved_memory import SavedTensors

BATCH, SIZE = 32, 64
MODES = ("grad_enabled", "no_grad", "inference_mode")


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).eval()


def context(mode: str):
    return {
        "grad_enabled": torch.enable_grad,
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
    }[mode]()


def saved_bytes(model: nn.Module, x: torch.Tensor, mode: str) -> int:
    """Bytes of the distinct storages the autograd graph of one forward pass keeps alive."""
    with SavedTensors(exclude=model.parameters()) as saved, context(mode):
        out = model(x)
    held = saved.nbytes()
    del out
    return held


def child(mode: str) -> None:
    """Run one mode in this fresh process after a ``no_grad`` forward of the same batch; print
    how much the peak resident memory grows beyond that, in bytes."""
    torch.set_num_threads(2)
    model = make_model()
    x = torch.randn(BATCH, 3, SIZE, SIZE)
    with torch.no_grad():
        model(x)  # warm-up: the peak of a no_grad forward is already reached
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with context(mode):
        out = model(x)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del out
    print((after - before) * 1024)  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    torch.set_num_threads(2)
    model = make_model()
    x = torch.randn(BATCH, 3, SIZE, SIZE)
    result: dict[str, dict[str, float]] = {}
    for mode in MODES:
        rss = int(
            subprocess.run(
                [sys.executable, __file__, "--child", mode],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()[-1]
        )
        result[mode] = {
            "saved_for_backward_MiB": round(saved_bytes(model, x, mode) / 2**20, 1),
            "peak_rss_growth_MiB": round(rss / 2**20, 1),
        }
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(9):  # interleaved, so that drift hits every mode alike
        for mode in MODES:
            t0 = time.perf_counter()
            with context(mode):
                model(x)
            times[mode].append(time.perf_counter() - t0)
    for mode in MODES:
        result[mode]["forward_ms_best"] = round(min(times[mode]) * 1000, 1)
    info = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "input": [BATCH, 3, SIZE, SIZE],
        "results": result,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"torch {info['torch']}, {info['threads']} threads, input {info['input']}")
    for mode, r in result.items():
        print(
            f"{mode:15} saved for backward {r['saved_for_backward_MiB']:7.1f} MiB   "
            f"extra peak RSS over no_grad {r['peak_rss_growth_MiB']:7.1f} MiB   "
            f"forward {r['forward_ms_best']:6.1f} ms"
        )


if __name__ == "__main__":
    main()
