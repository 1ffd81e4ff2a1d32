"""The checkpoint rules' fixes (TDR506, TDR601, TDR602, TDR603), run as programs: each program
saves and reloads checkpoints in a temporary directory with the installed (CPU) torch and prints
what it loaded; the real CLI applies the fixes (``check --fix``, then ``--unsafe-fixes``); the
program runs again. A safe fix leaves the output as it was (or changes only the effect its docs
name); an unsafe fix changes it only as its docs describe; the cases that must get no safe edit
(or no edit at all) leave the file as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SERVER = str(Path(__file__).resolve().parents[2] / "server")


def _run(program: Path, *paths: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", str(program), *paths],
        cwd=program.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _fix(program: Path, code: str, *extra: str) -> str:
    """Apply ``code``'s fixes with the CLI and return the file's new text."""
    env = {**os.environ, "PYTHONPATH": SERVER + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("CI", None)
    command = [sys.executable, "-m", "torchdoctor", "check", "--fix", "--select", code]
    proc = subprocess.run(
        [*command, *extra, program.name],
        cwd=program.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return program.read_text(encoding="utf-8")


def _write(tmp_path: Path, code: str) -> Path:
    program = tmp_path / "prog.py"
    program.write_text(code, encoding="utf-8")
    return program


MAP_LOCATION = """\
import sys
import torch
from torch import nn


def warm_start(net, path):
    # `device` is assigned below, after this function: map_location="cpu", not a NameError.
    net.load_state_dict(torch.load(path, weights_only=True))


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights, same_weights, features, same_features, out = sys.argv[1:6]

torch.manual_seed(0)
trained = nn.Linear(3, 2).to(device)
torch.save(trained.state_dict(), weights)
torch.save({"feats": torch.arange(6.0).reshape(2, 3)}, features)


class Predictor:
    def __init__(self):
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.net = nn.Linear(3, 2).to(self.device)

    def restore(self, path):
        self.net.load_state_dict(torch.load(path, weights_only=True))


def predict(path):
    net = nn.Linear(3, 2).to(device)
    net.load_state_dict(torch.load(path, weights_only=True))
    return net


def read_features(path):
    return torch.load(path, weights_only=True)["feats"]


net = predict(same_weights)
predictor = Predictor()
predictor.restore(same_weights)
first = nn.Linear(3, 2)
warm_start(first, same_weights)
x = read_features(same_features)
torch.save(net.state_dict(), out)
again = torch.load(out, weights_only=True)  # the file reads back what it saved: not reported
print(sorted(again), round(net(x).sum().item(), 5), round(predictor.net(x).sum().item(), 5))
print(round(first(x).sum().item(), 5), x.device.type)
"""


def test_tdr602_safe_fixes_keep_the_output(tmp_path: Path) -> None:
    program = _write(tmp_path, MAP_LOCATION)
    paths = [str(tmp_path / n) for n in ("w.pt", "w.pt", "f.pt", "f.pt", "out.pt")]
    before = _run(program, *paths)
    fixed = _fix(program, "TDR602")
    # A name bound where the load runs: the module's device, the class's own, else "cpu".
    assert "torch.load(path, weights_only=True, map_location=device)" in fixed
    assert "torch.load(path, weights_only=True, map_location=self.device)" in fixed
    assert 'net.load_state_dict(torch.load(path, weights_only=True, map_location="cpu"))' in fixed
    # The features are used as they load: no safe edit; the file's own round trip: no finding.
    assert 'return torch.load(path, weights_only=True)["feats"]' in fixed
    assert "again = torch.load(out, weights_only=True)  #" in fixed
    assert _run(program, *paths) == before
    unsafe = _fix(program, "TDR602", "--unsafe-fixes")
    assert 'torch.load(path, weights_only=True, map_location=device)["feats"]' in unsafe
    # On a CPU machine the features were on the CPU anyway: the output is the same.
    assert _run(program, *paths) == before


WHOLE_MODEL = """\
import sys
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(2, 2))
torch.save(net, sys.argv[1])
loaded = torch.load(sys.argv[1], weights_only=False)
print(type(loaded).__name__)

