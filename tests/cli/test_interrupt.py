"""Ctrl-C during ``check --fix``: the files fixed before it are counted, the others untouched.

The run is made to wait at a known file: a named pipe, which the CLI blocks on when it reads it.
The test waits until the files before it are fixed on disk, then sends SIGINT, so nothing depends
on timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SOURCE = (
    "import torch\n\nnet = torch.nn.Linear(2, 2)\nwith torch.cuda.amp.autocast():\n"
    "    y = net(torch.ones(2))\n"
)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("locale", ["en", "zh"])
def test_interrupted_fix_says_what_was_fixed(tmp_path: Path, locale: str) -> None:
    for name in ("a.py", "b.py", "d.py"):
        (tmp_path / name).write_text(SOURCE)
    os.mkfifo(tmp_path / "c.py")
    env = {**os.environ, "TORCHDOCTOR_LOCALE": locale}
    env.pop("CI", None)
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("torchdoctor")),
            "check",
            "--fix",
            "--no-cache",
            "a.py",
            "b.py",
            "c.py",
            "d.py",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while any("torch.cuda.amp" in (tmp_path / n).read_text() for n in ("a.py", "b.py")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "a.py and b.py were never fixed"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2
    assert "Traceback" not in err
    if locale == "en":
        assert "interrupted. Fixed 2 files (2 fixes); the other 2 files are untouched." in err
    else:
        assert "已中断。已修复 2 个文件（2 处修复）；其余 2 个文件未被修改。" in err
    assert (tmp_path / "d.py").read_text() == SOURCE
