"""Kernel bridge latency: first probe (installs the helper), then p50/p95 of probes of 16 names
(with 5 view checks) against a real ipykernel. Goal: p50 <= 10 ms.

    .venv/bin/python bench/bridge_latency.py [--runs 200] [--no-subshell]
"""

from __future__ import annotations

import argparse
import statistics
import time

SETUP = """
import torch
from torch import nn
big = torch.empty(2**28)
t0 = torch.randn(64, 64)
t1 = t0.t()
t2 = torch.randn(8, 3, 32, 32).to(memory_format=torch.channels_last)
t3 = torch.randn(100, 100)[:, ::2]
t4 = torch.randn(16, requires_grad=True)
t5 = (t4 * 2).sum()
with torch.inference_mode():
    t6 = torch.ones(1000)
t7 = torch.zeros(4, 4, dtype=torch.bfloat16)
model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)])
x = torch.randn(32, 256)
y = torch.randn(32, 10)
w = torch.randn(256, 256)
b = torch.randn(256)
n = 3
"""
NAMES = ["big", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "model", "x", "y", "w", "b", "n",
         "missing"]  # fmt: skip
VIEWS = [("t1", (-1,)), ("t2", (8, -1)), ("t3", (50, 100)), ("x", (("x", 0), -1)), ("big", (-1,))]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    from jupyter_client import KernelManager

    from torchdoctor.bridge.client import KernelBridge
    from torchdoctor.core.live_facts import ProbeRequest

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--no-subshell", action="store_true")
    args = parser.parse_args()
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        kc.execute_interactive(SETUP, timeout=120, output_hook=lambda m: None)
        request = ProbeRequest.of(NAMES, VIEWS)
        start = time.perf_counter()
        bridge = KernelBridge(km.connection_file, timeout=10, use_subshell=not args.no_subshell)
        connect = time.perf_counter() - start
        start = time.perf_counter()
        facts = bridge.probe(request)
        first = time.perf_counter() - start
        assert facts.tensor("big") is not None and facts.module("model") is not None
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            bridge.probe(request)
            times.append(time.perf_counter() - start)
        one = []
        single = ProbeRequest.of(["big"])
        for _ in range(args.runs):
            start = time.perf_counter()
            bridge.probe(single)
            one.append(time.perf_counter() - start)
        bridge.close()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    ms = 1000.0
    print(f"transport: {'main shell' if args.no_subshell else 'subshell'}; runs: {args.runs}")
    print(f"connect (kernel_info + subshell): {connect * ms:.1f} ms")
    print(f"first probe (installs helper), 16 names + 5 views: {first * ms:.1f} ms")
    print(
        f"16 names + 5 views: p50 {statistics.median(times) * ms:.2f} ms, "
        f"p95 {percentile(times, 0.95) * ms:.2f} ms"
    )
    print(
        f"1 name (1 GiB tensor): p50 {statistics.median(one) * ms:.2f} ms, "
        f"p95 {percentile(one, 0.95) * ms:.2f} ms"
    )
    goal = statistics.median(times) * ms <= 10
    print(f"goal p50 <= 10 ms: {'met' if goal else 'NOT met'}")


if __name__ == "__main__":
    main()