torch.save(net, sys.argv[2])
model = torch.load(sys.argv[2], weights_only=False)
model.eval()
print(round(model(torch.ones(1, 2)).sum().item(), 5))
"""


def test_tdr601_fix_changes_the_file_format_and_spares_loads_used_as_modules(
    tmp_path: Path,
) -> None:
    program = _write(tmp_path, WHOLE_MODEL)
    paths = [str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]
    before = _run(program, *paths)
    assert _fix(program, "TDR601") == WHOLE_MODEL  # unsafe: never applied by --fix alone
    fixed = _fix(program, "TDR601", "--unsafe-fixes")
    assert "torch.save(net.state_dict(), sys.argv[1])" in fixed
    # The second file is loaded back and used as a module: no edit, that load still works.
    assert "torch.save(net, sys.argv[2])" in fixed
    after = _run(program, *paths)
    first_before, second_before = before.splitlines()
    first_after, second_after = after.splitlines()
    # The documented difference: the file now holds a state dict, not the module.
    assert (first_before, first_after) == ("Sequential", "OrderedDict")
    assert second_after == second_before


WRAPPED = """\
import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.DataParallel(nn.Linear(2, 2))
torch.save(model.state_dict(), sys.argv[1])
sd = torch.load(sys.argv[1], weights_only=True)
print(round(sum(t.sum().item() for t in sd.values()), 5))
print(sorted(sd))
plain = nn.Linear(2, 2)
missing = plain.load_state_dict(sd, strict=False).missing_keys
print(sorted(missing))
"""


def test_tdr506_safe_fix_saves_the_same_tensors_without_the_prefix(tmp_path: Path) -> None:
    program = _write(tmp_path, WRAPPED)
    path = str(tmp_path / "m.pt")
    before = _run(program, path).splitlines()
    fixed = _fix(program, "TDR506")
    assert "torch.save(model.module.state_dict(), sys.argv[1])" in fixed
    after = _run(program, path).splitlines()
    assert after[0] == before[0]  # the same weights
    # The effect the docs name: the keys lose `module.`, and a plain model now loads them.
    assert before[1] == "['module.bias', 'module.weight']" and after[1] == "['bias', 'weight']"
    assert before[2] == "['bias', 'weight']" and after[2] == "[]"


WARM_START = """\
import os
import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.DataParallel(nn.Linear(2, 2))
if os.path.exists(sys.argv[2]):
    report = model.load_state_dict(torch.load(sys.argv[2], weights_only=True){strict})
    print("loaded", sorted(getattr(report, "missing_keys", [])))
with torch.no_grad():
    model.module.weight.fill_(2.0)
torch.save(model.state_dict(), sys.argv[1])
print(round(model.module.weight.sum().item(), 5))
"""


def _twice(program: Path, tmp_path: Path) -> list[str]:
    """Run, hand the checkpoint written to the next run as its initial weights, run again."""
    saved, init = tmp_path / "m.pt", tmp_path / "init.pt"
    for path in (saved, init):
        path.unlink(missing_ok=True)
    first = _run(program, str(saved), str(init))
    init.write_bytes(saved.read_bytes())
    return [first, _run(program, str(saved), str(init))]


def test_tdr506_a_load_into_the_wrapper_gets_no_safe_edit(tmp_path: Path) -> None:
    code = WARM_START.format(strict="")
    program = _write(tmp_path, code)
    before = _twice(program, tmp_path)
    assert "loaded []" in before[1]
    assert _fix(program, "TDR506") == code  # unsafe only
    fixed = _fix(program, "TDR506", "--unsafe-fixes")
    assert "torch.save(model.module.state_dict(), sys.argv[1])" in fixed
    # The documented difference: the strict load into the wrapper now misses `module.` keys.
    with pytest.raises(AssertionError, match="Missing key"):
        _twice(program, tmp_path)


def test_tdr506_a_lenient_load_into_the_wrapper_gets_no_edit(tmp_path: Path) -> None:
    code = WARM_START.format(strict=", strict=False")
    program = _write(tmp_path, code)
    assert "loaded []" in _twice(program, tmp_path)[1]
    # After the fix every such load would silently load nothing: no edit at all.
    assert _fix(program, "TDR506", "--unsafe-fixes") == code


RESUME = """\
import os
import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.DataParallel(nn.Linear(2, 2))
if os.path.exists(sys.argv[1]):
    model.load_state_dict(torch.load(sys.argv[1], weights_only=True))
    print("resumed")
torch.save(model.state_dict(), sys.argv[1])
"""


def test_tdr506_resuming_from_its_own_checkpoint_is_left_alone(tmp_path: Path) -> None:
    program = _write(tmp_path, RESUME)
    path = str(tmp_path / "m.pt")
    _run(program, path)
    assert _run(program, path) == "resumed\n"
    assert _fix(program, "TDR506", "--unsafe-fixes") == RESUME  # one format on both sides


HELPER = """\
import sys
import torch
from torch import nn
from helpers import restart_from_checkpoint

