"""Every output format reports the same fixes, with the same safety and the same counts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

EVAL = """import torch

def evaluate(model, loader):
    model.eval()
    for x in loader:
        out = model(x.cuda())

evaluate(torch.nn.Linear(2, 2).cuda(), val_loader)
"""
# A whole module saved: TDR601's only fix is unsafe.
SAVE = 'import torch\nmodel = torch.nn.Linear(2, 2)\ntorch.save(model, "model.pt")\n'
# Two findings that one edit fixes (the loader gets `pin_memory=True`).
PIN = """import torch
from torch.utils.data import DataLoader

loader = DataLoader(range(8), batch_size=8)
for x, y in loader:
    x = x.to("cuda", non_blocking=True)
    y = y.to("cuda", non_blocking=True)
"""
LOAD = 'import torch\nstate = torch.load("ckpt.pt", weights_only=True)\n'


def _edits_positions(edits: list[dict]) -> list[tuple[int, int]]:
    return [(e["location"]["row"], e["location"]["column"]) for e in edits]


def test_every_format_reports_the_fix_that_fix_applies(td, tmp_path: Path) -> None:
    (tmp_path / "e.py").write_text(EVAL)
    text = td("check", "--no-cache", "e.py").out
    assert "TDR105 [*]" in text
    fix = td("check", "--no-cache", "--output-format", "json", "e.py").json()[0]["fix"]
    assert fix["applicability"] == "safe" and "no_grad" in fix["message"]
    positions = _edits_positions(fix["edits"])
    assert len(positions) == len(set(positions)), fix["edits"]  # one edit per place
    sarif = json.loads(td("check", "--no-cache", "--output-format", "sarif", "e.py").out)
    result = sarif["runs"][0]["results"][0]
    assert result["properties"]["fixSafety"] == "safe"
    assert "no_grad" in result["fixes"][0]["description"]["text"]
    # With unsafe fixes on, TDR105 still shows (and --fix applies) its only fix, the safe one.
    unsafe = td("check", "--no-cache", "--unsafe-fixes", "--output-format", "json", "e.py")
    assert unsafe.json()[0]["fix"] == fix
    # A fix that is only unsafe: shown with its safety, marked fixable once unsafe fixes are on.
    (tmp_path / "s.py").write_text(SAVE)
    assert "TDR601 [*]" not in td("check", "--no-cache", "s.py").out
    fix = td("check", "--no-cache", "--output-format", "json", "s.py").json()[0]["fix"]
    assert fix["applicability"] == "unsafe" and "state_dict" in fix["message"]
    on = td("check", "--no-cache", "--unsafe-fixes", "--output-format", "json", "s.py")
    assert on.json()[0]["fix"] == fix
    assert "TDR601 [*]" in td("check", "--no-cache", "--unsafe-fixes", "s.py").out


def test_fix_counts_agree(td, tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text(PIN)
    assert "[*] 2 fixable with the `--fix` option." in td("check", "--no-cache", "p.py").out
    assert "Would fix 2 findings." in td("check", "--no-cache", "--diff", "p.py").err
    run = td("check", "--no-cache", "--fix", "p.py")
    assert "Fixed 2 findings." in run.out, run.out
    assert "pin_memory=True" in (tmp_path / "p.py").read_text()


def test_one_hidden_fix_is_english(td, tmp_path: Path) -> None:
    (tmp_path / "h.py").write_text(SAVE)
    out = td("check", "--no-cache", "h.py").out
    assert "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)" in out


def test_sarif_and_json_link_the_public_page_even_with_offline_docs(tmp_path: Path) -> None:
    import torchdoctor

    # An installed copy of the package with the offline docs in it.
    site = tmp_path / "site"
    shutil.copytree(
        Path(torchdoctor.__file__).parent,
        site / "torchdoctor",
        ignore=shutil.ignore_patterns("__pycache__", "_docs"),
    )
    page = site / "torchdoctor" / "_docs" / "rules" / "TDR602" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html></html>")
    (tmp_path / "a.py").write_text(LOAD)
    env = {k: v for k, v in os.environ.items() if k != "TORCHDOCTOR_DOCS_URL"}
    env["PYTHONPATH"] = str(site)

    def run(fmt: str) -> str:
        cmd = [sys.executable, "-m", "torchdoctor", "check", "--no-cache", "--output-format", fmt]
        proc = subprocess.run(
            [*cmd, "a.py"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
        )
        return proc.stdout

    sarif = json.loads(run("sarif"))
    uri = sarif["runs"][0]["tool"]["driver"]["rules"][0]["helpUri"]
    assert uri == "https://torchdoctor.dev/rules/TDR602/"
    assert json.loads(run("json"))[0]["url"] == "https://torchdoctor.dev/rules/TDR602/"


def test_github_annotations_of_a_notebook_name_the_cell(td, tmp_path: Path, notebook) -> None:
    (tmp_path / "n.ipynb").write_text(notebook("import torch", LOAD))
    gh = td("check", "--no-cache", "--output-format", "github", "n.ipynb").out.strip()
    assert gh.startswith("::warning title=torchdoctor (TDR602, cell 2),file=n.ipynb,line=2,"), gh
    assert gh.endswith("(cell 2)")


def test_sarif_short_description_is_one_sentence(td, tmp_path: Path) -> None:
    # TDR101's summary has several sentences, and full stops inside inline code (`.view(...)`).
    (tmp_path / "v.py").write_text("import torch\nx = torch.randn(2, 3)\ny = x.t().view(6)\n")
    for locale, stop in (("en", "."), ("zh", "。")):
        sarif = json.loads(
            td("check", "--no-cache", "--output-format", "sarif", "--locale", locale, "v.py").out
        )
        (rule,) = sarif["runs"][0]["tool"]["driver"]["rules"]
        short, full = rule["shortDescription"]["text"], rule["fullDescription"]["text"]
        assert rule["id"] == "TDR101"
        assert full.startswith(short) and len(full) > len(short), (short, full)
        assert short.endswith(stop) and "`.view(...)`" in short
        rest = short.replace("`.view(...)`", "")
        assert rest.count(stop) == 1 if locale == "zh" else rest.rstrip(".").count(". ") == 0
