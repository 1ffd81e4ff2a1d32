"""The rule registry: every ``tdrNNN_*`` module of ``torchdoctor.rules`` holds exactly one rule;
the registry finds them, and resolves codes, prefixes, names and other tools' codes."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .. import rules as _package
from ..rules.api_table import TORCHFIX_ALIASES
from ..rules.base import Rule

__all__ = ["ALIASES", "alias_targets", "all_rules", "get_rule", "resolve_selector"]

# Other tools' codes -> the TDR code (or prefix) they mean; a tuple when one TorchFix check is
# split over several rules (TOR102 -> TDR602 and TDR603).
ALIASES: dict[str, str | tuple[str, ...]] = {}


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for info in sorted(pkgutil.iter_modules(_package.__path__), key=lambda m: m.name):
        if not info.name.startswith("tdr"):
            continue
        module = importlib.import_module(f"{_package.__name__}.{info.name}")
        rules = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type)
            and issubclass(obj, Rule)
            and obj.__module__ == module.__name__
            and obj is not Rule
            and getattr(obj, "code", None)
        ]
        if len(rules) != 1:
            raise RuntimeError(
                f"{module.__name__} must define exactly one rule, found {len(rules)}"
            )
        found.append(rules[0])
    found.sort(key=lambda r: r.code)
    codes = [r.code for r in found]
    if len(codes) != len(set(codes)):
        raise RuntimeError("duplicate rule codes")
    for rule in found:
        for alias in rule.aliases:
            _add_alias(alias, (rule.code,))
    for code, target in _extra_aliases().items():
        _add_alias(code, (target,) if isinstance(target, str) else tuple(target))
    return tuple(found)


def alias_targets(code: str) -> tuple[str, ...]:
    """The TDR codes (or prefixes) an alias stands for, also for a prefix of aliases
    (``TOR1`` means every ``TOR1xx``); empty when ``code`` names no alias."""
    code = code.upper()
    target = ALIASES.get(code)
    if target is not None:
        return (target,) if isinstance(target, str) else target
    if code.startswith("TDR") or len(code) < 3:
        return ()
    out: list[str] = []
    for alias, value in ALIASES.items():
        if alias.startswith(code):
            out.extend((value,) if isinstance(value, str) else value)
    return tuple(dict.fromkeys(out))


def _add_alias(alias: str, targets: tuple[str, ...]) -> None:
    old = ALIASES.get(alias, ())
    merged = tuple(dict.fromkeys(((old,) if isinstance(old, str) else old) + targets))
    ALIASES[alias] = merged[0] if len(merged) == 1 else merged


def _extra_aliases() -> dict[str, str | tuple[str, ...]]:
    """Aliases that name a prefix rather than one rule (filled by the API-hygiene table)."""
    return dict(TORCHFIX_ALIASES)


def get_rule(code: str) -> type[Rule] | None:
    code = code.upper()
    for rule in all_rules():
        if rule.code == code or rule.name == code.lower():
            return rule
    for target in alias_targets(code):
        if target != code:
            found = get_rule(target)
            if found is not None:
                return found
    return None


def resolve_selector(selector: str) -> frozenset[str]:
    """Codes named by ``ALL``, a code, a prefix (``TDR5``), a rule name or a TorchFix code."""
    sel = selector.strip().upper()
    rules = all_rules()
    if sel == "ALL":
        return frozenset(r.code for r in rules)
    targets = alias_targets(sel)
    if targets:
        return frozenset(r.code for r in rules for t in targets if r.code.startswith(t))
    by_name = [r.code for r in rules if r.name == selector.strip().lower()]
    if by_name:
        return frozenset(by_name)
    return frozenset(r.code for r in rules if r.code.startswith(sel))
