"""Rules that depend on the target torch version (``target-version``)."""

from __future__ import annotations

from torchdoctor.engine.config import Settings
from torchdoctor.engine.fixes import apply_edits
from torchdoctor.engine.runner import check_text

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


def test_load_without_weights_only_is_fine_from_2_6() -> None:
    assert _tdr603(LOAD, "2.6") == []
    assert _tdr603(LOAD, "2.13") == []


def test_kwargs_may_hold_weights_only() -> None:
    assert _tdr603("import torch\nsd = torch.load(p, **opts)\n", "2.4") == []
