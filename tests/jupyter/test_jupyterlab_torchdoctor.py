"""The JupyterLab extension (jupyterlab-ext/, ``jupyterlab-torchdoctor``) in a real JupyterLab
in headless Chromium: the server extension relays ``torchdoctor server`` over a websocket, the
frontend syncs the notebook cell by cell, underlines a finding with its code, and the fix
button of the underline's tooltip changes the cell exactly as ``torchdoctor check --fix``
changes the notebook; Ctrl+Z undoes it. The side panel lists findings by cell, jumps to one,
and "Fix all safe" fixes the notebook as ``check --fix`` does.

The extension is loaded from the source tree (no install into the environment): its prebuilt
labextension from ``jupyterlab-ext/jupyterlab_torchdoctor/labextension`` (``bash
.ci/jupyterlab.sh`` builds it; without it the test is skipped) and its server extension through
``PYTHONPATH``. Screenshots go to ``jupyterlab-ext/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jupyter_helpers import (
    DIRECTORIES,
    START_TIMEOUT_S,
    JupyterServer,
    _stop,
    free_port,
    write_lab_settings,
)
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

# A browser suite: scripts/test.sh runs it alone, after the parallel run.
pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "jupyterlab-ext"
LABEXTENSION = EXT / "jupyterlab_torchdoctor" / "labextension"
SCREENSHOTS = EXT / "screenshots"
CONFIG = EXT / "jupyter-config" / "jupyter_server_config.d" / "jupyterlab_torchdoctor.json"
TIMEOUT_MS = 90_000

MARK = ".jp-Notebook .cm-lintRange.jp-torchdoctor-mark"
TOOLTIP = ".cm-tooltip-lint:has(.jp-torchdoctor-diagnostic)"

# The screen position of one character of a cell line, for the mouse.
CHAR_BOX = """([prefix, offset]) => {
  const line = [...document.querySelectorAll('.jp-Notebook .cm-line')]
    .find((l) => l.textContent.startsWith(prefix));
  if (!line) return null;
  const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
  let seen = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (offset - seen < node.textContent.length) {
      const range = document.createRange();
      range.setStart(node, offset - seen);
      range.setEnd(node, offset - seen + 1);
      const box = range.getBoundingClientRect();
      return {x: box.x + box.width / 2, y: box.y + box.height / 2};
    }
    seen += node.textContent.length;
  }
  return null;
}"""

CELLS = [
    "import torch\nx = torch.randn(4, 4)",
    "y = torch.log(1 + x)",
    'state = torch.load("x.pt")\nother = torch.load("y.pt")',
    "import os",  # pyflakes (through pylsp) reports it; torchdoctor does not
]
WITH_LSP = "with-jupyterlab-lsp"
WITHOUT_LSP = "without-jupyterlab-lsp"
LSP_LAB_EXTENSION = "@jupyter-lsp/jupyterlab-lsp"


def _chromium() -> str:
    found = os.environ.get("TORCHDOCTOR_CHROMIUM") or next(
        filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser"))), None
    )
    if found:
        return found
    if os.environ.get("TORCHDOCTOR_SKIP_EDITORS") == "1":
        pytest.skip("editor tests are off (TORCHDOCTOR_SKIP_EDITORS=1)")
    pytest.fail("Chromium not found: apt-get install chromium, or set TORCHDOCTOR_CHROMIUM")


def _notebook(cells: list[str]) -> dict[str, Any]:
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"cell{i}",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for i, source in enumerate(cells)
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _sources(notebook: dict[str, Any]) -> list[str]:
    out = []
    for cell in notebook["cells"]:
        source = cell["source"]
        out.append("".join(source) if isinstance(source, list) else source)
    return out


def expected_after_check_fix(
    tmp_path: Path, cells: list[str], name: str, *, unsafe: bool = False
) -> list[str]:
    """The cells after ``torchdoctor check --fix`` (``--unsafe-fixes``) on the notebook."""
    folder = tmp_path / f"cli-{name}"
    folder.mkdir()
    path = folder / "train.ipynb"
    path.write_text(json.dumps(_notebook(cells)))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torchdoctor",
            "check",
            "--fix",
            *(["--unsafe-fixes"] if unsafe else []),
            "--no-cache",
            "--exit-zero",
            str(path),
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return _sources(json.loads(path.read_text()))


@contextmanager
def jupyterlab_with_extension(
    tmp_path: Path,
    variant: str = WITH_LSP,
    lab_settings: dict[str, dict[str, Any]] | None = None,
    debug_server: bool = False,
) -> Iterator[tuple[JupyterServer, subprocess.Popen[bytes]]]:
    """JupyterLab with isolated Jupyter folders, our labextension in its data folder and our
    server extension enabled in its config folder; ``WITHOUT_LSP`` switches jupyterlab-lsp
    off (server and lab extension); ``lab_settings`` are user settings by plugin id;
    ``debug_server`` runs the language server with ``--log-level debug`` (its log lands in
    JupyterLab's, printed when a test fails)."""
    root = tmp_path / "work"
    root.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for var, name in DIRECTORIES:
        (tmp_path / name).mkdir()
        env[var] = str(tmp_path / name)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    env["PYTHONPATH"] = os.pathsep.join([str(EXT), *filter(None, [os.environ.get("PYTHONPATH")])])
    if debug_server:
        env["TORCHDOCTOR_SERVER_COMMAND"] = shlex.join(
            [sys.executable, "-m", "torchdoctor", "server", "--log-level", "debug"]
        )
    (tmp_path / "data" / "labextensions").mkdir()
    (tmp_path / "data" / "labextensions" / "jupyterlab-torchdoctor").symlink_to(LABEXTENSION)
    # No "news" notification over the notebook.
    news = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    write_lab_settings(tmp_path / "lab-settings", lab_settings or {})
    # The config file the wheel installs: enables the server extension and keeps jupyter-lsp
    # from starting torchdoctor a second time for jupyterlab-lsp.
    conf_d = tmp_path / "config" / "jupyter_server_config.d"
    conf_d.mkdir()
    shutil.copy(CONFIG, conf_d / CONFIG.name)
    if variant == WITHOUT_LSP:
        # Both halves of jupyterlab-lsp off for this JupyterLab only, as `jupyter server
        # extension disable` and `jupyter labextension disable` would write them.
        (tmp_path / "config" / "jupyter_server_config.json").write_text(
            json.dumps({"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False}}})
        )
        (tmp_path / "config" / "labconfig").mkdir()
        (tmp_path / "config" / "labconfig" / "page_config.json").write_text(
            json.dumps({"disabledExtensions": {LSP_LAB_EXTENSION: True}})
        )
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.log_level=DEBUG",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    log = tmp_path / "jupyterlab.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = JupyterServer(
        url=f"http://127.0.0.1:{port}",
        ws_url=f"ws://127.0.0.1:{port}",
        root=root,
        config_dir=tmp_path / "config",
        log=log,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyterlab exited with {proc.returncode}:\n{log.read_text()}")
            try:
                server.get_json("/torchdoctor/info")
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyterlab did not answer:\n{log.read_text()}")
                time.sleep(0.1)
        yield server, proc
    finally:
        _stop(proc)


def _need_build() -> None:
    if not (LABEXTENSION / "package.json").is_file():
        pytest.skip("the JupyterLab extension is not built (bash .ci/jupyterlab.sh builds it)")


@pytest.fixture(params=[WITH_LSP, WITHOUT_LSP])
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JupyterServer]:
    _need_build()
    with jupyterlab_with_extension(tmp_path, request.param) as (server, _proc):
        yield server


@contextmanager
def browser_page(lab: JupyterServer, width: int = 1400) -> Iterator[Any]:
    """A headless Chromium page; on failure a screenshot and the JupyterLab log."""
    executable = _chromium()
    SCREENSHOTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        console: list[str] = []  # the language server's log messages arrive here
        page.on(
            "console",
            lambda msg: console.append(f"{time.strftime('%H:%M:%S')} {msg.type}: {msg.text}"),
        )
        try:
            yield page
        except Exception:
            page.screenshot(path=str(SCREENSHOTS / "failure.png"))
            log = lab.log.read_text()
            print("\n".join(line for line in log.splitlines() if "torchdoctor" in line)[-20000:])
            print("--- browser console ---")
            print("\n".join(c for c in console if "torchdoctor" in c)[-20000:])
            print("--- log tail ---")
            print(log[-8000:])
            raise
        finally:
            browser.close()


def _open_panel(page: Any) -> Any:
    page.locator(".jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id='jp-torchdoctor-panel']").click()
    return page.locator(".jp-torchdoctor-panel")


def _lsp_status(lab: JupyterServer) -> dict[str, Any] | None:
    """jupyter-lsp's status, or None when its server extension is off."""
    try:
        return lab.get_json("/lsp/status")
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return None


def _hover_until(page: Any, selector: str | dict[str, float], tooltip: str) -> Any:
    """Move the mouse onto ``selector`` (or a point) until ``tooltip`` shows (a move can come
    too early)."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        if isinstance(selector, dict):
            x, y = selector["x"], selector["y"]
        else:
            box = page.locator(selector).first.bounding_box()
            assert box is not None
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(0, 0)
        page.mouse.move(x, y)
        page.mouse.move(x + 1, y)
        try:
            return page.wait_for_selector(tooltip, timeout=3000)
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise


def _cell_sources(page: Any) -> list[str]:
    return page.evaluate(
        """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell .cm-content')]
        .map((c) => [...c.querySelectorAll('.cm-line')].map((l) => l.textContent).join('\\n'))"""
    )


def _wait_sources(page: Any, expected: list[str]) -> None:
    deadline = time.monotonic() + 30
    while _cell_sources(page) != expected:
        if time.monotonic() > deadline:
            assert _cell_sources(page) == expected
        time.sleep(0.2)


def test_fix_from_tooltip_and_panel(lab: JupyterServer, tmp_path: Path, request: Any) -> None:
    variant = request.node.callspec.params["lab"]
    (lab.root / "train.ipynb").write_text(json.dumps(_notebook(CELLS)))
    one = [*CELLS[:2], CELLS[2].split("\n")[0], CELLS[3]]
    expected_one = expected_after_check_fix(tmp_path, one, "one")
    expected_all = expected_after_check_fix(tmp_path, CELLS, "all")
    expected_unsafe = expected_after_check_fix(tmp_path, expected_all, "unsafe", unsafe=True)
    assert expected_all[2] != CELLS[2]
    assert expected_all[1] == CELLS[1] != expected_unsafe[1]
    status = _lsp_status(lab)
    if variant == WITH_LSP:
        # jupyter-lsp runs python-lsp-server, not torchdoctor (our config opts it out).
        assert status is not None and "torchdoctor" not in status["sessions"]
        assert "pylsp" in status["sessions"], "python-lsp-server is not installed (test extra)"
    else:
        assert status is None
    shots = variant == WITHOUT_LSP  # the README's screenshots: torchdoctor's marks alone
    with browser_page(lab) as page:
        page.goto(f"{lab.url}/lab/tree/train.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content")
        disabled = page.evaluate(
            "JSON.parse(document.getElementById('jupyter-config-data').textContent)"
            ".disabledExtensions || []"
        )
        assert (LSP_LAB_EXTENSION in disabled) == (variant == WITHOUT_LSP), disabled

        # The two findings of the third cell are underlined, each with its rule code.
        page.wait_for_selector(f"{MARK}-TDR602")
        page.wait_for_function(
            f"document.querySelectorAll('{MARK}-TDR602').length === 2", timeout=TIMEOUT_MS
        )
        page.wait_for_selector(f"{MARK}-TDR808")
        marks = page.eval_on_selector_all(MARK, "els => els.map((e) => e.textContent)")
        assert marks == ["torch.log(1 + x)", 'torch.load("x.pt")', 'torch.load("y.pt")']

        if variant == WITH_LSP:
            # pylsp (pyflakes) still reports through jupyterlab-lsp, next to our marks; each
            # torchdoctor finding is underlined once.
            others = ".jp-Notebook .cm-lintRange:not(.jp-torchdoctor-mark)"
            page.wait_for_selector(others)
            assert page.eval_on_selector_all(others, "els => els.map((e) => e.textContent)") == [
                "import os"
            ]
            page.screenshot(path=str(SCREENSHOTS / "with-jupyterlab-lsp.png"))
        else:
            page.wait_for_timeout(1000)
            assert page.locator(".jp-Notebook .cm-lintRange").count() == len(marks)

        # The tooltip: code (a link to the rule's page), message, fix buttons.
        tooltip = _hover_until(page, f"{MARK}-TDR602", TOOLTIP)
        code = tooltip.query_selector(".jp-torchdoctor-code")
        assert code is not None and code.inner_text() == "TDR602"
        assert "TDR602" in (code.get_attribute("href") or "")
        assert "map_location" in tooltip.inner_text()
        if shots:
            page.screenshot(path=str(SCREENSHOTS / "tooltip.png"))
        page.locator(f"{TOOLTIP} button.jp-torchdoctor-fix-safe").first.click()

        # The first line changed exactly as `torchdoctor check --fix` changes it.
        sources = _cell_sources(page)
        deadline = time.monotonic() + 30
        while sources[2].split("\n")[0] != expected_one[2]:
            assert time.monotonic() < deadline, sources
            time.sleep(0.2)
            sources = _cell_sources(page)
        assert sources[:2] == expected_one[:2] == CELLS[:2]
        assert sources[2] == expected_one[2] + "\n" + CELLS[2].split("\n")[1]
        page.wait_for_function(
            f"document.querySelectorAll('{MARK}-TDR602').length === 1", timeout=TIMEOUT_MS
        )

        # Undo restores the cell.
        page.locator(".jp-Notebook .jp-Cell .cm-content").nth(2).click()
        page.keyboard.press("Control+z")
        _wait_sources(page, CELLS)
        page.wait_for_function(
            f"document.querySelectorAll('{MARK}-TDR602').length === 2", timeout=TIMEOUT_MS
        )

        # The panel lists the findings under their cell; a click jumps to the finding.
        panel = _open_panel(page)
        page.wait_for_selector(".jp-torchdoctor-panel .jp-torchdoctor-finding")
        assert panel.locator(".jp-torchdoctor-cell h3").all_inner_texts() == ["Cell 2", "Cell 3"]
        assert panel.locator(".jp-torchdoctor-finding").count() == 3
        page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
        panel.locator(".jp-torchdoctor-finding-main").nth(2).click()
        page.wait_for_selector(".jp-Notebook .jp-Cell.jp-mod-active:nth-child(3)")
        if shots:
            page.screenshot(path=str(SCREENSHOTS / "panel.png"))

        # "Fix all safe" fixes the notebook as `check --fix` does; the unsafe fix stays.
        panel.locator("button.jp-torchdoctor-fix-all").click()
        _wait_sources(page, expected_all)
        page.wait_for_selector(f"{MARK}-TDR602", state="detached")
        page.wait_for_selector(".jp-torchdoctor-fix-all:disabled")
        assert panel.locator(".jp-torchdoctor-finding").count() == 1
        if shots:
            page.screenshot(path=str(SCREENSHOTS / "fixed.png"))

        # The unsafe fix, from its tooltip, changes the cell as `--unsafe-fixes` does.
        tooltip = _hover_until(page, f"{MARK}-TDR808", TOOLTIP)
        assert tooltip.query_selector("button.jp-torchdoctor-fix-safe") is None
        page.locator(f"{TOOLTIP} button.jp-torchdoctor-fix-unsafe").first.click()
        _wait_sources(page, expected_unsafe)
        page.wait_for_selector(MARK, state="detached")
        page.wait_for_selector(".jp-torchdoctor-panel .jp-torchdoctor-cells", state="detached")

        # Live facts: once the first cell ran, a hover on `x` shows the kernel's tensor.
        page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
        page.keyboard.press("Shift+Enter")
        page.wait_for_selector(".jp-InputPrompt:has-text('[1]')")
        line = expected_unsafe[1]
        spot = page.evaluate(CHAR_BOX, [line, line.index("x)")])
        assert spot is not None
        hover = _hover_until(page, spot, ".jp-torchdoctor-hover:has-text('Tensor(4, 4)')")
        assert "float32" in hover.inner_text()
        if shots:
            page.screenshot(path=str(SCREENSHOTS / "live-tensor.png"))
        page.mouse.move(0, 0)


def test_labextension_is_compatible(tmp_path: Path) -> None:
    """JupyterLab accepts the prebuilt extension (its shared packages match JupyterLab's)."""
    if not (LABEXTENSION / "package.json").is_file():
        pytest.skip("the JupyterLab extension is not built (bash .ci/jupyterlab.sh builds it)")
    (tmp_path / "labextensions").mkdir()
    (tmp_path / "labextensions" / "jupyterlab-torchdoctor").symlink_to(LABEXTENSION)
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    out = subprocess.run(
        [sys.executable, "-m", "jupyterlab.labextensions", "list"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    text = out.stdout + out.stderr
    line = next(ln for ln in text.splitlines() if "jupyterlab-torchdoctor v" in ln)
    assert "OK" in line, text
    assert "not compatible" not in text, text


LIVE_CELLS = [
    "import torch\nx = torch.randn(4, 6)\nnet = torch.nn.Linear(6, 2).eval()",
    "y = x.t()",
    "flat = y.view(-1)",  # not run: flagged from the kernel's `y` before it runs
    "z = y.contiguous()",
]
LIVE = ".jp-torchdoctor-panel .jp-torchdoctor-live"


def _live_item(page: Any, name: str) -> dict[str, str]:
    """The live section's row for ``name``: its data attributes and text."""
    row = page.wait_for_selector(f"{LIVE} .jp-torchdoctor-live-item[data-name='{name}']")
    data = row.evaluate("(e) => ({...e.dataset})")
    data["text"] = row.inner_text()
    return data


def _run_cell(page: Any, index: int, count: int) -> None:
    print(f"{time.strftime('%H:%M:%S')} running cell {index}")
    page.locator(".jp-Notebook .jp-Cell .cm-content").nth(index).click()
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(
        f".jp-Notebook .jp-Cell:nth-child({index + 1}) .jp-InputPrompt:has-text('[{count}]')"
    )


def test_live_tensors(tmp_path: Path) -> None:
    """The panel's live section, read through the notebook's own kernel connection."""
    _need_build()
    with jupyterlab_with_extension(tmp_path, WITH_LSP, debug_server=True) as (lab, _proc):
        probe = lab.get_json("/torchdoctor/probe")
        assert probe["module"].startswith("_torchdoctor_probe_") and "exec(" in probe["install"]
        (lab.root / "live.ipynb").write_text(json.dumps(_notebook(LIVE_CELLS)))
        with browser_page(lab) as page:
            page.goto(f"{lab.url}/lab/tree/live.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content")
            _open_panel(page)
            # The kernel started with the notebook: nothing of torch in it yet.
            page.wait_for_selector(f"{LIVE} .jp-torchdoctor-note:has-text('not imported')")

            _run_cell(page, 0, 1)
            x = _live_item(page, "x")
            assert (x["shape"], x["device"], x["contiguous"]) == ("4,6", "cpu", "true")
            assert "float32" in x["text"] and "strides (6, 1)" in x["text"] and "96 B" in x["text"]
            net = _live_item(page, "net")
            assert (net["device"], net["mode"]) == ("cpu", "eval")
            assert "Linear" in net["text"] and "14 parameters" in net["text"]
            page.wait_for_selector(f"{LIVE} .jp-torchdoctor-live-stamp:has-text('In [1]')")

            # After the next cell: the transposed view, not contiguous.
            _run_cell(page, 1, 2)
            y = page.wait_for_selector(f"{LIVE} .jp-torchdoctor-live-item[data-name='y']")
            assert y is not None
            y_facts = _live_item(page, "y")
            assert (y_facts["shape"], y_facts["strides"], y_facts["contiguous"]) == (
                "6,4",
                "1,6",
                "false",
            )
            assert "not contiguous" in y_facts["text"] and "grad" in y_facts["text"]

            # `flat = y.view(-1)` has not run: the live rule flags it from the kernel's `y`, in
            # the cell and in the live section.
            page.wait_for_selector(f"{MARK}-TDR901")
            warning = page.wait_for_selector(
                f"{LIVE} .jp-torchdoctor-live-warning[data-code='TDR901']"
            )
            assert warning is not None
            assert "Cell 3" in warning.inner_text() and "view" in warning.inner_text()
            prompts = page.eval_on_selector_all(
                ".jp-Notebook .jp-InputPrompt", "els => els.map((e) => e.textContent)"
            )
            assert prompts[2].strip() in ("[ ]:", "[ ]")
            page.screenshot(path=str(SCREENSHOTS / "live-tensors.png"))

            # The probes are silent: a refresh, then the next cell still runs as In [3].
            page.locator(f"{LIVE} .jp-torchdoctor-live-refresh").click()
            _run_cell(page, 3, 3)
            z = _live_item(page, "z")
            assert (z["shape"], z["contiguous"]) == ("6,4", "true")
            page.wait_for_selector(f"{LIVE} .jp-torchdoctor-live-stamp:has-text('In [3]')")


MEASURE_CELLS = [
    "import torch\n"
    "model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))\n"
    "model.eval()\n"
    "batches = [torch.randn(32, 64) for _ in range(10)]",
    "outs = []\nfor b in batches:\n    outs.append(model(b))",
]


def test_measure_this_cell(tmp_path: Path) -> None:
    """The panel's "Measure this cell": the user's click runs the active cell under
    `%%torchdoctor run` (its output under the cell); the report it writes reaches the language
    server, and the finding shows what was measured."""
    _need_build()
    with jupyterlab_with_extension(tmp_path, WITH_LSP) as (lab, _proc):
        (lab.root / "measure.ipynb").write_text(json.dumps(_notebook(MEASURE_CELLS)))
        with browser_page(lab) as page:
            page.goto(f"{lab.url}/lab/tree/measure.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content")
            _open_panel(page)
            # The kernel is up (the live section has read it) before a cell runs.
            page.wait_for_selector(f"{LIVE} .jp-torchdoctor-note:has-text('not imported')")
            _run_cell(page, 0, 1)
            page.locator(".jp-Notebook .jp-Cell .cm-content").nth(1).click()
            page.locator(".jp-torchdoctor-panel .jp-torchdoctor-measure").click()
            output = page.wait_for_selector(
                ".jp-Notebook .jp-Cell:nth-child(2) .jp-OutputArea-output:has-text('TDR105')"
            )
            assert output is not None
            assert "10 forward calls" in output.inner_text()
            # The cell ran, as In [2].
            page.wait_for_selector(
                ".jp-Notebook .jp-Cell:nth-child(2) .jp-InputPrompt:has-text('[2]')"
            )
            measured = page.wait_for_selector(
                ".jp-torchdoctor-panel .jp-torchdoctor-finding[data-code='TDR105'] "
                ".jp-torchdoctor-measured"
            )
            assert measured is not None
            assert measured.inner_text() == (
                "measured: 320.0 KB of activations over 10 forward calls"
            )
            page.screenshot(path=str(SCREENSHOTS / "measure-cell.png"))
            # The underline's tooltip shows the measurement too.
            tooltip = _hover_until(
                page,
                ".jp-Notebook .jp-Cell:nth-child(2) .cm-lintRange.jp-torchdoctor-mark-TDR105",
                f"{TOOLTIP}:has(.jp-torchdoctor-measured)",
            )
            assert tooltip.query_selector(".jp-torchdoctor-measured").inner_text() == (
                "320.0 KB of activations over 10 forward calls"
            )
            page.screenshot(path=str(SCREENSHOTS / "measured-tooltip.png"))
        reports = list((lab.root / ".torchdoctor_cache" / "runs").glob("*.json"))
        assert len(reports) == 1


def test_live_findings_follow_a_kernel_restart(tmp_path: Path) -> None:
    """After a kernel restart a tensor of the old namespace underlines nothing, with no cell run;
    running the cells again brings the live finding back."""
    _need_build()
    with jupyterlab_with_extension(tmp_path, WITHOUT_LSP) as (lab, _proc):
        (lab.root / "restart.ipynb").write_text(json.dumps(_notebook(LIVE_CELLS)))
        with browser_page(lab) as page:
            page.goto(f"{lab.url}/lab/tree/restart.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content")
            _open_panel(page)
            page.wait_for_selector(f"{LIVE} .jp-torchdoctor-note:has-text('not imported')")
            _run_cell(page, 0, 1)
            _run_cell(page, 1, 2)
            page.wait_for_selector(f"{MARK}-TDR901")
            warning = f"{LIVE} .jp-torchdoctor-live-warning[data-code='TDR901']"
            page.wait_for_selector(warning)
            # The panel row shows the message's inline code as code, not as backticks.
            row = page.locator(f"{warning} .jp-torchdoctor-message").first
            assert row.locator("code.jp-torchdoctor-inline-code").count() > 0
            assert "`" not in row.inner_text()

            # Restarted with the notebook toolbar's "Restart Kernel" button and its dialog: the
            # page's own kernel connection goes through "restarting" before its REST call, so
            # no status message of the new kernel has to arrive in time.
            page.locator(".jp-NotebookPanel-toolbar [data-jp-item-name='restart'] button").click()
            page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()
            page.wait_for_selector(".jp-Dialog", state="detached")
            page.wait_for_selector(f"{MARK}-TDR901", state="detached")
            page.wait_for_selector(warning, state="detached")

            _run_cell(page, 0, 1)
            _run_cell(page, 1, 2)
            page.wait_for_selector(f"{MARK}-TDR901")


def test_multi_cell_fix_is_one_undo_step(tmp_path: Path) -> None:
    """With JupyterLab's document-wide undo, a fix of two cells is one Ctrl+Z; its button shows
    inline code; the tooltip stays within its size."""
    _need_build()
    settings = {"@jupyterlab/notebook-extension:tracker": {"documentWideUndoRedo": True}}
    expected = expected_after_check_fix(tmp_path, MULTI_CELLS, "undo")
    with jupyterlab_with_extension(tmp_path, WITHOUT_LSP, settings) as (lab, _proc):
        (lab.root / "undo.ipynb").write_text(json.dumps(_notebook(MULTI_CELLS)))
        with browser_page(lab) as page:
            page.goto(f"{lab.url}/lab/tree/undo.ipynb")
            page.wait_for_selector(f"{MARK}-TDR401")
            tooltip = _hover_until(page, f"{MARK}-TDR401", TOOLTIP)
            button = page.locator(f"{TOOLTIP} button.jp-torchdoctor-fix-safe").first
            page.wait_for_selector(f"{TOOLTIP} button.jp-torchdoctor-fix-safe code")
            assert "`" not in button.inner_text()
            assert "`" not in tooltip.inner_text()
            box = tooltip.bounding_box()
            assert box is not None and box["width"] <= 561 and box["height"] <= 301
            button.click()
            _wait_sources(page, expected)
            page.locator(".jp-Notebook .jp-Cell .cm-content").nth(1).click()
            page.keyboard.press("Control+z")
            _wait_sources(page, MULTI_CELLS)


MULTI_CELLS = ["import torch\nfrom torch.cuda.amp import GradScaler", "scaler = GradScaler()"]
PY_FILE = 'import torch\n\nstate = torch.load("x.pt")\n'


def _language_servers(root: int) -> list[int]:
    """The pids of `torchdoctor server` processes under process ``root`` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (
                (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            )
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        for child in children.get(pid, []):
            command = commands.get(child, "")
            # `torchdoctor server`, or the launcher's `python -c "...run_module('torchdoctor'..." server`
            launched = "run_module('torchdoctor'" in command and command.rstrip().endswith(
                " server"
            )
            if "torchdoctor server" in command or launched:
                out.append(child)
            stack.append(child)
    return out


def test_file_editor_multi_cell_fix_and_reconnect(tmp_path: Path) -> None:
    """A fix that edits two cells, a reconnect after the language server died, and a Python
    file in the file editor."""
    _need_build()
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc to find the language server")
    expected_nb = expected_after_check_fix(tmp_path, MULTI_CELLS, "multi")
    assert expected_nb[0] != MULTI_CELLS[0] and expected_nb[1] != MULTI_CELLS[1]
    py_dir = tmp_path / "cli-py"
    py_dir.mkdir()
    (py_dir / "train.py").write_text(PY_FILE)
    subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--fix", "--no-cache", "--exit-zero",
         str(py_dir / "train.py")],
        cwd=py_dir, capture_output=True, check=True,
    )  # fmt: skip
    expected_py = (py_dir / "train.py").read_text()
    assert expected_py != PY_FILE
    with jupyterlab_with_extension(tmp_path, WITHOUT_LSP) as (lab, proc):
        (lab.root / "amp.ipynb").write_text(json.dumps(_notebook(MULTI_CELLS)))
        (lab.root / "train.py").write_text(PY_FILE)
        with browser_page(lab) as page:
            page.goto(f"{lab.url}/lab/tree/amp.ipynb")
            page.wait_for_selector(f"{MARK}-TDR401")

            # The language server dies: the extension opens a new connection (the relay starts
            # a new server) and the notebook is opened there again.
            (old,) = _language_servers(proc.pid)
            os.kill(old, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while not (new := [p for p in _language_servers(proc.pid) if p != old]):
                assert time.monotonic() < deadline, "no new language server"
                time.sleep(0.2)
            assert len(new) == 1
            assert lab.log.read_text().count("torchdoctor: started") == 2
            page.wait_for_selector(f"{MARK}-TDR401")
            page.wait_for_selector(".jp-torchdoctor-problem", state="detached")

            # One fix, two cells: the import and the use, as `check --fix` changes them. The
            # underline goes once the new server has checked the fixed cells.
            tooltip = _hover_until(page, f"{MARK}-TDR401", TOOLTIP)
            assert "torch.amp" in tooltip.inner_text()
            page.locator(f"{TOOLTIP} button.jp-torchdoctor-fix-safe").first.click()
            _wait_sources(page, expected_nb)
            page.wait_for_selector(MARK, state="detached")

            # A Python file in the file editor: underline, panel, fix.
            page.goto(f"{lab.url}/lab/tree/train.py")
            mark = ".jp-FileEditor .cm-lintRange.jp-torchdoctor-mark-TDR602"
            page.wait_for_selector(mark)
            panel = _open_panel(page)
            page.wait_for_selector(".jp-torchdoctor-panel .jp-torchdoctor-finding")
            assert panel.locator(".jp-torchdoctor-cell h3").all_inner_texts() == ["train.py"]
            assert panel.locator(".jp-torchdoctor-live").count() == 0
            page.screenshot(path=str(SCREENSHOTS / "python-file.png"))
            tooltip = _hover_until(page, mark, TOOLTIP)
            page.locator(f"{TOOLTIP} button.jp-torchdoctor-fix-safe").first.click()
            page.wait_for_selector(mark, state="detached")
            text = page.evaluate(
                """() => [...document.querySelectorAll('.jp-FileEditor .cm-line')]
                .map((l) => l.textContent).join('\\n')"""
            )
            assert text == expected_py.rstrip("\n") + "\n" or text + "\n" == expected_py


def test_chinese(tmp_path: Path) -> None:
    """JupyterLab in Chinese: the server's messages and the panel are in Chinese."""
    _need_build()
    settings = {"@jupyterlab/translation-extension:plugin": {"locale": "zh_CN"}}
    with jupyterlab_with_extension(tmp_path, WITHOUT_LSP, settings) as (lab, _proc):
        (lab.root / "train.ipynb").write_text(json.dumps(_notebook(CELLS[:3])))
        with browser_page(lab) as page:
            page.goto(f"{lab.url}/lab/tree/train.ipynb")
            page.wait_for_selector(f"{MARK}-TDR602")
            tooltip = _hover_until(page, f"{MARK}-TDR602", TOOLTIP)
            message = tooltip.query_selector(".jp-torchdoctor-message")
            assert message is not None
            assert any("\u4e00" <= ch <= "\u9fff" for ch in message.inner_text()), (
                message.inner_text()
            )
            fix = tooltip.query_selector("button.jp-torchdoctor-fix-safe")
            assert fix is not None and any("\u4e00" <= ch <= "\u9fff" for ch in fix.inner_text())
            page.mouse.move(0, 0)
            panel = _open_panel(page)
            page.wait_for_selector(".jp-torchdoctor-panel .jp-torchdoctor-finding")
            assert panel.locator(".jp-torchdoctor-cell h3").all_inner_texts() == [
                "单元格 2",
                "单元格 3",
            ]
            assert panel.locator("button.jp-torchdoctor-fix-all").inner_text() == "修复所有安全项"
            assert panel.locator(".jp-torchdoctor-live h2").inner_text() == "实时张量"
            page.screenshot(path=str(SCREENSHOTS / "panel-zh.png"))
