"""``torchdoctor run --profile``: a few steps under torch.profiler, PyTorch's own anti-pattern
matcher over them, each match reported at the user's line; the script's results unchanged; a
clear note (no crash) when the private matcher is missing or has changed."""

from __future__ import annotations

import json
from pathlib import Path

# Three of PyTorch's anti-patterns that fire on a CPU: a loop indexing a tensor element by
# element, zero_grad writing zeros, a Conv2d with a bias followed by BatchNorm2d.
SLOW = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(144, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 3, 8, 8)


def targets(n):
    y = torch.empty(n, 1)
    for i in range(n):
        y[i] = i % 3
    return y


for step in range(8):
    optimizer.zero_grad(set_to_none=False)
    loss = nn.functional.mse_loss(model(x), targets(16))
    loss.backward()
    optimizer.step()
    print(f"loss {loss.item():.8f}")
"""

FIXED = (
    SLOW.replace("nn.Conv2d(3, 4, 3)", "nn.Conv2d(3, 4, 3, bias=False)")
    .replace(
        "    y = torch.empty(n, 1)\n    for i in range(n):\n        y[i] = i % 3\n    return y\n",
        "    return (torch.arange(n) % 3).float().unsqueeze(1)\n",
    )
    .replace("optimizer.zero_grad(set_to_none=False)", "optimizer.zero_grad()")
)


def _write(tmp_path: Path, text: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _report(run_dir: Path) -> dict:
    return json.loads((run_dir / "report.json").read_text(encoding="utf-8"))


def test_profile_reports_the_matchers_patterns_at_the_users_lines(tmp_path, td, row) -> None:
    path = _write(tmp_path, SLOW)
    run = td("run", "--profile", "--output-format", "json", "--report", "out", str(path))
    assert run.code == 1, run.err
    found = {(f["code"], f["location"]["row"]): f for f in run.json()}
    loop = found[("TDR409", row(path, "for i in range(n):"))]
    assert "ForLoopIndexingPattern" in loop["message"]
    assert loop["location"]["column"] == 5
    assert loop["measured"] == {"count": 3, "steps": 3}
    zero = found[("TDR111", row(path, "optimizer.zero_grad(set_to_none=False)"))]
    assert "GradNotSetToNonePattern" in zero["message"]
    assert zero["measured"]["count"] == 3
    conv = found[("TDR409", row(path, "loss = nn.functional.mse_loss(model(x)"))]
    assert "Conv2dBiasFollowedByBatchNorm2dPattern" in conv["message"]
    assert conv["name"] == "profiler-anti-pattern"
    assert conv["url"].endswith("/run/#profile")
    assert zero["url"].endswith("/rules/TDR111/")
    profile = _report(tmp_path / "out")["profile"]
    assert profile["status"] == "ok"
    assert profile["steps"] == 3
    # On a CPU, the patterns that need CUDA are not run.
    assert set(profile["patterns"]) == {
        "GradNotSetToNonePattern",
        "ForLoopIndexingPattern",
        "Conv2dBiasFollowedByBatchNorm2dPattern",
    }


def test_the_fixed_twin_is_quiet(tmp_path, td) -> None:
    run = td(
        "run",
        "--profile",
        "--output-format",
        "json",
        "--report",
        "out",
        str(_write(tmp_path, FIXED)),
    )
    # Only the `.item()` logged every step (measured without the profiler) is left.
    assert [f["code"] for f in run.json()] == ["TDR408"], run.out
    assert _report(tmp_path / "out")["profile"]["status"] == "ok"


def test_without_profile_nothing_is_profiled(tmp_path, td) -> None:
    run = td("run", "--output-format", "json", "--report", "out", str(_write(tmp_path, SLOW)))
    assert {f["code"] for f in run.json()} <= {"TDR408"}, run.out
    assert "profile" not in _report(tmp_path / "out")


def test_profile_leaves_the_scripts_results_unchanged(tmp_path, td) -> None:
    path = _write(tmp_path, SLOW)
    plain = td("run", str(path))
    profiled = td("run", "--profile", "--profile-steps", "5", str(path))
    losses = [line for line in plain.out.splitlines() if line.startswith("loss ")]
    assert len(losses) == 8
    assert [line for line in profiled.out.splitlines() if line.startswith("loss ")] == losses
    assert "Profiled 5 steps under torch.profiler" in profiled.out


def test_text_sarif_html_and_chinese(tmp_path, td, row) -> None:
    path = _write(tmp_path, SLOW)
    text = td("run", "--profile", "--locale", "zh", "--report", "out", str(path))
    assert (
        f"train.py:{row(path, 'for i in range(n):')}:5: TDR409 PyTorch 性能分析器实测" in text.out
    )
    assert "性能分析：在 torch.profiler 下运行了 3 步" in text.out
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "性能分析：在 torch.profiler 下运行了 3 步" in page
    sarif = json.loads(td("run", "--profile", "--output-format", "sarif", str(path)).out)
    run = sarif["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["TDR409"]["name"] == "profiler-anti-pattern"
    assert "TDR111" in rules
    assert run["invocations"][0]["properties"]["profile"]["status"] == "ok"


def test_a_missing_matcher_is_a_note_not_a_crash(tmp_path, td) -> None:
    body = "import sys\nsys.modules['torch.profiler._pattern_matcher'] = None\n" + SLOW
    run = td("run", "--profile", "--report", "out", str(_write(tmp_path, body)))
    assert "Traceback" not in run.err
    assert (
        "anti-pattern matcher (the private module torch.profiler._pattern_matcher) is not usable"
        in run.out
    )
    assert "Ran " in run.out
    profile = _report(tmp_path / "out")["profile"]
    assert profile["status"] == "unavailable"
    assert "torch.profiler._pattern_matcher" in profile["detail"]


def test_a_changed_matcher_runs_what_is_left_and_says_what_is_missing(tmp_path, td, row) -> None:
    body = SLOW.replace(
        "torch.manual_seed(0)\n",
        "torch.manual_seed(0)\nimport torch.profiler._pattern_matcher as pm\n"
        "del pm.ForLoopIndexingPattern\n",
    )
    path = _write(tmp_path, body)
    run = td("run", "--profile", "--output-format", "json", "--report", "out", str(path))
    codes = {(f["code"], f["location"]["row"]) for f in run.json()}
    assert ("TDR111", row(path, "optimizer.zero_grad(set_to_none=False)")) in codes
    assert ("TDR409", row(path, "for i in range(n):")) not in codes
    profile = _report(tmp_path / "out")["profile"]
    assert profile["status"] == "ok"
    assert profile["detail"] == "missing: ForLoopIndexingPattern"


def test_too_few_steps_is_said(tmp_path, td) -> None:
    body = SLOW.replace("range(8)", "range(1)")
    run = td("run", "--profile", str(_write(tmp_path, body)))
    assert "too few optimizer steps" in run.out
    assert run.code == 0, run.err


def test_profile_steps_is_bounded(tmp_path, td) -> None:
    run = td("run", "--profile", "--profile-steps", "0", str(_write(tmp_path, FIXED)))
    assert run.code == 2
    assert "--profile-steps must be 1 to 20" in run.err


def test_a_script_profiling_itself_keeps_its_profiler(tmp_path, td) -> None:
    body = FIXED.split("for step in range(8):")[0] + (
        "with torch.profiler.profile() as own:\n"
        "    for step in range(8):\n"
        "        optimizer.zero_grad()\n"
        "        loss = nn.functional.mse_loss(model(x), targets(16))\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "print('own events', len(own.events()) > 0)\n"
    )
    run = td("run", "--profile", "--report", "out", str(_write(tmp_path, body)))
    assert "own events True" in run.out, run.out + run.err
    profile = _report(tmp_path / "out")["profile"]
    assert profile["status"] == "unavailable"
    assert "already running" in profile["detail"]
