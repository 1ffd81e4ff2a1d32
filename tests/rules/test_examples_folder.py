"""The scripts and the notebook in ``examples/`` are what ``torchdoctor check examples/`` shows new
users: each core rule must be demonstrated there, with default settings, and the files must stay
valid Python and a valid notebook.

Every rule of the guide's chapters (TDR1xx-TDR7xx) is demonstrated too: a default-on rule with the
default selection, an off-by-default one when the chapters are selected
(``--select TDR1,...,TDR7``). Every fix offered on the examples must leave valid code."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from torchdoctor.core.config import Settings
from torchdoctor.core.fixes import apply_edits
from torchdoctor.linter.registry import all_rules, get_rule
from torchdoctor.linter.runner import FileResult, check_any, fix_any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORE = (
    "TDR101", "TDR105", "TDR301", "TDR401", "TDR402", "TDR403",
    "TDR405", "TDR502", "TDR503", "TDR601", "TDR602", "TDR603",
)  # fmt: skip
CHAPTERS = ("TDR1", "TDR2", "TDR3", "TDR4", "TDR5", "TDR6", "TDR7")
GUIDE_RULES = [r for r in all_rules() if r.code.startswith(CHAPTERS)]
DEFAULT_ON = [r.code for r in GUIDE_RULES if r.default]
OFF_BY_DEFAULT = [r.code for r in GUIDE_RULES if not r.default]


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


def _check_all(settings: Settings | None) -> dict[str, FileResult]:
    out: dict[str, FileResult] = {}
    for path in _files():
        result = check_any(path.read_text(encoding="utf-8"), str(path), settings)
        assert not result.errors, result.errors
        out[path.name] = result
    return out


@pytest.fixture(scope="module")
def chapter_results() -> dict[str, FileResult]:
    """Results per file with every rule of the guide's chapters selected."""
    return _check_all(Settings(select=list(CHAPTERS)))


@pytest.mark.parametrize("code", CORE)
def test_core_rule_is_demonstrated(code: str, findings: dict[str, set[str]]) -> None:
    assert get_rule(code) is not None, f"{code} is not registered"
    where = [name for name, codes in findings.items() if code in codes]
    assert where, f"no file in examples/ shows {code}"


def test_the_guide_has_rules_both_on_and_off_by_default() -> None:
    assert len(DEFAULT_ON) > len(CORE)
    assert OFF_BY_DEFAULT


@pytest.mark.parametrize("code", DEFAULT_ON)
def test_default_rule_is_demonstrated(code: str, findings: dict[str, set[str]]) -> None:
    where = [name for name, codes in findings.items() if code in codes]
    assert where, f"no file in examples/ shows {code} with the default selection"


@pytest.mark.parametrize("code", OFF_BY_DEFAULT)
def test_off_by_default_rule_is_demonstrated_when_selected(
    code: str, findings: dict[str, set[str]], chapter_results: dict[str, FileResult]
) -> None:
    assert not any(code in codes for codes in findings.values()), f"{code} ran by default"
    where = [n for n, r in chapter_results.items() if any(f.code == code for f in r.findings)]
    assert where, f"no file in examples/ shows {code} with --select {','.join(CHAPTERS)}"


def test_every_fix_on_the_examples_leaves_valid_code(
    chapter_results: dict[str, FileResult],
) -> None:
    """Each fix (alternatives and suggestions included), applied alone, parses."""
    tried = 0
    for name, result in chapter_results.items():
        for finding in result.findings:
            for fix in finding.fixes:
                if not fix.edits:
                    continue
                tried += 1
                edits = list(fix.edits)
                where = f"{name}: {finding.code} fix {fix.title.en!r}"
                if result.notebook is not None:
                    fixed = check_any(result.notebook.apply(edits), name)
                    assert not fixed.errors, (where, fixed.errors)
                else:
                    ast.parse(apply_edits(result.text, edits), filename=where)
    assert tried


@pytest.mark.parametrize("select", [None, CHAPTERS], ids=["default", "chapters"])
@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_bulk_fixes_apply_cleanly(path: Path, select: tuple[str, ...] | None) -> None:
    """What `torchdoctor check examples/ --fix --unsafe-fixes` does."""
    settings = Settings(select=list(select)) if select else None
    outcome = fix_any(path.read_text(encoding="utf-8"), str(path), settings, unsafe=True)
    assert outcome.error is None, outcome.error
    assert not outcome.result.errors, outcome.result.errors


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
