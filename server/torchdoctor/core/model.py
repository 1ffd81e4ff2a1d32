"""Plain data types shared by the core, the rules, the linter, the CLI and the language
server."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Severity(str, Enum):
    """How loudly a finding is shown in editors (LSP DiagnosticSeverity names)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


class Applicability(str, Enum):
    """How safe a fix is, as in Ruff.

    ``SAFE`` keeps behaviour and is applied in bulk; ``UNSAFE`` is applied in bulk only with
    ``--unsafe-fixes``; ``SUGGESTION`` is shown as a code action and never applied in bulk.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    SUGGESTION = "suggestion"

    @property
    def ruff_name(self) -> str:
        """The name Ruff's JSON output uses for this applicability."""
        return "display-only" if self is Applicability.SUGGESTION else self.value


@dataclass(frozen=True)
class Text:
    """A message in English and Simplified Chinese."""

    en: str
    zh: str

    def get(self, locale: str | None) -> str:
        return self.zh if is_chinese(locale) else self.en


def is_chinese(locale: str | None) -> bool:
    return bool(locale) and str(locale).lower().replace("_", "-").startswith("zh")


@dataclass(frozen=True, order=True)
class Pos:
    """A position: 1-based row, 0-based column counted in code points."""

    row: int
    col: int


@dataclass(frozen=True)
class Range:
    start: Pos
    end: Pos


@dataclass(frozen=True)
class Edit:
    """Replace the text between ``start`` and ``end`` with ``content``."""

    start: Pos
    end: Pos
    content: str


@dataclass(frozen=True)
class Fix:
    title: Text
    edits: tuple[Edit, ...]
    applicability: Applicability

    def allowed(self, unsafe: bool) -> bool:
        if self.applicability is Applicability.SAFE:
            return True
        return unsafe and self.applicability is Applicability.UNSAFE


@dataclass(frozen=True)
class Related:
    """Another place that explains a finding (the ``.eval()`` call, the sampler's creation...)."""

    range: Range
    message: Text


@dataclass
class Finding:
    code: str
    name: str
    message: Text
    range: Range
    severity: Severity
    fixes: tuple[Fix, ...] = ()
    related: tuple[Related, ...] = ()
    tags: tuple[str, ...] = ()
    noqa_row: int = 0
    # Filled for notebooks: 1-based cell index among all cells, and the range inside that cell.
    cell: int | None = None
    cell_range: Range | None = None
    extra: dict[str, object] = field(default_factory=dict)
    # The rule's fixes were left unbuilt (a check with ``fixes=False``, as the language server
    # runs while typing): ``fixes`` is empty, and a check of the same text with fixes on builds
    # them (``linter.runner.check_text``).
    fixes_deferred: bool = False

    @property
    def fix(self) -> Fix | None:
        """The fix shown first (the preferred one)."""
        return self.fixes[0] if self.fixes else None

    def bulk_fix(self, unsafe: bool) -> Fix | None:
        """The first fix that ``--fix`` (or fix-all) may apply under the given safety setting."""
        for fix in self.fixes:
            if fix.allowed(unsafe):
                return fix
        return None


class ErrorKind(str, Enum):
    """Why a file could not be checked (or fixed)."""

    READ = "read"  # missing, unreadable, too large, binary or undecodable
    CONFIG = "config"  # its configuration cannot be used
    NOTEBOOK = "notebook"  # not a valid notebook
    SYNTAX = "syntax"  # the code does not parse
    TOO_DEEP = "too-deep"  # nested too deeply to parse or analyse
    INTERNAL = "internal"  # a rule failed
    FIX = "fix"  # a fix could not be applied or written


@dataclass(frozen=True)
class FileError:
    """A file that could not be checked: one clear line, never a traceback."""

    path: str
    reason: str
    row: int | None = None
    cell: int | None = None
    kind: ErrorKind = ErrorKind.READ

    @property
    def unparsable(self) -> bool:
        """The code itself cannot be parsed or analysed (editors keep the last good findings)."""
        return self.kind in (ErrorKind.SYNTAX, ErrorKind.TOO_DEEP)

    def format(self) -> str:
        where = self.path
        if self.cell is not None:
            where += f":cell {self.cell}"
        if self.row is not None:
            where += f":{self.row}"
        return f"{where}: {self.reason}"
