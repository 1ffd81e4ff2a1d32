"""Fixes of training steps (TDR107, TDR109, TDR110, TDR111, TDR402, TDR403, TDR405, TDR702),
run before and after."""

from __future__ import annotations

from pathlib import Path

import pytest
from behaviour_harness import ANY, Case, Programs, exercise

SETUP = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(4, 1, bias=False)
optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
xs = [torch.full((1, 4), float(i + 1)) for i in range(4)]
# %%
"""

ACCUMULATION = (
    SETUP
    + """\
for i, x in enumerate(xs):
    optimizer.zero_grad()
    model(x).sum().backward()
    if (i + 1) % 4 == 0:
        print("accumulated grad:", model.weight.grad.tolist())
        optimizer.step()
"""
)

CLIP_AFTER_STEP = (
    SETUP
    + """\
start = model.weight.detach().clone()
for x in xs[3:]:
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
print("update norm:", round((model.weight.detach() - start).norm().item(), 4))
"""
)

# Clipping before the backward pass clips the gradients zero_grad() has just cleared.
CLIP_BEFORE_BACKWARD = (
    SETUP
    + """\
start = model.weight.detach().clone()
for x in xs[3:]:
    optimizer.zero_grad()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
print("update norm:", round((model.weight.detach() - start).norm().item(), 4))
"""
)

CLIP_SCALED = (
    SETUP
    + """\
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
start = model.weight.detach().clone()
for x in xs[3:]:
    optimizer.zero_grad()
    scaler.scale(model(x).sum()).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
print("update norm:", round((model.weight.detach() - start).norm().item(), 6))
print("scale:", scaler.get_scale())
"""
)

# Backward inside autocast: the backward ops already run in the dtypes autocast chose for
# their forward ops, so moving the call out of the block changes no gradient.
BACKWARD_IN_AUTOCAST = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
x = torch.randn(4, 8)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
    loss = out.float().pow(2).mean()
    loss.backward()
# %%
for name, p in model.named_parameters():
    print(name, "grad:", p.grad.dtype, p.grad.flatten()[:3].tolist())
print("loss:", loss.item())
"""

# Even a backward that records its own graph (a gradient penalty) computes the same values.
DOUBLE_BACKWARD_IN_AUTOCAST = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = model(torch.randn(4, 8)).float().pow(2).mean()
    loss.backward(create_graph=True)
grad = model[0].weight.grad
print("grad:", grad.dtype, grad.flatten()[:4].tolist())
model.zero_grad()
grad.pow(2).sum().backward()
print("second order:", model[0].weight.grad.flatten()[:4].tolist())
"""

BACKWARD_IN_AUTOCAST_SCALED = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(8, 2)
scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(torch.randn(3, 8)).float().sum()
        scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
print("weight:", [round(v, 6) for v in model.weight.flatten().tolist()])
"""

# The optimizer steps with scaled gradients: the update is `scale` times too large.
SCALER_BYPASSED = (
    SETUP
    + """\
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
start = model.weight.detach().clone()
for x in xs[:2]:
    optimizer.zero_grad()
    scaler.scale(model(x).sum()).backward()
    optimizer.step()
print("update norm:", round((model.weight.detach() - start).norm().item(), 4))
"""
)

# `update()` without the step's inf check fails: the fixed code trains.
SCALER_BYPASSED_UPDATE = (
    SETUP
    + """\
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
start = model.weight.detach().clone()
try:
    for x in xs[:2]:
        optimizer.zero_grad()
        scaler.scale(model(x).sum()).backward()
        optimizer.step()
        scaler.update()
except AssertionError as exc:
    print("error:", exc)
else:
    print("error:", None)
print("update norm:", round((model.weight.detach() - start).norm().item(), 4))
"""
)

# Without `update()` the second `scaler.step()` raises.
SCALER_NO_UPDATE = (
    SETUP
    + """\
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
start = model.weight.detach().clone()
try:
    for x in xs[:2]:
        optimizer.zero_grad()
        scaler.scale(model(x).sum()).backward()
        scaler.step(optimizer)
except RuntimeError as exc:
    print("error:", exc)
else:
    print("error:", None)
print("update norm:", round((model.weight.detach() - start).norm().item(), 4))
"""
)

CHECKPOINT = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
block = nn.Linear(4, 4)
head = nn.Linear(4, 1)
x = torch.randn(2, 4)  # inputs without requires_grad
# %%
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    y = checkpoint(block, x)
    head(y).sum().backward()
print("block grad:", block.weight.grad is not None)
print("head grad:", head.weight.grad is not None)
print("output:", [round(v, 5) for v in head(y).flatten().tolist()])
"""

SCHEDULER = (
    SETUP
    + """\
