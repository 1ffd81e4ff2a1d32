"""TDR202-TDR204 against the installed torch: TDR202 reports exactly the snippets where Dynamo
records a graph break, TDR204 reports the traces that compute a different result from eager
code, and TDR203's fix gives an export that accepts another batch size. (The linter never
imports torch; tests may.)"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest

from torchdoctor.core.fixes import apply_edits
from torchdoctor.linter.runner import check_text

torch = pytest.importorskip("torch")


def _findings(code: str, rule: str) -> list:
    result = check_text(code, "x.py", codes=frozenset({rule}))
    assert not result.errors, result.errors
    return [f for f in result.findings if f.code == rule]


def _run(code: str) -> dict[str, object]:
    scope: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "x.py", "exec"), scope)
    return scope


COMPILED = [
    ("if x.sum() > 0:\n        x = x * 2\n    return x", True),
    ("while x.abs().max() > 1:\n        x = x / 2\n    return x", True),
    ("n = x.max().item()\n    return x / n", True),
    ("print('step')\n    return x + 1", True),
    ("return torch.tensor(x.tolist()) + 1", True),
    ("if x.shape[0] > 2 and x.dim() == 1:\n        x = x + 1\n    return x", False),
    ("assert (x > -100).all()\n    return x.cpu() + 1", False),
    ("return torch.where(x.sum() > 0, x * 2, x)", False),
]


class _Breaks(logging.Handler):
    """Collects what ``TORCH_LOGS=graph_breaks`` would print: one record per graph break."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def graph_breaks():
    # Importing these creates the artifact loggers that `TORCH_LOGS=graph_breaks` enables.
    import torch._dynamo.convert_frame
    import torch._dynamo.symbolic_convert

    handler = _Breaks()
    names = [n for n in logging.Logger.manager.loggerDict if n.endswith("__graph_breaks")]
    torch._logging.set_logs(graph_breaks=True)
    for name in names:
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler.records
    finally:
        for name in names:
            logging.getLogger(name).removeHandler(handler)
        torch._logging.set_logs()


@pytest.mark.parametrize(("body", "breaks"), COMPILED)
def test_tdr202_reports_what_dynamo_breaks_on(body: str, breaks: bool, graph_breaks) -> None:
    code = f"import torch\n@torch.compile(backend='eager')\ndef f(x):\n    {body}\n"
    assert bool(_findings(code, "TDR202")) is breaks
    torch._dynamo.reset()
    f = _run(code)["f"]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        f(torch.linspace(0.5, 3.0, 4))  # type: ignore[operator]
    assert bool(graph_breaks) is breaks, [r.getMessage()[:200] for r in graph_breaks]


TRACED = [
    ("if x.sum() > 0:\n            return x + 1\n        return x - 1", True),
    ("return torch.where(x.sum() > 0, x + 1, x - 1)", False),
    ("if x.dim() == 1:\n            return x + 1\n        return x", False),
]


@pytest.mark.parametrize(("body", "differs"), TRACED)
def test_tdr204_reports_traces_that_differ_from_eager(body: str, differs: bool) -> None:
    code = (
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        f"        {body}\n"
        "traced = torch.jit.trace(Net(), (torch.ones(3),))\n"
    )
    assert bool(_findings(code, "TDR204")) is differs
    scope = _run(code)
    other = -torch.ones(3)
    eager = scope["Net"]()(other)  # type: ignore[operator]
    traced = scope["traced"](other)  # type: ignore[operator]
    assert (not torch.equal(eager, traced)) is differs


def test_tdr203_fix_makes_the_batch_dynamic() -> None:
    code = (
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x, mask, scale):\n"
        "        return x.relu() * mask * scale\n"
        "x = torch.randn(4, 3)\nmask = torch.ones(4, 3)\n"
        "ep = torch.export.export(Net(), (x, mask, 0.5))\n"
    )
    findings = _findings(code, "TDR203")
    assert findings and findings[0].fix is not None
    fixed = apply_edits(code, list(findings[0].fix.edits))
    assert 'dynamic_shapes=({0: torch.export.Dim("batch")}, ' in fixed
    before = _run(code)["ep"].module()  # type: ignore[attr-defined]
    after = _run(fixed)["ep"].module()  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="Guard failed"):
        before(torch.randn(7, 3), torch.ones(7, 3), 0.5)
    assert after(torch.randn(7, 3), torch.ones(7, 3), 0.5).shape == (7, 3)
    assert _findings(fixed, "TDR203") == []
