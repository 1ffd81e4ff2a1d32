"""TDR105 in notebooks: an evaluation region never spans cells; a demo cell with a single forward
and a notebook that never uses an accelerator are not reported."""

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


SETUP = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
LOOP = "for x in val_loader:\n    y = model(x.cuda())\nprint(y)\n"
OTHER = "for x in test_loader:\n    z = model(x.cuda())\n"


def test_one_finding_per_cell_after_eval() -> None:
    raw = _notebook(SETUP, LOOP, OTHER)
    result = check_any(raw, "eval.ipynb", codes=CODES)
    assert [(f.cell, f.cell_range.start.row) for f in result.findings] == [(2, 2), (3, 2)]
    for finding in result.findings:
        assert finding.related, "each finding points at the .eval() call"
        assert finding.related[0].range.start.row == 3


def test_fix_wraps_within_each_cell() -> None:
    raw = _notebook(SETUP, LOOP, OTHER)
    outcome = fix_any(raw, "eval.ipynb", codes=CODES)
    assert outcome.error is None
    cells = [c["source"] for c in json.loads(outcome.text)["cells"]]
    assert cells == [
        SETUP,
        "with torch.no_grad():\n    for x in val_loader:\n        y = model(x.cuda())\nprint(y)\n",
        "with torch.no_grad():\n    for x in test_loader:\n        z = model(x.cuda())\n",
    ]
    assert check_any(outcome.text, "eval.ipynb", codes=CODES).findings == []


def test_a_single_forward_in_a_demo_cell_is_not_reported() -> None:
    demo = "images, labels = next(iter(val_loader))\nout = model(images.cuda())\nout[:5]\n"
    raw = _notebook(SETUP, demo, LOOP)
    assert [f.cell for f in check_any(raw, "eval.ipynb", codes=CODES).findings] == [3]


def test_a_notebook_on_the_cpu_is_reported_too() -> None:
    # A loop of forwards keeps autograd's bookkeeping whatever the device.
    raw = _notebook(SETUP.replace(".cuda()", ""), LOOP.replace(".cuda()", ""))
    assert [f.cell for f in check_any(raw, "eval.ipynb", codes=CODES).findings] == [2]


def test_train_in_a_later_cell_ends_the_region() -> None:
    raw = _notebook(
        SETUP, "model.train()\n", "for x in train_loader:\n    loss = model(x.cuda())\n"
    )
    assert check_any(raw, "eval.ipynb", codes=CODES).findings == []


def test_backward_in_a_later_cell_of_the_region_keeps_it_silent() -> None:
    raw = _notebook(
        SETUP, "outs = [model(x.cuda()) for x in loader]\n", "outs[0].sum().backward()\n"
    )
    assert check_any(raw, "eval.ipynb", codes=CODES).findings == []
