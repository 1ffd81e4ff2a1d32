"""Stepping the optimizer past the GradScaler (rule TDR403).

A linear regression (64 features, batch 256, SGD lr 0.01) trained with a GradScaler
(``torch.amp.GradScaler("cpu")``, default initial scale 65,536): after
``scaler.scale(loss).backward()`` it steps either with ``scaler.step(optimizer)`` +
``scaler.update()`` or, bypassing the scaler, with ``optimizer.step()``. Prints the size of the
first update and the loss after a few steps for both.

    python bench/cpu_scaler_bypass.py [--steps 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import math

import torch


def run(bypass: bool, steps: int) -> dict[str, float]:
    torch.manual_seed(0)
    x = torch.randn(256, 64)
    y = x @ torch.randn(64, 1) + 0.1 * torch.randn(256, 1)
    model = torch.nn.Linear(64, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    first_update = math.nan
    initial = float(torch.nn.functional.mse_loss(model(x), y).detach())
    for step in range(steps):
        before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if bypass:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        if step == 0:
            after = torch.cat([p.detach().flatten() for p in model.parameters()])
            first_update = float((after - before).norm())
    final = float(torch.nn.functional.mse_loss(model(x), y).detach())
    return {"first_update_l2": first_update, "initial_loss": initial, "final_loss": final}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {
        "scaler.step": run(bypass=False, steps=args.steps),
        "optimizer.step (bypass)": run(bypass=True, steps=args.steps),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"torch {torch.__version__}, {args.steps} SGD steps")
    for name, r in results.items():
        print(
            f"{name:<24} first update L2 {r['first_update_l2']:.4g}   "
            f"loss {r['initial_loss']:.4g} -> {r['final_loss']:.4g}"
        )


if __name__ == "__main__":
    main()
