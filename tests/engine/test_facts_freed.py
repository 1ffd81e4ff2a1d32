"""A check leaves no reference cycle among the tree and its facts: they are freed as soon as the
check returns. A cycle would keep every node of the file alive until the cycle collector
traverses them all, after each file (a large share of a run over many files)."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchdoctor.core.semantic import Semantic
from torchdoctor.linter.runner import check_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py"))


@pytest.fixture
def collector() -> Iterator[None]:
    """The cycle collector off, and what it would free kept in ``gc.garbage`` for the test."""
    was_on = gc.isenabled()
    gc.disable()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_on:
            gc.enable()


def test_the_examples_have_findings() -> None:
    assert SCRIPTS
    assert any(check_text(p.read_text(), str(p)).findings for p in SCRIPTS)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
@pytest.mark.usefixtures("collector")
def test_no_cycle_keeps_the_facts_alive(path: Path) -> None:
    result = check_text(path.read_text(), str(path))
    gc.collect()
    left = [o for o in gc.garbage if isinstance(o, ast.AST | Semantic)]
    assert not left, f"{len(left)} nodes and facts were only freed by the cycle collector"
    assert result.path == str(path)
