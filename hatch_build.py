"""Build hook: a torchdoctor wheel (or sdist) carries the offline HTML documentation that
`torchdoctor docs` and the findings' links open, or the build stops and says how to build it.
An editable install (`pip install -e .`) builds the documentation on first use instead."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DOCS_INDEX = Path("server", "torchdoctor", "_docs", "index.html")
OPT_OUT = "TORCHDOCTOR_WHEEL_WITHOUT_DOCS"


class OfflineDocsHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable" or (Path(self.root) / DOCS_INDEX).is_file():
            return
        if os.environ.get(OPT_OUT) == "1":
            self.app.display_warning(
                f"torchdoctor: building the {self.target_name} without the offline documentation "
                f"({OPT_OUT}=1): `torchdoctor docs` and findings will link to the public site"
            )
            return
        raise SystemExit(
            f"torchdoctor: the {self.target_name} would ship without the offline documentation "
            f"({DOCS_INDEX.as_posix()} is missing). Build it first: "
            "pip install -e '.[docs]' && torchdoctor generate-docs --build "
            "(scripts/build-release.sh does both); "
            f"or set {OPT_OUT}=1 to build one without it on purpose."
        )
