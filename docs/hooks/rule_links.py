"""MkDocs hook: a rule code written as inline code (`` `TDR105` ``) in prose becomes a link to
that rule's page when the rule exists; codes of rules not yet implemented stay plain code."""

from __future__ import annotations

import posixpath
import re
from typing import Any

_FENCE = re.compile(r"^(```|~~~)", re.M)
_CODE = re.compile(r"(?<!\[)`(TDR\d{3})`(?!\])")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    src = page.file.src_uri
    here = posixpath.dirname(src)
    known = {f.src_uri for f in files}

    def link(match: re.Match[str]) -> str:
        code = match.group(1)
        target = f"rules/{code}.md"
        if target not in known and f"rules/{code}.zh.md" not in known:
            return match.group(0)
        return f"[`{code}`]({posixpath.relpath(target, here or '.')})"

    parts = _FENCE.split(markdown)
    out, inside = [], False
    for part in parts:
        if part in ("```", "~~~"):
            inside = not inside
            out.append(part)
        elif inside:
            out.append(part)
        else:
            out.append(_CODE.sub(link, part))
    return "".join(out)
