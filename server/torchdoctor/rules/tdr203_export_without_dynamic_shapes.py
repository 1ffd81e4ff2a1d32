from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, data, fixes, graphs
from ..core.context import Context, Fixes
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import Semantic, terminal_name
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
    Dimension 0 is not always the batch: an image exported as `(C, H, W)` has channels there,
    and an RNN's input and hidden state put the sequence and the layers first. So the fix is
    an edit only where the code shows that dimension 0 of every tensor input is the batch:
    each input is one field of a batch of a DataLoader made in the file with the default
    collate and a literal `batch_size` of 2 or more (`x` in `for x, y in loader`, under
    `enumerate`/`tqdm` too, or in `x, y = next(iter(loader))`, and `x.to(device)` of one).
    There it is unsafe: dims with the same name are one symbol, so every input must share that
    batch size, and export fails with `Constraints violated (batch)! ... your code specialized
    it to be a constant` when the model fixes the batch (a `view(16, -1)`, say), or when the
    example is a last batch of one. Anywhere else it is a suggestion, shown to be checked and
    never applied in bulk. No fix is offered when an input is built with a literal batch of 1
    (`torch.randn(1, ...)`): `torch.export` specialises a dimension of size 1 and rejects
    marking it dynamic; use a batch of 2 or more as the example. Calls with `kwargs=` get no
    fix. With `dynamo=False` and literal `input_names=`, the fix adds
    `dynamic_axes={name: {0: "batch"}}`: for the input names only, unsafe, where the inputs
    are DataLoader batches as above; for every input and `output_names=` name, as a
    suggestion, elsewhere.

    ## References
    - [`torch.export`: expressing dynamism](https://pytorch.org/docs/stable/export.html)
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
        # The export module under an alias, dynamic_shapes given.
        "import torch.export as tex\nep = tex.export(net, (x,), dynamic_shapes={'x': {0: tex.Dim('b')}})\n",
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
            lines=(2,),
        ),
        # Alias import, a constant input, keyword args.
        Invalid(
            "import torch as T\nfrom torch.export import export\n"
            "ep = export(net, args=(images, 0.5), strict=True)\n",
            fixed="import torch as T\nfrom torch.export import export\n"
            "ep = export(net, args=(images, 0.5), strict=True, dynamic_shapes="
            '({0: T.export.Dim("batch")}, None))\n',
            lines=(3,),
        ),
        # No `import torch` binding: the fix adds one.
        Invalid(
            "from torch.export import export\nep = export(net, (x,))\n",
            fixed="import torch\nfrom torch.export import export\n"
            'ep = export(net, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))\n',
            lines=(2,),
        ),
        # The default ONNX exporter.
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx')\n",
            fixed="import torch\ntorch.onnx.export(model, (x,), 'model.onnx', "
            'dynamic_shapes=({0: torch.export.Dim("batch")},))\n',
            lines=(2,),
        ),
        # Inputs that are not a literal tuple, or a batch of one: reported, no fix.
        Invalid(
            "import torch\ndummy = torch.randn(2, 3)\ntorch.onnx.export(model, dummy, 'model.onnx')\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nep = torch.export.export(model, (torch.randn(1, 3, 224, 224),))\n",
            fixed=None,
            lines=(2,),
        ),
        # The legacy exporter: dynamic_axes for every named input and output.
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx', dynamo=False,\n"
            "                  input_names=['input'], output_names=['logits'])\n",
            fixed="import torch\ntorch.onnx.export(model, (x,), 'model.onnx', dynamo=False,\n"
            "                  input_names=['input'], output_names=['logits'], "
            "dynamic_axes={'input': {0: 'batch'}, 'logits': {0: 'batch'}})\n",
            lines=(2,),
        ),
        Invalid(
            "import torch\ntorch.onnx.export(model, (x,), 'model.onnx', dynamo=False)\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nep = torch.export.export(model, (x,))\n",
            fixed="import torch\nep = torch.export.export(model, (x,), "
            'dynamic_shapes=({0: torch.export.Dim("batch")},))\n',
            notebook=True,
            lines=(2,),
        ),
        # Inputs that are fields of a DataLoader batch (default collate, batch_size >= 2):
        # dimension 0 is the batch, so the fix is an edit (unsafe); elsewhere a suggestion.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, batch_size=16, shuffle=True)\n"
            "for step, (x, y) in enumerate(loader):\n    x = x.to(dev)\n    fit(x, y)\n"
            "ep = torch.export.export(model, (x, 0.5))\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, batch_size=16, shuffle=True)\n"
            "for step, (x, y) in enumerate(loader):\n    x = x.to(dev)\n    fit(x, y)\n"
            "ep = torch.export.export(model, (x, 0.5), "
            'dynamic_shapes=({0: torch.export.Dim("batch")}, None))\n',
            lines=(7,),
        ),
        Invalid(
            "import torch\nimport torch.utils.data as tud\n"
            "images, labels = next(iter(tud.DataLoader(train_set, 64)))\n"
            "torch.onnx.export(net, (images.cuda(),), 'net.onnx', dynamo=False,\n"
            "                  input_names=['images'], output_names=['logits'])\n",
            fixed="import torch\nimport torch.utils.data as tud\n"
            "images, labels = next(iter(tud.DataLoader(train_set, 64)))\n"
            "torch.onnx.export(net, (images.cuda(),), 'net.onnx', dynamo=False,\n"
            "                  input_names=['images'], output_names=['logits'], "
            "dynamic_axes={'images': {0: 'batch'}})\n",
            lines=(4,),
        ),
        # Not proven: a custom collate (sequence first); an item taken from the whole batch of
        # a loader whose batch size is not a literal: a suggestion.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "for seq, h in DataLoader(ds, collate_fn=pad_time_major, batch_size=8):\n"
            "    pass\n"
            "ep = torch.export.export(lm, (seq, h))\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "for seq, h in DataLoader(ds, collate_fn=pad_time_major, batch_size=8):\n"
            "    pass\n"
            "ep = torch.export.export(lm, (seq, h), dynamic_shapes="
            '({0: torch.export.Dim("batch")}, {0: torch.export.Dim("batch")}))\n',
            lines=(5,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, bs)\n"
            "for batch in loader:\n    img = batch[0]\n"
            "ep = torch.export.export(model, (img,))\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, bs)\n"
            "for batch in loader:\n    img = batch[0]\n"
            'ep = torch.export.export(model, (img,), dynamic_shapes=({0: torch.export.Dim("batch")},))\n',
            lines=(6,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_to(graphs.TORCH_EXPORT, graphs.ONNX_EXPORT):
            onnx = ctx.qualname(call.func) == graphs.ONNX_EXPORT
            bound = arguments.bind(call, arguments.ONNX_EXPORT if onnx else arguments.EXPORT)
            if bound.may_pass("dynamic_shapes"):
                continue
            kwargs = bound.value("kwargs")
            if not graphs.written_inputs(sem, call) and not isinstance(kwargs, ast.Dict):
                continue  # inputs from a caller: a generic export helper
            inputs = graphs.export_inputs(call)
            if kwargs is None and inputs is not None:
                if all(isinstance(e, ast.Constant) for e in inputs):
                    continue
            if onnx:
                if graphs.is_exported_program(sem, bound.value("model")):
                    continue
                dynamo = bound.value("dynamo")
                dynamo_on = graphs.literal_bool(dynamo) if dynamo is not None else True
                if dynamo_on is None or bound.value("dynamic_axes") is not None:
                    continue
                if dynamo_on:
                    self._report(ctx, call, "torch.onnx.export", partial(_shapes_fix, ctx, call))
                else:
                    self._report_legacy(ctx, call)
            else:
                self._report(ctx, call, "torch.export.export", partial(_shapes_fix, ctx, call))

    def _report(self, ctx: Context, call: ast.Call, name: str, fix: Fixes) -> None:
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
            fixes=fix,
        )

    def _report_legacy(self, ctx: Context, call: ast.Call) -> None:
        bound = arguments.bind(call, arguments.ONNX_EXPORT)
        inputs = graphs.literal_strings(bound.value("input_names"))
        outputs = graphs.literal_strings(bound.value("output_names")) or []
        examples = graphs.export_inputs(call)
        fix = None
        if inputs:
            # Dimension 0 of the inputs is the batch where each is a DataLoader batch; the
            # outputs' dimension 0 is then left to the user.
            proven = (
                examples is not None
                and len(examples) == len(inputs)
                and all(_loader_batch(ctx.sem, e) for e in examples)
            )
            names = dict.fromkeys(inputs if proven else inputs + outputs)
            axes = ", ".join(f"{n!r}: {{0: 'batch'}}" for n in names)
            fix = Fix(
                Text(
                    "Add `dynamic_axes=` marking dimension 0 as `batch`"
                    + ("" if proven else " (check that dimension 0 of each is its batch)"),
                    "添加 `dynamic_axes=`，把第 0 维标为 `batch`"
                    + ("" if proven else "（请确认每个的第 0 维是 batch）"),
                ),
                (fixes.add_keyword(ctx.source, call, f"dynamic_axes={{{axes}}}"),),
                Applicability.UNSAFE if proven else Applicability.SUGGESTION,
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
    """``dynamic_shapes=`` marking dim 0 of each positional input as ``Dim("batch")``: an
    unsafe edit where every tensor input is a DataLoader batch (dim 0 is then the batch), a
    suggestion to check elsewhere (dim 0 may be channels, or a sequence)."""
    inputs = graphs.export_inputs(call)
    onnx = ctx.qualname(call.func) == graphs.ONNX_EXPORT
    api = arguments.ONNX_EXPORT if onnx else arguments.EXPORT
    if not inputs or arguments.value(call, api, "kwargs") is not None:
        return None
    if any(
        isinstance(e, ast.Tuple | ast.List | ast.Dict | ast.Set) or graphs.batch_of_one(ctx.sem, e)
        for e in inputs
    ):
        return None
    ref = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
    if ref is None:
        return None
    torch_name, imports = ref
    dim = f'{{0: {torch_name}.export.Dim("batch")}}'
    constant = [isinstance(e, ast.Constant | ast.JoinedStr | ast.Lambda) for e in inputs]
    specs = ["None" if c else dim for c in constant]
    value = f"({specs[0]},)" if len(specs) == 1 else f"({', '.join(specs)})"
    proven = all(c or _loader_batch(ctx.sem, e) for c, e in zip(constant, inputs, strict=True))
    return Fix(
        Text(
            'Add `dynamic_shapes=` marking dimension 0 as `torch.export.Dim("batch")`'
            + ("" if proven else " (check that dimension 0 of each input is its batch)"),
            '添加 `dynamic_shapes=`，把第 0 维标为 `torch.export.Dim("batch")`'
            + ("" if proven else "（请确认每个输入的第 0 维是 batch）"),
        ),
        (*imports, fixes.add_keyword(ctx.source, call, f"dynamic_shapes={value}")),
        Applicability.UNSAFE if proven else Applicability.SUGGESTION,
    )


# Calls that move or cast a tensor and keep its dimensions.
_SAME_DIMS = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "contiguous"})


