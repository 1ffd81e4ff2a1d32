"""Optimizer steps on float16 parameters, without float32 master weights (rule TDR407).

One step on a parameter of four ones, stored in float16 and in float32, with the gradients
0, 1e-3, 0.1 and 0.4: SGD (lr 1e-3) and Adam (lr 1e-3, default eps 1e-8). Prints the
parameter after the step. In float16, SGD updates below half of float16's spacing at 1.0
(2**-11, about 4.9e-4) round away, and Adam's `eps` underflows to zero, so a zero gradient
gives NaN and a small one -inf.

    python bench/cpu_half_training.py [--json]
"""

from __future__ import annotations

import argparse
import json

import torch

GRADIENTS = (0.0, 1e-3, 0.1, 0.4)


def step(optimizer: str, dtype: torch.dtype) -> list[float]:
    param = torch.nn.Parameter(torch.ones(len(GRADIENTS), dtype=dtype))
    opt = (
        torch.optim.SGD([param], lr=1e-3)
        if optimizer == "sgd"
        else torch.optim.Adam([param], lr=1e-3)
    )
    param.grad = torch.tensor(GRADIENTS, dtype=dtype)
    opt.step()
    return [float(v) for v in param.detach().float()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {
        f"{opt}/{name}": step(opt, dtype)
        for opt in ("sgd", "adam")
        for name, dtype in (("float32", torch.float32), ("float16", torch.float16))
    }
    if args.json:
        print(json.dumps({"gradients": GRADIENTS, "after_one_step": results}))
        return
    print(f"gradients: {GRADIENTS}")
    for key, values in results.items():
        print(f"{key:14s} " + "  ".join(f"{v:.6g}" for v in values))


if __name__ == "__main__":
    main()
