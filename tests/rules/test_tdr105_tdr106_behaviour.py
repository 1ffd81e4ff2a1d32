"""The fixes of TDR105 (wrap evaluation in ``torch.no_grad()``) and TDR106 (``no_grad`` ->
``inference_mode``), proved on small CPU torch programs.

Each program prints what it computes (losses, accuracies, samples). The test runs it, applies the
fix with the real CLI (``python -m torchdoctor check --fix [--unsafe-fixes]``), checks that the
file changed as expected, and runs it again: a fix must not change a single printed digit.

The other programs are the ones where an edit would change behaviour (an attack or a helper that
differentiates in the loop, results that reach a backward pass later, tensors made under
``inference_mode`` that would be saved for backward). There the test shows that the edit the
rule does not offer really breaks the program, and that the CLI leaves the file alone (or, for
an attack in the loop, wraps only the forward statements)."""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.core.model import Finding
from torchdoctor.linter.runner import check_any

torch = pytest.importorskip("torch")

COMMON = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x_all = torch.randn(64, 8)
y_all = (x_all.sum(1) > 0).long()
train_loader = DataLoader(TensorDataset(x_all[:48], y_all[:48]), batch_size=16)
test_loader = DataLoader(TensorDataset(x_all[48:], y_all[48:]), batch_size=8)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()


def train_one_epoch():
    model.train()
    for inputs, labels in train_loader:
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
    return loss.item()
"""

# TDR105: the whole loop of an evaluation function is wrapped; training goes on after it.
EVALUATE = (
    COMMON
    + """

def evaluate(model, loader):
    model.eval()
    total_loss, correct, seen = 0.0, 0, 0
    for inputs, labels in loader:
        inputs, labels = inputs.to(device), labels.to(device)
        logits = model(inputs)
        total_loss += criterion(logits, labels).item() * labels.size(0)
        correct += (logits.argmax(1) == labels).sum().item()
        seen += labels.size(0)
    return total_loss / seen, correct / seen


for epoch in range(3):
    train_loss = train_one_epoch()
    val_loss, val_acc = evaluate(model, test_loader)
    print(f"epoch {epoch} train {train_loss!r} val {val_loss!r} acc {val_acc!r}")
"""
)

# TDR105: one generator forward per epoch whose output is kept (every epoch's graph would stay
# alive); the statement is wrapped inside the epoch loop, between eval() and train().
SAMPLES = """\
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
G = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).to(device)
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-2)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-2)
bce = nn.BCEWithLogitsLoss()
real = torch.randn(32, 2, device=device) * 0.5 + 1.0
fixed_z = torch.randn(5, 4, device=device)
samples = []
for epoch in range(4):
    for step in range(3):
        z = torch.randn(32, 4, device=device)
        d_loss = bce(D(real), torch.ones(32, 1)) + bce(D(G(z).detach()), torch.zeros(32, 1))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = bce(D(G(z)), torch.ones(32, 1))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
    G.eval()
    samples.append(G(fixed_z))
    G.train()
    print(epoch, repr(d_loss.item()), repr(g_loss.item()))
print(torch.stack(samples).sum(dim=(1, 2)).tolist())
"""

# TDR105 in a script that never binds `torch` itself: the fix adds `import torch`.
IMPORT_ADDED = """\
from torch import manual_seed, nn, randn
from torch.utils.data import DataLoader, TensorDataset

manual_seed(0)
device = "cpu"
model = nn.Linear(3, 2).to(device)
model.eval()
loader = DataLoader(TensorDataset(randn(20, 3)), batch_size=5)
total = 0.0
for (batch,) in loader:
    total += model(batch.to(device)).sum().item()
print(repr(total))
"""

ATTACKS = """\
import torch
import torch.nn.functional as F


def fgsm(model, x, y, eps):
    x = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(F.cross_entropy(model(x), y), x)
    return (x + eps * grad.sign()).detach()
"""

# TDR105: the loop also runs an attack that needs autograd. In a module the analysis cannot see
# into, wrapping the loop would break it: the fix wraps the two forward statements only.
ATTACK_IN_LOOP = (
    COMMON
    + """
from attacks import fgsm

for epoch in range(2):
    train_one_epoch()
model.eval()
clean = adv = 0
for inputs, labels in test_loader:
    inputs, labels = inputs.to(device), labels.to(device)
    adv_inputs = fgsm(model, inputs, labels, eps=0.5)
    clean += (model(inputs).argmax(1) == labels).sum().item()
    adv += (model(adv_inputs).argmax(1) == labels).sum().item()
print("clean", clean, "adversarial", adv)
"""
)

SALIENCY = """\
import torch


