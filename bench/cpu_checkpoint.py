"""Activation checkpointing trades memory for compute (rule TDR405).

An MLP of 8 blocks (each Linear, GELU, Linear, GELU; width 1024), batch 128, with and without
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` around each block: counts the
bytes saved for backward (``torch.autograd.graph.saved_tensors_hooks``, parameters excluded) and
the ``Linear`` forwards per step (recomputation included), and times a forward + backward step on
the CPU (best of 7).

    python bench/cpu_checkpoint.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from saved_memory import SavedTensors

BLOCKS, WIDTH, BATCH = 8, 1024, 128


class Net(nn.Module):
    def __init__(self, use_checkpoint: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU())
            for _ in range(BLOCKS)
        )
        self.use_checkpoint = use_checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.use_checkpoint else block(x)
        return x


def saved_bytes(net: Net, x: torch.Tensor) -> int:
    """Bytes of distinct storages saved for backward after one forward pass."""
    with SavedTensors(exclude=net.parameters()) as saved:
        out = net(x)
    held = saved.nbytes()
    del out
    return held


def linear_forwards_per_step(net: Net, x: torch.Tensor) -> int:
    """How many ``nn.Linear`` forwards one forward + backward step runs (recomputation included)."""
    calls = 0

    def count(*_: object) -> None:
        nonlocal calls
        calls += 1

    handles = [m.register_forward_hook(count) for m in net.modules() if isinstance(m, nn.Linear)]
    net(x).sum().backward()
    net.zero_grad()
    for h in handles:
        h.remove()
    return calls


def step_ms(net: Net, x: torch.Tensor, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        net(x).sum().backward()
        times.append(time.perf_counter() - t0)
        net.zero_grad()
    return min(times[1:]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    x = torch.randn(BATCH, WIDTH, requires_grad=True)
    results = {}
    for name, flag in (("plain", False), ("checkpoint", True)):
        torch.manual_seed(0)
        net = Net(flag)
        results[name] = {
            "saved_for_backward_MiB": round(saved_bytes(net, x) / 2**20, 1),
            "linear_forwards_per_step": linear_forwards_per_step(net, x),
            "step_ms_best": round(step_ms(net, x), 1),
        }
    info = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": f"{BLOCKS} x (2 x (Linear {WIDTH}->{WIDTH} + GELU)), batch {BATCH}",
        "results": results,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"torch {info['torch']}, {info['threads']} threads, {info['model']}")
    for name, r in results.items():
        print(
            f"{name:11} saved for backward {r['saved_for_backward_MiB']:6.1f} MiB   "
            f"Linear forwards {r['linear_forwards_per_step']:3}   "
            f"forward+backward {r['step_ms_best']:7.1f} ms"
        )


if __name__ == "__main__":
    main()
