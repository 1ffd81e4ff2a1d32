"""The page `torchdoctor run --report DIR` writes, opened in headless Chromium (Playwright) from
``file://``: it shows both plots (step time split, memory over steps) and the measured findings
with their lines. The run is real (CPU torch, a subprocess). The test saves a full-page screenshot,
``run-report.png``, in ``jupyterlab-ext/screenshots/`` (git-ignored), next to the JupyterLab
extension's.

Needs Chromium (``apt-get install chromium``, or ``TORCHDOCTOR_CHROMIUM``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

# A browser suite: scripts/test.sh runs it alone, after the parallel run.
pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "jupyterlab-ext" / "screenshots"
TIMEOUT_MS = 60_000

# Training that sums the loss with its graph, then an evaluation without no_grad.
PITFALLS = """
total = 0
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss

model.eval()
predictions = []
for x, _ in loader:
    predictions.append(model(x))
"""


def _chromium() -> str:
    found = os.environ.get("TORCHDOCTOR_CHROMIUM") or next(
        filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser"))), None
    )
    if found:
        return found
    if os.environ.get("TORCHDOCTOR_SKIP_EDITORS") == "1":
        pytest.skip("editor tests are off (TORCHDOCTOR_SKIP_EDITORS=1)")
    pytest.fail("Chromium not found: apt-get install chromium, or set TORCHDOCTOR_CHROMIUM")


def test_report_page_shows_the_plots_and_the_findings(script, td, row, tmp_path) -> None:
    path = script(PITFALLS)
    run = td("run", "--report", "out", str(path))
    assert run.code == 1, run.err
    page_file = tmp_path / "out" / "index.html"
    assert page_file.is_file()
    expected = {
        "TDR103": f"train.py:{row(path, 'total += loss')}:",
        "TDR105": f"train.py:{row(path, 'predictions.append(model(x))')}:",
    }
    executable = _chromium()
    SCREENSHOTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(page_file.resolve().as_uri())
            assert "torchdoctor run" in page.title()

            # The step time plot: visible, with bars (one stacked bar per step) and its legend.
            steps = page.locator("svg[aria-label='step time']")
            steps.wait_for(state="visible")
            box = steps.bounding_box()
            assert box is not None and box.get("width", 0) > 100 and box.get("height", 0) > 50
            assert steps.locator("rect:has(title)").count() >= 8
            legend = steps.text_content() or ""
            for part in ("data", "forward", "backward", "optimizer"):
                assert part in legend

            # The memory plot: visible, a line through one point per step.
            memory = page.locator("svg[aria-label='memory']")
            memory.wait_for(state="visible")
            box = memory.bounding_box()
            assert box is not None and box.get("width", 0) > 100 and box.get("height", 0) > 50
            points = memory.locator("polyline").get_attribute("points") or ""
            assert len(points.split()) >= 8

            # The findings: each code on its row, with the line that caused it.
            for code, where in expected.items():
                finding = page.locator("tr", has=page.locator(f"td > code:text-is('{code}')"))
                assert finding.count() == 1, code
                assert finding.is_visible()
                assert where in finding.inner_text(), (code, finding.inner_text())

            page.screenshot(path=str(SCREENSHOTS / "run-report.png"), full_page=True)
        finally:
            browser.close()
    assert (SCREENSHOTS / "run-report.png").stat().st_size > 0
