"""The package's layers point one way. This file is where their order is written down.

Every module's imports are read from its source (function-local imports and imports under
``TYPE_CHECKING`` included); a module may import its own layer and the layers below it, never one
above. ``docs/architecture.md`` explains what each layer holds.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "torchdoctor"

# Lowest first. ``torchdoctor`` itself (``__init__.py``) holds only the version.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("torchdoctor",),  # the version
    ("torchdoctor.core",),  # source, parse, facts, fixes, findings: knows no rule
    ("torchdoctor.rules",),  # one rule per module, and what rules share
    ("torchdoctor.linter",),  # registry, selection, configuration files, the run
    ("torchdoctor.bridge",),  # the kernel bridge (its kernel side: stdlib + torch only)
    ("torchdoctor.run",),  # `torchdoctor run`: its reports, findings, HTML, in-process side
    ("torchdoctor.lsp",),  # the language server
    ("torchdoctor.cli", "torchdoctor.run.command"),  # the command line (it starts the server)
    # entry points, and how they are started with nothing of the workspace on sys.path
    ("torchdoctor.__main__", "torchdoctor.jupyter_lsp", "torchdoctor.launch"),
)
# Third-party packages of the editor and the kernel: not below the layer that talks to them.
OUTSIDE_ALLOWED_FROM = {
    "pygls": "torchdoctor.lsp",
    "lsprotocol": "torchdoctor.lsp",
    "jupyter_client": "torchdoctor.bridge",
}
KERNEL_SIDE = "torchdoctor.bridge._kernel_probe"  # runs inside the user's kernel
RUN_SIDE = "torchdoctor.run._bootstrap"  # runs inside the user's process (`torchdoctor run`)


def module_name(path: Path) -> str:
    parts = ["torchdoctor", *path.relative_to(PACKAGE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(row, absolute module) of every import in ``source``, wherever it stands; for
    ``from package import name`` both ``package`` and ``package.name`` are listed."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            out.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return out


def layer_of(module: str) -> int | None:
    """The index of the layer a torchdoctor module belongs to (the longest matching prefix)."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    here = layer_of(module)
    assert here is not None, f"{module} belongs to no layer: add it to LAYERS"
    found: dict[int, str] = {}  # one problem per import statement
    for row, target in imported_modules(source, module, is_package):
        if row in found:
            continue
        top = target.split(".")[0]
        if top == "torchdoctor":
            there = layer_of(target)
            if there is not None and there > here:
                found[row] = f"{module}:{row} imports {target} (a higher layer)"
        elif top in OUTSIDE_ALLOWED_FROM:
            allowed = layer_of(OUTSIDE_ALLOWED_FROM[top])
            assert allowed is not None
            if here < allowed:
                found[row] = f"{module}:{row} imports {target} (editor or kernel library)"
    return list(found.values())


def package_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_imports_a_higher_layer() -> None:
    problems: list[str] = []
    for path in package_modules():
        problems += violations(
            path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py"
        )
    assert problems == []


def test_the_kernel_side_imports_only_the_standard_library_and_torch() -> None:
    path = PACKAGE / "bridge" / "_kernel_probe.py"
    imported = {
        target.split(".")[0]
        for _row, target in imported_modules(path.read_text(), KERNEL_SIDE, False)
    }
    assert imported, "the kernel side imports something"
    assert imported <= set(sys.stdlib_module_names) | {"torch", "__future__"}


def test_the_run_side_imports_only_the_standard_library_and_torch() -> None:
    path = PACKAGE / "run" / "_bootstrap.py"
    imported = {
        target.split(".")[0] for _row, target in imported_modules(path.read_text(), RUN_SIDE, False)
    }
    assert imported, "the run side imports something"
    assert imported <= set(sys.stdlib_module_names) | {"torch", "__future__"}


def test_every_module_belongs_to_a_layer() -> None:
    assert all(layer_of(module_name(p)) is not None for p in package_modules())


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from ..rules.base import Rule", "torchdoctor.core.context", 1),
        # Imports inside functions and under TYPE_CHECKING count too.
        ("def f():\n    from ..linter import runner", "torchdoctor.rules.tdr101_x", 1),
        (
            "if TYPE_CHECKING:\n    from torchdoctor.lsp.server import X",
            "torchdoctor.bridge.client",
            1,
        ),
        ("from .. import linter", "torchdoctor.rules.base", 1),
        ("import pygls", "torchdoctor.linter.runner", 1),
        ("from ..core.model import Finding", "torchdoctor.rules.base", 0),
        ("from . import api_table", "torchdoctor.rules.tdr801_x", 0),
        ("from .. import __version__", "torchdoctor.cli.main", 0),
        ("from ..lsp import server", "torchdoctor.cli.main", 0),
    ],
)
def test_the_check_itself(source: str, module: str, expected: int) -> None:
    assert len(violations(source, module)) == expected
