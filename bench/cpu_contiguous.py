"""``.contiguous()`` and ``.reshape()`` copy a non-contiguous tensor; ``.view()`` never copies.

Rules TDR101, TDR102. Times (best of 15), on the CPU, the calls on a 4096 x 4096 float32 tensor
(64 MiB) and reports whether each result shares the input's storage (no copy) or owns a new one
(a full copy).

    python bench/cpu_contiguous.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch

N = 4096


def best_ms(fn: Callable[[], torch.Tensor], repeat: int = 15) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000  # the least disturbed run on a shared machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    t = torch.randn(N, N)
    cases: dict[str, Callable[[], torch.Tensor]] = {
        "t.view(-1)": lambda: t.view(-1),
        "t.reshape(-1)": lambda: t.reshape(-1),
        "t.contiguous()": lambda: t.contiguous(),
        "t.t().contiguous()": lambda: t.t().contiguous(),
        "t.t().reshape(-1)": lambda: t.t().reshape(-1),
        "t.t().contiguous().view(-1)": lambda: t.t().contiguous().view(-1),
        "t.t().contiguous().reshape(-1)": lambda: t.t().contiguous().reshape(-1),
    }
    base = t.untyped_storage().data_ptr()
    results = {}
    for name, fn in cases.items():
        copied = fn().untyped_storage().data_ptr() != base
        results[name] = {"ms_best": round(best_ms(fn), 4), "copies": copied}
    info = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "tensor": f"{N}x{N} float32 ({t.nbytes // 2**20} MiB)",
        "results": results,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"torch {info['torch']}, {info['threads']} threads, {info['tensor']}")
    for name, r in results.items():
        what = "copy   " if r["copies"] else "no copy"
        print(f"{name:32} {what} {r['ms_best']:10.4f} ms")


if __name__ == "__main__":
    main()
