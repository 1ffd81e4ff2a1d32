"""What ships: the wheel (with the offline docs when they are built), the commands an installed
wheel has, the .vsix packaging, and test runs that leave the work tree clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "TORCHDOCTOR_LOCALE": "", **env}
    full_env.pop("TORCHDOCTOR_DOCS_URL", None)
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env=full_env, timeout=300, check=False
    )


def _project_copy(dest: Path, docs: bool) -> Path:
    """The files a build reads, copied; with a stand-in for the built HTML docs."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", ".gitignore", "LICENSE"):
        shutil.copy2(REPO / name, dest / name)
    for name in ("hatch_build.py",):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(
        REPO / "server" / "torchdoctor",
        dest / "server" / "torchdoctor",
        ignore=shutil.ignore_patterns("__pycache__", "_docs"),
    )
    if docs:
        page = dest / "server" / "torchdoctor" / "_docs" / "rules" / "TDR105" / "index.html"
        page.parent.mkdir(parents=True)
        page.write_text("<html>TDR105</html>")
        (dest / "server" / "torchdoctor" / "_docs" / "index.html").write_text("<html></html>")
    return dest


def _wheel(source: Path, out: Path, **env: str) -> Path:
    run = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "."],
        source,
        PIP_WHEEL_DIR=str(out),
        **env,
    )
    assert run.returncode == 0, run.stderr
    (wheel,) = out.glob("torchdoctor-*.whl")
    return wheel


def test_a_wheel_built_from_the_sdist_has_the_built_docs(tmp_path: Path) -> None:
    """`python -m build` builds the sdist, then the wheel from it: the docs must pass through."""
    project = _project_copy(tmp_path / "project", docs=True)
    run = _run(
        [sys.executable, "-c", "from hatchling.build import build_sdist; build_sdist('dist')"],
        project,
    )
    assert run.returncode == 0, run.stderr
    (sdist,) = (project / "dist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "sdist", filter="data")
    (unpacked,) = (tmp_path / "sdist").iterdir()
    (tmp_path / "wheels").mkdir()
    wheel = _wheel(unpacked, tmp_path / "wheels")
    names = zipfile.ZipFile(wheel).namelist()
    assert "torchdoctor/_docs/rules/TDR105/index.html" in names
    assert "torchdoctor-0.1.0.dist-info/licenses/LICENSE" in names
    with tarfile.open(sdist) as tar:
        assert any(n.endswith("/LICENSE") for n in tar.getnames())
    # Built from the tree directly, too.
    (tmp_path / "direct").mkdir()
    assert (
        "torchdoctor/_docs/index.html"
        in zipfile.ZipFile(_wheel(project, tmp_path / "direct")).namelist()
    )


def test_a_wheel_without_the_docs_is_not_built_unless_asked_for(tmp_path: Path) -> None:
    project = _project_copy(tmp_path / "project", docs=False)
    run = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "."],
        project,
        PIP_WHEEL_DIR=str(tmp_path / "wheels"),
    )
    assert run.returncode != 0
    assert "Traceback" not in run.stdout + run.stderr
    assert (
        "torchdoctor: the wheel would ship without the offline documentation "
        "(server/torchdoctor/_docs/index.html is missing). Build it first: "
        "pip install -e '.[docs]' && torchdoctor generate-docs --build"
    ) in run.stdout + run.stderr
    assert not list((tmp_path / "wheels").glob("*.whl"))


def test_an_installed_wheel_explains_docs_and_generate_docs(tmp_path: Path) -> None:
    project = _project_copy(tmp_path / "project", docs=False)
    (tmp_path / "wheels").mkdir()
    wheel = _wheel(project, tmp_path / "wheels", TORCHDOCTOR_WHEEL_WITHOUT_DOCS="1")
    site = tmp_path / "site"
    run = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        tmp_path,
    )
    assert run.returncode == 0, run.stderr
    work = tmp_path / "work"
    work.mkdir()
    td = [sys.executable, "-m", "torchdoctor"]
    run = _run([*td, "generate-docs"], work, PYTHONPATH=str(site))
    assert run.returncode == 2
    assert "generate-docs is a development command" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    run = _run([*td, "docs", "--no-browser", "TDR105"], work, PYTHONPATH=str(site))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "https://torchdoctor.dev/rules/TDR105/"
    assert "`torchdoctor generate-docs --build` before building the wheel" in run.stderr


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm")
def test_npm_run_package_fails_loudly_without_the_bundled_wheel(tmp_path: Path) -> None:
    shutil.copy2(REPO / "vscode-extension" / "package.json", tmp_path / "package.json")
    run = _run(["npm", "run", "package"], tmp_path)
    assert run.returncode != 0
    assert "no torchdoctor wheel in bundled/" in run.stderr, run.stderr


def test_the_ui_test_writes_its_screenshot_where_git_ignores_it() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    script = (REPO / "vscode-extension" / "scripts" / "ui.mjs").read_text(encoding="utf-8")
    line = next(ln for ln in script.splitlines() if "const shot = path.join(EXT_DIR" in ln)
    parts = [
        p.strip().strip('"') for p in line.split("path.join(EXT_DIR,")[1].rstrip(");").split(",")
    ]
    shot = Path("vscode-extension", *parts).as_posix()
    ignored = subprocess.run(["git", "check-ignore", "-q", shot], cwd=REPO, check=False)
    assert ignored.returncode == 0, f"{shot} is not ignored by git: a UI test run changes the tree"
    readme = (REPO / "vscode-extension" / "README.md").read_text(encoding="utf-8")
    assert shot.removeprefix("vscode-extension/") in readme


def test_every_package_carries_the_license() -> None:
    """LICENSE (BSD-3-Clause, as both pyproject files declare) at the root, and the same text
    where the JupyterLab wheel and the .vsix are built from (each packs the file next to it)."""
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License") and "torchdoctor developers" in text
    for folder in ("jupyterlab-ext", "vscode-extension"):
        assert (REPO / folder / "LICENSE").read_text(encoding="utf-8") == text, folder
    for pyproject in (REPO / "pyproject.toml", REPO / "jupyterlab-ext" / "pyproject.toml"):
        toml = pyproject.read_text(encoding="utf-8")
        assert 'license = "BSD-3-Clause"' in toml and 'license-files = ["LICENSE"]' in toml
    assert "--skip-license" not in (REPO / "vscode-extension" / "package.json").read_text(
        encoding="utf-8"
    )
