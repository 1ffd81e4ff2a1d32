"""What ``torchdoctor run``'s instrumentation costs on a small CPU training loop.

The same seeded script (an MLP 512 -> H -> H -> 10, H = 1024 unless ``--hidden``, batch 64, a DataLoader, SGD with
momentum, a StepLR stepped per epoch and ``loss.item()`` logged every step; one thread) is run
plainly (``python train.py``) and under ``torchdoctor run``, in alternating rounds, each in a
fresh process. The script times its own steps in CPU time (``time.process_time``: one thread, so
other processes on a shared machine do not blur it; the first 20 steps are a warm-up and left
out); the figure is the median step time of each variant, the overhead their ratio minus one. The losses both variants print are compared too: they must be identical.

    python bench/run_overhead.py [--rounds 5] [--steps 300] [--hidden 1024] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "server"
WARMUP = 20

SCRIPT = """\
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
STEPS, HIDDEN = int(sys.argv[1]), int(sys.argv[2])
model = nn.Sequential(
    nn.Linear(512, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10)
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
data = TensorDataset(torch.randn(64 * 50, 512), torch.randint(0, 10, (64 * 50,)))
loader = DataLoader(data, batch_size=64, shuffle=True)
step = 0
while step < STEPS:
    for x, y in loader:
        t0 = time.process_time()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.8f}")
        print(f"step_s {time.process_time() - t0:.9f}")
        step += 1
        if step == STEPS:
            break
    scheduler.step()
"""


def run(variant: str, script: Path, steps: int, hidden: int) -> tuple[list[float], list[str]]:
    if variant == "plain":
        command = [sys.executable, str(script), str(steps), str(hidden)]
    else:
        command = [sys.executable, "-m", "torchdoctor", "run", str(script), str(steps), str(hidden)]
    env = {**os.environ, "PYTHONPATH": str(SERVER), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        command, capture_output=True, text=True, check=False, env=env, cwd=script.parent
    ).stdout
    times = [float(line.split()[1]) for line in out.splitlines() if line.startswith("step_s ")]
    losses = [line for line in out.splitlines() if line.startswith("loss ")]
    return times[WARMUP:], losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=1024, help="Width of the hidden layers.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    medians: dict[str, list[float]] = {"plain": [], "run": []}
    losses: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(SCRIPT)
        for _ in range(args.rounds):
            for variant in ("plain", "run"):
                times, printed = run(variant, script, args.steps, args.hidden)
                medians[variant].append(statistics.median(times))
                losses[variant] = printed
    plain = statistics.median(medians["plain"])
    instrumented = statistics.median(medians["run"])
    result = {
        "steps": args.steps,
        "hidden": args.hidden,
        "rounds": args.rounds,
        "median_step_ms_plain": round(plain * 1000, 3),
        "median_step_ms_run": round(instrumented * 1000, 3),
        "overhead_percent": round((instrumented / plain - 1) * 100, 1),
        "same_losses": losses["plain"] == losses["run"] and len(losses["plain"]) == args.steps,
        "round_medians_ms": {k: [round(v * 1000, 3) for v in vs] for k, vs in medians.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"median step: {result['median_step_ms_plain']} ms plain, "
            f"{result['median_step_ms_run']} ms under torchdoctor run "
            f"({result['overhead_percent']:+.1f}%); same losses: {result['same_losses']}"
        )


if __name__ == "__main__":
    main()
