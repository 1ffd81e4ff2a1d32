"""TDR101 follows a transposed tensor's layout through elementwise operations, copies and
slices: against torch's own ``view`` on CPU tensors, the rule reports a view exactly when it
raises. And its fix of the top-k accuracy helper, applied by the real CLI, gives the numbers a
contiguous copy gives. (The linter never imports torch; tests may.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import torchdoctor
from torchdoctor.linter.runner import check_text

torch = pytest.importorskip("torch")

# The body of ``f(x, t)``, with ``x`` of shape (8, 5) and ``t`` of shape (5, 8).
BODIES = [
    "return x.t().eq(t).view(-1)",
    "return t.eq(x.t()).view(-1)",
    "return (x.t() + t).view(-1)",
    "return (t + x.t()).view(-1)",
    "return (x.t() > 0).view(-1)",
    "return (2 * x.t()).view(-1)",
    "return (1 - x.t()).view(-1)",
    "return (-x.t()).view(-1)",
    "return (~(x.t() > 0)).view(-1)",
    "return x.t().float().view(-1)",
    "return x.t().type(torch.int32).view(-1)",
    "return x.t().detach().bool().view(-1)",
    "return x.t().clone().view(-1)",
    "return x.t().clone(memory_format=torch.contiguous_format).view(-1)",
    "return x.t().contiguous().view(-1)",
    "return x.t().sum(0).view(-1)",
    "return x.t().softmax(1).view(-1)",
    "return x.t().masked_fill(x.t() > 0, 0).view(-1)",
    "return (x.expand(2, 8, 5) + 1).view(-1)",
    "c = x.t().eq(t)\n    return c[:3].view(-1)",
    "c = x.t().eq(t)\n    return c[:3, :].float().view(-1)",
    "c = x.t().eq(t)\n    return c[:1].view(-1)",
    "c = x.t().eq(t)\n    return c[1:2].view(-1)",
    "c = x.t().eq(t)\n    return c[0].view(-1)",
    "c = x.t().eq(t)\n    return c[..., :4].view(-1)",
    "c = x.t().eq(t)\n    return c[:, :1].view(-1)",
    "c = x.t().eq(t)\n    return c[:3].view(3, 8)",
    "c = x.t()\n    c = c.contiguous()\n    return c[:3].view(-1)",
    "c = x.t()\n    return [c[:k].view(-1) for k in (2, 3)]",
]


def _raises(body: str) -> bool:
    scope: dict[str, object] = {"torch": torch}
    exec(f"def f(x, t):\n    {body}\n", scope)
    try:
        scope["f"](torch.randn(8, 5), torch.randn(5, 8))  # type: ignore[operator]
    except RuntimeError as error:
        assert "view size is not compatible" in str(error)
        return True
    return False


@pytest.mark.parametrize("body", BODIES)
def test_reported_exactly_when_the_view_fails(body: str) -> None:
    result = check_text(
        f"import torch\ndef f(x, t):\n    {body}\n", "x.py", codes=frozenset({"TDR101"})
    )
    assert not result.errors, result.errors
    assert any(f.code == "TDR101" for f in result.findings) == _raises(body)


ACCURACY = """\
import torch


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].view(-1).float().sum(0, keepdim=True)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


def reference(output, target, k):
    top = output.topk(k, 1, True, True)[1]
    return (top == target[:, None]).any(1).float().mean().item() * 100


