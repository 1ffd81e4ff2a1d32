"""The scripts and the notebook in ``examples/`` are what ``torchdoctor check examples/`` shows new
users: each core rule must be demonstrated there, with default settings, and the files must stay
valid Python and a valid notebook."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from torchdoctor.engine.runner import check_any
from torchdoctor.rules import get_rule

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORE = (
    "TDR101", "TDR105", "TDR301", "TDR401", "TDR402", "TDR403",
    "TDR405", "TDR502", "TDR503", "TDR601", "TDR602", "TDR603",
)  # fmt: skip


def _files() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".py", ".ipynb"))


@pytest.fixture(scope="module")
def findings() -> dict[str, set[str]]:
    """Codes reported per file, with the default selection."""
    out: dict[str, set[str]] = {}
    for path in _files():
        result = check_any(path.read_text(encoding="utf-8"), str(path))
        assert not result.errors, result.errors
        out[path.name] = {f.code for f in result.findings}
    return out


@pytest.mark.parametrize("code", CORE)
def test_core_rule_is_demonstrated(code: str, findings: dict[str, set[str]]) -> None:
    if get_rule(code) is None:
        pytest.skip(f"{code} is not implemented yet")
    where = [name for name, codes in findings.items() if code in codes]
    assert where, f"no file in examples/ shows {code}"


def test_examples_are_valid_python_and_notebook() -> None:
    files = _files()
    assert {p.suffix for p in files} == {".py", ".ipynb"}
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            ast.parse(text, filename=str(path))
            continue
        nb = json.loads(text)
        assert nb["nbformat"] == 4
        for cell in nb["cells"]:
            assert cell["cell_type"] in ("code", "markdown")
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None
                source = "".join(cell["source"])
                # Magics are IPython syntax; the rest of the cell must parse.
                lines = ["pass" if ln.lstrip().startswith("%") else ln for ln in source.split("\n")]
                ast.parse("\n".join(lines))
