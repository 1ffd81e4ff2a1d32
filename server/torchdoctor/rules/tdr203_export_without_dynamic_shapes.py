from __future__ import annotations

import ast

from ..core import fixes, graphs
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import argument, has_star_kwargs, keyword
from .base import Invalid, Rule, Valid


class ExportWithoutDynamicShapes(Rule):
    """## What it does
    Checks for `torch.export.export(...)` without `dynamic_shapes=`, and for
    `torch.onnx.export(...)` that states no dynamic dimension: without `dynamic_shapes=` (and
    without `dynamic_axes=`, see TDR205) under the default exporter, or without `dynamic_axes=`
    with `dynamo=False`. Only exports whose example inputs are written in the file are
    reported (a literal tuple, a `torch.randn(...)`-style call, or a name assigned one): a
    generic helper that receives the model and inputs from its caller is left alone, since only
    the caller knows which dimensions vary.

    ## Why is this bad?
    Both exporters trace the model with the example inputs and, unless told otherwise, record
    every input dimension as a constant. The exported program then only accepts that exact shape:
    `torch.export` raises `Guard failed: x.size()[0] == 4` for another batch size (verified on
    2.13), and the ONNX graph declares `Shape([4, 3])` inputs that ONNX Runtime rejects for other
    sizes. The guide warns about exactly this: a model meant for variable inputs must say which
    dimensions are dynamic when it is exported, or it is frozen to the example's shape.

    `torch.onnx.export` uses the `torch.export`-based exporter by default since PyTorch 2.9
    (`dynamo: bool = True`; the legacy path warns "Starting in PyTorch 2.9, the new
    torch.export-based ONNX exporter has become the default"), and that exporter reads
    `dynamic_shapes=`, like `torch.export.export`.

    Fixed shapes are sometimes intended (a deployment that always runs batch 1 at 224×224): pass
    `dynamic_shapes=None` explicitly to say so, and the rule stays silent. Calls with
    `**kwargs`, calls whose example inputs are all constants or empty, a `dynamo=` that is not a
    literal, and `torch.onnx.export` of an `ExportedProgram` made in the file (its shapes were
    decided by `torch.export`) are not reported.

    ## Example
    ```python
    ep = torch.export.export(model, (x, mask))
    torch.onnx.export(model, (x,), "model.onnx", dynamo=False, input_names=["x"])
    ```

    ## Use instead
    ```python
    batch = torch.export.Dim("batch")
    ep = torch.export.export(model, (x, mask), dynamic_shapes=({0: batch}, {0: batch}))
    torch.onnx.export(
        model, (x,), "model.onnx", dynamo=False, input_names=["x"],
        dynamic_axes={"x": {0: "batch"}},
    )
    ```

    ## Fix safety
    When the example inputs are a literal tuple, the fix adds `dynamic_shapes=` marking
    dimension 0 of each positional input as `torch.export.Dim("batch")` (constants get `None`).
    It is unsafe: dims with the same name are one symbol, so every input must share that batch
    size, and export fails with `Constraints violated (batch)! ... your code specialized it to be
    a constant` when the model fixes the batch (a `view(4, -1)`, say). It is not offered when an
    input is built with a literal batch of 1 (`torch.randn(1, ...)`): `torch.export` specialises
    a dimension of size 1 and rejects marking it dynamic; use a batch of 2 or more as the
    example. Calls with `kwargs=` get no fix. With `dynamo=False` and literal `input_names=`
    (and `output_names=`), the fix adds `dynamic_axes={name: {0: "batch"}}` for each name
    (unsafe for the same reason).

    ## References
    - [`torch.export`: expressing dynamism](https://pytorch.org/docs/stable/export.html)
    - [`torch.onnx.export`](https://pytorch.org/docs/stable/onnx_export.html)
    """

    zh = """## 功能
    检查没有 `dynamic_shapes=` 的 `torch.export.export(...)`，以及没有声明任何动态维度的
    `torch.onnx.export(...)`：使用默认导出器时既没有 `dynamic_shapes=`（也没有 `dynamic_axes=`，见
    TDR205），或在 `dynamo=False` 时没有 `dynamic_axes=`。只报告示例输入写在本文件中的导出（字面量元组、
    `torch.randn(...)` 这类调用，或被赋值为二者之一的名字）：从调用方接收模型和输入的通用辅助函数不会被
    报告，因为只有调用方知道哪些维度会变化。

    ## 为什么不好？
    两种导出器都用示例输入追踪模型，除非另行指定，会把输入的每一维都记录为常量。导出的程序因此只接受完全
    相同的形状：换一个 batch 大小，`torch.export` 会报 `Guard failed: x.size()[0] == 4`（已在 2.13 上
    核实），ONNX 图则把输入声明为 `Shape([4, 3])`，ONNX Runtime 会拒绝其他尺寸。指南正是在提醒这一点：
    支持变长输入的模型在导出时必须显式指定哪些维度是动态的，否则会被固化为示例的形状。

    自 PyTorch 2.9 起，`torch.onnx.export` 默认使用基于 `torch.export` 的导出器（`dynamo: bool =
    True`；旧路径会警告 "Starting in PyTorch 2.9, the new torch.export-based ONNX exporter has
    become the default"），该导出器与 `torch.export.export` 一样读取 `dynamic_shapes=`。

    有时确实需要固定形状（例如部署时始终以 batch 1、224×224 运行）：显式传入 `dynamic_shapes=None`
    表明这一点，本规则便不会报告。带 `**kwargs` 的调用、示例输入全为常量或为空的调用、`dynamo=` 不是字面量
    的调用，以及对本文件中生成的 `ExportedProgram` 调用 `torch.onnx.export`（其形状已由
    `torch.export` 决定）都不会被报告。

    ## 示例
    ```python
    ep = torch.export.export(model, (x, mask))
    torch.onnx.export(model, (x,), "model.onnx", dynamo=False, input_names=["x"])
    ```

    ## 改为
    ```python
    batch = torch.export.Dim("batch")
    ep = torch.export.export(model, (x, mask), dynamic_shapes=({0: batch}, {0: batch}))
    torch.onnx.export(
        model, (x,), "model.onnx", dynamo=False, input_names=["x"],
        dynamic_axes={"x": {0: "batch"}},
    )
    ```

    ## 修复安全性
    当示例输入是字面量元组时，修复会添加 `dynamic_shapes=`，把每个位置输入的第 0 维标为
    `torch.export.Dim("batch")`（常量输入对应 `None`）。它是不安全的：同名的 Dim 是同一个符号，因此所有
    输入必须共享这个 batch 大小；若模型把 batch 固定了（例如 `view(4, -1)`），导出会失败并报
    `Constraints violated (batch)! ... your code specialized it to be a constant`。当某个输入以字面量
    batch 1 构造时（`torch.randn(1, ...)`）不提供修复：`torch.export` 会把大小为 1 的维度特化，拒绝将其
    标为动态；请用 2 或更大的 batch 作为示例。带 `kwargs=` 的调用没有修复。在 `dynamo=False` 且
    `input_names=`（及 `output_names=`）为字面量时，修复会为每个名字添加
    `dynamic_axes={name: {0: "batch"}}`（出于同样原因不安全）。

    ## 参考
    - [`torch.export`：表达动态性](https://pytorch.org/docs/stable/export.html)
    - [`torch.onnx.export`](https://pytorch.org/docs/stable/onnx_export.html)
    """

    code = "TDR203"
    name = "export-without-dynamic-shapes"
    severity = Severity.WARNING
    fix_safety = Applicability.UNSAFE

    VALID = (
        # All inputs in kwargs= from the caller, after `args=()` (transformers' ONNX exporter).
        "import copy\nimport torch\ndef export(ep, sample_inputs):\n"
        "    return torch.onnx.export(ep, args=(), kwargs=copy.deepcopy(dict(sample_inputs)))\n",
        "import torch\nbatch = torch.export.Dim('batch')\n"
        "ep = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))\n",
        # Fixed shapes stated on purpose.
        "import torch\nep = torch.export.export(model, (x,), dynamic_shapes=None)\n",
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', dynamic_shapes=({0: 'batch'},))\n",
        # dynamic_axes with the default exporter is TDR205's business.
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', input_names=['x'],\n"
        "                  dynamic_axes={'x': {0: 'batch'}})\n",
        # The legacy exporter with dynamic_axes.
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', dynamo=False,\n"
        "                  input_names=['x'], dynamic_axes={'x': {0: 'batch'}})\n",
        # Exporting an ExportedProgram: its shapes were decided by torch.export.
        "import torch\nep = torch.export.export(model, (x,), dynamic_shapes=dyn)\n"
        "torch.onnx.export(ep, f='m.onnx')\n",
        # No tensor inputs, **kwargs, a computed dynamo flag.
        "import torch\nep = torch.export.export(model, ())\n"
        "torch.onnx.export(model, (3, 'a'), 'm.onnx')\n",
        "import torch\nep = torch.export.export(model, (x,), **export_options)\n",
        "import torch\ntorch.onnx.export(model, (x,), 'm.onnx', dynamo=use_dynamo)\n",
        # A generic helper: the example inputs come from its caller or are computed.
        "import torch\ndef to_program(mod, example_args, example_kwargs=None):\n"
        "    return torch.export.export(mod, example_args, example_kwargs)\n",
        "import torch\ndef lower(ep, mod):\n    args, kwargs = ep.example_inputs\n"
        "    flat = tuple(args)\n    return torch.export.export(mod, flat)\n",
        # Other export functions.
        "import torch\nfrom mylib import export\nexport(model, (x,))\n",
        "import torch\ndef export(m, a):\n    return m\nexport(model, (x,))\n",
        Valid(
            "import torch\nep = torch.export.export(model, (x,), dynamic_shapes=None)\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nep = torch.export.export(model, (x, mask))\n",
            fixed="import torch\nep = torch.export.export(model, (x, mask), dynamic_shapes="
            '({0: torch.export.Dim("batch")}, {0: torch.export.Dim("batch")}))\n',
        ),
        # Alias import, a constant input, keyword args.
        Invalid(
            "import torch as T\nfrom torch.export import export\n"
            "ep = export(net, args=(images, 0.5), strict=True)\n",
            fixed="import torch as T\nfrom torch.export import export\n"
            "ep = export(net, args=(images, 0.5), strict=True, dynamic_shapes="
            '({0: T.export.Dim("batch")}, None))\n',
        ),
        # No `import torch` binding: the fix adds one.
        Invalid(
            "from torch.export import export\nep = export(net, (x,))\n",
            fixed="from torch.export import export\nimport torch\nep = export(net, (x,), "
            'dynamic_shapes=({0: torch.export.Dim("batch")},))\n',
        ),
        # The default ONNX exporter.
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx')\n",
            fixed="import torch\ntorch.onnx.export(model, (x,), 'model.onnx', "
            'dynamic_shapes=({0: torch.export.Dim("batch")},))\n',
        ),
        # Inputs that are not a literal tuple, or a batch of one: reported, no fix.
        Invalid(
            "import torch\ndummy = torch.randn(2, 3)\ntorch.onnx.export(model, dummy, 'model.onnx')\n",
            fixed=None,
        ),
        Invalid(
            "import torch\nep = torch.export.export(model, (torch.randn(1, 3, 224, 224),))\n",
            fixed=None,
        ),
        # The legacy exporter: dynamic_axes for every named input and output.
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx', dynamo=False,\n"
            "                  input_names=['input'], output_names=['logits'])\n",
            fixed="import torch\ntorch.onnx.export(model, (x,), 'model.onnx', dynamo=False,\n"
            "                  input_names=['input'], output_names=['logits'], "
            "dynamic_axes={'input': {0: 'batch'}, 'logits': {0: 'batch'}})\n",
        ),
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx', dynamo=False)\n",
            fixed=None,
        ),
        Invalid(
            "import torch\nep = torch.export.export(model, (x,))\n",
            fixed="import torch\nep = torch.export.export(model, (x,), "
            'dynamic_shapes=({0: torch.export.Dim("batch")},))\n',
            notebook=True,
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_to(graphs.TORCH_EXPORT, graphs.ONNX_EXPORT):
            if has_star_kwargs(call) or keyword(call, "dynamic_shapes"):
                continue
            onnx = ctx.qualname(call.func) == graphs.ONNX_EXPORT
            kwargs = argument(call, "kwargs", None if onnx else 2)
            if not graphs.written_inputs(sem, call) and not isinstance(kwargs, ast.Dict):
                continue  # inputs from a caller: a generic export helper
            inputs = graphs.export_inputs(call)
            if kwargs is None and inputs is not None:
                if all(isinstance(e, ast.Constant) for e in inputs):
                    continue
            if onnx:
                if graphs.is_exported_program(sem, argument(call, "model", 0)):
                    continue
                dynamo = keyword(call, "dynamo")
                dynamo_on = graphs.literal_bool(dynamo.value) if dynamo else True
                if dynamo_on is None or keyword(call, "dynamic_axes"):
                    continue
                if dynamo_on:
                    self._report(ctx, call, "torch.onnx.export", _shapes_fix(ctx, call))
                else:
                    self._report_legacy(ctx, call)
            else:
                self._report(ctx, call, "torch.export.export", _shapes_fix(ctx, call))

    def _report(self, ctx: Context, call: ast.Call, name: str, fix: Fix | None) -> None:
        ctx.report(
            call,
            Text(
                f"`{name}` without `dynamic_shapes=` freezes every input shape to the example's; "
                "mark the dimensions that vary with `torch.export.Dim`, or pass "
                "`dynamic_shapes=None` if fixed shapes are intended",
                f"未指定 `dynamic_shapes=` 的 `{name}` 会把每个输入形状固定为示例的形状；请用 "
                "`torch.export.Dim` 标出会变化的维度，若确实需要固定形状则显式传入 "
                "`dynamic_shapes=None`",
            ),
            fixes=[fix],
        )

    def _report_legacy(self, ctx: Context, call: ast.Call) -> None:
        inputs = graphs.literal_strings(argument(call, "input_names"))
        outputs = graphs.literal_strings(argument(call, "output_names")) or []
        fix = None
        if inputs:
            axes = ", ".join(f"{n!r}: {{0: 'batch'}}" for n in dict.fromkeys(inputs + outputs))
            fix = Fix(
                Text(
                    "Add `dynamic_axes=` marking dimension 0 as `batch`",
                    "添加 `dynamic_axes=`，把第 0 维标为 `batch`",
                ),
                (fixes.add_keyword(ctx.source, call, f"dynamic_axes={{{axes}}}"),),
                Applicability.UNSAFE,
            )
        ctx.report(
            call,
            Text(
                "`torch.onnx.export(..., dynamo=False)` without `dynamic_axes=` freezes every "
                "input shape to the example's; mark the dimensions that vary",
                "未指定 `dynamic_axes=` 的 `torch.onnx.export(..., dynamo=False)` 会把每个输入形状"
                "固定为示例的形状；请标出会变化的维度",
            ),
            fixes=[fix],
        )


def _shapes_fix(ctx: Context, call: ast.Call) -> Fix | None:
    """``dynamic_shapes=`` marking dim 0 of each positional input as ``Dim("batch")``."""
    inputs = graphs.export_inputs(call)
    onnx = ctx.qualname(call.func) == graphs.ONNX_EXPORT
    if not inputs or argument(call, "kwargs", None if onnx else 2) is not None:
        return None
    if any(
        isinstance(e, ast.Tuple | ast.List | ast.Dict | ast.Set) or graphs.batch_of_one(ctx.sem, e)
        for e in inputs
    ):
        return None
    ref = fixes.module_ref(ctx.sem, ctx.source, "torch")
    if ref is None:
        return None
    torch_name, imports = ref
    dim = f'{{0: {torch_name}.export.Dim("batch")}}'
    specs = [
        "None" if isinstance(e, ast.Constant | ast.JoinedStr | ast.Lambda) else dim for e in inputs
    ]
    value = f"({specs[0]},)" if len(specs) == 1 else f"({', '.join(specs)})"
    return Fix(
        Text(
            'Add `dynamic_shapes=` marking dimension 0 as `torch.export.Dim("batch")`',
            '添加 `dynamic_shapes=`，把第 0 维标为 `torch.export.Dim("batch")`',
        ),
        (*imports, fixes.add_keyword(ctx.source, call, f"dynamic_shapes={value}")),
        Applicability.UNSAFE,
    )
