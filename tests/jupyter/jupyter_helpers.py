"""Shared helpers: start a real Jupyter server (or JupyterLab) with isolated, empty Jupyter
directories, so that only what the installed packages declare (entry points, prebuilt
extensions) is found, and stop it with everything it started."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Generous: a cold start of the Jupyter server and of the language server on a busy 2-core machine.
START_TIMEOUT_S = 90.0

DIRECTORIES = [
    ("JUPYTER_CONFIG_DIR", "config"),
    ("JUPYTER_DATA_DIR", "data"),
    ("JUPYTER_RUNTIME_DIR", "runtime"),
    ("IPYTHONDIR", "ipython"),
    ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"),
    ("JUPYTERLAB_WORKSPACES_DIR", "lab-workspaces"),
]


@dataclass
class JupyterServer:
    url: str
    ws_url: str
    root: Path
    config_dir: Path
    log: Path

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.loads(response.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server and everything it started (the language server runs in its group)."""
    if proc.poll() is not None:
        return
    if hasattr(os, "killpg"):
        os.killpg(proc.pid, signal.SIGTERM)
    else:  # pragma: no cover - Windows
        proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
        proc.wait(timeout=15)


def write_lab_settings(settings_dir: Path, settings: dict[str, dict[str, Any]]) -> None:
    """JupyterLab user settings, by plugin id (``package:plugin``), into ``settings_dir``."""
    for plugin_id, values in settings.items():
        package, _, plugin = plugin_id.partition(":")
        folder = settings_dir / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{plugin}.jupyterlab-settings").write_text(json.dumps(values))


@contextmanager
def running_jupyter(
    tmp_path: Path,
    module: str = "jupyter_server",
    lab_settings: dict[str, dict[str, Any]] | None = None,
) -> Iterator[JupyterServer]:
    """``python -m <module>`` (``jupyter_server`` or ``jupyterlab``) serving ``tmp_path/work``,
    with ``lab_settings`` as the user's JupyterLab settings."""
    root = tmp_path / "work"
    root.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for var, name in DIRECTORIES:
        (tmp_path / name).mkdir()
        env[var] = str(tmp_path / name)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    write_lab_settings(tmp_path / "lab-settings", lab_settings or {})

    port = free_port()
    argv = [
        sys.executable,
        "-m",
        module,
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")

    log = tmp_path / f"{module}.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = JupyterServer(
        url=f"http://127.0.0.1:{port}",
        ws_url=f"ws://127.0.0.1:{port}",
        root=root,
        config_dir=tmp_path / "config",
        log=log,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{module} exited with {proc.returncode}:\n{log.read_text()}")
            try:
                server.get_json("/api/status")
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    pytest.fail(f"{module} did not answer:\n{log.read_text()}")
                time.sleep(0.1)
        yield server
    finally:
        _stop(proc)
