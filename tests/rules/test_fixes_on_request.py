"""Fixes built on request: a check with ``fixes=False`` (the language server's, while typing)
finds what a check with fixes finds, with no fix built; and checking the same text again with one
rule alone and fixes on gives that rule's findings with the fixes of the whole check."""

from __future__ import annotations

import dataclasses

import pytest

from torchdoctor.core.config import Settings
from torchdoctor.core.model import Finding
from torchdoctor.linter.registry import all_rules
from torchdoctor.linter.runner import check_text

RULES = all_rules()
ALL = frozenset(r.code for r in RULES)


def _without_fixes(finding: Finding) -> Finding:
    return dataclasses.replace(finding, fixes=(), fixes_deferred=False)


def _cases() -> list:
    return [
        pytest.param(example.code, example.filename, id=f"{rule.code}-invalid-{i}")
        for rule in RULES
        for i, example in enumerate(rule.INVALID)
        if not example.notebook and example.live is None
    ]


@pytest.mark.parametrize(("code", "filename"), _cases())
def test_fixes_on_request_match_the_whole_check(code: str, filename: str) -> None:
    settings = Settings(select=["ALL"])
    whole = check_text(code, filename, settings, codes=ALL).findings
    typing = check_text(code, filename, settings, codes=ALL, fixes=False).findings
    # The same findings, none with a fix built; those that have fixes say they were left.
    assert [_without_fixes(f) for f in typing] == [_without_fixes(f) for f in whole]
    assert all(not f.fixes for f in typing)
    for built, left in zip(whole, typing, strict=True):
        if built.fixes:
            assert left.fixes_deferred, built.code
    # One rule again, building its fixes: the whole check's findings of that rule, fixes and all.
    for rule_code in {f.code for f in typing if f.fixes_deferred}:
        again = check_text(code, filename, settings, codes=frozenset({rule_code})).findings
        assert [f for f in again if f.code == rule_code] == [
            f for f in whole if f.code == rule_code
        ]
