"""Rule registry: every ``tdrNNN_*`` module in this package holds exactly one rule."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .base import Invalid, Rule, Valid

__all__ = ["Invalid", "Rule", "Valid", "all_rules", "get_rule", "resolve_selector", "ALIASES"]

ALIASES: dict[str, str] = {}


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("tdr"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        rules = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__
            and obj is not Rule and getattr(obj, "code", None)
        ]
        if len(rules) != 1:
            raise RuntimeError(f"{module.__name__} must define exactly one rule, found {len(rules)}")
        found.append(rules[0])
    found.sort(key=lambda r: r.code)
    codes = [r.code for r in found]
    if len(codes) != len(set(codes)):
        raise RuntimeError("duplicate rule codes")
    for rule in found:
        for alias in rule.aliases:
            ALIASES[alias] = rule.code
    for code, target in _extra_aliases().items():
        ALIASES.setdefault(code, target)
    return tuple(found)


def _extra_aliases() -> dict[str, str]:
    """Aliases that name a prefix rather than one rule (filled by the API-hygiene table)."""
    try:
        from .api_table import TORCHFIX_ALIASES
    except ImportError:
        return {}
    return dict(TORCHFIX_ALIASES)


def get_rule(code: str) -> type[Rule] | None:
    code = code.upper()
    for rule in all_rules():
        if rule.code == code or rule.name == code.lower():
            return rule
    target = ALIASES.get(code)
    if target:
        return get_rule(target)
    return None


def resolve_selector(selector: str) -> frozenset[str]:
    """Codes named by ``ALL``, a code, a prefix (``TDR5``), a rule name or a TorchFix code."""
    sel = selector.strip().upper()
    rules = all_rules()
    if sel == "ALL":
        return frozenset(r.code for r in rules)
    if sel in ALIASES:
        sel = ALIASES[sel]
    by_name = [r.code for r in rules if r.name == selector.strip().lower()]
    if by_name:
        return frozenset(by_name)
    return frozenset(r.code for r in rules if r.code.startswith(sel))
