"""The live rules' entry points for callers with a kernel (the language server, ``probe``):
what to ask the kernel for a document, and the live findings once it has answered. The facts
themselves are read by the kernel bridge; the rules are pure (``rules/live.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..core.config import Settings
from ..core.live_facts import FactDict, LiveFacts, ProbeRequest
from ..core.model import Finding
from ..core.notebook import Notebook, NotebookError
from ..rules.live import LIVE_CODES, MAX_NAMES, probe_request
from .runner import NO_PROBE, analysed, check_text, mentions_torch
from .selection import enabled_codes

NO_REQUEST = NO_PROBE


def _code_of(text: str, path: str, notebook: Notebook | None) -> tuple[str, Notebook | None] | None:
    """(source text, Notebook or None) for a document; notebooks as raw JSON or cells."""
    if notebook is not None:
        return notebook.text, notebook
    if path.endswith(".ipynb") and text.lstrip().startswith("{"):
        try:
            nb = Notebook(text)
        except NotebookError:
            return None
        return nb.text, nb
    return text, None


def collect_request(
    text: str, path: str = "<stdin>", limit: int = MAX_NAMES, *, notebook: Notebook | None = None
) -> ProbeRequest:
    """What to ask the kernel for a document: the names worth probing (operands of the
    expressions the live rules look at) and the ``view`` shapes to replay.

    For a notebook pass its raw JSON as ``text`` (path ending in ``.ipynb``), or the
    ``Notebook`` built from the editor's cells (``Notebook.from_cells``) as ``notebook``.
    """
    parsed = _code_of(text, path, notebook)
    if parsed is None:
        return NO_REQUEST
    code, nb = parsed
    if not mentions_torch(code):
        return NO_REQUEST
    with analysed(code, path, Settings(), notebook=nb) as (ctx, _errors):
        return NO_REQUEST if ctx is None else probe_request(ctx, limit)


def collect_names(
    text: str, path: str = "<stdin>", *, notebook: Notebook | None = None
) -> list[str]:
    """The names in a document worth probing for the live rules (at most ``MAX_NAMES``)."""
    return list(collect_request(text, path, notebook=notebook).names)


def live_findings(
    text: str,
    path: str,
    facts: LiveFacts | Mapping[str, FactDict],
    execution_count: int | None = None,
    settings: Settings | None = None,
    *,
    kernel: Mapping[str, Any] | None = None,
    notebook: Notebook | None = None,
) -> list[Finding]:
    """Findings of the live rules for one document, given the kernel's facts.

    ``text`` is Python source, or a notebook's raw JSON when ``path`` ends with ``.ipynb``
    (findings then carry ``cell`` and ``cell_range``); or pass the ``Notebook`` built from the
    editor's cells (``Notebook.from_cells``) as ``notebook``. ``facts`` is a :class:`LiveFacts` (as
    :meth:`KernelBridge.probe` returns) or a plain mapping name -> facts. Only live rules that the
    settings enable for ``path`` run.
    """
    if isinstance(facts, LiveFacts):
        live = facts
        if execution_count is not None or kernel is not None:
            live = dataclasses.replace(
                live,
                execution_count=execution_count
                if execution_count is not None
                else live.execution_count,
                kernel=kernel if kernel is not None else live.kernel,
            )
    else:
        live = LiveFacts(names=dict(facts), execution_count=execution_count, kernel=kernel or {})
    base = settings or Settings()
    codes = enabled_codes(base, path) & LIVE_CODES
    if not codes:
        return []
    parsed = _code_of(text, path, notebook)
    if parsed is None:
        return []
    code, nb = parsed
    result = check_text(code, path, base, notebook=nb, codes=frozenset(codes), live=live)
    return [f for f in result.findings if f.code in LIVE_CODES]