torch.manual_seed(0)
output, target = torch.randn(64, 10), torch.randint(0, 10, (64,))
print([round(a.item(), 4) for a in accuracy(output, target, topk=TOPK)])
print([round(reference(output, target, k), 4) for k in TOPK])
"""


def _run(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    server = str(Path(torchdoctor.__file__).resolve().parents[1])
    env = {**os.environ, "TORCHDOCTOR_LOCALE": ""}
    env["PYTHONPATH"] = os.pathsep.join([server, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("topk", ["(1,)", "(1, 5)"])
def test_fix_of_the_accuracy_helper(tmp_path: Path, topk: str) -> None:
    path = tmp_path / "acc.py"
    path.write_text(ACCURACY.replace("TOPK", topk))
    before = _run(path, path.name)
    fix = _run(path, "-m", "torchdoctor", "check", "--no-cache", "--fix", "--select", "TDR101",
               path.name)  # fmt: skip
    assert fix.returncode in (0, 1), fix.stdout + fix.stderr
    assert ".reshape(-1)" in path.read_text()
    after = _run(path, path.name)
    assert after.returncode == 0, after.stderr[-2000:]
    got, expected = after.stdout.splitlines()
    assert got == expected
    if topk == "(1,)":  # the view of one row worked: the fix changes nothing
        assert before.stdout == after.stdout
    else:  # the view of five rows raised
        assert "view size is not compatible" in before.stderr


# A permutation, then a view whose sizes are the tensor's own dimensions, named by unpacking
# ``x.shape`` (before a slice that keeps them whole, where ``sliced``) and a ``-1`` that merges
# the rest.
NAMED = [
    ("(0, 2, 1, 3, 4)", "(-1, c, 1, h, w)", True),
    ("(0, 2, 1, 3, 4)", "(b, -1, h, w)", True),
    ("(0, 2, 1, 3, 4)", "(-1, c, h, w)", False),
    ("(0, 2, 1, 3, 4)", "(b, f, c, -1)", False),
    ("(0, 3, 4, 1, 2)", "(b, h, w, -1)", False),
    ("(1, 0, 2, 3, 4)", "(-1, h, w)", False),
    ("(0, 1, 3, 4, 2)", "(b, c, -1)", True),
]


@pytest.mark.parametrize(("order", "view", "sliced"), NAMED)
def test_named_sizes_reported_exactly_when_the_view_fails(
    order: str, view: str, sliced: bool
) -> None:
    code = (
        "import torch\ndef f(x):\n    b, c, f, h, w = x.shape\n"
        + ("    x = x[:, :, 1:]\n" if sliced else "")
        + f"    return x.permute{order}.view{view}\n"
    )
    result = check_text(code, "x.py", codes=frozenset({"TDR101"}))
    assert not result.errors, result.errors
    scope: dict[str, object] = {"torch": torch}
    exec(code, scope)
    try:
        scope["f"](torch.empty(2, 3, 4, 5, 6, device="meta"))  # type: ignore[operator]
        fails = False
    except RuntimeError as error:
        assert "view size is not compatible" in str(error)
        fails = True
    assert any(f.code == "TDR101" for f in result.findings) == fails


ALTERNATIVE = """\
import torch
def f(x, t):
    a = (x.t() > 0).view(-1)
    b = (x.t() + t).view(-1)
    c = (x.movedim(0, 1)
         .view(-1))
    return torch.cat([a.float(), b, c])
"""


def test_contiguous_fix_goes_before_the_view_outside_parentheses() -> None:
    from torchdoctor.core.fixes import apply_edits

    result = check_text(ALTERNATIVE, "x.py", codes=frozenset({"TDR101"}))
    assert len(result.findings) == 3
    edits = [edit for f in result.findings for edit in f.fixes[1].edits]
    fixed = apply_edits(ALTERNATIVE, edits)
    assert "(x.t() > 0).contiguous().view(-1)" in fixed
    assert not check_text(fixed, "x.py", codes=frozenset({"TDR101"})).findings
    scope: dict[str, object] = {"torch": torch}
    exec(fixed, scope)
    x, t = torch.randn(3, 4), torch.randn(4, 3)
    out = scope["f"](x, t)  # type: ignore[operator]
    expected = torch.cat(
        [(x.t() > 0).reshape(-1).float(), (x.t() + t).reshape(-1), x.t().reshape(-1)]
    )
    assert torch.equal(out, expected)
