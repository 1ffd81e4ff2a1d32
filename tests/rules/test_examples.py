"""Every rule's VALID and INVALID examples, run through the public checking API.

For each INVALID example: the rule reports it; its first fix gives the stated code (or no fix is
offered when the example says so); every fix is as safe as the rule's declared `fix_safety` says
(a rule declaring SAFE emits only safe fixes; one declaring UNSAFE emits safe or unsafe ones; a
rule without a declared safety emits none); every fix's result parses and re-checking it finds
no fixable report of that rule.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from torchdoctor.core.fixes import apply_edits
from torchdoctor.core.live_facts import LiveFacts
from torchdoctor.core.model import Applicability, Fix
from torchdoctor.linter.registry import all_rules
from torchdoctor.linter.runner import check_any, fix_any
from torchdoctor.rules.base import Invalid, Valid

RULES = all_rules()

# How risky a fix applied in bulk is. A rule declares the riskiest fix it may apply in bulk; its
# fixes may be safer than that, never riskier. Suggestions are never applied in bulk.
_RISK = {Applicability.SAFE: 0, Applicability.UNSAFE: 1}


def _fix_safety_mismatch(rule, fix: Fix) -> str | None:
    """Why ``fix`` is riskier than ``rule`` declares, or None."""
    if rule.fix_safety is None:
        return f"{rule.code} declares no fix but offers a {fix.applicability.value} one"
    if fix.applicability is Applicability.SUGGESTION or rule.fix_safety is Applicability.SUGGESTION:
        if fix.applicability is not Applicability.SUGGESTION:
            return f"{rule.code} declares suggestions but offers a {fix.applicability.value} fix"
        return None
    if _RISK[fix.applicability] > _RISK[rule.fix_safety]:
        return (
            f"{rule.code} declares {rule.fix_safety.value} fixes but offers a "
            f"{fix.applicability.value} one: {fix.title.en}"
        )
    return None


def _as_notebook(code: str) -> str:
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "metadata": {},
                    "source": code,
                    "outputs": [],
                    "execution_count": None,
                }
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )


def _path(example: Valid | Invalid, root: Path) -> str:
    """Where the example is checked: in a project of its own (``root``) that holds the other
    modules it states and, when there are any, the example itself (as a checked file is on
    disk, or open in the editor: the other modules' imports of it resolve to it)."""
    name = example.filename[:-3] + ".ipynb" if example.notebook else example.filename
    (root / "pyproject.toml").write_text("[project]\nname = 'example'\n", encoding="utf-8")
    for relative, code in example.files:
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code, encoding="utf-8")
    if example.files:
        (root / name).write_text(_text(example), encoding="utf-8")
    return str(root / name)


def _text(example: Valid | Invalid) -> str:
    return _as_notebook(example.code) if example.notebook else example.code


def _live(example: Valid | Invalid) -> LiveFacts | None:
    """Live rules (TDR9xx) get the kernel facts their example states."""
    assert example.live is None or isinstance(example.live, LiveFacts)
    return example.live


def _cases(kind: str) -> list:
    out = []
    for rule in RULES:
        examples = rule.valid_examples() if kind == "valid" else list(rule.INVALID)
        for i, example in enumerate(examples):
            out.append(pytest.param(rule, example, id=f"{rule.code}-{kind}-{i}"))
    return out


@pytest.mark.parametrize(("rule", "example"), _cases("valid"))
def test_valid(rule, example: Valid, tmp_path: Path) -> None:
    result = check_any(
        _text(example), _path(example, tmp_path), codes=frozenset({rule.code}), live=_live(example)
    )
    assert not result.errors, result.errors
    assert [f for f in result.findings if f.code == rule.code] == []


@pytest.mark.parametrize(("rule", "example"), _cases("invalid"))
def test_invalid(rule, example: Invalid, tmp_path: Path) -> None:
    codes = frozenset({rule.code})
    path = _path(example, tmp_path)
    result = check_any(_text(example), path, codes=codes, live=_live(example))
    assert not result.errors, result.errors
    findings = [f for f in result.findings if f.code == rule.code]
    assert findings, f"{rule.code} did not report:\n{example.code}"
    # Where the findings are, and how many: every INVALID example states it.
    assert example.lines is not None, "the example does not state the rows of its findings"
    rows = tuple(
        (f.cell_range or f.range).start.row if example.notebook else f.range.start.row
        for f in findings
    )
    assert rows == example.lines
    for finding in findings:
        assert finding.message.en and finding.message.zh
    first = findings[0]
    if example.fixed is None:
        assert first.fix is None, "the example says no fix is offered"
    else:
        assert first.fix is not None, "the example states a fixed code but no fix was offered"
        if example.notebook:
            new = result.notebook.apply(list(first.fix.edits))  # type: ignore[union-attr]
            cell = json.loads(new)["cells"][0]["source"]
            got = "".join(cell) if isinstance(cell, list) else cell
            assert got == example.fixed
        else:
            assert apply_edits(example.code, list(first.fix.edits)) == example.fixed
    # No fix is riskier than the rule declares.
    for finding in findings:
        for fix in finding.fixes:
            assert _fix_safety_mismatch(rule, fix) is None, _fix_safety_mismatch(rule, fix)
    # Every fix offered for every finding must give code that parses.
    for finding in findings:
        for fix in finding.fixes:
            if example.notebook:
                continue
            fixed = apply_edits(example.code, list(fix.edits))
            ast.parse(fixed)
    # Applying all fixes (unsafe included) leaves no fixable report of this rule.
    outcome = fix_any(_text(example), path, unsafe=True, codes=codes, live=_live(example))
    assert outcome.error is None, outcome.error
    if not example.notebook:
        ast.parse(outcome.text)
    leftover = [f for f in outcome.result.findings if f.code == rule.code and f.bulk_fix(True)]
    assert leftover == [], [f.message.en for f in leftover]


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_is_documented(rule) -> None:
    from torchdoctor.rules.base import DOC_SECTIONS, DOC_SECTIONS_ZH
    from torchdoctor.rules.docs import rule_doc

    assert list(rule_doc(rule, "en").sections) == list(DOC_SECTIONS)
    assert list(rule_doc(rule, "zh").sections) == list(DOC_SECTIONS_ZH)
    assert rule.VALID and rule.INVALID
    assert rule.name == rule.name.lower() and " " not in rule.name
    assert rule.__module__.rsplit(".", 1)[-1].startswith(rule.code.lower() + "_")
