from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, checkpoints, training
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import is_false
from .base import Invalid, Rule


class LoadStateDictStrictFalse(Rule):
    """## What it does
    Checks for `model.load_state_dict(..., strict=False)` whose return value is thrown away.
    Not reported: a state dict whose keys were taken from the same model's `state_dict()`
    (YOLOv5's `intersect_dicts(csd, model.state_dict())`), a function that checks
    `missing_keys`/`unexpected_keys` itself, and a call with a comment about `strict` on its
    line or the two lines above (the partial load is deliberate and explained) in a file that
    trains or saves the model. A test or inference script (no `backward`, no optimizer step,
    no `torch.save`) is reported whatever the comment says: nothing there trains the weights
    that did not load, and its results silently come from a partly initialised model.

    Off by default (`extend-select = ["TDR605"]` turns it on): on real code most `strict=False` loads are deliberate: base weights then adapter weights into one model, heads deleted or added on purpose, keys remapped from the model's own state dict.

    ## Why is this bad?
    `strict=False` skips keys that do not match instead of raising. That is what you want when a
    new head is expected to be missing — but it also swallows every mistake: a checkpoint saved
    from a `DistributedDataParallel` wrapper has keys prefixed with `module.`, none of them match,
    and the model silently keeps its random initialisation. `load_state_dict` returns the
    `missing_keys` and `unexpected_keys`; ignoring them is how this goes unnoticed.

    ## Example
    ```python
    model.load_state_dict(torch.load("ckpt.pt", map_location="cpu"), strict=False)
    ```

    ## Use instead
    ```python
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, f"unexpected keys: {unexpected[:5]}"
    ```
    or strip a wrapper's prefix first:
    `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, "module.")`.

    ## Fix safety
    The suggestion binds the result to `missing_keys, unexpected_keys` and prints them; it is
    shown as a code action and never applied in bulk.

    ## References
    - [`Module.load_state_dict`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.load_state_dict)
    - [`consume_prefix_in_state_dict_if_present`](https://pytorch.org/docs/stable/generated/torch.nn.modules.utils.consume_prefix_in_state_dict_if_present.html)
    """

    code = "TDR605"
    default = False
    name = "load-state-dict-strict-false"
    severity = Severity.INFO
    fix_safety = Applicability.SUGGESTION

    VALID = (
        "import torch\nmodel.load_state_dict(sd)",
        "import torch\nresult = model.load_state_dict(sd, strict=False)\nprint(result)",
        "import torch\nmissing, unexpected = model.load_state_dict(sd, strict=False)",
        "import torch\nmodel.load_state_dict(sd, strict=True)",
        "import torch\nlog(model.load_state_dict(sd, strict=False))",
        # Keys taken from the model itself (YOLOv5).
        "import torch\ndef load(model, ckpt):\n    csd = ckpt['model'].float().state_dict()\n"
        "    csd = intersect_dicts(csd, model.state_dict(), exclude=['anchor'])\n"
        "    model.load_state_dict(csd, strict=False)\n",
        # The function checks the keys itself (transformers' load_sharded_checkpoint).
        "import torch\ndef load(model, sd, strict):\n"
        "    missing_keys = [k for k in model.state_dict() if k not in sd]\n"
        "    if strict and missing_keys:\n        raise RuntimeError(missing_keys)\n"
        "    model.load_state_dict(sd, strict=False)\n",
        # A deliberate partial load, explained, in code that trains (Lightning).
        "import torch\n# choose non-strict loading: layers may have been added in the worker\n"
        "module.load_state_dict(ckpt, strict=False)\nmodule(x).sum().backward()\n",
    )
    INVALID = (
        Invalid(
            "import torch\nmodel.load_state_dict(sd, strict=False)\n",
            fixed="import torch\n"
            "missing_keys, unexpected_keys = model.load_state_dict(sd, strict=False)\n"
            'print(f"missing keys: {missing_keys}; unexpected keys: {unexpected_keys}")\n',
            lines=(2,),
        ),
        Invalid(
            "import torch\ndef load(net, path):\n"
            "    net.load_state_dict(torch.load(path, map_location='cpu'), strict=False)\n",
            fixed="import torch\ndef load(net, path):\n"
            "    missing_keys, unexpected_keys = net.load_state_dict("
            "torch.load(path, map_location='cpu'), strict=False)\n"
            '    print(f"missing keys: {missing_keys}; unexpected keys: {unexpected_keys}")\n',
            lines=(3,),
        ),
        # A test script explains the partial load, but nothing trains the keys that miss:
        # the scores come from whatever weights did load.
        Invalid(
            "import torch\nckpt = torch.load(args.resume, map_location='cpu')\n"
            "# strict=False, so that it is compatible with old saved models\n"
            "model.load_state_dict(ckpt['state_dict'], strict=False)\nmodel.eval()\n"
            "with torch.no_grad():\n    scores = [model(x) for x in loader]\n",
            fixed="import torch\nckpt = torch.load(args.resume, map_location='cpu')\n"
            "# strict=False, so that it is compatible with old saved models\n"
            "missing_keys, unexpected_keys = model.load_state_dict(ckpt['state_dict'], strict=False)\n"
            'print(f"missing keys: {missing_keys}; unexpected keys: {unexpected_keys}")\n'
            "model.eval()\n"
            "with torch.no_grad():\n    scores = [model(x) for x in loader]\n",
            lines=(4,),
        ),
        # `strict` passed by position.
        Invalid(
            "import torch\nmodel.load_state_dict(sd, False)\n",
            fixed="import torch\n"
            "missing_keys, unexpected_keys = model.load_state_dict(sd, False)\n"
            'print(f"missing keys: {missing_keys}; unexpected keys: {unexpected_keys}")\n',
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_by_attr.get("load_state_dict", ()):
            if not is_false(arguments.value(call, arguments.LOAD_STATE_DICT, "strict")):
                continue
            stmt = ctx.sem.parent(call)
            if not isinstance(stmt, ast.Expr) or _explained_or_checked(ctx, call):
                continue
            ctx.report(
                call,
                Text(
                    "`load_state_dict(..., strict=False)` result ignored: keys that match nothing "
                    "(such as a `module.` prefix) are skipped silently",
                    "忽略了 `load_state_dict(..., strict=False)` 的返回值：完全不匹配的键（例如带 `module.` 前缀）"
                    "会被悄悄跳过",
                ),
                fixes=partial(self._suggestion, ctx, stmt),
            )

    @staticmethod
    def _suggestion(ctx: Context, stmt: ast.Expr) -> Fix | None:
        from ..core import fixes

        if not fixes.starts_line(ctx.source, stmt) or not fixes.ends_line(ctx.source, stmt):
            return None
        indent = ctx.source.indent_of(stmt.lineno)
        end = ctx.source.end(stmt)
        text = (
            f"missing_keys, unexpected_keys = {ctx.segment(stmt)}{ctx.source.newline}"
            f'{indent}print(f"missing keys: {{missing_keys}}; unexpected keys: {{unexpected_keys}}")'
        )
        return Fix(
            Text("Check the missing and unexpected keys", "检查缺失和多余的键"),
            (Edit(ctx.source.start(stmt), end, text),),
            Applicability.SUGGESTION,
        )


def _explained_or_checked(ctx: Context, call: ast.Call) -> bool:
    """Keys taken from the model's own ``state_dict()``, keys checked by the function, or a
    comment about ``strict`` on the call's line or the two above (not in a file that only
    computes with the weights: nothing trains the weights that did not load)."""
    if not _only_evaluates(ctx):
        for row in range(max(1, call.lineno - 2), call.lineno + 1):
            line = ctx.source.line(row)
            if "#" in line and "strict" in line[line.index("#") :].lower():
                return True
    func = ctx.sem.enclosing_function(call)
    body = func.body if func is not None else ctx.sem.tree.body
    for stmt in body:
        for node in ast.walk(stmt):
            name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if name in ("missing_keys", "unexpected_keys") and node is not call:
                return True
    assert isinstance(call.func, ast.Attribute)
    arg = call.args[0] if call.args else None
    if not isinstance(arg, ast.Name):
        return False
    binding = ctx.sem.lookup(arg.id, arg)
    if binding is None or binding.value is None:
        return False
    receiver = ast.dump(call.func.value)
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "state_dict"
        and ast.dump(node.func.value) == receiver
        for node in ast.walk(binding.value)
    )


def _only_evaluates(ctx: Context) -> bool:
    """The file neither trains (no ``backward``, no optimizer step) nor saves: a test or
    inference script, whose results come from whatever weights the load left in the model."""
    sem = ctx.sem
    return not (
        training.has_backward_calls(sem)
        or training.all_optimizer_steps(sem)
        or any(sem.calls_to(*checkpoints.SAVES))
    )
