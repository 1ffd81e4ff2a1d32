"""`torchdoctor probe`: JSON output and one-line errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.cli.main import main

TENSOR_KEYS = [
    "kind", "shape", "dtype", "device", "layout", "stride", "storage_offset", "is_contiguous",
    "channels_last", "is_view", "nbytes", "storage_nbytes", "requires_grad", "is_leaf",
    "grad_fn", "is_inference", "is_pinned",
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _cells(kernel) -> None:
    kernel.run(
        "import torch\na = torch.randn(4, 6)\nb = a.t()\n"
        "c = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)\n"
        "m = torch.nn.Linear(3, 2)\nn = 5"
    )


def _probe(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["probe", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_output(kernel, capsys) -> None:
    code, out, err = _probe(
        capsys, "--connection-file", kernel.connection_file, "a", "b", "m", "n", "zz",
        "--view", "b=-1", "--view", "c=8,-1", "--view", "a=2,-1",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["a", "b", "m", "n", "zz", "c"]
    assert list(data["a"]) == [*TENSOR_KEYS, "view_ok", "view_error"]
    assert data["a"]["view_ok"] is True and data["a"]["view_error"] is None
    assert data["b"]["stride"] == [1, 6] and data["b"]["view_ok"] is False
    assert data["b"]["view_error"].startswith("view size is not compatible")
    assert data["c"]["channels_last"] is True and data["c"]["view_ok"] is False
    assert data["m"] == {
        "kind": "module", "num_parameters": 8, "devices": ["cpu"], "dtypes": ["torch.float32"],
        "training": True,
    }  # fmt: skip
    assert data["n"] == {"kind": "other", "type": "int"}
    assert data["zz"] == {"kind": "missing"}


def test_entry_point_runs(kernel) -> None:
    exe = Path(sys.executable).with_name("torchdoctor")
    proc = subprocess.run(
        [str(exe), "probe", "-f", kernel.connection_file, "a"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["a"]["shape"] == [4, 6]


def _secret_connection_file(tmp_path: Path) -> tuple[Path, str]:
    ports = []
    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    key = "secret-key-0123456789abcdef"
    info = {
        "shell_port": ports[0], "iopub_port": ports[1], "stdin_port": ports[2],
        "control_port": ports[3], "hb_port": ports[4], "ip": "127.0.0.1", "key": key,
        "transport": "tcp", "signature_scheme": "hmac-sha256", "kernel_name": "python3",
    }  # fmt: skip
    path = tmp_path / "kernel-dead.json"
    path.write_text(json.dumps(info))
    return path, key


def test_dead_kernel(tmp_path: Path, capsys) -> None:
    path, key = _secret_connection_file(tmp_path)
    code, out, err = _probe(capsys, "--connection-file", str(path), "--timeout", "0.5", "a")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "does not answer" in err
    assert key not in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "connection file not found"),
        ("{not json", "not JSON"),
        ("[]", "not a Jupyter connection file"),
    ],
)
def test_bad_connection_file(tmp_path: Path, capsys, content: str | None, expected: str) -> None:
    path = tmp_path / "kernel-x.json"
    if content is not None:
        path.write_text(content)
    code, out, err = _probe(capsys, "--connection-file", str(path), "a")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and expected in err


def test_unreadable_connection_file(tmp_path: Path, capsys) -> None:
    path = tmp_path / "kernel-dir.json"
    path.mkdir()
    code, _out, err = _probe(capsys, "--connection-file", str(path), "a")
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [["a;import os"], ["a", "--view", "a=x"], ["a", "--view", "a"], ["a", "--view", "a()=1"], []],
)
def test_bad_arguments(kernel, capsys, args: list[str]) -> None:
    code, out, err = _probe(capsys, "--connection-file", kernel.connection_file, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("where", ["path", "name", "missing"])
def test_without_jupyter_client_the_fix_is_named(tmp_path: Path, where: str) -> None:
    import torchdoctor

    path, key = _secret_connection_file(tmp_path)
    target = {"path": str(path), "name": "kernel-1.json", "missing": str(tmp_path / "no.json")}
    server = Path(torchdoctor.__file__).resolve().parent.parent
    # -S: no site-packages, so jupyter-client is really missing; only torchdoctor is importable.
    proc = subprocess.run(
        [sys.executable, "-S", "-m", "torchdoctor", "probe", "-f", target[where], "a"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={"PYTHONPATH": str(server), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "jupyter-client" in lines[0] and "pip install 'torchdoctor[bridge]'" in lines[0]
    assert key not in proc.stderr
