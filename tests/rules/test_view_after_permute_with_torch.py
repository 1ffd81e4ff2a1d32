"""TDR101 on views after a permutation, against torch's own view on meta tensors: where the
tensor's literal shape is in the code, the rule reports exactly the views that raise; where it
is not, it reports every view whose trailing literal size may split the moved dimension. (The
linter never imports torch; tests may.)"""

from __future__ import annotations

import pytest

from torchdoctor.linter.runner import check_text

torch = pytest.importorskip("torch")

CASES = [
    ((2, 36, 5, 5), (0, 2, 3, 1), (2, -1, 4)),  # SSD's box head: 9 anchors x 4 coordinates
    ((2, 4, 5, 5), (0, 2, 3, 1), (2, -1, 4)),
    ((2, 36, 5, 5), (0, 2, 3, 1), (2, -1, 36)),
    ((2, 3, 8, 8), (0, 2, 3, 1), (-1, 3)),
    ((2, 36, 5), (0, 2, 1), (2, -1, 4)),
    ((2, 4, 5), (0, 2, 1), (2, -1, 4)),
    ((2, 3, 4), (0, 2, 1), (2, 4, 3)),
]


def _reported(code: str) -> bool:
    result = check_text(code, "x.py", codes=frozenset({"TDR101"}))
    assert not result.errors, result.errors
    return any(f.code == "TDR101" for f in result.findings)


@pytest.mark.parametrize(("shape", "order", "view"), CASES)
def test_reported_exactly_when_the_view_fails(shape, order, view) -> None:
    x = torch.empty(shape, device="meta")
    try:
        x.permute(*order).view(*view)
        fails = False
    except RuntimeError as error:
        assert "view size is not compatible" in str(error)
        fails = True
    code = f"import torch\nx = torch.randn{shape}\ny = x.permute{order}.view{view}\n"
    assert _reported(code) == fails
    if fails:  # the shape unknown: still reported
        unknown = f"import torch\ndef head(x, n):\n    return x.permute{order}.view{view}\n"
        assert _reported(unknown)