model = nn.DataParallel(nn.Linear(2, 2))
restart_from_checkpoint({source}, state_dict=model)
torch.save({{"state_dict": model.state_dict()}}, sys.argv[1])
print(round(model.module.weight.sum().item(), 5))
"""
HELPERS = """\
import os
import torch


def restart_from_checkpoint(path, state_dict):
    if os.path.exists(path):
        print(state_dict.load_state_dict(torch.load(path)["state_dict"], strict=False))
"""


def test_tdr506_wrapper_passed_to_an_unseen_helper_gets_no_safe_edit(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    # The helper resumes from the path the file saves: the file's own format, not reported.
    own = HELPER.format(source="sys.argv[1]")
    program = _write(tmp_path, own)
    assert _fix(program, "TDR506", "--unsafe-fixes") == own
    # From another path, the helper may load into the wrapper: unsafe.
    code = HELPER.format(source="sys.argv[2]")
    program = _write(tmp_path, code)
    saved, init = str(tmp_path / "c.pt"), str(tmp_path / "init.pt")
    _run(program, saved, init)
    Path(init).write_bytes(Path(saved).read_bytes())
    assert "<All keys matched successfully>" in _run(program, saved, init)
    assert _fix(program, "TDR506") == code
    _fix(program, "TDR506", "--unsafe-fixes")
    _run(program, saved, init)
    Path(init).write_bytes(Path(saved).read_bytes())
    # The documented difference: the helper's strict=False load now matches no key.
    assert "missing_keys=['module.weight', 'module.bias']" in _run(program, saved, init)


WEIGHTS_ONLY = """\
import argparse
import sys
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Linear(2, 2)
torch.save(net.state_dict(), sys.argv[1])
sd = torch.load(sys.argv[1])
print(sorted(sd))
torch.save({"args": argparse.Namespace(lr=0.1)}, sys.argv[2])
try:
    print(torch.load(sys.argv[2])["args"].lr)
except Exception as error:
    print("refused", type(error).__name__)


def cached(items, path):
    torch.save(items, path)
    return torch.load(path, weights_only=False)  # its own objects: not reported


print(cached(argparse.Namespace(n=3), sys.argv[3]).n)
"""


def test_tdr603_fix_keeps_state_dicts_loading(tmp_path: Path) -> None:
    program = _write(tmp_path, WEIGHTS_ONLY)
    paths = [str(tmp_path / n) for n in ("a.pt", "b.pt", "c.pt")]
    before = _run(program, *paths)
    target = ("--target-version", "2.5")
    assert _fix(program, "TDR603", *target) == WEIGHTS_ONLY  # unsafe only
    fixed = _fix(program, "TDR603", "--unsafe-fixes", *target)
    assert "sd = torch.load(sys.argv[1], weights_only=True)" in fixed
    assert 'print(torch.load(sys.argv[2], weights_only=True)["args"].lr)' in fixed
    assert "return torch.load(path, weights_only=False)  #" in fixed
    after = _run(program, *paths)
    # The installed torch already defaults to weights_only=True: the state dict loads as
    # before and the Namespace is refused as before; before 2.6 the fix makes the second
    # load refuse what it used to unpickle (the difference its docs describe).
    assert after == before
    assert "refused UnpicklingError" in after


SOMETIMES_WRAPPED = """\
import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(2, 2)
if sys.argv[2] == "parallel":
    model = nn.DataParallel(model)
torch.save(model.state_dict(), sys.argv[1])
sd = torch.load(sys.argv[1], weights_only=True)
print(round(sum(t.sum().item() for t in sd.values()), 5))
print(sorted(sd))
"""


def test_tdr506_a_model_wrapped_on_some_runs_saves_one_format(tmp_path: Path) -> None:
    program = _write(tmp_path, SOMETIMES_WRAPPED)
    path = str(tmp_path / "m.pt")
    before = {how: _run(program, path, how).splitlines() for how in ("plain", "parallel")}
    assert _fix(program, "TDR506") == SOMETIMES_WRAPPED  # unsafe only
    fixed = _fix(program, "TDR506", "--unsafe-fixes")
    assert 'torch.save(getattr(model, "module", model).state_dict(), sys.argv[1])' in fixed
    after = {how: _run(program, path, how).splitlines() for how in ("plain", "parallel")}
    assert before["plain"] == after["plain"]  # a run without the wrapper is unchanged
    # The documented effect: the wrapped run saves the same weights under the plain keys.
    assert after["parallel"][0] == before["parallel"][0]
    assert before["parallel"][1] == "['module.bias', 'module.weight']"
    assert after["parallel"][1] == "['bias', 'weight']" == after["plain"][1]
