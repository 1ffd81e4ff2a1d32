"""No module of the workspace runs when torchdoctor's language server starts.

A cloned repository may hold a ``json.py``, ``typing_extensions.py`` or ``pygls.py``. Each entry
point that starts the server from the workspace is run here in a folder that holds a module of
every standard-library name, of torchdoctor's dependencies and of torchdoctor itself, each of which
leaves a mark when imported; the server must lint a document and leave no mark: its own
``torchdoctor server`` script, the command the jupyter-lsp spec declares (and a real Jupyter server
that runs it through jupyter-lsp), and the JupyterLab extension's relay in a real Jupyter server.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_helpers import (
    LINTED_SOURCE as SOURCE,
)
from jupyter_helpers import (
    START_TIMEOUT_S,
    lint_over_websocket,
    running_jupyter,
)

from torchdoctor import jupyter_lsp, launch

EXT = Path(__file__).resolve().parents[2] / "jupyterlab-ext"

#: Top-level modules of torchdoctor and of what it imports besides the standard library.
DEPENDENCIES = [
    "torchdoctor",
    "attr",
    "attrs",
    "cattrs",
    "jedi",
    "libcst",
    "lsprotocol",
    "parso",
    "pathspec",
    "pygls",
    "typing_extensions",
    "yaml",
    "jupyter_client",
    "zmq",
    "tornado",
    "traitlets",
    "jupyter_core",
    "dateutil",
    "platformdirs",
]


def plant(root: Path, marks: Path) -> list[str]:
    """Modules in ``root`` that each write a file into ``marks`` when imported; their names."""
    names = sorted(set(sys.stdlib_module_names) | set(DEPENDENCIES) | {"sitecustomize"})
    for name in names:
        body = f"open({str(marks / name)!r}, 'w').close()\n"
        if name in DEPENDENCIES:  # a package, the other form an import can find
            (root / name).mkdir()
            (root / name / "__init__.py").write_text(body)
        else:
            (root / f"{name}.py").write_text(body)
    return names


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    root = tmp_path / "work"
    marks = tmp_path / "marks"
    root.mkdir()
    marks.mkdir()
    assert len(plant(root, marks)) > 250
    yield root, marks
    assert sorted(p.name for p in marks.iterdir()) == [], "a module of the workspace ran"


def _lint_over_stdio(argv: list[str], root: Path) -> None:
    """Start ``argv`` in ``root``; initialize, open a document, read its diagnostics, shut down."""
    import json

    def frame(message: dict[str, object]) -> bytes:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    uri = (root / "train.py").as_uri()
    messages = [
        {
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": root.as_uri(), "capabilities": {}},
        },
        {"method": "initialized", "params": {}},
        {
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": SOURCE}
            },
        },
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        argv,
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"".join(frame(m) for m in messages))
        proc.stdin.flush()
        while True:  # read until the diagnostics of the document arrive
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = proc.stdout.read(1)
                assert byte, proc.stderr.read().decode() if proc.stderr else ""
                header += byte
            length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
            message = json.loads(proc.stdout.read(length))
            if message.get("method") == "textDocument/publishDiagnostics":
                codes = [d["code"] for d in message["params"]["diagnostics"]]
                if "TDR602" in codes:
                    break
        proc.stdin.write(frame({"id": 2, "method": "shutdown"}) + frame({"method": "exit"}))
        proc.stdin.flush()
        proc.wait(timeout=START_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_console_script(planted: tuple[Path, Path]) -> None:
    root, _marks = planted
    _lint_over_stdio([str(Path(sys.executable).with_name("torchdoctor")), "server"], root)


def test_the_command_every_launcher_uses(planted: tuple[Path, Path]) -> None:
    root, _marks = planted
    argv = jupyter_lsp.spec()["torchdoctor"]["argv"]
    assert argv == launch.server_command()
    _lint_over_stdio(argv, root)


def test_python_dash_m_would_run_the_workspace(tmp_path: Path) -> None:
    """The hole the launch command closes: ``python -m torchdoctor`` from the workspace imports
    the workspace's modules (this test fails if that ever stops being true, and with it the reason
    for :mod:`torchdoctor.launch`)."""
    root, marks = tmp_path / "work", tmp_path / "marks"
    root.mkdir()
    marks.mkdir()
    plant(root, marks)
    subprocess.run(
        [sys.executable, "-m", "torchdoctor", "--version"],
        cwd=root,
        capture_output=True,
        timeout=START_TIMEOUT_S,
    )
    assert list(marks.iterdir())


def test_jupyter_lsp_in_a_real_jupyter_server(tmp_path: Path, planted: tuple[Path, Path]) -> None:
    with running_jupyter(tmp_path, console_script=True) as server:
        asyncio.run(lint_over_websocket(server, "/lsp/ws/torchdoctor"))


def test_the_jupyterlab_relay_in_a_real_jupyter_server(
    tmp_path: Path, planted: tuple[Path, Path]
) -> None:
    # The server extension from the source tree, enabled as the wheel's config file enables it.
    config = tmp_path / "config" / "jupyter_server_config.json"
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(EXT), os.environ.get("PYTHONPATH")]))}
    config.parent.mkdir()
    config.write_text('{"ServerApp": {"jpserver_extensions": {"jupyterlab_torchdoctor": true}}}')
    with running_jupyter(tmp_path, console_script=True, env_extra=env) as server:
        asyncio.run(lint_over_websocket(server, "/torchdoctor/lsp"))
