from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> list[dict]:
        return json.loads(self.out)


@pytest.fixture
def td(tmp_path: Path):
    """Run the real CLI in a subprocess, in ``tmp_path``."""

    def run(
        *args: str, stdin: str | None = None, cwd: Path | None = None, env: dict | None = None
    ) -> Run:
        full_env = {**os.environ, "TORCHDOCTOR_LOCALE": "", **(env or {})}
        full_env.pop("CI", None)
        proc = subprocess.run(
            [sys.executable, "-m", "torchdoctor", *args],
            cwd=cwd or tmp_path,
            input=stdin,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=120,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def notebook():
    """Build notebook JSON (nbformat 4, as Jupyter writes it) from cell sources."""
    return make_notebook


def make_notebook(*cells: str, cell_type: str = "code") -> str:
    return (
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": cell_type,
                        "execution_count": None,
                        "metadata": {},
                        "outputs": [],
                        "source": c.splitlines(keepends=True),
                    }
                    for c in cells
                ],
                "metadata": {
                    "kernelspec": {
                        "display_name": "Python 3",
                        "language": "python",
                        "name": "python3",
                    },
                    "language_info": {"name": "python"},
                },
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )
