"""TDR105 in notebooks: an evaluation region never spans cells."""

from __future__ import annotations

import json

from torchdoctor.linter.runner import check_any, fix_any

CODES = frozenset({"TDR105"})


def _notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "metadata": {},
                    "source": src,
                    "outputs": [],
                    "execution_count": None,
                }
                for src in cells
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )


SETUP = "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"


def test_one_finding_per_cell_after_eval() -> None:
    raw = _notebook(SETUP, "y = model(x)\nprint(y)\n", "z = model(x2)\n")
    result = check_any(raw, "eval.ipynb", codes=CODES)
    assert [(f.cell, f.cell_range.start.row) for f in result.findings] == [(2, 1), (3, 1)]
    for finding in result.findings:
        assert finding.related, "each finding points at the .eval() call"
        assert finding.related[0].range.start.row == 3


def test_fix_wraps_within_each_cell() -> None:
    raw = _notebook(SETUP, "y = model(x)\nprint(y)\n", "z = model(x2)\n")
    outcome = fix_any(raw, "eval.ipynb", codes=CODES)
    assert outcome.error is None
    cells = [c["source"] for c in json.loads(outcome.text)["cells"]]
    assert cells == [
        SETUP,
        "with torch.no_grad():\n    y = model(x)\nprint(y)\n",
        "with torch.no_grad():\n    z = model(x2)\n",
    ]
    assert check_any(outcome.text, "eval.ipynb", codes=CODES).findings == []


def test_train_in_a_later_cell_ends_the_region() -> None:
    raw = _notebook(SETUP, "model.train()\n", "loss = model(x).sum()\n")
    assert check_any(raw, "eval.ipynb", codes=CODES).findings == []


def test_backward_in_a_later_cell_of_the_region_keeps_it_silent() -> None:
    raw = _notebook(SETUP, "out = model(x)\n", "out.sum().backward()\n")
    assert check_any(raw, "eval.ipynb", codes=CODES).findings == []
