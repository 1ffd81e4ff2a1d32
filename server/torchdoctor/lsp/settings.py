"""Editor settings for the language server: typed, validated key by key.

A value of the wrong type never breaks the server: that key falls back to its default and the
problem is reported once in the log. Keys are camelCase (as editors send them); kebab-case and
snake_case spellings are accepted too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..core.config import Settings

LOG_LEVELS = ("error", "warning", "info", "debug")
DEFAULT_DEBOUNCE_MS = 100
MAX_DEBOUNCE_MS = 5000


@dataclass(frozen=True)
class ClientSettings:
    """What the editor configured (``initializationOptions`` and ``workspace/configuration``).

    ``None`` means "not set here": the value from ``[tool.torchdoctor]`` (or the default) holds.
    """

    enable: bool = True
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool | None = None
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    docs_base_url: str | None = None
    log_level: str = "info"
    bridge: bool = True  # live facts from the notebook's running kernel (hovers, TDR901-TDR904)
    kernel_connection_file: str | None = None  # explicit kernel for notebooks (else discovered)
    # Keys that were given explicitly (so layers can be merged).
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def overlay(self, other: ClientSettings) -> ClientSettings:
        """These settings with every key ``other`` sets explicitly laid on top."""
        values = {name: getattr(other, name) for name in other.given}
        return replace(self, **values, given=self.given | other.given)

    def apply(self, base: Settings) -> Settings:
        """The engine settings for a file: its ``[tool.torchdoctor]`` with these on top."""
        return base.merged(
            select=list(self.select) if self.select is not None else None,
            extend_select=list(self.extend_select) or None,
            ignore=list(self.ignore) or None,
            unsafe_fixes=self.unsafe_fixes,
            docs_base_url=self.docs_base_url,
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "given":
                continue
            value = getattr(self, f.name)
            out[_camel(f.name)] = list(value) if isinstance(value, tuple) else value
        return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_NAMES = {f.name for f in fields(ClientSettings) if f.name != "given"}
_SPELLINGS = {
    spelling: name for name in _NAMES for spelling in (name, _camel(name), name.replace("_", "-"))
}


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("must be true or false")


def _codes(value: Any) -> tuple[str, ...]:
    from ..linter.registry import resolve_selector

    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of rule codes")
    unknown = [v for v in value if not resolve_selector(v)]
    if unknown:
        raise ValueError(f"names no rule: {', '.join(unknown)}")
    return tuple(v.strip().upper() for v in value)


def _debounce(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number of milliseconds")
    if not 0 <= value <= MAX_DEBOUNCE_MS:
        raise ValueError(f"must be between 0 and {MAX_DEBOUNCE_MS}")
    return int(value)


def _optional_text(what: str) -> Callable[[Any], str | None]:
    """A parser for a string setting that may be empty (None); ``what`` names it in errors."""

    def parse(value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError(f"must be {what}")
        return value

    return parse


def _log_level(value: Any) -> str:
    if not isinstance(value, str) or value.lower() not in (*LOG_LEVELS, "warn", "off"):
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    level = value.lower()
    return {"warn": "warning", "off": "error"}.get(level, level)


_PARSERS = {
    "enable": _bool,
    "select": _codes,
    "extend_select": _codes,
    "ignore": _codes,
    "unsafe_fixes": _bool,
    "debounce_ms": _debounce,
    "docs_base_url": _optional_text("a URL"),
    "log_level": _log_level,
    "bridge": _bool,
    "kernel_connection_file": _optional_text("a file path"),
}


def parse_settings(raw: Any, origin: str) -> tuple[ClientSettings, list[str]]:
    """Typed settings from an editor's JSON object, and the problems found (one line each).

    Accepts the settings object itself or one wrapped as ``{"torchdoctor": {...}}``. Unknown
    keys are ignored (editors send settings of other versions); invalid values are dropped.
    """
    problems: list[str] = []
    if raw is None:
        return ClientSettings(), problems
    if isinstance(raw, dict) and isinstance(raw.get("torchdoctor"), dict):
        raw = raw["torchdoctor"]
    if not isinstance(raw, dict):
        return ClientSettings(), [f"{origin}: settings must be an object; using defaults"]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = _SPELLINGS.get(str(key))
        if name is None:
            continue
        if value is None and name in (
            "select",
            "unsafe_fixes",
            "docs_base_url",
            "kernel_connection_file",
        ):
            values[name] = None
            continue
        try:
            parsed = _PARSERS[name](value)
            # An empty `select` from an editor means "not set", never "no rules at all".
            values[name] = None if name == "select" and not parsed else parsed
        except ValueError as exc:
            problems.append(f"{origin}: `{key}` {exc}; using the default")
    return ClientSettings(**values, given=frozenset(values)), problems
