"""`torchdoctor run` as a command: bounds, exit statuses, the script's own view of its process,
unchanged results, output formats, the report files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from torchdoctor.run.report import read_reports, reports_dir

LOSSES = """
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
for epoch in range(3):
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.10f}")
    scheduler.step()
    with torch.no_grad():
        print(f"eval {nn.functional.mse_loss(model(dataset.tensors[0]), dataset.tensors[1]).item():.10f}")
"""

FOREVER = """
import itertools

for step in itertools.count():
    optimizer.zero_grad()
    nn.functional.mse_loss(model(dataset.tensors[0]), dataset.tensors[1]).backward()
    optimizer.step()
"""


def test_the_script_computes_the_same_with_and_without_instrumentation(
    script, td, tmp_path
) -> None:
    path = script(LOSSES)
    plain = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    run = td("run", str(path))
    measured = [line for line in run.out.splitlines() if line.startswith(("loss ", "eval "))]
    assert len(measured) == 27
    assert measured == plain.stdout.splitlines()


def test_steps_stop_the_script_cleanly(script, td) -> None:
    run = td("run", "--steps", "3", "--output-format", "json", str(script(FOREVER)))
    assert run.code == 0, run.err
    report = read_reports(run.cwd)[0]
    assert (report.steps, report.stopped, report.exit_code) == (3, "steps", 0)
    assert [entry["step"] for entry in report.timeline] == [1, 2, 3]


def test_seconds_stop_a_training_loop_that_never_ends(script, td) -> None:
    run = td("run", "--seconds", "2", str(script(FOREVER)))
    assert run.code == 0, run.err
    assert "stopped at the time limit" in run.out
    report = read_reports(run.cwd)[0]
    assert (report.stopped, report.exit_code) == ("seconds", 0)
    assert len(report.timeline) == report.steps


def test_a_second_stop_request_neither_interrupts_the_ending_nor_replaces_its_reason(
    script, td
) -> None:
    # The alarm of --seconds and SIGTERM arrive while the run is already ending at --steps
    # (as when a step's time check and the alarm both fall due): the run ends as the first
    # request said, with its report.
    body = """
    import itertools
    import os
    import signal

    try:
        for step in itertools.count():
            optimizer.zero_grad()
            nn.functional.mse_loss(model(dataset.tensors[0]), dataset.tensors[1]).backward()
            optimizer.step()
    finally:
        os.kill(os.getpid(), signal.SIGALRM)
        os.kill(os.getpid(), signal.SIGTERM)
        print("unwound")
    """
    run = td("run", "--steps", "3", "--seconds", "600", str(script(body)))
    assert run.code == 0, run.err
    assert "unwound" in run.out
    report = read_reports(run.cwd)[0]
    assert (report.steps, report.stopped, report.exit_code) == (3, "steps", 0)


def test_seconds_stop_a_script_that_never_steps(script, td) -> None:
    run = td(
        "run",
        "--seconds",
        "1",
        str(script("import time\nwhile True:\n    time.sleep(0.01)\n", prelude=False)),
    )
    assert run.code == 0, run.err
    report = read_reports(run.cwd)[0]
    assert (report.stopped, report.steps) == ("seconds", 0)
    assert report.duration_s < 20


def test_the_scripts_exit_status_is_reported(script, td) -> None:
    run = td("run", str(script("import sys\nprint('bye')\nsys.exit(3)\n", prelude=False)))
    assert run.code == 1
    assert "exited with status 3" in run.err
    assert "bye" in run.out
    report = read_reports(run.cwd)[0]
    assert (report.exit_code, report.stopped) == (3, "error")


def test_a_crashing_script_shows_its_traceback_and_is_reported(script, td) -> None:
    path = script(TRAIN_THEN_CRASH)
    run = td("run", "--output-format", "json", str(path))
    assert run.code == 1
    assert "ValueError: diverged" in run.err
    assert f'File "{path}", line' in run.err
    assert run.json() == []  # stdout holds only the JSON
    report = read_reports(run.cwd)[0]
    assert (report.exit_code, report.stopped, report.steps) == (1, "error", 8)


TRAIN_THEN_CRASH = """
for x, y in loader:
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
print("not JSON")
raise ValueError("diverged")
"""


def test_the_script_runs_as_python_script_py_would_run_it(tmp_path, td) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "helper.py").write_text("VALUE = 'sibling module'\n")
    (folder / "show.py").write_text(
        "import sys, os\n"
        "import helper\n"
        "print(helper.VALUE)\n"
        "print(__name__, os.path.basename(__file__))\n"
        "print(sys.argv)\n"
        "print(sys.path[0] == os.path.dirname(os.path.realpath(__file__)))\n"
        "print(os.getcwd())\n"
        "print('_torchdoctor_run' in sys.modules, 'torchdoctor' in sys.modules)\n"
    )
    run = td("run", "--python", sys.executable, "proj/show.py", "--lr", "3", "-x")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[:6] == [
        "sibling module",
        "__main__ show.py",
        "['proj/show.py', '--lr', '3', '-x']",
        "True",
        str(tmp_path),
        "True False",
    ]


def test_children_the_script_leaves_running_are_stopped(script, td, tmp_path) -> None:
    pid_file = tmp_path / "child.pid"
    body = (
        "import subprocess\n"
        f"p = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
    )
    run = td("run", str(script(body, prelude=False)))
    assert run.code == 0, run.err
    pid = int(pid_file.read_text())
    status = Path(f"/proc/{pid}/status")
    # Gone, or a zombie waiting for init to reap it: not sleeping any more.
    assert not status.exists() or "State:\tZ" in status.read_text()


def test_json_output_shape(script, td) -> None:
    run = td("run", "--output-format", "json", str(script(EVAL)))
    assert run.code == 1
    (f,) = run.json()
    assert set(f) >= {
        "code",
        "name",
        "message",
        "summary",
        "filename",
        "location",
        "end_location",
        "url",
        "severity",
        "measured",
    }
    assert f["code"] == "TDR105"
    assert f["name"] == "eval-without-no-grad"
    assert os.path.isabs(f["filename"])
    assert f["url"].endswith("/rules/TDR105/")
    assert set(f["measured"]) >= {"bytes", "calls"}


EVAL = """
model.eval()
outputs = [model(x) for x, _ in loader]
"""


def test_sarif_output_shape(script, td) -> None:
    run = td("run", "--output-format", "sarif", str(script(EVAL)))
    assert run.code == 1
    sarif = json.loads(run.out)
    assert sarif["version"] == "2.1.0"
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "TDR105"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 12
    assert result["properties"]["measured"]["calls"] == 8
    assert [r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]] == ["TDR105"]


def test_text_output_in_chinese(script, td) -> None:
    run = td("run", "--locale", "zh", str(script(EVAL)))
    assert run.code == 1
    assert "train.py:12:12: TDR105 实测" in run.out
    assert "发现 1 个实测问题" in run.out


def test_report_is_written_to_the_project_cache_and_to_report_dir(tmp_path, script, td) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "src").mkdir()
    path = script(TRAIN_THEN_CRASH.split("print(")[0] + EVAL, name="src/train.py")
    run = td("run", "--report", "out", "src/train.py", cwd=tmp_path)
    assert run.code == 1, run.err
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    cached = reports_dir(tmp_path) / f"{key}.json"
    data = json.loads(cached.read_text())
    assert data["version"] == 1
    assert data["script"] == str(path.resolve())
    assert data["findings"][0]["code"] == "TDR105"
    assert data["findings"][0]["message_zh"] and data["findings"][0]["summary_zh"]
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == data
    page = (tmp_path / "out" / "index.html").read_text()
    assert page.count("<svg") == 2
    # One point per step on the memory plot, left to right.
    points = re.search(r'<polyline points="([^"]+)"', page)
    assert points is not None
    xs = [float(pair.split(",")[0]) for pair in points.group(1).split()]
    assert len(xs) == data["steps"] == 8
    assert xs == sorted(set(xs))
    assert "TDR105" in page
    assert "<script" not in page and "http" not in page.replace("https://json", "")


def test_usage_errors_exit_2(td) -> None:
    assert td("run", "missing.py").code == 2
    assert td("run").code == 2
    assert td("run", "--steps", "0", "x.py").code == 2


def test_interrupting_torchdoctor_stops_the_script_and_keeps_the_report(script, tmp_path) -> None:
    path = script(
        "import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.05)\n",
        prelude=False,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchdoctor", "run", str(path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"  # the script runs
    proc.send_signal(signal.SIGINT)  # Ctrl-C reaches torchdoctor, not the script's group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, out + err
    assert "stopped at an interruption" in out
    report = read_reports(tmp_path)[0]
    assert report.stopped == "interrupted"
