from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, fixes, graphs
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid


class OnnxDynamicAxesWithDynamo(Rule):
    """## What it does
    Checks for `torch.onnx.export(..., dynamic_axes=...)` that uses the default
    (`torch.export`-based) exporter: no `dynamo=False`, and no `dynamic_shapes=`.

    ## Why is this bad?
    `dynamic_axes` belongs to the legacy TorchScript exporter. Since PyTorch 2.9 `torch.onnx.export`
    defaults to `dynamo=True`, and that exporter only converts `dynamic_axes` on a best-effort
    basis. PyTorch 2.13 warns on every such call (verified): "'dynamic_axes' is not recommended
    when dynamo=True, and may lead to 'torch._dynamo.exc.UserError: Constraints violated.' Supply
    the 'dynamic_shapes' argument instead if export is unsuccessful.", followed by a
    `DeprecationWarning` that the conversion helper `from_dynamic_axes_to_dynamic_shapes` "will be
    removed in a future release". When the conversion fails, export stops with "Failed to
    convert 'dynamic_axes' to 'dynamic_shapes'. Please provide 'dynamic_shapes' directly."
    Code written for the old exporter keeps working for now, on a path that is going away.

    Calls with `dynamo=False` (the legacy exporter, where `dynamic_axes` is the right option), a
    `dynamo=` that is not a literal, `dynamic_shapes=` already given, `**kwargs`, and exports of
    an `ExportedProgram` made in the file are not reported.

    ## Example
    ```python
    torch.onnx.export(
        model, (x,), "model.onnx", input_names=["x"], output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
    )
    ```

    ## Use instead
    ```python
    torch.onnx.export(
        model, (x,), "model.onnx", input_names=["x"], output_names=["y"],
        dynamic_shapes=({0: "batch"},),
    )
    ```
    `dynamic_shapes` follows the structure of the example inputs (a tuple for positional inputs)
    and names only inputs: output dimensions are inferred. String names such as `"batch"` are
    accepted by `torch.onnx.export` and become the axis names of the ONNX graph;
    `torch.export.Dim("batch")` works as well.

    ## Fix safety
    The suggestion replaces `dynamic_axes=` with the equivalent `dynamic_shapes=` tuple, built
    from `input_names=` and the literal example inputs (entries for outputs are dropped, inputs
    without dynamic axes get `None`, a list of axes `[0, 1]` gets generated names). It is only
    a suggestion: it is offered only when `input_names`, `dynamic_axes` and the example inputs
    are literals, and `torch.export` may still reject a dimension that the model specialises.

    ## References
    - [`torch.onnx.export`](https://pytorch.org/docs/stable/onnx_export.html)
    - [`torch.export`: expressing dynamism](https://pytorch.org/docs/stable/export.html)
    """

    code = "TDR205"
    name = "onnx-dynamic-axes-with-dynamo"
    severity = Severity.INFO
    fix_safety = Applicability.SUGGESTION

    VALID = (
        # The legacy exporter, where dynamic_axes is the option to use.
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', dynamo=False,\n"
        "                  input_names=['x'], dynamic_axes={'x': {0: 'batch'}})\n",
        # Already converted, or both given.
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', input_names=['x'],\n"
        "                  dynamic_shapes=({0: 'batch'},))\n",
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', dynamic_shapes=shapes,\n"
        "                  dynamic_axes=axes)\n",
        # A computed flag, **kwargs, an ExportedProgram.
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', dynamo=legacy is False,\n"
        "                  dynamic_axes={'x': {0: 'batch'}})\n",
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', **opts)\n",
        "import torch\nep = torch.export.load('m.pt2')\n"
        "torch.onnx.export(ep, f='m.onnx', dynamic_axes={'x': {0: 'batch'}})\n",
        # A local function named export, and a parameter shadowing the import.
        "import torch\ndef export(model, args, path, dynamic_axes=None):\n    pass\n"
        "export(model, (x,), 'm.onnx', dynamic_axes={'x': {0: 'b'}})\n",
        "from torch.onnx import export\ndef save(export):\n"
        "    export(model, (x,), dynamic_axes={'x': {0: 'b'}})\n",
        # Another library's export.
        "import torch\nimport tf2onnx\ntf2onnx.export(model, dynamic_axes={'x': {0: 'b'}})\n",
        Valid(
            "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', dynamo=False,\n"
            "                  dynamic_axes={'x': {0: 'batch'}})\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx', input_names=['x'],\n"
            "                  output_names=['y'],\n"
            "                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}})\n",
            fixed="import torch\ntorch.onnx.export(model, (x,), 'model.onnx', input_names=['x'],\n"
            "                  output_names=['y'],\n"
            "                  dynamic_shapes=({0: 'batch'},))\n",
            lines=(4,),
        ),
        # dynamo=True stated; several inputs, one static, a list of axes.
        Invalid(
            "import torch as T\nT.onnx.export(net, (ids, mask, 3), 'm.onnx', dynamo=True,\n"
            "              input_names=['ids', 'mask', 'n'],\n"
            "              dynamic_axes={'ids': [0, 1]})\n",
            fixed="import torch as T\nT.onnx.export(net, (ids, mask, 3), 'm.onnx', dynamo=True,\n"
            "              input_names=['ids', 'mask', 'n'],\n"
            "              dynamic_shapes=({0: 'ids_dim_0', 1: 'ids_dim_1'}, None, None))\n",
            lines=(4,),
        ),
        # A single tensor as args.
        Invalid(
            "import torch\nfrom torch.onnx import export\n"
            "export(model, torch.randn(2, 3), 'm.onnx', input_names=['x'],\n"
            "       dynamic_axes={'x': {0: 'batch'}})\n",
            fixed="import torch\nfrom torch.onnx import export\n"
            "export(model, torch.randn(2, 3), 'm.onnx', input_names=['x'],\n"
            "       dynamic_shapes=({0: 'batch'},))\n",
            lines=(4,),
        ),
        # Axes held in a variable: reported, no suggestion.
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', input_names=['x'],\n"
            "                  dynamic_axes=axes)\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\ntorch.onnx.export(model, dummy, 'm.onnx', dynamic_axes={'x': {0: 'b'}})\n",
            fixed=None,
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_to(graphs.ONNX_EXPORT):
            bound = arguments.bind(call, arguments.ONNX_EXPORT)
            axes = bound.keyword("dynamic_axes")
            if axes is None or bound.may_pass("dynamic_shapes"):
                continue
            dynamo = bound.value("dynamo")
            if dynamo is not None and graphs.literal_bool(dynamo) is not True:
                continue
            if graphs.is_exported_program(sem, bound.value("model")):
                continue
            ctx.report(
                axes,
                Text(
                    "`dynamic_axes=` is converted with a warning by the default (dynamo) ONNX "
                    "exporter and may fail with 'Constraints violated'; pass `dynamic_shapes=` "
                    "instead",
                    "默认（dynamo）ONNX 导出器只会带着警告转换 `dynamic_axes=`，并可能以 "
                    "'Constraints violated' 失败；请改传 `dynamic_shapes=`",
                ),
                fixes=partial(_convert, ctx, call, axes),
            )


def _convert(ctx: Context, call: ast.Call, axes: ast.keyword) -> Fix | None:
    """Replace ``dynamic_axes=`` with the ``dynamic_shapes=`` tuple it means for the inputs."""
    bound = arguments.bind(call, arguments.ONNX_EXPORT)
    names = graphs.literal_strings(bound.value("input_names"))
    args = bound.value("args")
    if names is None or not isinstance(axes.value, ast.Dict) or args is None:
        return None
    if isinstance(args, ast.Tuple | ast.List):
        inputs = graphs.export_inputs(call)
    elif isinstance(args, ast.Call) and (ctx.qualname(args.func) or "").startswith("torch."):
        inputs = [args]  # a single tensor
    else:
        return None
    if not inputs or bound.value("kwargs") is not None:
        return None
    by_name: dict[str, str] = {}
    for key, value in zip(axes.value.keys, axes.value.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        spec = _axes_spec(ctx, key.value, value)
        if spec is None:
            return None
        by_name[key.value] = spec
    specs = [
        by_name.get(names[i], "None") if i < len(names) else "None" for i in range(len(inputs))
    ]
    if all(s == "None" for s in specs):
        return None
    shapes = f"({specs[0]},)" if len(specs) == 1 else f"({', '.join(specs)})"
    return Fix(
        Text(
            "Convert `dynamic_axes` to `dynamic_shapes`",
            "把 `dynamic_axes` 转换为 `dynamic_shapes`",
        ),
        (fixes.replace(ctx.source, axes, f"dynamic_shapes={shapes}"),),
        Applicability.SUGGESTION,
    )


def _axes_spec(ctx: Context, name: str, value: ast.expr) -> str | None:
    """``{0: 'batch'}`` kept as written; ``[0, 1]`` becomes ``{0: 'x_dim_0', 1: 'x_dim_1'}``."""
    if isinstance(value, ast.Dict):
        ok = all(
            isinstance(k, ast.Constant)
            and isinstance(k.value, int)
            and isinstance(v, ast.Constant)
            and isinstance(v.value, str)
            for k, v in zip(value.keys, value.values, strict=True)
        )
        return ctx.segment(value) if ok and value.keys else None
    if isinstance(value, ast.List | ast.Tuple):
        dims = [e.value for e in value.elts if isinstance(e, ast.Constant) and type(e.value) is int]
        if len(dims) != len(value.elts) or not dims:
            return None
        return "{" + ", ".join(f"{d}: {f'{name}_dim_{d}'!r}" for d in dims) + "}"
    return None
