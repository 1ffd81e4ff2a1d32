"""Configuration files: ``[tool.torchdoctor]`` in the nearest ``pyproject.toml`` (or a
``torchdoctor.toml`` given on the command line), and editor settings with the same keys,
validated into :class:`~torchdoctor.core.config.Settings`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..core.config import ConfigError, Settings
from ..core.reading import real_path
from ..core.torch_version import parse_version
from .selection import selector_problems

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

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


def _str_list(value: Any, key: str) -> list[str]:
    # A string is refused like any other wrong type (Ruff refuses it too): `select = "TDR6"`
    # is almost always a list that lost its brackets, and silently taking it as one is a guess.
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        example = f'["{value}"]' if isinstance(value, str) else '["TDR6"]'
        raise ConfigError(f"`{key}` must be a list of strings, such as {example}, not {value!r}")
    return list(value)


def check_target_version(value: Any, what: str) -> str:
    """``value`` if it names a torch version (``"2.13"``, ``"2.13.0"``); ConfigError otherwise."""
    if not isinstance(value, str) or parse_version(value) is None:
        raise ConfigError(f'{what} must be a torch version such as "2.13", not {value!r}')
    return value


def settings_from_table(table: dict[str, Any], root: Path | None, origin: str) -> Settings:
    """Validate a ``[tool.torchdoctor]`` table (or editor settings with the same keys). Every
    problem of the table is reported at once: one ConfigError, one line per problem."""
    settings = Settings(root=root)
    problems: list[str] = []
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key not in KEYS:
            known = ", ".join(sorted(KEYS))
            problems.append(f"{origin}: unknown setting `{raw_key}` (known: {known})")
            continue
        try:
            _set(settings, key, value, origin)
        except ConfigError as exc:
            message = str(exc)
            problems.append(message if message.startswith(origin) else f"{origin}: {message}")
    problems.extend(selector_problems(settings, origin))
    if problems:
        raise ConfigError("\n".join(problems))
    return settings


def _set(settings: Settings, key: str, value: Any, origin: str) -> None:
    attr = key.replace("-", "_")
    if key in ("select", "extend-select", "ignore", "exclude"):
        setattr(settings, attr, _str_list(value, key))
    elif key == "per-file-ignores":
        if not isinstance(value, dict):
            raise ConfigError("`per-file-ignores` must be a table")
        settings.per_file_ignores = {
            str(k): _str_list(v, f"per-file-ignores.{k}") for k, v in value.items()
        }
    elif key == "unsafe-fixes":
        if not isinstance(value, bool):
            raise ConfigError("`unsafe-fixes` must be true or false")
        settings.unsafe_fixes = value
    elif key == "target-version":
        settings.target_version = check_target_version(value, f"{origin}: `target-version`")
    else:
        if not isinstance(value, str):
            raise ConfigError(f"`{key}` must be a string")
        setattr(settings, attr, value)


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
        self._by_path: dict[Path, Settings] = {}  # paths asked for already

    def for_path(
        self, path: Path, resolved: Path | None = None, *, is_dir: bool | None = None
    ) -> Settings:
        """The settings of ``path``; ``resolved`` (its real path) and ``is_dir``, when the
        caller knows them, save the system calls that find them."""
        known = self._by_path.get(path)
        if known is not None:
            return known
        start = resolved if resolved is not None else real_path(path)
        if is_dir is None:
            is_dir = start.is_dir()
        found = self._for_dir(start if is_dir else start.parent)
        self._by_path[path] = found
        return found

    def _for_dir(self, directory: Path) -> Settings:
        known = self._by_dir.get(directory)
        if known is not None:
            return known
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
