#!/usr/bin/env bash
# Builds and checks the JupyterLab extension (jupyterlab-ext/): installs its npm packages with
# jlpm (from the repository's .venv, which has JupyterLab), lints and typechecks the frontend,
# runs its unit tests (vitest, happy-dom), builds the prebuilt labextension and the Python wheel
# and checks what the wheel holds (the prebuilt labextension, its settings schema and the server
# config). The UI tests in a real JupyterLab (tests/jupyter/test_jupyterlab_torchdoctor.py,
# headless Debian chromium, with and without jupyterlab-lsp + python-lsp-server) run in the
# pytest step with the labextension built here.
#
# Needs the repository's virtual environment (.venv, as .ci/run creates it, or $TORCHDOCTOR_PYTHON)
# and Node.js >= 20 on PATH.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXT="$REPO/jupyterlab-ext"
PY="${TORCHDOCTOR_PYTHON:-$REPO/.venv/bin/python}"
VENV_BIN="$(dirname "$PY")"
export PATH="$VENV_BIN:$PATH"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

START=$SECONDS
CURRENT="setup"
DONE=()
summary() {
  local rc=$?
  local took=$((SECONDS - START))
  if [[ $rc -eq 0 ]]; then
    echo "jupyterlab: PASS (${DONE[*]}) in ${took} s"
  else
    echo "jupyterlab: FAIL at '$CURRENT' after ${took} s (passed: ${DONE[*]:-nothing})"
  fi
}
trap summary EXIT

step() {  # step NAME COMMAND...: runs one stage, timed
  CURRENT="$1"
  shift
  local t0=$SECONDS
  echo "::: $CURRENT"
  "$@"
  DONE+=("$CURRENT:$((SECONDS - t0))s")
}

install_apt() {
  # chromium for the UI tests; a CJK font so that the Chinese screenshot (panel-zh.png) shows
  # characters (the test reads the DOM text, so it passes without the font too).
  local missing=()
  dpkg -s chromium >/dev/null 2>&1 || command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  if command -v dpkg >/dev/null 2>&1 && ! dpkg -s fonts-wqy-zenhei >/dev/null 2>&1; then
    missing+=(fonts-wqy-zenhei)
  fi
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "chromium and a CJK font present"
    return
  fi
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >/dev/null
  echo "installed: ${missing[*]}"
}

check_tools() {
  command -v node >/dev/null || { echo "Node.js is needed (node on PATH)" >&2; return 1; }
  command -v jlpm >/dev/null || { echo "jlpm not found in $VENV_BIN (install jupyterlab)" >&2; return 1; }
  command -v jupyter-builder >/dev/null || { echo "jupyter-builder not found in $VENV_BIN" >&2; return 1; }
  echo "node $(node --version), jlpm $(jlpm --version)"
}

python_lint() {
  "$VENV_BIN/ruff" check .
  "$VENV_BIN/ruff" format --check .
}

wheel() {
  # The build backend's plugin goes to a folder of its own (not into the environment); the
  # labextension built above is reused (skip-if-exists), so no second jlpm build.
  local tools="$EXT/.build-tools" out="$EXT/dist"
  [[ -d "$tools/hatch_jupyter_builder" ]] ||
    "$PY" -m pip install -q --no-deps --target "$tools" "hatch-jupyter-builder>=0.9"
  rm -rf "$out"
  PYTHONPATH="$tools${PYTHONPATH:+:$PYTHONPATH}" \
    "$PY" -m pip wheel --no-deps --no-build-isolation -q "$EXT" -w "$out"
  "$PY" - "$out" <<'PYEOF'
import sys, zipfile
from pathlib import Path

wheels = list(Path(sys.argv[1]).glob("jupyterlab_torchdoctor-*.whl"))
assert len(wheels) == 1, wheels
names = zipfile.ZipFile(wheels[0]).namelist()
data = "jupyterlab_torchdoctor-0.1.0.data/data/"
need = [
    "jupyterlab_torchdoctor/__init__.py",
    "jupyterlab_torchdoctor/handlers.py",
    data + "share/jupyter/labextensions/jupyterlab-torchdoctor/package.json",
    data + "share/jupyter/labextensions/jupyterlab-torchdoctor/schemas/jupyterlab-torchdoctor/plugin.json",
    data + "etc/jupyter/jupyter_server_config.d/jupyterlab_torchdoctor.json",
    # `jupyter labextension list` names the Python package it came from
    data + "share/jupyter/labextensions/jupyterlab-torchdoctor/install.json",
    "jupyterlab_torchdoctor-0.1.0.dist-info/licenses/LICENSE",
]
missing = [n for n in need if n not in names]
assert not missing, missing
assert any("/static/remoteEntry." in n for n in names), "no remoteEntry in the wheel"
print(f"{wheels[0].name}: {len(names)} files, {wheels[0].stat().st_size // 1024} KB")
PYEOF
}

if [[ ! -x "$PY" ]]; then
  echo "no Python with torchdoctor at $PY (create the repository's .venv first)" >&2
  exit 2
fi

step apt install_apt
step tools check_tools
cd "$EXT"
step jlpm-install jlpm install --immutable
step lint jlpm run lint
step typecheck jlpm run typecheck
step unit env NO_COLOR=1 jlpm run test
step python-lint python_lint
step build jlpm run build
step wheel wheel
