"""The torch version rules assume: ``target-version`` from the settings, else the version
installed in the environment (read from package metadata, torch is never imported), else the
newest (``None``: every version-gated check applies as for the latest release)."""

from __future__ import annotations

import re
from functools import cache
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Settings

Version = tuple[int, int]

_VERSION = re.compile(r"(\d+)\.(\d+)")


def parse_version(text: str | None) -> Version | None:
    """``(2, 13)`` for ``"2.13"``, ``"2.13.0+cu128"`` or ``"torch==2.13"``; None otherwise."""
    if not text:
        return None
    match = _VERSION.search(text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


@cache
def installed_version() -> Version | None:
    """The version of the ``torch`` distribution installed here, if any."""
    try:
        return parse_version(metadata.version("torch"))
    except (metadata.PackageNotFoundError, ValueError):
        return None


def target_version(settings: Settings | None) -> Version | None:
    """The version to check against; None means "the newest"."""
    if settings is not None and settings.target_version:
        parsed = parse_version(settings.target_version)
        if parsed is not None:
            return parsed
    return installed_version()


def at_least(settings: Settings | None, version: str | None) -> bool:
    """Whether the target is ``version`` or newer (always true for an unknown target or an
    empty ``version``)."""
    wanted = parse_version(version)
    if wanted is None:
        return True
    target = target_version(settings)
    return target is None or target >= wanted


def before(settings: Settings | None, version: str) -> bool:
    """Whether the target is known to be older than ``version``."""
    wanted = parse_version(version)
    target = target_version(settings)
    return wanted is not None and target is not None and target < wanted


def format_version(version: Version | None) -> str:
    return "the newest" if version is None else f"{version[0]}.{version[1]}"
