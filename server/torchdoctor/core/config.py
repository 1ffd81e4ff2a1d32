"""Settings: what ``[tool.torchdoctor]``, command-line flags and editor settings say, merged into
one typed object. Reading configuration files and resolving rule selectors is the linter's
(``linter.configuration``, ``linter.selection``)."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration file or value that cannot be used."""


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

    def fingerprint(self) -> str:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "root"}
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

    def is_excluded(self, path: Path) -> bool:
        if not self.exclude:
            return False
        rel = relative(str(path), self.root)
        return any(glob_match(rel, pattern) for pattern in self.exclude)


def relative(path: str, root: Path | None) -> str:
    p = Path(path)
    if root is not None:
        try:
            return p.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return p.as_posix()


def glob_match(rel: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(Path(rel).name, pattern):
        return True
    parts = rel.split("/")
    return any(fnmatch.fnmatch("/".join(parts[: i + 1]), pattern) for i in range(len(parts)))