def weight_saliency(logits, model):
    grads = torch.autograd.grad(logits.max(1).values.sum(), list(model.parameters()))
    return sum(g.abs().sum().item() for g in grads)
"""

# TDR105: the model's output goes to a helper which differentiates it. Where the analysis cannot
# see the helper it reports (it cannot tell) with no edit; where it can, it is silent.
OUTPUT_TO_HELPER = (
    COMMON
    + """
from saliency import weight_saliency

train_one_epoch()
model.eval()
for inputs, labels in test_loader:
    logits = model(inputs.to(device))
    print(repr(weight_saliency(logits, model)))
"""
)

# TDR105: what the loop over the validation loader computes is backpropagated later, through
# the function's return: the backbone is trained by it. Not reported, nothing to edit.
REACHES_BACKWARD = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
val_loader = DataLoader(TensorDataset(torch.randn(12, 4)), batch_size=4)
backbone = nn.Linear(4, 4).to(device)
head = nn.Linear(4, 1).to(device)
opt = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1)


def embed(model, val_loader):
    feats = []
    for (inputs,) in val_loader:
        feats.append(model(inputs.to(device)))
    return torch.cat(feats)


for step in range(3):
    loss = head(embed(backbone, val_loader)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, repr(loss.item()), repr(backbone.weight.sum().item()))
"""

# TDR106: a no_grad evaluation block whose results are plain numbers; training goes on after it
# with the same model, so no inference tensor may leak into it.
INFERENCE_OK = (
    COMMON
    + """

for epoch in range(3):
    train_loss = train_one_epoch()
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in test_loader:
            correct += (model(xb.to(device)).argmax(1) == yb.to(device)).sum().item()
    print(f"epoch {epoch} train {train_loss!r} correct {correct}")
"""
)

# TDR106: a decorated sampler returns a tensor that its caller only prints; training goes on.
DECORATED_SAMPLER = (
    COMMON
    + """

@torch.no_grad()
def sample(n):
    model.eval()
    x = torch.zeros(n, 8, device=device)
    for _ in range(3):
        x = x + model(x).softmax(1).repeat(1, 4)
    model.train()
    return x


for epoch in range(3):
    train_loss = train_one_epoch()
    images = torch.cat([sample(2) for _ in range(2)])
    print(f"epoch {epoch} train {train_loss!r} sample {images.sum().item()!r}")
"""
)

# TDR106: a decorated function makes the targets of a loss; inference_mode would make the
# backward raise. Not reported.
DECORATED_TEACHER = """\
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
teacher = nn.Linear(4, 3)
student = nn.Linear(4, 3)
opt = torch.optim.SGD(student.parameters(), lr=0.1)


@torch.no_grad()
def targets(x):
    return teacher(x).softmax(-1)


for step in range(3):
    x = torch.randn(8, 4)
    t = targets(x)
    loss = F.mse_loss(student(x).softmax(-1), t)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, repr(loss.item()))
"""

# TDR106: tensors made in the block reach a backward pass later; inference_mode would make the
# backward raise. None of them is reported.
DETACHED_FEATURES = """\
import torch
from torch import nn

torch.manual_seed(0)
backbone = nn.Linear(4, 4)
head = nn.Linear(4, 1)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
x = torch.randn(8, 4)
with torch.no_grad():
    feats = backbone(x).detach()
for step in range(3):
    loss = head(feats).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, repr(loss.item()))
"""

CACHED_BY_HELPER = """\
import torch
from torch import nn

torch.manual_seed(0)
teacher = nn.Linear(4, 4)
head = nn.Linear(4, 1)
cache = []


def remember(t):
    cache.append(t)


with torch.no_grad():
    for _ in range(3):
        remember(teacher(torch.randn(2, 4)))
loss = sum(head(t).pow(2).mean() for t in cache)
loss.backward()
print(repr(loss.item()), repr(head.weight.grad.sum().item()))
"""

ENABLE_GRAD_HELPER = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)


def input_gradient_norm(model, x):
    with torch.enable_grad():
        x = x.clone().requires_grad_()
        model(x).sum().backward()
    return x.grad.norm().item()


with torch.no_grad():
    print(repr(input_gradient_norm(model, torch.randn(3, 4))))
