from __future__ import annotations

import ast
from functools import partial

from ..core import fixes
from ..core.context import Context
from ..core.eval_regions import Region, earlier_eval, unguarded_forwards
from ..core.evaluation import callee, is_model, safe_to_turn_grad_off
from ..core.model import Applicability, Edit, Fix, Text
from .base import Rule
from .examples import tdr105


class EvalWithoutNoGrad(Rule):
    """## What it does
    Checks for forward calls of a model that run again and again in evaluation code with
    gradient tracking on. Evaluation code is the statements after `model.eval()`, or after
    `model = load(...)` where `load` (of the file or of another module of the project) hands
    back a model it switched to evaluation mode, up to a later `model.train()` (also inside a
    function the model is handed to); a function whose name starts with `eval`, `valid`,
    `test`, `predict` or `infer`; a loop over a loader whose name contains `val` or `test`; or
    the methods of a class (not a module) that keeps on `self` a model every construction of
    it in the file hands it in evaluation mode (`Translator(model, ...)` after `fields, model,
    opt = load_test_model(...)`, a helper that returns the model in a tuple after switching it
    to evaluation), when no method of the class switches it back to training; there a call of
    an attribute of that model that is no `nn.Module` method (`self.model.decoder(...)`) runs
    part of the model.
    The forward must repeat: it runs inside a loop whose items reach the forward (whatever the
    iterable is called: `val_loader`, `val_data`, `data`), a loop over `range(...)`, a `while`
    loop, or a loop that appends or adds its output to something made before the loop. A call
    of a function that runs the model it is handed again and again (a loop over batches in a
    helper of the file or of another module: `calc_loss_loader(val_loader, model, device)`)
    counts as such a forward, and is reported where it is called. It is reported when it is
    not under `torch.no_grad()`, `torch.inference_mode()` or `torch.set_grad_enabled(False)`.

    Not reported:

    - a single forward (a demo cell, `predict(sentence)`, one batch to plot): its graph lives
      only until the output is dropped;
    - regions that need autograd: a backward pass, `torch.autograd`/`torch.func`, an optimizer
      step, `requires_grad_()`, gradients turned back on — in the region or in a function it
      calls, of the file or of another module of the project, or in the `__call__` of an
      object it makes (a loss-and-step helper handed to a shared epoch function) — or the
      forward of a model the analysis cannot see into called with a constant flag
      (`model(im, label, make_adv=True)`: robustness's `AttackerModel` runs a PGD attack
      inside `forward`);
    - regions whose results are backpropagated later (followed through assignments, lists,
      returns and the callers of the function);
    - tests (`conftest.py`, `tests.py`, files under `tests/`, a `test_*.py` or `*_test.py`
      that imports `pytest` or `unittest` or defines `test_*` functions — a script named so
      without tests, like `tools/test_net.py`, is evaluation code — pytest-decorated
      functions, `test_*` functions without a loop over a loader, unittest cases),
      Lightning's evaluation hooks, methods of `nn.Module` classes, functions only called
      with gradients off (also from a function of the file so called) or whose result is
      backpropagated, and functions never called in
      the file but passed around as values (detectron2's `inference_on_dataset` runs them
      under `no_grad()`).

    ## Why is this bad?
    `model.eval()` only switches layers such as dropout and batch norm to inference behaviour;
    it does not turn off autograd. Every forward call still records the graph and keeps the
    activations each layer would need for a backward pass that never comes. Measured on an
    H200, a ResNet-50 forward with a batch of 256 images at 224×224 peaks at 20,857 MiB with
    gradients enabled, against 2,548 MiB under `torch.no_grad()` or `torch.inference_mode()`
    (8.2× less), at the same speed. Evaluation then runs out of memory at batch sizes that
    would fit, or pushes training itself out of memory.

    ## Example
    ```python
    import torch

    def evaluate(model, val_loader, device):
        model.eval()
        correct = 0
        for x, y in val_loader:
            x, y = x.to(device), y.to(device)
            correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## Use instead
    ```python
    import torch

    def evaluate(model, val_loader, device):
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in val_loader:
                x, y = x.to(device), y.to(device)
                correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## Fix safety
    The fix wraps the statements of the region that hold the reported calls (usually the
    loop) in `with torch.no_grad():`. It is safe, and offered only when the analysis shows that
    turning gradients off there changes nothing but the memory autograd keeps:

    1. every call in the wrapped statements is one the analysis can see needs no autograd:
       torch functions other than `torch.autograd`, `torch.func` and `torch.enable_grad`; the
       standard library and the scientific, plotting, progress-bar and logging libraries;
       tensor, list, dict, string and file methods; losses; the forward of a model built by
       torch, torchvision, timm, transformers or peft, or by a class (of the file or of
       another module of the project) whose `forward` (and all it calls) passes the same test;
       functions whose bodies do;
    2. nothing computed there from a tensor that requires grad (a model's output, its
       parameters, a tensor the file marks with `requires_grad`) reaches, after the wrap, a
       backward pass, `torch.autograd`, an optimizer, `requires_grad_()`, an attribute, a
       closure or a call the analysis cannot see, followed through assignments, containers,
       loops, `return` and the callers of the function;
    3. the statements neither `yield` nor `await` (the grad mode would leak to the caller).

    When the whole region fails — it also calls an adversarial attack's `perturb`, or a helper
    imported from your project — the fix wraps the statements of the forward calls alone if
    they pass. Otherwise no fix is offered (a model class imported from another file, a model
    unpickled by `torch.load`, a parameter filled by callers the file does not show): wrap the
    code yourself once you know it needs no gradients. The fix reuses your alias of `torch` and
    adds `import torch` when needed.

    `torch.inference_mode()` frees the same memory and also skips view and version tracking,
    but a tensor made under it can never enter autograd later (`RuntimeError: Inference tensors
    cannot be saved for backward`), which this rule does not check. The fix therefore writes
    `no_grad()`; TDR106 (off by default) suggests `inference_mode()` for a `no_grad()` block
    whose results cannot reach autograd.

    ## References
    - [`torch.no_grad`](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    - [Autograd mechanics: locally disabling gradient computation](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    code = "TDR105"
    name = "eval-without-no-grad"
    fix_safety = Applicability.SAFE
    VALID = tdr105.VALID
    INVALID = tdr105.INVALID

    def check(self, ctx: Context) -> None:
        for found in unguarded_forwards(ctx):
            self._report(ctx, found.region, found.calls, found.stmts, found.through)

    def _report(
        self,
        ctx: Context,
        region: Region,
        calls: list[ast.Call],
        stmts: list[ast.stmt],
        through: frozenset[ast.Call] = frozenset(),
    ) -> None:
        first = calls[0]
        eval_call = region.eval_call or earlier_eval(ctx, first)
        related = []
        if eval_call is not None:
            switch = isinstance(eval_call.func, ast.Attribute) and eval_call.func.attr == "eval"
            what = "`.eval()`" if switch else f"`{_short(ctx, eval_call.func)}(...)`"
            related.append(
                ctx.related(
                    eval_call,
                    Text(
                        f"{what} switches layers to inference behaviour but keeps autograd on",
                        f"{what} 只切换层的推理行为，autograd 仍然开启",
                    )
                    if switch
                    else Text(
                        f"{what} hands back a model in evaluation mode; autograd stays on",
                        f"{what} 返回处于评估模式的模型，autograd 仍然开启",
                    ),
                )
            )
        target = _short(ctx, callee(first))
        if first not in through or is_model(ctx, callee(first)):
            message = Text(
                f"`{target}(...)` is evaluated without `torch.no_grad()` or "
                "`torch.inference_mode()`, so autograd keeps activations for a backward pass "
                "that never runs",
                f"评估时调用 `{target}(...)` 未使用 `torch.no_grad()` 或 "
                "`torch.inference_mode()`，autograd 会为永远不会发生的反向传播保留激活值",
            )
        else:  # a helper that runs the model it is handed
            message = Text(
                f"The forwards `{target}(...)` runs are evaluated without `torch.no_grad()` or "
                "`torch.inference_mode()`, again and again, so autograd keeps activations for "
                "a backward pass that never runs",
                f"`{target}(...)` 中的前向在评估时反复执行，未使用 `torch.no_grad()` 或 "
                "`torch.inference_mode()`，autograd 会为永远不会发生的反向传播保留激活值",
            )
        ctx.report(first, message, fixes=partial(_no_grad_fix, ctx, stmts, calls), related=related)


def _short(ctx: Context, expr: ast.expr) -> str:
    text = ctx.segment(expr)
    return text if len(text) <= 40 else "model"


# ---- the fix ---------------------------------------------------------------------------------
def _no_grad_fix(ctx: Context, stmts: list[ast.stmt], calls: list[ast.Call]) -> Fix | None:
    """``with torch.no_grad():`` around the region's statements that hold the reported calls
    when that is provably safe, else around the statements of the forward calls alone when
    that is, else None."""
    ref = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
    if ref is None:
        return None
    torch, imports = ref
    header = f"with {torch}.no_grad()"
    candidates = [stmts]
    own = []
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        stmt = ctx.sem.statement_of(call)
        if stmt not in own:
            own.append(stmt)
    if own != stmts and all(isinstance(s, _SIMPLE_STATEMENTS) for s in own):
        candidates.append(own)
    for candidate in candidates:
        if not safe_to_turn_grad_off(ctx, candidate):
            continue
        edits: list[Edit] = []
        if candidate is stmts:
            wrap = fixes.wrap_statements(ctx.source, candidate, header)
            if wrap is None:
                continue
            edits = wrap
        else:
            parts = [fixes.wrap_statements(ctx.source, [s], header) for s in candidate]
            if any(p is None for p in parts):
                continue
            edits = [e for p in parts if p is not None for e in p]
        return Fix(
            Text(f"Wrap in `{header}:`", f"包进 `{header}:`"),
            (*imports, *edits),
            Applicability.SAFE,
        )
    return None


_SIMPLE_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
