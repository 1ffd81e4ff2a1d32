"""Selection: which rules run on a file, from ``select``, ``extend-select``, ``ignore`` and
``per-file-ignores``."""

from __future__ import annotations

from ..core.config import ConfigError, Settings, glob_match, relative
from .registry import all_rules, resolve_selector


def enabled_codes(settings: Settings, path: str | None = None) -> frozenset[str]:
    """The codes of the rules that run on ``path`` under ``settings``."""
    rules = all_rules()
    if settings.select is None:
        chosen = {r.code for r in rules if r.default}
    else:
        chosen = set()
        for sel in settings.select:
            chosen |= resolve_selector(sel)
    for sel in settings.extend_select:
        chosen |= resolve_selector(sel)
    for sel in settings.ignore:
        chosen -= resolve_selector(sel)
    if path and settings.per_file_ignores:
        rel = relative(path, settings.root)
        for pattern, codes in settings.per_file_ignores.items():
            if glob_match(rel, pattern):
                for sel in codes:
                    chosen -= resolve_selector(sel)
    return frozenset(chosen)


def selector_problems(settings: Settings, origin: str) -> list[str]:
    """What is wrong with ``select``, ``extend-select`` and ``ignore``: each selector that names
    no rule."""
    problems = []
    for key, items in (
        ("select", settings.select or []),
        ("extend-select", settings.extend_select),
        ("ignore", settings.ignore),
    ):
        for sel in items:
            if not resolve_selector(sel):
                problems.append(f"{origin}: `{key}` names no rule: `{sel}`")
    return problems


def check_selectors(settings: Settings, origin: str) -> None:
    """ConfigError (one line per problem) when a selector names no rule."""
    problems = selector_problems(settings, origin)
    if problems:
        raise ConfigError("\n".join(problems))