def _loader_batch(sem: Semantic, expr: ast.expr, _depth: int = 0) -> bool:
    """Whether ``expr`` holds one field of a batch of a DataLoader made in this file with the
    default collate and a literal ``batch_size`` of 2 or more, so that its dimension 0 is the
    batch: ``x`` in ``for x, y in loader`` (also ``enumerate``/``tqdm``), in
    ``x, y = next(iter(loader))``, or a name assigned ``x.to(device)``-style from one."""
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _SAME_DIMS
    ):
        expr = expr.func.value
    if not isinstance(expr, ast.Name) or _depth > 4:
        return False
    binding = sem.lookup(expr.id, expr)
    if binding is None:
        return False
    if binding.how == "assign" and binding.value is not None:
        if binding.index is None:
            return _loader_batch(sem, binding.value, _depth + 1)
        value = binding.value
        if (
            isinstance(value, ast.Call)
            and terminal_name(value.func) == "next"
            and len(value.args) == 1
            and isinstance(value.args[0], ast.Call)
            and terminal_name(value.args[0].func) == "iter"
            and len(value.args[0].args) == 1
        ):
            return _batched(sem, value.args[0].args[0])
        return False
    if binding.how != "loop" or not isinstance(binding.node, ast.Name):
        return False
    loop = sem.parent(binding.node)
    while isinstance(loop, ast.Tuple | ast.List):
        loop = sem.parent(loop)
    if not isinstance(loop, ast.For):
        return False
    target = loop.target
    if isinstance(loop.iter, ast.Call) and terminal_name(loop.iter.func) == "enumerate":
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
            return False
        target = target.elts[1]
    # One field of the collated tuple, not the whole batch (a dict, a list, a tensor).
    if not (isinstance(target, ast.Tuple | ast.List) and binding.node in target.elts):
        return False
    loader = data.batch_loader(sem, binding.node)
    return loader is not None and _batched(sem, loader)


def _batched(sem: Semantic, loader: ast.expr) -> bool:
    calls, unknown = data.loader_calls(sem, loader)
    if unknown or not calls:
        return False
    for call in calls:
        size = data.loader_argument(call, "batch_size")
        if (
            not isinstance(size, ast.Constant)
            or isinstance(size.value, bool)
            or not isinstance(size.value, int)
            or size.value < 2
            or data.passes(call, "collate_fn")
            or data.passes(call, "batch_sampler")
        ):
            return False
    return True
