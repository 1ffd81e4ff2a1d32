"""How a Python process of torchdoctor's is started so that nothing of the user's workspace runs.

``python -m torchdoctor server`` puts the working folder first on ``sys.path``; an editor or a
Jupyter server that starts it from a repository would let that repository's ``json.py``,
``typing_extensions.py`` or ``pygls.py`` run in place of the real module. ``python -I`` would also
drop the user site and ``PYTHONPATH`` (where some users install torchdoctor) and ``-P`` needs
Python 3.11, so the server is started with :data:`BOOTSTRAP` instead: it removes the working folder
from ``sys.path`` before anything is imported, then runs ``torchdoctor`` as ``-m`` would. The
console script ``torchdoctor`` is safe as it is: its ``sys.path[0]`` is the script's folder.
"""

from __future__ import annotations

import sys

#: Run with ``python -c``: only ``sys`` and ``os`` (loaded before the working folder is put on the
#: path) are used until the working folder (``''`` or its absolute path) is off ``sys.path``.
BOOTSTRAP = (
    "import os, sys\n"
    "try:\n"
    "    here = os.getcwd()\n"
    "except OSError:\n"
    "    here = ''\n"
    "sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]\n"
    "import runpy\n"
    "runpy.run_module('torchdoctor', run_name='__main__', alter_sys=True)\n"
)


def python_command(*args: str, python: str | None = None) -> list[str]:
    """The command line that runs ``python -m torchdoctor ARGS`` without the working folder on
    ``sys.path`` (``python``: the interpreter, by default this one)."""
    return [python or sys.executable, "-c", BOOTSTRAP, *args]


def server_command(python: str | None = None) -> list[str]:
    """The command line of the language server over stdio, started from any folder."""
    return python_command("server", python=python)
