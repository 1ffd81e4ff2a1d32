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
import shutil
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jupyter_helpers import DIRECTORIES, START_TIMEOUT_S, JupyterServer, _stop, free_port
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

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
]


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
def jupyterlab_with_extension(tmp_path: Path) -> Iterator[JupyterServer]:
    """JupyterLab with isolated Jupyter folders, our labextension in its data folder and our
    server extension enabled in its config folder."""
    root = tmp_path / "work"
    root.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for var, name in DIRECTORIES:
        (tmp_path / name).mkdir()
        env[var] = str(tmp_path / name)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    env["PYTHONPATH"] = os.pathsep.join([str(EXT), *filter(None, [os.environ.get("PYTHONPATH")])])
    (tmp_path / "data" / "labextensions").mkdir()
    (tmp_path / "data" / "labextensions" / "jupyterlab-torchdoctor").symlink_to(LABEXTENSION)
    # No "news" notification over the notebook.
    news = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # The config file the wheel installs: enables the server extension and keeps jupyter-lsp
    # from starting torchdoctor a second time for jupyterlab-lsp.
    conf_d = tmp_path / "config" / "jupyter_server_config.d"
    conf_d.mkdir()
    shutil.copy(CONFIG, conf_d / CONFIG.name)
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
        yield server
    finally:
        _stop(proc)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[JupyterServer]:
    if not (LABEXTENSION / "package.json").is_file():
        pytest.skip("the JupyterLab extension is not built (bash .ci/jupyterlab.sh builds it)")
    with jupyterlab_with_extension(tmp_path) as server:
        yield server


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


def test_fix_from_tooltip_and_panel(lab: JupyterServer, tmp_path: Path) -> None:
    executable = _chromium()
    SCREENSHOTS.mkdir(exist_ok=True)
    (lab.root / "train.ipynb").write_text(json.dumps(_notebook(CELLS)))
    expected_one = expected_after_check_fix(tmp_path, [*CELLS[:2], CELLS[2].split("\n")[0]], "one")
    expected_all = expected_after_check_fix(tmp_path, CELLS, "all")
    expected_unsafe = expected_after_check_fix(tmp_path, expected_all, "unsafe", unsafe=True)
    assert expected_all[2] != CELLS[2]
    assert expected_all[1] == CELLS[1] != expected_unsafe[1]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        try:
            page.goto(f"{lab.url}/lab/tree/train.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content")

            # The two findings of the third cell are underlined, each with its rule code.
            page.wait_for_selector(f"{MARK}-TDR602")
            page.wait_for_function(
                f"document.querySelectorAll('{MARK}-TDR602').length === 2", timeout=TIMEOUT_MS
            )
            page.wait_for_selector(f"{MARK}-TDR808")
            marks = page.eval_on_selector_all(MARK, "els => els.map((e) => e.textContent)")
            assert marks == ["torch.log(1 + x)", 'torch.load("x.pt")', 'torch.load("y.pt")']

            # Next to jupyterlab-lsp: jupyter-lsp does not run torchdoctor too, so each
            # finding is underlined once.
            sessions = lab.get_json("/lsp/status")["sessions"]
            assert "torchdoctor" not in sessions
            assert page.locator(".jp-Notebook .cm-lintRange").count() == len(marks)

            # The tooltip: code (a link to the rule's page), message, fix buttons.
            tooltip = _hover_until(page, f"{MARK}-TDR602", TOOLTIP)
            code = tooltip.query_selector(".jp-torchdoctor-code")
            assert code is not None and code.inner_text() == "TDR602"
            assert "TDR602" in (code.get_attribute("href") or "")
            assert "map_location" in tooltip.inner_text()
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
            page.locator(
                ".jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id='jp-torchdoctor-panel']"
            ).click()
            page.wait_for_selector(".jp-torchdoctor-panel .jp-torchdoctor-finding")
            panel = page.locator(".jp-torchdoctor-panel")
            assert panel.locator(".jp-torchdoctor-cell h3").all_inner_texts() == [
                "Cell 2",
                "Cell 3",
            ]
            assert panel.locator(".jp-torchdoctor-finding").count() == 3
            page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
            panel.locator(".jp-torchdoctor-finding-main").nth(2).click()
            page.wait_for_selector(".jp-Notebook .jp-Cell.jp-mod-active:nth-child(3)")
            page.screenshot(path=str(SCREENSHOTS / "panel.png"))

            # "Fix all safe" fixes the notebook as `check --fix` does; the unsafe fix stays.
            panel.locator("button.jp-torchdoctor-fix-all").click()
            _wait_sources(page, expected_all)
            page.wait_for_selector(f"{MARK}-TDR602", state="detached")
            page.wait_for_selector(".jp-torchdoctor-fix-all:disabled")
            assert panel.locator(".jp-torchdoctor-finding").count() == 1
            page.screenshot(path=str(SCREENSHOTS / "fixed.png"))

            # The unsafe fix, from its tooltip, changes the cell as `--unsafe-fixes` does.
            tooltip = _hover_until(page, f"{MARK}-TDR808", TOOLTIP)
            assert tooltip.query_selector("button.jp-torchdoctor-fix-safe") is None
            page.locator(f"{TOOLTIP} button.jp-torchdoctor-fix-unsafe").first.click()
            _wait_sources(page, expected_unsafe)
            page.wait_for_selector(MARK, state="detached")
            page.wait_for_selector(".jp-torchdoctor-panel .jp-torchdoctor-note")

            # Live facts: once the first cell ran, a hover on `x` shows the kernel's tensor.
            page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
            page.keyboard.press("Shift+Enter")
            page.wait_for_selector(".jp-InputPrompt:has-text('[1]')")
            line = expected_unsafe[1]
            spot = page.evaluate(CHAR_BOX, [line, line.index("x)")])
            assert spot is not None
            hover = _hover_until(page, spot, ".jp-torchdoctor-hover:has-text('Tensor(4, 4)')")
            assert "float32" in hover.inner_text()
            page.screenshot(path=str(SCREENSHOTS / "live-tensor.png"))
            page.mouse.move(0, 0)
        except Exception:
            page.screenshot(path=str(SCREENSHOTS / "failure.png"))
            print(lab.log.read_text()[-20000:])
            raise
        finally:
            browser.close()


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
