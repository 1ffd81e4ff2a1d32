"""The analysis context: what a rule sees (the source, the semantic facts, the kernel's facts
when there is a kernel) and ``report``."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeAlias

from . import kinds
from .kinds import Kind
from .model import Finding, Fix, Range, Related, Severity, Text
from .semantic import Semantic
from .source import Source

if TYPE_CHECKING:
    from .config import Settings
    from .live_facts import LiveFacts
    from .notebook import Notebook


class Reporter(Protocol):
    """What a finding takes from the rule that reports it."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    tags: ClassVar[tuple[str, ...]]


# A finding's fixes, or a function that builds them (one fix, None, or several), such as
# ``functools.partial(_fix, ctx, call)``: called at once by ``report`` when the check builds
# fixes, never when it does not (``Context.build_fixes``).
Fixes: TypeAlias = "Iterable[Fix | None] | Callable[[], Fix | Iterable[Fix | None] | None]"


class Context:
    def __init__(
        self,
        source: Source,
        sem: Semantic,
        path: str,
        settings: Settings,
        notebook: Notebook | None = None,
        *,
        live: LiveFacts | None = None,
        build_fixes: bool = True,
    ) -> None:
        self.source = source
        self.sem = sem
        self.path = path
        self.settings = settings
        self.notebook = notebook
        self.live = live  # facts read from the running kernel; None without one
        # Whether ``report`` builds the fixes a rule hands it as a function (the command line
        # and the fix loop do; the language server, typing, builds them when a code action asks).
        self.build_fixes = build_fixes
        self.rule: type[Reporter] | None = None
        self.findings: list[Finding] = []

    # -- shortcuts ---------------------------------------------------------------------
    @property
    def tree(self) -> ast.Module:
        return self.sem.tree

    @property
    def is_notebook(self) -> bool:
        return self.notebook is not None

    def qualname(self, expr: ast.AST) -> str | None:
        return self.sem.qualname(expr)

    def kind(self, expr: ast.AST | None) -> Kind | None:
        return kinds.kind(self.sem, expr)

    def segment(self, node: ast.AST) -> str:
        return self.source.segment(node)

    def range(self, node: ast.AST) -> Range:
        return self.source.range(node)

    def cell_of(self, node: ast.AST) -> int | None:
        """The notebook cell (1-based index) a node starts in; None for files."""
        if self.notebook is None:
            return None
        cell = self.notebook.cell_at(getattr(node, "lineno", 0))
        return cell.index if cell else None

    def elsewhere(self, node: ast.AST) -> str | None:
        """Where a node of another module of the project is (``data.py:12``, the path relative
        to the checked file's folder); None for a node of this file."""
        owner = self.sem.owner(node)
        if owner is self.sem or owner.path is None:
            return None
        base = os.path.dirname(os.path.abspath(self.path))
        relative = os.path.relpath(owner.path, base).replace(os.sep, "/")
        return f"{relative}:{getattr(node, 'lineno', 1)}"

    def related(self, node: ast.AST, message: Text) -> Related:
        return Related(self.source.range(node), message)

    # -- reporting ---------------------------------------------------------------------
    def report(
        self,
        node: ast.AST | Range,
        message: Text,
        fixes: Fixes = (),
        related: Iterable[Related] = (),
        severity: Severity | None = None,
        **extra: object,
    ) -> Finding:
        """Record a finding; ``severity`` overrides the rule's for this finding only (a variant
        the rule is less sure about).

        ``fixes`` may be a function that builds them (``partial(_fix, ctx, call)``): it is
        called here, before the rule goes on, or not at all when the check does not build
        fixes. Such a finding is then ``fixes_deferred``, as is one whose fixes were handed
        built: a check that does not build fixes gives none, and a check of the same text with
        the finding's rule builds them."""
        built: Iterable[Fix | None]
        if not callable(fixes):
            built = fixes
        elif not self.build_fixes:
            built = ()
        else:
            made = fixes()
            built = (made,) if made is None or isinstance(made, Fix) else made
        kept = tuple(f for f in built if f is not None)
        deferred = not self.build_fixes and (callable(fixes) or bool(kept))
        if deferred:
            kept = ()
        rule = self.rule
        assert rule is not None, "report() called outside a rule"
        rng = node if isinstance(node, Range) else self.source.range(node)
        if not isinstance(node, Range) and "statement_row" not in extra:
            # A noqa comment on the first row of a multi-row statement covers it (as in flake8).
            try:
                first = self.sem.statement_of(node).lineno
            except ValueError:
                first = rng.start.row
            if first != rng.start.row:
                extra["statement_row"] = first
        finding = Finding(
            code=rule.code,
            name=rule.name,
            message=message,
            range=rng,
            severity=severity or rule.severity,
            fixes=kept,
            related=tuple(related),
            tags=rule.tags,
            noqa_row=rng.start.row,
            extra=dict(extra),
            fixes_deferred=deferred,
        )
        self.findings.append(finding)
        return finding
