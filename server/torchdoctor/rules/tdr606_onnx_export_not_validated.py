from __future__ import annotations

from ..core.context import Context
from ..core.model import Severity, Text
from .base import Invalid, Rule

_EXPORTS = ("torch.onnx.export", "torch.export.export")
_CHECKS = ("assert_close", "allclose", "assert_allclose", "InferenceSession", "isclose")


class OnnxExportNotValidated(Rule):
    """## What it does
    Checks for a file that exports a model with `torch.onnx.export` or `torch.export.export` and
    never runs the exported artefact or compares its outputs with the original model's
    (`onnxruntime.InferenceSession`, `torch.testing.assert_close`, `torch.allclose`,
    `numpy.testing.assert_allclose`). Off by default.

    Only scripts and notebooks are checked (the export at module level, an
    `if __name__ == "__main__":` block, or a module-level call of one of the file's functions):
    a library function that exports on behalf of its callers (`LightningModule.to_onnx`,
    exporter back ends) leaves the validation to them.

    ## Why is this bad?
    An export can succeed and still compute something else: a data-dependent branch frozen to
    the path taken by the example input, a shape specialised to the example batch, an operator
    lowered with different numerics, pre-processing that differs between training and serving.
    The guide's advice is to compare outputs on real inputs right after exporting; it costs a few
    lines and catches these before deployment.

    ## Example
    ```python
    torch.onnx.export(model, (x,), "model.onnx")
    ```

    ## Use instead
    ```python
    torch.onnx.export(model, (x,), "model.onnx")
    session = onnxruntime.InferenceSession("model.onnx")
    (out,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(out), model(x), rtol=1e-3, atol=1e-4)
    ```

    ## Fix safety
    No fix is offered.

    ## References
    - [`torch.onnx`](https://pytorch.org/docs/stable/onnx.html)
    - [`torch.export`](https://pytorch.org/docs/stable/export.html)
    """

    code = "TDR606"
    name = "onnx-export-not-validated"
    severity = Severity.HINT
    default = False

    VALID = (
        # A library function exporting on behalf of its callers (Lightning's to_onnx).
        "import torch\nclass Module(torch.nn.Module):\n    def to_onnx(self, path, sample):\n"
        "        torch.onnx.export(self, sample, path)\n",
        "import torch\nimport onnxruntime as ort\ntorch.onnx.export(m, (x,), 'm.onnx')\n"
        "s = ort.InferenceSession('m.onnx')",
        "import torch\nep = torch.export.export(m, (x,))\n"
        "torch.testing.assert_close(ep.module()(x), m(x))",
        "import torch\ntorch.onnx.export(m, (x,), 'm.onnx')\nassert torch.allclose(a, b)",
        "import torch\ndef export(m):\n    pass\nexport(m)",
    )
    INVALID = (
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx')", fixed=None, lines=(2,)
        ),
        Invalid(
            "from torch.export import export\nep = export(model, (x,))", fixed=None, lines=(2,)
        ),
        Invalid(
            "import torch\ndef main():\n    torch.onnx.export(model, (x,), 'model.onnx')\n"
            "if __name__ == '__main__':\n    main()\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\ndef export(model, x):\n    torch.onnx.export(model, (x,), 'm.onnx')\n"
            "export(net, sample)\n",
            fixed=None,
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        exports = list(ctx.sem.calls_to(*_EXPORTS))
        if not exports:
            return
        sem = ctx.sem
        if any(qual and qual.split(".")[0] == "onnxruntime" for _n, _a, qual in sem.imports):
            return
        if any(sem.calls_by_attr.get(n) or sem.calls_by_name.get(n) for n in _CHECKS):
            return
        first = min(exports, key=lambda c: (c.lineno, c.col_offset))
        if ctx.notebook is None and not sem.runs_as_script(first):
            return  # a library exporting on behalf of its callers
        ctx.report(
            first,
            Text(
                "the exported model is never run or compared with the original: check its outputs "
                "on real inputs",
                "导出的模型从未被运行或与原模型比较：请用真实输入检查它的输出",
            ),
        )
