"""``torchdoctor run`` on a CUDA machine: are its measurements the real ones?

Writes a small CUDA training script with three pitfalls (``loss.item()`` every step, an
evaluation loop without ``no_grad``, a DataLoader without ``pin_memory`` whose batches are copied
with ``non_blocking=True``), runs it under ``torchdoctor run --output-format json``, and measures
the same things directly in this process:

- synchronisations: the count CUDA's own sync checker reports
  (``torch.cuda.set_sync_debug_mode("warn")``, one warning per synchronising call) over the
  training loop, next to the TDR408 counts;
- activation bytes: ``torch.cuda.memory_allocated()`` after a forward under autograd minus after
  the same forward under ``no_grad`` (the output kept in both), next to TDR105's bytes per call;
- pinned memory: host-to-device copy rates of a pageable and a pinned batch-sized tensor;
- peak memory: the report's ``peak_memory`` next to ``torch.cuda.max_memory_allocated()``.

Prints one JSON object. Needs a CUDA device and torchdoctor importable (``PYTHONPATH=server``).

    python bench/gpu_run.py [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

SERVER = Path(__file__).resolve().parents[1] / "server"
BATCH, WIDTH, EVAL_BATCHES = 256, 2048, 8

SCRIPT = f"""\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda")


def make_model():
    return nn.Sequential(
        nn.Linear({WIDTH}, {WIDTH}), nn.GELU(), nn.Linear({WIDTH}, {WIDTH}), nn.GELU(),
        nn.Linear({WIDTH}, 10),
    )


def main():
    model = make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn({BATCH} * 16, {WIDTH}), torch.randint(0, 10, ({BATCH} * 16,)))
    loader = DataLoader(data, batch_size={BATCH}, shuffle=True)
    for epoch in range(100):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            print(f"loss {{loss.item():.6f}}")
        model.eval()
        outputs = []
        for i, (x, _) in enumerate(loader):
            if i == {EVAL_BATCHES}:
                break
            outputs.append(model(x.to(device)))
        model.train()


if __name__ == "__main__":
    main()
"""


def run_torchdoctor(script: Path, steps: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(SERVER)}
    t0 = time.perf_counter()
    report_dir = str(script.parent / "report")
    options = ["--output-format", "json", "--steps", str(steps), "--report", report_dir]
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "run", *options, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=script.parent,
        check=False,
    )
    elapsed = time.perf_counter() - t0
    findings = json.loads(proc.stdout) if proc.stdout.strip() else []
    report = json.loads((script.parent / "report" / "report.json").read_text())
    return {
        "exit": proc.returncode,
        "wall_s": round(elapsed, 2),
        "findings": findings,
        "report": report,
        "stderr_tail": proc.stderr[-2000:] if proc.returncode not in (0, 1) else "",
    }


def syncs_by_cuda(steps: int) -> dict[str, Any]:
    """The same loop in this process, with CUDA's sync checker on during the training steps."""
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = nn.Sequential(
        nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, 10)
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x_all = torch.randn(BATCH * 16, WIDTH)
    y_all = torch.randint(0, 10, (BATCH * 16,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for step in range(steps):
                i = step % 16
                x = x_all[i * BATCH : (i + 1) * BATCH].to(device, non_blocking=True)
                y = y_all[i * BATCH : (i + 1) * BATCH].to(device, non_blocking=True)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                _ = f"{loss.item():.6f}"
        finally:
            torch.cuda.set_sync_debug_mode(0)
    messages = [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
    return {"count": len(messages), "per_step": round(len(messages) / steps, 3)}


def activation_bytes() -> dict[str, Any]:
    """Bytes autograd keeps for one evaluation forward (output kept, as the script does)."""
    device = torch.device("cuda")
    model = nn.Sequential(
        nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, 10)
    ).to(device)
    model.eval()
    x = torch.randn(BATCH, WIDTH, device=device)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    with torch.no_grad():
        out_plain = model(x)
    torch.cuda.synchronize()
    no_grad = torch.cuda.memory_allocated() - base
    del out_plain
    base = torch.cuda.memory_allocated()
    out_graph = model(x)
    torch.cuda.synchronize()
    with_graph = torch.cuda.memory_allocated() - base
    del out_graph
    return {"per_call_bytes": with_graph - no_grad, "output_bytes": no_grad}


def copy_rates() -> dict[str, float]:
    device = torch.device("cuda")
    size = 64 << 20  # 64 MiB of float32
    pageable = torch.empty(size // 4)
    pinned = torch.empty(size // 4).pin_memory()
    rates = {}
    for name, src in (("pageable", pageable), ("pinned", pinned)):
        for _ in range(3):
            src.to(device, non_blocking=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            src.to(device, non_blocking=True)
        torch.cuda.synchronize()
        rates[name + "_GBps"] = round(20 * size / (time.perf_counter() - t0) / 1e9, 1)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        sys.exit(2)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train_cuda.py"
        script.write_text(SCRIPT)
        # --steps past one epoch (16 batches) so the evaluation loop runs once.
        measured = run_torchdoctor(script, max(args.steps, 17))
    by_code: dict[str, list[dict[str, Any]]] = {}
    for f in measured["findings"]:
        by_code.setdefault(f["code"], []).append(f)
    report = measured["report"]
    activations = activation_bytes()
    tdr105 = by_code.get("TDR105", [{}])[0].get("measured", {})
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "torchdoctor_exit": measured["exit"],
        "torchdoctor_wall_s": measured["wall_s"],
        "steps": report["steps"],
        "stopped": report["stopped"],
        "report_device": report["device"],
        "codes": sorted(by_code),
        "syncs": {
            "torchdoctor_TDR408": [
                {"row": f["location"]["row"], **f["measured"]} for f in by_code.get("TDR408", [])
            ],
            "cuda_sync_debug_mode": syncs_by_cuda(args.steps),
        },
        "activations": {
            "torchdoctor_TDR105_bytes": tdr105.get("bytes"),
            "torchdoctor_TDR105_calls": tdr105.get("calls"),
            "torchdoctor_bytes_per_call": (
                tdr105["bytes"] // tdr105["calls"] if tdr105.get("calls") else None
            ),
            "cuda_memory_allocated_per_call": activations["per_call_bytes"],
        },
        "data": [
            {"code": f["code"], **f["measured"]}
            for code in ("TDR303", "TDR310")
            for f in by_code.get(code, [])
        ],
        "copy": copy_rates(),
        "peak_memory": {
            "report_bytes": report["peak_memory"].get("bytes"),
            "report_row": report["peak_memory"].get("row"),
        },
        "timeline_first_steps": report["timeline"][:3],
        "stderr_tail": measured["stderr_tail"],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
