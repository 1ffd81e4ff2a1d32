"""Rule documentation, from one source: each rule's docstring (English) and its translation.

The Chinese text of rule ``TDRnnn`` is the Markdown file ``zh/TDRnnn.md`` beside the rule modules:
the same sections, prose only. Its code blocks come from the docstring by position: a line
``{code:N}`` stands for the N-th fenced block of the English text, written out once there. A block
whose comments are translated is written out in full instead (the same code, only its comments
differ), and takes the place of the English block of the same position.

Used by ``torchdoctor rule``, editor hovers and the generated documentation pages.
"""

from __future__ import annotations

import inspect
import io
import os
import re
import tokenize
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.model import is_chinese

if TYPE_CHECKING:
    from .base import Rule

DEFAULT_DOCS_URL = "https://torchdoctor.dev/"
_SECTION = re.compile(r"^## (.+?)\s*$", re.M)


@dataclass(frozen=True)
class RuleDoc:
    code: str
    name: str
    summary: str
    sections: dict[str, str]  # heading -> markdown body, in order
    locale: str

    def markdown(self) -> str:
        parts = [f"# {self.code} ({self.name})", ""]
        for heading, body in self.sections.items():
            parts += [f"## {heading}", body.strip(), ""]
        return "\n".join(parts).rstrip() + "\n"


_BREAK = re.compile(r"[ \t]*\n[ \t]*")
_CJK_PUNCT = re.compile(r"[\u3000-\u303f\uff00-\uffef]")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def unwrap(text: str) -> str:
    """Join a wrapped paragraph into one line. A break after Chinese punctuation, or between
    two Chinese characters, joins without a space."""

    def join(m: re.Match[str]) -> str:
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        if _CJK_PUNCT.match(before) or (_CJK.match(before) and _CJK.match(after)):
            return ""
        return " "

    return " ".join(_BREAK.sub(join, text).split())


def split_sections(text: str) -> dict[str, str]:
    text = inspect.cleandoc(text or "")
    matches = list(_SECTION.finditer(text))
    out: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out[m.group(1).strip()] = text[m.end() : end].strip("\n")
    return out


# ---------------------------------------------------------------------------- translations

TRANSLATIONS_DIR = Path(__file__).resolve().parent / "zh"
_PLACEHOLDER = re.compile(r"^\{code:(\d+)\}$")
_FENCE = re.compile(r"^(`{3,}|~{3,})")


class TranslationError(ValueError):
    """A translation that cannot be read against its English text."""


def translation_path(code: str, directory: Path = TRANSLATIONS_DIR) -> Path:
    """The Markdown file holding the Chinese text of rule ``code``."""
    return directory / f"{code}.md"


def code_blocks(text: str) -> list[tuple[int, int]]:
    """The fenced code blocks of ``text``, as (first line, line after the closing fence), 0-based.
    A fence opens at the start of a line and is closed by the same fence, or by the end."""
    lines = text.split("\n")
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != m.group(1):
            j += 1
        out.append((i, min(j + 1, len(lines))))
        i = j + 1
    return out


def fill_code(translation: str, english: str, where: str = "the translation") -> str:
    """``translation`` with each ``{code:N}`` line replaced by the N-th code block of ``english``
    (both as :func:`inspect.cleandoc` leaves them). ``where`` names the text in errors."""
    lines = translation.split("\n")
    english_lines = english.split("\n")
    blocks = ["\n".join(english_lines[a:b]) for a, b in code_blocks(english)]
    inside = {i for a, b in code_blocks(translation) for i in range(a, b)}
    for i, line in enumerate(lines):
        m = _PLACEHOLDER.match(line)
        if i in inside or not m:
            continue
        n = int(m.group(1))
        if not 1 <= n <= len(blocks):
            raise TranslationError(
                f"{where}, line {i + 1}: `{line}` but the English text has "
                f"{len(blocks)} code block(s)"
            )
        lines[i] = blocks[n - 1]
    return "\n".join(lines)


@cache
def _translation(code: str, english: str) -> str | None:
    path = translation_path(code)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return fill_code(inspect.cleandoc(text), inspect.cleandoc(english), str(path))


def translation(rule: type[Rule]) -> str | None:
    """The rule's Chinese text, code blocks filled in; None when it has no translation."""
    return _translation(rule.code, rule.__doc__ or "")


def _same_code(a: str, b: str) -> bool:
    """Two Python snippets that differ at most in their comments."""

    def tokens(src: str) -> list[tuple[int, str]]:
        skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE)
        stream = tokenize.generate_tokens(io.StringIO(src).readline)
        return [(t.type, t.string) for t in stream if t.type not in skip]

    try:
        return tokens(a) == tokens(b)
    except (tokenize.TokenError, SyntaxError):
        return False


