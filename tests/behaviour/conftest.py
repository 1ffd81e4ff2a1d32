from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from behaviour_harness import Programs

if importlib.util.find_spec("torch") is None:  # pragma: no cover - torch is a test dependency
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def programs() -> Iterator[Programs]:
    """Runs the cases' programs (one torch import per test process)."""
    runner = Programs()
    yield runner
    runner.close()