import warnings
warnings.simplefilter("ignore")
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
lrs = []
for x in xs[:3]:
    scheduler.step()
    lrs.append(optimizer.param_groups[0]["lr"])
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
print("lr used:", lrs)
print("weight:", [round(v, 4) for v in model.weight.flatten().tolist()])
"""
)

ZERO_TO_NONE = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
# %%
for _ in range(3):
    optimizer.zero_grad(set_to_none=False)
    model(torch.randn(5, 3)).pow(2).mean().backward()
    optimizer.step()
print("weights:", [round(w, 6) for w in model.weight.flatten().tolist()])
optimizer.zero_grad(set_to_none=False)
print("grad after zero_grad:", None if model.weight.grad is None else "zeros")
"""

CASES = [
    # The unsafe fixes change training, to what the code intended.
    Case(
        "accumulate",
        "TDR107",
        ACCUMULATION,
        unsafe=True,
        changes={"accumulated grad": ("[[4.0, 4.0, 4.0, 4.0]]", "[[10.0, 10.0, 10.0, 10.0]]")},
    ),
    Case(
        "accumulate",
        "TDR107",
        ACCUMULATION,
        unsafe=True,
        notebook=True,
        changes={"accumulated grad": ("[[4.0, 4.0, 4.0, 4.0]]", "[[10.0, 10.0, 10.0, 10.0]]")},
    ),
    # |x| = 4 * 2: the unclipped update has norm 8, the clipped one 1.
    Case("clip", "TDR109", CLIP_AFTER_STEP, unsafe=True, changes={"update norm": ("8.0", "1.0")}),
    Case(
        "clip",
        "TDR109",
        CLIP_AFTER_STEP,
        unsafe=True,
        notebook=True,
        changes={"update norm": ("8.0", "1.0")},
    ),
    Case(
        "before-backward",
        "TDR109",
        CLIP_BEFORE_BACKWARD,
        unsafe=True,
        changes={"update norm": ("8.0", "1.0")},
    ),
    # Clipping the scaled gradient to norm 1, then unscaling by 1024, leaves a 1/1024 update.
    Case(
        "unscale",
        "TDR110",
        CLIP_SCALED,
        unsafe=True,
        changes={"update norm": ("0.000977", "1.0")},
    ),
    Case(
        "unscale",
        "TDR110",
        CLIP_SCALED,
        unsafe=True,
        notebook=True,
        changes={"update norm": ("0.000977", "1.0")},
    ),
    # The same training; `.grad` reads None instead of zeros between steps.
    Case(
        "set-to-none",
        "TDR111",
        ZERO_TO_NONE,
        unsafe=True,
        changes={"grad after zero_grad": ("zeros", "None")},
    ),
    Case(
        "set-to-none",
        "TDR111",
        ZERO_TO_NONE,
        unsafe=True,
        notebook=True,
        changes={"grad after zero_grad": ("zeros", "None")},
    ),
    Case("backward", "TDR402", BACKWARD_IN_AUTOCAST),
    Case("backward", "TDR402", BACKWARD_IN_AUTOCAST, notebook=True),
    Case("scaled-backward", "TDR402", BACKWARD_IN_AUTOCAST_SCALED),
    Case("double-backward", "TDR402", DOUBLE_BACKWARD_IN_AUTOCAST),
    # Replacing a bypassing `optimizer.step()` changes the update from scaled to unscaled
    # gradients: unsafe.
    Case("bypass", "TDR403", SCALER_BYPASSED, unsafe=True, changes={"update norm": (ANY, ANY)}),
    Case(
        "bypass",
        "TDR403",
        SCALER_BYPASSED,
        unsafe=True,
        notebook=True,
        changes={"update norm": (ANY, ANY)},
    ),
    # Where the code fails today, the fixes are safe.
    Case(
        "bypass-with-update",
        "TDR403",
        SCALER_BYPASSED_UPDATE,
        changes={
            "error": ("No inf checks were recorded prior to update.", "None"),
            "update norm": (ANY, ANY),
        },
    ),
    Case(
        "update",
        "TDR403",
        SCALER_NO_UPDATE,
        changes={
            "error": ("step() has already been called since the last update().", "None"),
            "update norm": (ANY, ANY),
        },
    ),
    # Non-reentrant checkpointing records the graph when no input requires grad: the block
    # starts training.
    Case(
        "reentrant",
        "TDR405",
        CHECKPOINT,
        unsafe=True,
        changes={"block grad": ("False", "True")},
    ),
    Case(
        "reentrant",
        "TDR405",
        CHECKPOINT,
        unsafe=True,
        notebook=True,
        changes={"block grad": ("False", "True")},
    ),
    # Each step uses the intended learning rate.
    Case(
        "order",
        "TDR702",
        SCHEDULER,
        unsafe=True,
        changes={"lr used": ("[0.5, 0.25, 0.125]", "[1.0, 0.5, 0.25]"), "weight": (ANY, ANY)},
    ),
    Case(
        "order",
        "TDR702",
        SCHEDULER,
        unsafe=True,
        notebook=True,
        changes={"lr used": ("[0.5, 0.25, 0.125]", "[1.0, 0.5, 0.25]"), "weight": (ANY, ANY)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.param_id for c in CASES])
def test_fix(case: Case, tmp_path: Path, programs: Programs) -> None:
    exercise(case, tmp_path, programs)
