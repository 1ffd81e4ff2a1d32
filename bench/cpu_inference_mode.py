"""Per-operation overhead of ``torch.no_grad()`` versus ``torch.inference_mode()`` (rule TDR106).

Runs many tiny forward passes (a 3-layer MLP of width 64, batch 1: the time goes to per-op
bookkeeping, not arithmetic) under each mode, interleaving the modes over several rounds and
keeping each mode's best round, and reports microseconds per forward pass.

    python bench/cpu_inference_mode.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from torch import nn

WIDTH, CALLS, ROUNDS = 64, 2000, 15
MODES: dict[str, Callable[[], AbstractContextManager[object]]] = {
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1)
    )
    x = torch.randn(1, WIDTH)
    best = dict.fromkeys(MODES, float("inf"))
    for _ in range(ROUNDS):
        for name, mode in MODES.items():
            with mode():
                net(x)
                t0 = time.perf_counter()
                for _ in range(CALLS):
                    net(x)
                best[name] = min(best[name], time.perf_counter() - t0)
    results = {name: round(seconds / CALLS * 1e6, 2) for name, seconds in best.items()}
    info = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": f"MLP {WIDTH}-{WIDTH}-{WIDTH}-1, batch 1",
        "us_per_forward": results,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"torch {info['torch']}, {info['threads']} thread, {info['model']}")
    for name, us in results.items():
        print(f"{name:15} {us:8.2f} us per forward")


if __name__ == "__main__":
    main()
