"""The rule framework: a rule is one class in one module, its docstring is its documentation
(English), ``zh/TDRnnn.md`` beside the modules holds the same sections in Simplified Chinese
(see ``docs``), and ``VALID``/``INVALID`` examples in the class run as tests."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..core.model import Applicability, Severity, Text

if TYPE_CHECKING:
    from ..core.context import Context

DOC_SECTIONS = (
    "What it does",
    "Why is this bad?",
    "Example",
    "Use instead",
    "Fix safety",
    "References",
)
DOC_SECTIONS_ZH = ("功能", "为什么不好？", "示例", "改为", "修复安全性", "参考")


@dataclass(frozen=True)
class Valid:
    """Code on which the rule must stay silent."""

    code: str
    notebook: bool = False  # check the code as a one-cell notebook
    filename: str = "example.py"
    live: object | None = None  # kernel facts (``core.live_facts.LiveFacts``) for live rules
    # Other modules of the example's project, (path relative to the example, code): the example
    # is checked as one file of that project.
    files: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report, at ``lines``. ``fixed`` is the code after its first fix is
    applied (unsafe fixes included); ``fixed=None`` states that no fix is offered."""

    code: str
    fixed: str | None = None
    notebook: bool = False
    filename: str = "example.py"
    live: object | None = None  # kernel facts (``core.live_facts.LiveFacts``) for live rules
    # The first row of each finding, in order (rows of the example's code; for a notebook, of its
    # one cell): where the findings are, and how many.
    lines: tuple[int, ...] | None = None
    files: tuple[tuple[str, str], ...] = ()  # other modules of the example's project

    @classmethod
    def inserting(
        cls,
        code: str,
        *,
        at: int,
        lines: str,
        notebook: bool = False,
        rows: tuple[int, ...] | None = None,
        files: tuple[tuple[str, str], ...] = (),
    ) -> Invalid:
        """An example whose first fix inserts ``lines`` (whole lines, indented) before its
        row ``at`` (1-based), reported at ``rows``."""
        kept = code.splitlines(keepends=True)
        fixed = "".join(kept[: at - 1]) + lines + "".join(kept[at - 1 :])
        return cls(code, fixed, notebook=notebook, lines=rows, files=files)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.WARNING
    default: ClassVar[bool] = True
    fix_safety: ClassVar[Applicability | None] = None
    tags: ClassVar[tuple[str, ...]] = ()  # "deprecated", "unnecessary"
    notebooks: ClassVar[bool] = True  # run on notebooks
    scripts: ClassVar[bool] = True  # run on .py files
    VALID: ClassVar[Sequence[Valid | str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    # Names of other tools' codes that mean this rule (``TOR102``...), for noqa and --select.
    aliases: ClassVar[tuple[str, ...]] = ()

    def check(self, ctx: Context) -> None:
        raise NotImplementedError

    # Convenience for rules.
    @staticmethod
    def text(en: str, zh: str) -> Text:
        return Text(en, zh)

    @classmethod
    def summary(cls, locale: str | None = None) -> str:
        from .docs import rule_doc

        return rule_doc(cls, locale).summary

    @classmethod
    def valid_examples(cls) -> list[Valid]:
        return [v if isinstance(v, Valid) else Valid(v) for v in cls.VALID]


def dump(node: ast.AST) -> str:  # pragma: no cover - debugging aid
    return ast.dump(node, indent=2)
