"""Installs the release artifacts of dist/ (scripts/build-release.sh), not the source tree, into
fresh virtual environments, as a user would, with no Node.js on PATH (a `node` that fails
stands first on PATH; what asked for it is reported), and checks that each one works:

- the torchdoctor wheel and sdist hold the offline docs and LICENSE; installed, `torchdoctor
  check` finds the examples' pitfalls, and `torchdoctor docs TDR105` resolves to the page installed
  with it (printed with --no-browser; the file exists inside the environment);
- with JupyterLab and the jupyterlab-torchdoctor wheel, `jupyter labextension list` shows the
  extension enabled and installed from its Python package, and a Jupyter server started from
  the environment on a free loopback port answers GET /torchdoctor/info;
- installing ./jupyterlab-ext from source without Node.js stops with one clear line;
- the .vsix holds LICENSE and the very torchdoctor wheel of dist/.

Usage: python scripts/check-release.py [DIST]   (exit 0: every check passed)
Packages come from the package index pip is configured with (or its local mirrors)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS_PAGE = "torchdoctor/_docs/rules/TDR105/index.html"
# The JupyterLab the extension is built and tested against (pyproject's test extra).
JUPYTERLAB = "jupyterlab==4.6.6"


def step(name: str) -> None:
    print(f"::: {name}", flush=True)


def run(cmd: list[str | Path], *, env: dict[str, str], cwd: Path | None = None, ok=(0,)) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode not in ok:
        raise SystemExit(
            f"check-release: `{' '.join(map(str, cmd))}` exited {proc.returncode}\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc.stdout + proc.stderr


def only(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"check-release: expected one {pattern} in {folder}, found {found}")
    return found[0]


def no_node_env(tmp: Path) -> tuple[dict[str, str], Path]:
    """PATH with a `node` (and npm, npx) first that fails and leaves a mark when run."""
    stubs = tmp / "no-node"
    stubs.mkdir()
    mark = tmp / "node-was-run"
    for name in ("node", "npm", "npx"):
        stub = stubs / name
        stub.write_text(
            f'#!/bin/sh\necho "$0 $*" >> "{mark}"\necho "no Node.js here" >&2\nexit 127\n'
        )
        stub.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}"
    env["TORCHDOCTOR_LOCALE"] = "en"
    env.pop("TORCHDOCTOR_DOCS_URL", None)
    return env, mark


def fresh_venv(path: Path, env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """A new virtual environment; its commands come right after the failing `node`."""
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    bin_dir = path / "bin"
    stubs, *rest = env["PATH"].split(os.pathsep)
    venv_path = os.pathsep.join([stubs, str(bin_dir), *rest])
    return bin_dir, {**env, "PATH": venv_path, "VIRTUAL_ENV": str(path)}


def check_archives(dist: Path) -> tuple[Path, Path, Path]:
    step("archives: docs, LICENSE, install.json, the bundled wheel")
    wheel = only(dist, "torchdoctor-*-py3-none-any.whl")
    sdist = only(dist, "torchdoctor-*.tar.gz")
    lab = only(dist, "jupyterlab_torchdoctor-*-py3-none-any.whl")
    vsix = only(dist, "torchdoctor-*.vsix")
    names = set(zipfile.ZipFile(wheel).namelist())
    version = wheel.name.split("-")[1]
    for need in ("torchdoctor/_docs/index.html", "torchdoctor/_docs/zh/index.html", DOCS_PAGE,
                 f"torchdoctor-{version}.dist-info/licenses/LICENSE"):  # fmt: skip
        assert need in names, f"{wheel.name} lacks {need}"
    with tarfile.open(sdist) as tar:
        tar_names = set(tar.getnames())
    for need in (f"torchdoctor-{version}/LICENSE", f"torchdoctor-{version}/server/{DOCS_PAGE}"):
        assert need in tar_names, f"{sdist.name} lacks {need}"
    lab_names = set(zipfile.ZipFile(lab).namelist())
    data = f"jupyterlab_torchdoctor-{version}.data/data/share/jupyter/labextensions/"
    for need in (data + "jupyterlab-torchdoctor/install.json",
                 data + "jupyterlab-torchdoctor/package.json",
                 f"jupyterlab_torchdoctor-{version}.dist-info/licenses/LICENSE"):  # fmt: skip
        assert need in lab_names, f"{lab.name} lacks {need}"
    with zipfile.ZipFile(vsix) as z:
        vsix_names = set(z.namelist())
        assert "extension/LICENSE.txt" in vsix_names or "extension/LICENSE" in vsix_names, (
            f"{vsix.name} has no LICENSE"
        )
        bundled = f"extension/bundled/{wheel.name}"
        assert bundled in vsix_names, f"{vsix.name} lacks {bundled}"
        inner = hashlib.sha256(z.read(bundled)).hexdigest()
    assert inner == hashlib.sha256(wheel.read_bytes()).hexdigest(), (
        f"the wheel in {vsix.name} is not {wheel.name} of dist/"
    )
    print(f"{wheel.name}, {sdist.name}, {lab.name}, {vsix.name}: ok")
    return wheel, lab, vsix


def check_cli(tmp: Path, wheel: Path, env: dict[str, str]) -> None:
    step("torchdoctor wheel in a fresh environment")
    bin_dir, venv_env = fresh_venv(tmp / "cli", env)
    run([bin_dir / "python", "-m", "pip", "install", "-q", wheel], env=venv_env)
    work = tmp / "work"
    shutil.copytree(REPO / "examples", work / "examples")
    out = run([bin_dir / "torchdoctor", "check", "--no-cache", "examples"], env=venv_env,
              cwd=work, ok=(1,))  # fmt: skip
    assert "TDR" in out and "Found " in out, out
    # No torch next to this torchdoctor: the version the rules assume is said, once.
    assert out.count("no torch is installed next to torchdoctor") == 1, out
    url = run([bin_dir / "torchdoctor", "docs", "--no-browser", "TDR105"], env=venv_env, cwd=work)
    lines = [ln for ln in url.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("file://"), url
    page = Path(urllib.request.url2pathname(lines[0].removeprefix("file://")))
    assert page.is_file() and page.is_relative_to(tmp / "cli"), page
    assert page.as_posix().endswith("site-packages/" + DOCS_PAGE), page
    print(f"check: findings in examples/; docs TDR105: {lines[0]}")

    step("jupyterlab-ext from source without Node.js")
    source = tmp / "jupyterlab-ext"
    shutil.copytree(
        REPO / "jupyterlab-ext",
        source,
        ignore=shutil.ignore_patterns("node_modules", "lib", "labextension", ".build-tools",
                                      "dist", ".yarn", "*.tsbuildinfo"),
    )  # fmt: skip
    proc = subprocess.run(
        [bin_dir / "python", "-m", "pip", "install", "--no-deps", source],
        env=venv_env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said
    assert "Traceback" not in said, said
    line = next(ln.strip() for ln in said.splitlines() if "needs Node.js >= 20" in ln)
    print(f"without Node.js: {line}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_jupyterlab(tmp: Path, wheel: Path, lab: Path, env: dict[str, str]) -> None:
    step("JupyterLab with jupyterlab-torchdoctor in a fresh environment")
    bin_dir, venv_env = fresh_venv(tmp / "lab", env)
    run([bin_dir / "python", "-m", "pip", "install", "-q", wheel, lab, JUPYTERLAB], env=venv_env)
    listing = run([bin_dir / "jupyter", "labextension", "list"], env=venv_env)
    line = next((ln for ln in listing.splitlines() if "jupyterlab-torchdoctor" in ln), "")
    assert "enabled" in line and "OK" in line and "jupyterlab-torchdoctor" in line, listing
    assert "(python, jupyterlab-torchdoctor)" in line, f"no install.json? {line}"
    print(f"labextension: {line.strip()}")
    runtime = tmp / "runtime"
    root = tmp / "lab-root"
    root.mkdir()
    token = hashlib.sha256(os.urandom(16)).hexdigest()
    server_env = {**venv_env, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_TOKEN": token}
    server = subprocess.Popen(
        [bin_dir / "jupyter", "server", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={free_port()}", "--ServerApp.port_retries=50",
         f"--ServerApp.root_dir={root}", *(["--allow-root"] if os.getuid() == 0 else [])],
        env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        info = None
        deadline = time.monotonic() + 120
        while info is None and time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(f"check-release: jupyter server exited: {server.stderr.read()}")
            files = list(runtime.glob(f"jpserver-{server.pid}.json"))
            if not files:
                time.sleep(0.5)
                continue
            port = json.loads(files[0].read_text())["port"]
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/torchdoctor/info",
                headers={"Authorization": f"token {token}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    info = json.loads(response.read())
            except OSError:
                time.sleep(0.5)
        assert isinstance(info, dict), "GET /torchdoctor/info did not answer"
        print(f"server extension: GET /torchdoctor/info -> {sorted(info)}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main(argv: list[str]) -> int:
    dist = Path(argv[0]).resolve() if argv else REPO / "dist"
    started = time.monotonic()
    wheel, lab, _vsix = check_archives(dist)
    with tempfile.TemporaryDirectory(prefix="torchdoctor-release-") as name:
        tmp = Path(name)
        env, mark = no_node_env(tmp)
        check_cli(tmp, wheel, env)
        check_jupyterlab(tmp, wheel, lab, env)
        # JupyterLab asks node for yarn's configuration when it lists extensions, and goes on
        # without it: what tried to run node is said, the checks above decide.
        tried = sorted(set(mark.read_text().splitlines())) if mark.exists() else []
    print(f"release: PASS in {time.monotonic() - started:.0f} s, with no Node.js on PATH")
    if tried:
        print(f"(asked for node and went on without it: {'; '.join(tried)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
