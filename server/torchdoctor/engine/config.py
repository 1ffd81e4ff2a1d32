"""Settings: ``[tool.torchdoctor]`` in the nearest ``pyproject.toml``, command-line flags and
editor settings, merged into one typed object."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    """A configuration file or value that cannot be used."""


KEYS = {
    "select": "Rules (codes or prefixes such as `TDR5`, or `ALL`) to enable instead of the defaults.",
    "extend-select": "Rules to enable in addition to the selected ones.",
    "ignore": "Rules to disable.",
    "per-file-ignores": "A table from glob pattern to the rules ignored in matching files.",
    "exclude": "Glob patterns of files and folders never checked (on top of `.gitignore`).",
    "unsafe-fixes": "Apply unsafe fixes with `--fix` and in fix-all.",
    "target-version": "The torch version rules assume (for example `2.13`); by default the installed one.",
    "docs-base-url": "Base URL of the rule pages that diagnostics link to; default: the docs installed with the package.",
}


@dataclass
class Settings:
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    target_version: str | None = None
    docs_base_url: str | None = None
    # Facts of the machine the editor runs on (set by the language server, never from files).
    machine_cpus: int | None = None
    root: Path | None = None  # folder of the configuration file
    # Facts read from a running kernel (``bridge.facts.LiveFacts``), set by the caller, never by
    # a configuration file; only the live rules (TDR9xx) read them.
    live: Any = None

    def fingerprint(self) -> str:
        data = {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("root", "live")
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[
            :16
        ]

    def merged(self, **overrides: Any) -> Settings:
        """A copy with command-line or editor values laid over the file's."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for key, value in overrides.items():
            if value is None:
                continue
            if key == "extend_select" or key == "ignore":
                values[key] = [*values[key], *value]
            else:
                values[key] = value
        return Settings(**values)

    def enabled(self, path: str | None = None) -> frozenset[str]:
        from ..rules import all_rules, resolve_selector

        rules = all_rules()
        if self.select is None:
            chosen = {r.code for r in rules if r.default}
        else:
            chosen = set()
            for sel in self.select:
                chosen |= resolve_selector(sel)
        for sel in self.extend_select:
            chosen |= resolve_selector(sel)
        for sel in self.ignore:
            chosen -= resolve_selector(sel)
        if path and self.per_file_ignores:
            rel = _relative(path, self.root)
            for pattern, codes in self.per_file_ignores.items():
                if _glob_match(rel, pattern):
                    for sel in codes:
                        chosen -= resolve_selector(sel)
        return frozenset(chosen)

    def is_excluded(self, path: Path) -> bool:
        if not self.exclude:
            return False
        rel = _relative(str(path), self.root)
        return any(_glob_match(rel, pattern) for pattern in self.exclude)


def _relative(path: str, root: Path | None) -> str:
    p = Path(path)
    if root is not None:
        try:
            return p.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return p.as_posix()


def _glob_match(rel: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(Path(rel).name, pattern):
        return True
    parts = rel.split("/")
    return any(fnmatch.fnmatch("/".join(parts[: i + 1]), pattern) for i in range(len(parts)))


def _str_list(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"`{key}` must be a list of strings")
    return list(value)


def check_target_version(value: Any, what: str) -> str:
    """``value`` if it names a torch version (``"2.13"``, ``"2.13.0"``); ConfigError otherwise."""
    from .torch_version import parse_version

    if not isinstance(value, str) or parse_version(value) is None:
        raise ConfigError(f'{what} must be a torch version such as "2.13", not {value!r}')
    return value


def settings_from_table(table: dict[str, Any], root: Path | None, origin: str) -> Settings:
    """Validate a ``[tool.torchdoctor]`` table (or editor settings with the same keys)."""
    from ..rules import resolve_selector

    settings = Settings(root=root)
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key not in KEYS:
            known = ", ".join(sorted(KEYS))
            raise ConfigError(f"{origin}: unknown setting `{raw_key}` (known: {known})")
        attr = key.replace("-", "_")
        if key in ("select", "extend-select", "ignore", "exclude"):
            items = _str_list(value, key)
            if key != "exclude":
                for sel in items:
                    if not resolve_selector(sel):
                        raise ConfigError(f"{origin}: `{key}` names no rule: `{sel}`")
            setattr(settings, attr, items)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: `per-file-ignores` must be a table")
            settings.per_file_ignores = {str(k): _str_list(v, key) for k, v in value.items()}
        elif key == "unsafe-fixes":
            if not isinstance(value, bool):
                raise ConfigError(f"{origin}: `unsafe-fixes` must be true or false")
            settings.unsafe_fixes = value
        elif key == "target-version":
            settings.target_version = check_target_version(value, f"{origin}: `target-version`")
        else:
            if not isinstance(value, str):
                raise ConfigError(f"{origin}: `{key}` must be a string")
            setattr(settings, attr, value)
    return settings


def load_file(path: Path) -> Settings:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("torchdoctor", {})
    else:
        table = data.get("tool", {}).get("torchdoctor", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchdoctor] must be a table")
    return settings_from_table(table, path.parent, str(path))


class ConfigFinder:
    """Finds, for each file, the nearest ``pyproject.toml`` with a ``[tool.torchdoctor]`` table."""

    def __init__(self, default: Settings | None = None) -> None:
        self.default = default or Settings()
        self._by_dir: dict[Path, Settings] = {}

    def for_path(self, path: Path) -> Settings:
        start = path.resolve()
        directory = start if start.is_dir() else start.parent
        chain: list[Path] = []
        found: Settings | None = None
        for d in (directory, *directory.parents):
            if d in self._by_dir:
                found = self._by_dir[d]
                break
            chain.append(d)
            candidate = d / "pyproject.toml"
            if candidate.is_file() and _has_table(candidate):
                found = load_file(candidate)
                break
        if found is None:
            found = self.default
        for d in chain:
            self._by_dir[d] = found
        return found


def _has_table(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return "tool.torchdoctor" in text
