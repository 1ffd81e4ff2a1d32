"""Which running kernel belongs to which notebook.

VS Code starts kernels with ``--f=<runtime dir>/kernel-v2-*.json`` and sets
``__vsc_ipynb_file__`` in the kernel's namespace; JupyterLab writes ``kernel-<id>.json`` and sets
``JPY_SESSION_NAME=<notebook path>`` in the kernel's environment. The probe reads both (a
dictionary lookup and ``os.environ``), so matching needs no server API.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.live_facts import ProbeRequest
from .errors import BridgeError, missing_jupyter_client


def runtime_dir() -> Path:
    """Jupyter's runtime folder (where kernels write their connection files)."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        raise missing_jupyter_client() from None
    return Path(jupyter_runtime_dir())


def connection_files(folder: str | os.PathLike[str] | None = None) -> list[Path]:
    """Kernel connection files in ``folder`` (default: the runtime dir), newest first."""
    base = Path(folder) if folder is not None else runtime_dir()
    try:
        files = [p for p in base.glob("kernel-*.json") if p.is_file()]
    except OSError:
        return []
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


def _normalise(path: str) -> str:
    return os.path.normcase(os.path.realpath(os.path.expanduser(path)))


def notebook_matches(kernel: dict[str, object], notebook: str) -> bool:
    """Whether kernel facts (from a probe) name ``notebook``.

    ``__vsc_ipynb_file__`` holds an absolute path; ``JPY_SESSION_NAME`` may be relative to the
    Jupyter server's root, so it matches when the notebook's path ends with it.
    """
    wanted = _normalise(notebook)
    vsc = kernel.get("vscode_notebook")
    if isinstance(vsc, str) and vsc and _normalise(vsc) == wanted:
        return True
    session = kernel.get("session_name")
    if isinstance(session, str) and session:
        if os.path.isabs(session):
            return _normalise(session) == wanted
        tail = os.path.normcase(os.path.normpath(session))
        return wanted == tail or wanted.endswith(os.sep + tail)
    return False


def find_kernel_for_notebook(
    notebook: str,
    folder: str | os.PathLike[str] | None = None,
    timeout: float = 1.0,
) -> str | None:
    """The connection file of the running kernel attached to ``notebook``, or None.

    Each candidate kernel is asked once (through a subshell when it has one, so a busy kernel
    answers too); kernels that do not answer are skipped.
    """
    from .client import KernelBridge

    for path in connection_files(folder):
        try:
            with KernelBridge(path, timeout=timeout) as bridge:
                facts = bridge.probe(ProbeRequest.of([], kernel=True))
        except BridgeError:
            continue
        if notebook_matches(dict(facts.kernel), notebook):
            return str(path)
    return None


def resolve_connection_file(name: str) -> str:
    """An explicit connection file: a path, or a file name / kernel id in the runtime dir."""
    candidate = Path(name).expanduser()
    if candidate.is_file():
        return str(candidate)
    try:
        from jupyter_client import find_connection_file
    except ImportError:
        raise missing_jupyter_client() from None
    try:
        return str(find_connection_file(name))
    except OSError:
        raise BridgeError(f"connection file not found: {name}") from None
