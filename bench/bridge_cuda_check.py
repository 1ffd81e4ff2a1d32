"""The kernel bridge on CUDA tensors: the same facts, with GPU work still queued and
``torch.cuda.set_sync_debug_mode("error")`` on in the kernel, prove that a probe never syncs.

Starts its own kernel:  python bench/bridge_cuda_check.py [--matmuls 200]

Proof: after queueing matmuls and recording a CUDA event, the probe reads every fact; the event
must still be pending afterwards (a sync would have drained the queue), no fact may be missing
(a syncing read would have raised under the debug mode), and as a control `repr()` of a CUDA
tensor must raise under the same mode. Exits 0 with a message when no CUDA device is present.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time

CHECK = "import torch\n_cuda_ok = torch.cuda.is_available()"
SETUP = """
import torch
from torch import nn
dev = torch.device("cuda")
a = torch.randn(8192, 8192, device=dev)
at = a.t()
cl = torch.randn(8, 3, 64, 64, device=dev).to(memory_format=torch.channels_last)
s = torch.randn(100, 100, device=dev)[:, ::2]
g = torch.randn(512, 512, device=dev, requires_grad=True)
h = (g * 2).t()
with torch.inference_mode():
    inf = torch.ones(1000, device=dev)
bf = torch.zeros(256, 256, device=dev, dtype=torch.bfloat16)
model = nn.Sequential(nn.Linear(1024, 1024), nn.LayerNorm(1024)).to(dev).eval()
lin = nn.Linear(64, 32).to(dev)
pinned = torch.empty(1 << 20).pin_memory()
torch.cuda.synchronize()
for _ in range({matmuls}):
    q = a @ a
ev = torch.cuda.Event()
ev.record()
torch.cuda.set_sync_debug_mode("error")
"""
CONTROL = """
try:
    repr(at)
    _repr_raised = None
except RuntimeError as exc:
    _repr_raised = str(exc).splitlines()[0][:120]
torch.cuda.set_sync_debug_mode(0)
torch.cuda.synchronize()
"""
NAMES = ["a", "at", "cl", "s", "g", "h", "inf", "bf", "model", "pinned", "lin.weight"]
TENSOR_FIELDS = (
    "shape", "dtype", "device", "layout", "stride", "storage_offset", "is_contiguous", "is_view",
    "nbytes", "storage_nbytes", "requires_grad", "is_leaf", "is_inference", "is_pinned",
)  # fmt: skip


def _expression(kc, expr: str) -> object:
    msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"v": expr})
    while True:
        reply = kc.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    entry = reply["content"]["user_expressions"]["v"]
    if entry.get("status") != "ok":
        raise RuntimeError(f"{expr}: {entry.get('ename')}: {entry.get('evalue')}")
    return ast.literal_eval(entry["data"]["text/plain"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--matmuls", type=int, default=200, help="8192x8192 matmuls to queue")
    args = parser.parse_args()
    try:
        from jupyter_client import KernelManager
    except ImportError:
        print("bridge_cuda_check: jupyter-client is not installed; nothing checked")
        return 0
    from torchdoctor.bridge.client import KernelBridge
    from torchdoctor.core.live_facts import ProbeRequest

    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    failures: list[str] = []
    try:
        kc.wait_for_ready(timeout=120)
        kc.execute_interactive(CHECK, timeout=300, output_hook=lambda m: None)
        if not _expression(kc, "_cuda_ok"):
            print("bridge_cuda_check: no CUDA device in the kernel; nothing to check (ok)")
            return 0
        name = _expression(kc, "torch.cuda.get_device_name(0)")
        reply = kc.execute_interactive(
            SETUP.replace("{matmuls}", str(args.matmuls)), timeout=300, output_hook=lambda m: None
        )
        if reply["content"]["status"] != "ok":
            print(f"setup failed: {reply['content'].get('evalue')}")
            return 1
        request = ProbeRequest.of(NAMES, [("at", (-1,)), ("cl", (8, -1)), ("s", (50, 100))])
        with KernelBridge(km.connection_file, timeout=30) as bridge:
            start = time.perf_counter()
            facts = bridge.probe(request)
            first = time.perf_counter() - start
            start = time.perf_counter()
            facts = bridge.probe(request)
            again = time.perf_counter() - start
        pending = _expression(kc, "not ev.query()")
        if not pending:
            failures.append("the queued GPU work had finished after the probe (increase --matmuls)")
        for n in NAMES:
            f = facts.get(n) or {}
            if n == "model":
                if f.get("kind") != "module" or f.get("devices") != ["cuda:0"]:
                    failures.append(f"model facts wrong: {f}")
                continue
            if f.get("kind") != "tensor":
                failures.append(f"{n}: not read as a tensor: {f}")
                continue
            missing = [k for k in TENSOR_FIELDS if f.get(k) is None]
            if missing:
                failures.append(f"{n}: fields not read (a sync would raise here): {missing}")
        if (facts.tensor("pinned") or {}).get("is_pinned") is not True:
            failures.append("pinned CPU tensor not reported as pinned")
        if (facts.view("at", (-1,)) or {}).get("ok") is not False:
            failures.append("at.view(-1) should fail")
        if (facts.view("s", (50, 100)) or {}).get("ok") is not True:
            failures.append("s.view(50, 100) should work")
        kc.execute_interactive(CONTROL, timeout=300, output_hook=lambda m: None)
        control = _expression(kc, "_repr_raised")
        print(f"device: {name}")
        print(f"probe of {len(NAMES)} names + 3 views with GPU work queued: "
              f"first {first * 1000:.1f} ms, again {again * 1000:.1f} ms")  # fmt: skip
        print(f"GPU queue still busy after the probes: {pending}")
        print(f"control: repr() of a CUDA tensor under sync debug mode 'error' raised: {control!r}")
        if control is None:
            failures.append("control repr() did not raise: the debug mode is not active")
        for n in ("at", "cl", "model"):
            shown = {k: v for k, v in (facts.get(n) or {}).items() if k != "views"}
            print(f"{n}: {json.dumps(shown)}")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("OK: every fact read on CUDA tensors without a sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