"""


# ---- helpers ----------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = {**os.environ, "TORCHDOCTOR_LOCALE": ""}
    env.pop("CI", None)
    return env


def _execute(path: Path) -> tuple[str, BaseException | None]:
    """Run the program as ``__main__`` in this process (torch is imported once for all the
    programs), on the CPU, with its folder first on ``sys.path``: what it prints, and the
    exception it ended with."""
    out = io.StringIO()
    saved_path, saved_cwd = list(sys.path), os.getcwd()
    local = {p.stem for p in path.parent.glob("*.py")}
    for name in local:
        sys.modules.pop(name, None)
    sys.path.insert(0, str(path.parent))
    os.chdir(path.parent)
    error: BaseException | None = None
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(path), run_name="__main__")
    except Exception as exc:  # the programs that must fail
        error = exc
    finally:
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        for name in local:
            sys.modules.pop(name, None)
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    return out.getvalue(), error


def _run(path: Path) -> str:
    """Run the program; what it prints."""
    printed, error = _execute(path)
    assert error is None, repr(error)
    assert printed.strip(), "the program printed nothing"
    return printed


def _crash(path: Path) -> str:
    """Run a program that must fail; its error."""
    printed, error = _execute(path)
    assert error is not None, printed
    return str(error)


def _fix(path: Path, rule: str, *, unsafe: bool = False) -> subprocess.CompletedProcess[str]:
    """The real CLI: ``python -m torchdoctor check --fix [--unsafe-fixes] --select RULE file``."""
    args = ["check", "--fix", "--no-cache", "--select", rule, path.name]
    if unsafe:
        args.insert(2, "--unsafe-fixes")
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=180,
    )


def _findings(path: Path, rule: str) -> list[Finding]:
    result = check_any(path.read_text(), str(path), codes=frozenset({rule}))
    return [f for f in result.findings if f.code == rule]


# Put on the path at run time: a package the analysis cannot read (not under the project).
OUTSIDE = (
    "import os, sys\n"
    "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'site'))\n"
)


def _write(tmp_path: Path, code: str, *, outside: bool = False, **modules: str) -> Path:
    """The program ``main.py`` and its modules: next to it (modules of the project, which the
    analysis reads), or with ``outside`` in a folder the program puts on ``sys.path`` itself."""
    folder = tmp_path / "site" if outside else tmp_path
    folder.mkdir(exist_ok=True)
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    path = tmp_path / "main.py"
    path.write_text(OUTSIDE + code if outside else code)
    return path


def _fixed_keeps_output(
    tmp_path: Path,
    code: str,
    rule: str,
    *,
    unsafe: bool = False,
    outside: bool = False,
    **modules: str,
) -> str:
    """Apply the rule's fix with the CLI and check the program prints the same; the new code."""
    path = _write(tmp_path, code, outside=outside, **modules)
    before = _run(path)
    result = _fix(path, rule, unsafe=unsafe)
    fixed = path.read_text()
    assert fixed != code, result.stdout + result.stderr
    assert "Fixed 1 finding." in result.stdout, result.stdout + result.stderr
    assert _run(path) == before
    assert _findings(path, rule) == [], "the fixed code is reported again"
    return fixed


# ---- TDR105: safe fixes keep every printed digit -----------------------------------------------
def test_tdr105_wraps_the_evaluation_loop_and_keeps_the_metrics(tmp_path: Path) -> None:
    fixed = _fixed_keeps_output(tmp_path, EVALUATE, "TDR105")
    assert (
        "    with torch.no_grad():\n"
        "        for inputs, labels in loader:\n"
        "            inputs, labels = inputs.to(device), labels.to(device)\n"
        "            logits = model(inputs)\n"
    ) in fixed


def test_tdr105_wraps_the_kept_sample_and_keeps_the_gan_training(tmp_path: Path) -> None:
    fixed = _fixed_keeps_output(tmp_path, SAMPLES, "TDR105")
    assert (
        "    G.eval()\n    with torch.no_grad():\n        samples.append(G(fixed_z))\n    G.train()\n"
    ) in fixed


def test_tdr105_adds_the_import_it_needs(tmp_path: Path) -> None:
    fixed = _fixed_keeps_output(tmp_path, IMPORT_ADDED, "TDR105")
    # Where isort puts it: first in the block that imports from torch.
    assert fixed.startswith("import torch\nfrom torch import manual_seed, nn, randn\n")
    assert "with torch.no_grad():\n    for (batch,) in loader:\n" in fixed


def test_tdr105_wraps_only_the_forwards_when_the_loop_runs_an_attack(tmp_path: Path) -> None:
    fixed = _fixed_keeps_output(tmp_path, ATTACK_IN_LOOP, "TDR105", outside=True, attacks=ATTACKS)
    assert "    adv_inputs = fgsm(model, inputs, labels, eps=0.5)\n" in fixed  # not wrapped
    assert (
        "    with torch.no_grad():\n"
        "        clean += (model(inputs).argmax(1) == labels).sum().item()\n"
        "    with torch.no_grad():\n"
        "        adv += (model(adv_inputs).argmax(1) == labels).sum().item()\n"
    ) in fixed
    # Why the loop itself must not be wrapped: the attack then cannot differentiate.
    whole = ATTACK_IN_LOOP.replace(
        "for inputs, labels in test_loader:\n",
        "with torch.no_grad():\n  for inputs, labels in test_loader:\n",
    )
    path = _write(tmp_path, whole, outside=True)
    assert "does not require grad" in _crash(path)


