#!/usr/bin/env bash
# The whole test suite, from a fresh clone: creates .venv, installs the package with its test
# extra, then runs the linters, the type checker, the docs checks, the editor-extension tests,
# the release artifacts installed as a user would (scripts/build-release.sh, check-release.py)
# and pytest (in parallel, then the browser suites alone). Usage: bash scripts/test.sh [pytest args...]
#
# Needs from the machine (checked first): Python >= 3.10 with venv, git, the PyPI and npm
# registries (or the local mirrors pip and npm are configured with); for the editor tests
# (TORCHDOCTOR_SKIP_EDITORS=1 skips them and the release check) Node.js >= 20 with npm, and root
# or passwordless sudo when Debian packages (chromium, a CJK font, build tools) are missing.
# TORCHDOCTOR_TEST_WORKERS: pytest worker processes (default: auto, one per CPU).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
EDITORS=$([ "${TORCHDOCTOR_SKIP_EDITORS:-0}" = 1 ] && echo 0 || echo 1)
step() { printf '\n== %s ==\n' "$*"; }

preflight() {
  local missing=() apt_missing=()
  "$PYTHON" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null ||
    missing+=("Python >= 3.10 with venv and ensurepip as \$PYTHON (now: $PYTHON; apt-get install python3-venv)")
  command -v git >/dev/null || missing+=("git")
  if "$PYTHON" -m pip --version >/dev/null 2>&1; then
    "$PYTHON" -m pip index versions pip --timeout 20 >/dev/null 2>&1 ||
      missing+=("the PyPI registry or a local mirror pip is configured with (pip index versions pip failed)")
  fi
  if [ "$EDITORS" = 1 ]; then
    local major
    major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')
    if [ -z "$major" ] || [ "$major" -lt 20 ] || ! command -v npm >/dev/null; then
      missing+=("Node.js >= 20 with npm on PATH (found: $(node --version 2>/dev/null || echo none))")
    elif ! npm ping >/dev/null 2>&1; then
      missing+=("the npm registry (npm ping failed)")
    fi
    for p in chromium fonts-wqy-zenhei libkrb5-dev libxkbfile-dev libsecret-1-dev pkg-config g++ make; do
      dpkg -s "$p" >/dev/null 2>&1 || apt_missing+=("$p")
    done
    if [ ${#apt_missing[@]} -gt 0 ] && [ "$(id -u)" != 0 ] && ! sudo -n true 2>/dev/null; then
      missing+=("root or passwordless sudo to apt-get install ${apt_missing[*]}")
    fi
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    {
      printf 'scripts/test.sh cannot run on this machine; it needs:\n'
      printf '  - %s\n' "${missing[@]}"
      printf 'TORCHDOCTOR_SKIP_EDITORS=1 runs everything but the editor and release tests.\n'
    } >&2
    exit 2
  fi
}

step "machine"
preflight
echo "ok"

# A test run must leave the work tree as it found it (what it writes goes to ignored folders).
tree_state() { git status --porcelain --untracked-files=all 2>/dev/null || true; }
BEFORE=$(tree_state)

step "install"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"

step "ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

step "mypy"
.venv/bin/mypy

if .venv/bin/torchdoctor generate-docs --help >/dev/null 2>&1; then
  step "docs"
  .venv/bin/torchdoctor generate-docs --check
  .venv/bin/torchdoctor generate-docs --build
fi

if [ -f .ci/vscode.sh ] && [ "${TORCHDOCTOR_SKIP_EDITORS:-0}" != 1 ]; then
  step "VS Code extension"
  bash .ci/vscode.sh
fi

if [ -f .ci/jupyterlab.sh ] && [ "${TORCHDOCTOR_SKIP_EDITORS:-0}" != 1 ]; then step "JupyterLab extension"; bash .ci/jupyterlab.sh; fi

if [ "$EDITORS" = 1 ]; then
  step "release artifacts, installed as a user would"
  bash scripts/build-release.sh --reuse
  .venv/bin/python scripts/check-release.py dist
fi

# pytest: in parallel (each file on one worker), then the suites marked `serial` (a browser, the
# packaged docs build) alone. Exit 5 is "no test selected" (args that pick one kind only).
pytest_run() {
  local rc=0
  .venv/bin/python -m pytest -p no:cacheprovider "$@" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || return "$rc"
}
step "pytest (parallel)"
pytest_run -n "${TORCHDOCTOR_TEST_WORKERS:-auto}" --dist loadfile -m "not serial" "$@"
step "pytest (serial: browsers, the packaged docs)"
pytest_run -n 0 -m serial "$@"

step "work tree"
AFTER=$(tree_state)
if [ "$BEFORE" != "$AFTER" ]; then
  echo "the test run changed the work tree:" >&2
  diff <(printf '%s\n' "$BEFORE") <(printf '%s\n' "$AFTER") >&2 || true
  exit 1
fi
echo "unchanged"
