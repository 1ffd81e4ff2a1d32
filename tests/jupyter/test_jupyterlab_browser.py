"""torchdoctor in JupyterLab, in a real browser: JupyterLab 4 with jupyterlab-lsp, our server
found through its entry point, driven by headless Chromium (Playwright).

jupyterlab-lsp sends a notebook's code cells to the server as one Python document under the
notebook's path; the server checks it as a notebook (no script-only findings), finds the
notebook's kernel, and answers hovers with live facts once a cell has run.

python-lsp-server is installed too (the test extra has it, as most Jupyter users do): with
jupyterlab-lsp alone, one server serves a document, so the user gives torchdoctor the higher
priority in jupyterlab-lsp's settings, as docs/getting-started.md says (our own extension,
tests/jupyter/test_jupyterlab_torchdoctor.py, needs no such setting).

Needs Chromium (``apt-get install chromium``; ``scripts/test.sh`` installs it with the editor
tests). With ``TORCHDOCTOR_SKIP_EDITORS=1`` (no editor tests) the test is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_helpers import JupyterServer, running_jupyter
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

# A browser suite: scripts/test.sh runs it alone, after the parallel run.
pytestmark = pytest.mark.serial

TIMEOUT_MS = 90_000
LINT = ".jp-Notebook .cm-lintRange"

CELLS = [
    'import torch\nfrom torch.utils.data import DataLoader\nb = eval("torch.randn(4, 6).t()")',
    'state = torch.load("x.pt", weights_only=True)\n'
    "flat = b.view(-1)\n"
    "loader = DataLoader(dataset, batch_size=8, num_workers=2)\n"
    "for batch in loader:\n"
    "    pass",
]

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


def _hover_until(page: Any, spot: dict[str, float], tooltip: str, ctrl: bool = False) -> Any:
    """Move the mouse onto ``spot`` (holding Ctrl if asked) until ``tooltip`` shows: editors
    open hover tooltips on mouse movement after a delay, so a move can come too early."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        page.mouse.move(0, 0)
        page.mouse.move(spot["x"], spot["y"])
        if ctrl:
            page.keyboard.down("Control")
        page.mouse.move(spot["x"] + 1, spot["y"])
        try:
            return page.wait_for_selector(tooltip, timeout=3000)
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise
        finally:
            if ctrl:
                page.keyboard.up("Control")


def _center(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None
    return {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}


def _chromium() -> str:
    found = os.environ.get("TORCHDOCTOR_CHROMIUM") or next(
        filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser"))), None
    )
    if found:
        return found
    if os.environ.get("TORCHDOCTOR_SKIP_EDITORS") == "1":
        pytest.skip("editor tests are off (TORCHDOCTOR_SKIP_EDITORS=1)")
    pytest.fail("Chromium not found: apt-get install chromium, or set TORCHDOCTOR_CHROMIUM")


# What docs/getting-started.md tells a jupyterlab-lsp user with python-lsp-server to set.
PRIORITY = {
    "@jupyter-lsp/jupyterlab-lsp:plugin": {"language_servers": {"torchdoctor": {"priority": 100}}}
}


@pytest.fixture
def jupyterlab(tmp_path: Path) -> Iterator[JupyterServer]:
    with running_jupyter(tmp_path, "jupyterlab", PRIORITY) as server:
        yield server


def _notebook(cells: list[str]) -> str:
    return json.dumps(
        {
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
    )


def test_notebook_in_jupyterlab(jupyterlab: JupyterServer) -> None:
    executable = _chromium()
    (jupyterlab.root / "train.ipynb").write_text(_notebook(CELLS))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        try:
            page.goto(f"{jupyterlab.url}/lab/tree/train.ipynb")

            # The finding shows as an underline in the second cell, with the server's message.
            page.wait_for_selector(LINT)
            marks = page.eval_on_selector_all(LINT, "els => els.map((e) => e.textContent)")
            # Checked as a notebook: no TDR301 for the DataLoader outside a __main__ guard.
            assert marks == ['torch.load("x.pt", weights_only=True)']
            tooltip = _hover_until(page, _center(page, LINT), ".cm-tooltip-lint")
            assert "map_location" in tooltip.inner_text()

            # Run the first cell: a hover (Ctrl + mouse in jupyterlab-lsp) on `b` in the second
            # cell shows the live tensor.
            page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
            page.keyboard.press("Shift+Enter")
            page.wait_for_selector(".jp-InputPrompt:has-text('[1]')")
            spot = page.evaluate(CHAR_BOX, ["flat = b.view", len("flat = ")])
            assert spot is not None
            hover = _hover_until(page, spot, ".lsp-hover:has-text('Tensor(6, 4)')", ctrl=True)
            assert "strides: (1, 6)" in hover.inner_text()
            page.mouse.move(0, 0)

            # Fixing the code by typing clears the underline.
            page.locator(".jp-Notebook .jp-Cell .cm-content").nth(1).click()
            page.keyboard.press("Control+Home")
            page.keyboard.press("End")
            page.keyboard.press("ArrowLeft")
            page.keyboard.type(', map_location="cpu"')
            page.wait_for_selector(LINT, state="detached")
        except Exception:
            page.screenshot(path=str(jupyterlab.log.with_suffix(".png")))
            print(jupyterlab.log.read_text())
            raise
        finally:
            browser.close()