def test_tdr105_leaves_a_loop_alone_that_runs_an_attack_of_the_project(tmp_path: Path) -> None:
    # The attack is a module of the project: its summary says it differentiates, so the loop
    # is not evaluation-only (as for an attack defined in the same file).
    path = _write(tmp_path, ATTACK_IN_LOOP, attacks=ATTACKS)
    before = _run(path)
    assert _findings(path, "TDR105") == []
    _fix(path, "TDR105")
    assert path.read_text() == ATTACK_IN_LOOP
    assert _run(path) == before


def test_tdr105_is_silent_when_the_output_goes_to_project_code_that_differentiates_it(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, OUTPUT_TO_HELPER, saliency=SALIENCY)
    assert _findings(path, "TDR105") == []


# ---- TDR105: no edit where one would change behaviour ------------------------------------------
def test_tdr105_offers_no_edit_when_the_output_goes_to_code_it_cannot_see(tmp_path: Path) -> None:
    path = _write(tmp_path, OUTPUT_TO_HELPER, outside=True, saliency=SALIENCY)
    before = _run(path)
    assert len(_findings(path, "TDR105")) == 1  # reported: the analysis cannot tell
    result = _fix(path, "TDR105")
    assert path.read_text() == OUTSIDE + OUTPUT_TO_HELPER, result.stdout
    assert _run(path) == before
    wrapped = OUTPUT_TO_HELPER.replace(
        "    logits = model(inputs.to(device))\n",
        "    with torch.no_grad():\n        logits = model(inputs.to(device))\n",
    )
    path.write_text(OUTSIDE + wrapped)
    assert "does not require grad" in _crash(path)


def test_tdr105_is_silent_when_the_results_reach_a_backward_pass(tmp_path: Path) -> None:
    path = _write(tmp_path, REACHES_BACKWARD)
    before = _run(path)
    assert _findings(path, "TDR105") == []
    _fix(path, "TDR105")
    assert path.read_text() == REACHES_BACKWARD
    assert _run(path) == before
    # Wrapping the loop would silently stop training the backbone.
    wrapped = REACHES_BACKWARD.replace(
        "    for (inputs,) in val_loader:\n        feats.append",
        "    with torch.no_grad():\n      for (inputs,) in val_loader:\n        feats.append",
    )
    path.write_text(wrapped)
    assert _run(path) != before


# ---- TDR106 ------------------------------------------------------------------------------------
def test_tdr106_switches_to_inference_mode_and_keeps_training(tmp_path: Path) -> None:
    path = _write(tmp_path, INFERENCE_OK)
    assert _fix(path, "TDR106").returncode == 1  # unsafe: not applied without the flag
    assert path.read_text() == INFERENCE_OK
    fixed = _fixed_keeps_output(tmp_path, INFERENCE_OK, "TDR106", unsafe=True)
    assert "    with torch.inference_mode():\n        for xb, yb in test_loader:\n" in fixed


def test_tdr106_switches_a_decorator_and_keeps_training(tmp_path: Path) -> None:
    fixed = _fixed_keeps_output(tmp_path, DECORATED_SAMPLER, "TDR106", unsafe=True)
    assert "@torch.inference_mode()\ndef sample(n):\n" in fixed


@pytest.mark.parametrize(
    "code",
    [DETACHED_FEATURES, CACHED_BY_HELPER, ENABLE_GRAD_HELPER, DECORATED_TEACHER],
    ids=["detached-features", "cached-by-helper", "enable-grad-helper", "decorated-teacher"],
)
def test_tdr106_offers_no_edit_when_tensors_of_the_block_reach_autograd(
    tmp_path: Path, code: str
) -> None:
    path = _write(tmp_path, code)
    before = _run(path)
    assert _findings(path, "TDR106") == []
    _fix(path, "TDR106", unsafe=True)
    assert path.read_text() == code
    assert _run(path) == before
    # The edit the rule holds back would break the program.
    path.write_text(code.replace("torch.no_grad()", "torch.inference_mode()"))
    error = _crash(path)
    assert "Inference tensors cannot be saved for backward" in error or (
        "does not require grad" in error
    )
