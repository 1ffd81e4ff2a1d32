#!/usr/bin/env bash
# The whole test suite, from a fresh clone: creates .venv, installs the package with its test
# extra, then runs the linters, the type checker, the docs checks, the editor-extension tests
# and pytest. Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
step() { printf '\n== %s ==\n' "$*"; }

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

step "pytest"
.venv/bin/python -m pytest -p no:cacheprovider "$@"

step "work tree"
AFTER=$(tree_state)
if [ "$BEFORE" != "$AFTER" ]; then
  echo "the test run changed the work tree:" >&2
  diff <(printf '%s\n' "$BEFORE") <(printf '%s\n' "$AFTER") >&2 || true
  exit 1
fi
echo "unchanged"
