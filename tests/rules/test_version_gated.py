"""Rules that depend on the target torch version (``target-version``)."""

from __future__ import annotations

from torchdoctor.core.config import Settings
from torchdoctor.core.fixes import apply_edits
from torchdoctor.linter.runner import check_text

LOAD = "import torch\nsd = torch.load('m.pt', map_location='cpu')\n"


def _tdr603(code: str, target: str) -> list:
    result = check_text(code, "x.py", Settings(target_version=target), codes=frozenset({"TDR603"}))
    assert not result.errors
    return result.findings


def test_load_without_weights_only_before_2_6() -> None:
    (finding,) = _tdr603(LOAD, "2.5")
    assert "before PyTorch 2.6" in finding.message.en
    assert finding.fix is not None and finding.fix.applicability.value == "unsafe"
    fixed = apply_edits(LOAD, list(finding.fix.edits))
    assert fixed == "import torch\nsd = torch.load('m.pt', map_location='cpu', weights_only=True)\n"
    assert _tdr603(fixed, "2.5") == []


def test_from_2_6_a_load_of_tensors_is_not_reported() -> None:
    for target in ("2.6", "2.13"):
        assert _tdr603(LOAD, target) == []


def test_from_2_6_a_load_that_fails_is_an_error_without_a_fix() -> None:
    code = "import torch\nmodel = torch.load('model.pt')\nmodel.eval()\n"
    for target in ("2.6", "2.13"):
        (finding,) = _tdr603(code, target)
        assert finding.severity.value == "error"
        assert "UnpicklingError" in finding.message.en and "whole module" in finding.message.en
        assert finding.fix is None  # weights_only=True is what fails
        assert [r.range.start.row for r in finding.related] == [3]  # `model.eval()` shows it
    # Before 2.6 the same load unpickles anything: the pre-2.6 warning, with its unsafe fix.
    (finding,) = _tdr603(code, "2.5")
    assert "before PyTorch 2.6" in finding.message.en


def test_custom_pickle_module_defaults_to_full_unpickling_on_every_version() -> None:
    code = "import dill\nimport torch\nsd = torch.load('m.pt', pickle_module=dill)\n"
    for target in ("2.5", "2.13"):
        (finding,) = _tdr603(code, target)
        assert finding.severity.value == "warning"
        assert finding.fix is None  # torch refuses weights_only=True with a pickle module
    assert _tdr603(code.replace("dill)", "None)"), "2.13") == []


def test_kwargs_may_hold_weights_only() -> None:
    for target in ("2.4", "2.13"):
        assert _tdr603("import torch\nsd = torch.load(p, **opts)\n", target) == []
        assert _tdr603("import torch\nsd = torch.load(*args)\n", target) == []


def test_loader_iterator_next_before_1_13_is_not_reported() -> None:
    code = "import torch\nfrom torch.utils.data import DataLoader\nit = iter(DataLoader(ds))\nx = it.next()\n"
    for target, count in (("1.12", 0), ("1.13", 1), ("2.13", 1)):
        result = check_text(
            code, "x.py", Settings(target_version=target), codes=frozenset({"TDR815"})
        )
        assert not result.errors
        assert len(result.findings) == count
