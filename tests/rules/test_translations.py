"""Every rule has its Chinese text in ``rules/zh/TDRnnn.md``: the English sections, prose only,
each code block a ``{code:N}`` placeholder for the N-th block of the docstring (or that block with
its comments translated). The checks on a sample rule show what a broken translation reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.linter.registry import all_rules
from torchdoctor.rules.base import Rule
from torchdoctor.rules.docs import code_blocks, rule_doc, translation_problems

RULES = all_rules()


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_has_its_translation(rule: type[Rule]) -> None:
    problems = translation_problems(rule)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_chinese_doc_has_the_english_code_blocks(rule: type[Rule]) -> None:
    en = rule_doc(rule, "en").markdown()
    zh = rule_doc(rule, "zh").markdown()
    assert rule_doc(rule, "zh").locale == "zh"
    assert "{code:" not in zh
    assert len(code_blocks(zh)) == len(code_blocks(en))


def test_the_cli_shows_the_chinese_text_with_the_english_examples() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "rule", "TDR102", "--locale", "zh"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "## 示例\n```python\nmask = torch.zeros(batch, seq_len).contiguous()\n```\n" in out
    assert "## 改为\n```python\nmask = torch.zeros(batch, seq_len)\n```\n" in out


class Sample(Rule):
    """## What it does
    Checks for a thing.

    ## Why is this bad?
    It is slow.

    ## Example
    ```python
    y = f(x)  # slow
    ```

    ## Use instead
    ```python
    y = g(x)
    ```

    ## Fix safety
    No fix.

    ## References
    - [f](https://example.com/f)
    """

    code = "TDR999"
    name = "sample"


GOOD = """## 功能
检查某件事。

## 为什么不好？
它很慢。

## 示例
{code:1}

## 改为
{code:2}

## 修复安全性
不提供修复。

## 参考
- [f](https://example.com/f)
"""


def problems_of(text: str | None, directory: Path, rule: type[Rule] = Sample) -> str:
    if text is not None:
        (directory / "TDR999.md").write_text(text, encoding="utf-8")
    return "\n".join(translation_problems(rule, directory))


def test_a_complete_translation_passes(tmp_path: Path) -> None:
    assert problems_of(GOOD, tmp_path) == ""


def test_a_missing_translation_says_where_to_write_it(tmp_path: Path) -> None:
    problems = problems_of(None, tmp_path)
    assert "TDR999.md is missing" in problems and "{code:N}" in problems


def test_an_inline_translation_is_reported(tmp_path: Path) -> None:
    class Inline(Sample):
        __doc__ = Sample.__doc__
        zh = GOOD

    problems = problems_of(GOOD, tmp_path, Inline)
    assert "still holds its Chinese text in the module" in problems
    assert "scripts/move_translations.py TDR999" in problems


def test_sections_must_be_the_english_ones(tmp_path: Path) -> None:
    problems = problems_of(GOOD.replace("## 参考", "## 参考资料"), tmp_path)
    assert "sections" in problems and "参考资料" in problems
    swapped = GOOD.replace("## 示例\n{code:1}", "## 改为\n{code:1}", 1).replace(
        "## 改为\n{code:2}", "## 示例\n{code:2}"
    )
    assert "sections ['功能', '为什么不好？', '改为', '示例'" in problems_of(swapped, tmp_path)


def test_placeholders_must_follow_the_english_blocks(tmp_path: Path) -> None:
    swapped = GOOD.replace("{code:1}", "{code:X}").replace("{code:2}", "{code:1}")
    problems = problems_of(swapped.replace("{code:X}", "{code:2}"), tmp_path)
    assert "示例: code blocks [2], expected [1]" in problems
    assert "改为: code blocks [1], expected [2]" in problems
    problems = problems_of(GOOD.replace("{code:2}", ""), tmp_path)
    assert "改为: code blocks [], expected [2]" in problems


def test_a_placeholder_past_the_english_blocks_is_an_error(tmp_path: Path) -> None:
    problems = problems_of(GOOD.replace("{code:2}", "{code:3}"), tmp_path)
    assert "`{code:3}` but the English text has 2 code block(s)" in problems


def test_a_misspelt_placeholder_is_reported(tmp_path: Path) -> None:
    problems = problems_of(GOOD.replace("{code:2}", "{code: 2}"), tmp_path)
    assert "`{code: 2}` is not a placeholder" in problems


def test_a_repeated_code_block_is_reported(tmp_path: Path) -> None:
    problems = problems_of(GOOD.replace("{code:2}", "```python\ny = g(x)\n```"), tmp_path)
    assert "code block 2 is repeated; write `{code:2}`" in problems


def test_a_block_may_translate_its_comments_only(tmp_path: Path) -> None:
    translated = GOOD.replace("{code:1}", "```python\ny = f(x)  # 很慢\n```")
    assert problems_of(translated, tmp_path) == ""
    changed = GOOD.replace("{code:1}", "```python\ny = h(x)  # 很慢\n```")
    assert "not that block with its comments translated" in problems_of(changed, tmp_path)