def translation_problems(rule: type[Rule], directory: Path = TRANSLATIONS_DIR) -> list[str]:
    """What is wrong with a rule's translation (empty when nothing): it is missing, its
    sections are not the English ones, its placeholders do not stand for the English code
    blocks in order, or it repeats a code block instead of referring to it."""
    from .base import DOC_SECTIONS, DOC_SECTIONS_ZH

    code, path = rule.code, translation_path(rule.code, directory)
    shown = f"server/torchdoctor/rules/zh/{path.name}" if directory == TRANSLATIONS_DIR else path
    where = f"{code}: {shown}"
    problems = []
    if "zh" in vars(rule):
        problems.append(
            f"{code} still holds its Chinese text in the module (`zh = ...`): move it to "
            f"{shown} with `python scripts/move_translations.py {code}` "
            "(see docs/contributing.md)"
        )
    if not path.is_file():
        return [
            *problems,
            f"{where} is missing: every rule has its Chinese text there, the sections of its "
            "docstring in Simplified Chinese, with a line `{code:N}` for the N-th code block "
            "of the docstring (see docs/contributing.md)",
        ]
    english = inspect.cleandoc(rule.__doc__ or "")
    text = inspect.cleandoc(path.read_text(encoding="utf-8"))
    try:
        fill_code(text, english, where)
    except TranslationError as e:
        problems.append(str(e))
    en_sections, zh_sections = split_sections(english), split_sections(text)
    headings = dict(zip(DOC_SECTIONS, DOC_SECTIONS_ZH, strict=True))
    expected = [headings.get(h, h) for h in en_sections]
    if list(zh_sections) != expected:
        problems.append(f"{where}: sections {list(zh_sections)}, expected {expected}")
    if not text.startswith("## "):
        problems.append(f"{where}: text before the first section (start with `## {expected[0]}`)")
    # The code blocks of each section, in order: English ones by number, translated by position.
    blocks = [english.split("\n")[a:b] for a, b in code_blocks(english)]
    number = 0
    for en_heading, zh_heading in zip(en_sections, zh_sections, strict=False):
        en_body, zh_body = en_sections[en_heading], zh_sections[zh_heading]
        want = list(range(number + 1, number + 1 + len(code_blocks(en_body))))
        number += len(want)
        got: list[int] = []
        zh_lines = zh_body.split("\n")
        spans = code_blocks(zh_body)
        inside = {i for a, b in spans for i in range(a, b)}
        slots: list[tuple[int, int]] = [(a, -1) for a, _ in spans]
        for i, line in enumerate(zh_lines):
            m = _PLACEHOLDER.match(line)
            if i not in inside and m:
                slots.append((i, int(m.group(1))))
            elif i not in inside and "{code" in line:
                problems.append(f"{where}, {zh_heading}: `{line.strip()}` is not a placeholder")
        for k, (line_no, n) in enumerate(sorted(slots)):
            if n >= 0:
                got.append(n)
                continue
            n = want[k] if k < len(want) else 0
            got.append(n)
            a, b = next(s for s in spans if s[0] == line_no)
            written = zh_lines[a:b]
            if n == 0:
                continue
            original = blocks[n - 1]
            if written == original:
                problems.append(
                    f"{where}, {zh_heading}: code block {n} is repeated; write `{{code:{n}}}`"
                )
            elif not (
                original[0].strip() == "```python"
                and written[0] == original[0]
                and _same_code("\n".join(original[1:-1]), "\n".join(written[1:-1]))
            ):
                problems.append(
                    f"{where}, {zh_heading}: the code block written in place of code block {n} "
                    "is not that block with its comments translated"
                )
        if got != want:
            problems.append(
                f"{where}, {zh_heading}: code blocks {got}, expected {want} "
                "(as in the English section)"
            )
    return problems


def rule_doc(rule: type[Rule], locale: str | None = None) -> RuleDoc:
    text = translation(rule) if is_chinese(locale) else None
    zh = bool(text)
    sections = split_sections(text if text else (rule.__doc__ or ""))
    first = next(iter(sections.values()), "").strip()
    summary = unwrap(first.split("\n\n")[0])
    return RuleDoc(rule.code, rule.name, summary, sections, "zh" if zh else "en")


def packaged_docs_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "_docs"


def rule_url(code: str, base: str | None = None, locale: str | None = None) -> str:
    """The page of a rule: under ``base`` when given, else the HTML docs installed with the
    package (a ``file:`` URL, works offline), else the public site."""
    page = f"rules/{code}/"
    lang = "zh/" if is_chinese(locale) else ""
    base = base or os.environ.get("TORCHDOCTOR_DOCS_URL")
    if base:
        return base.rstrip("/") + "/" + lang + page
    local = packaged_docs_dir() / lang / "rules" / code / "index.html"
    if local.is_file():
        return local.resolve().as_uri()
    return DEFAULT_DOCS_URL + lang + page
