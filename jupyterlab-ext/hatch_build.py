"""Build hook, run before the JupyterLab builder: building the labextension from source needs
Node.js >= 20. Without it, one clear line says so (rather than a traceback from the builder);
a prebuilt labextension (the released wheel, or a tree where `jlpm build` has run) needs none."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BUILT = Path("jupyterlab_torchdoctor", "labextension", "package.json")
NODE_MAJOR = 20


class NodeCheckHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if (Path(self.root) / BUILT).is_file():
            return
        node = shutil.which("node")
        found = ""
        if node is not None:
            try:
                found = subprocess.run(
                    [node, "--version"], capture_output=True, text=True, timeout=30, check=False
                ).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                found = ""
        match = re.match(r"v?(\d+)", found)
        if match and int(match.group(1)) >= NODE_MAJOR:
            return
        what = f"found {found}" if found else "no working `node` on PATH"
        raise SystemExit(
            f"jupyterlab-torchdoctor: building the JupyterLab extension from source needs "
            f"Node.js >= {NODE_MAJOR} ({what}); install Node.js, or install the prebuilt wheel "
            "(dist/jupyterlab_torchdoctor-*.whl from scripts/build-release.sh, or "
            "`pip install jupyterlab-torchdoctor` once it is published)."
        )
