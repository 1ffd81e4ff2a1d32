"""Rule documentation, from one source: each rule's docstring (English) and ``zh`` (Chinese).

Used by ``torchdoctor rule``, editor hovers and the generated documentation pages.
"""

from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass
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


def rule_doc(rule: type[Rule], locale: str | None = None) -> RuleDoc:
    zh = is_chinese(locale) and bool(rule.zh)
    sections = split_sections(rule.zh if zh else (rule.__doc__ or ""))
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
