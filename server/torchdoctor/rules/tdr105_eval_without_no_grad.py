from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

from ..core import fixes, kinds, training
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Edit, Fix, Pos, Text
from ..core.semantic import dotted, is_false, terminal_name
from .base import Invalid, Rule, Valid

_EVAL_FUNCTION = re.compile(r"^_*(eval|valid|test|predict|infer)", re.I)
_EVAL_LOADER = re.compile(r"(^|_)(val|test|eval)", re.I)
# Lightning runs these with gradients already disabled.
_LIGHTNING_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
_AUTOGRAD_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward", "torch.enable_grad"})


@dataclass
class _Region:
    stmts: list[ast.stmt]  # the statements of one block that make up the region
    eval_call: ast.Call | None = None
    function: ast.FunctionDef | ast.AsyncFunctionDef | None = None  # a function region


class EvalWithoutNoGrad(Rule):
    """## What it does
    Checks for forward calls of a model in evaluation code that runs with gradient tracking on:
    after `model.eval()` (up to a later `model.train()`), in a function whose name starts with
    `eval`, `valid`, `test`, `predict` or `infer`, or in a loop over a loader whose name contains
    `val` or `test`, when the call is not under `torch.no_grad()`, `torch.inference_mode()` or
    `torch.set_grad_enabled(False)` and the region calls no `.backward()`.

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

    def evaluate(model, val_loader):
        model.eval()
        correct = 0
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## Use instead
    ```python
    import torch

    def evaluate(model, val_loader):
        model.eval()
        correct = 0
        with torch.inference_mode():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## Fix safety
    The preferred fix wraps the region (the loop, or the statements after `.eval()`) in
    `with torch.inference_mode():`. It is unsafe: tensors created there are inference tensors,
    and using one later in autograd raises `RuntimeError: Inference tensors cannot be saved for
    backward`. Wrapping in `with torch.no_grad():` instead is safe (the region has no backward
    pass) and is the fix applied in bulk. For a function named like an evaluation function, a
    third fix decorates it with `@torch.inference_mode()` (unsafe for the same reason). The
    fixes reuse your alias of `torch` and add `import torch` when needed.

    The guide recommends `torch.no_grad()` and then `torch.inference_mode()` as the stricter
    choice; both free the same memory, `inference_mode` also skips view and version tracking.

    ## References
    - [`torch.no_grad`](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    - [Autograd mechanics: locally disabling gradient computation](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    zh = """## 功能
    检查在开启梯度跟踪的评估代码中调用模型前向的情况：`model.eval()` 之后（直到随后的
    `model.train()`）、名称以 `eval`、`valid`、`test`、`predict` 或 `infer` 开头的函数中，或在遍历名称含
    `val` 或 `test` 的加载器的循环中；且该调用不在 `torch.no_grad()`、`torch.inference_mode()` 或
    `torch.set_grad_enabled(False)` 之下，该区域中也没有 `.backward()`。

    ## 为什么不好？
    `model.eval()` 只会把 dropout、batch norm 等层切换到推理行为，并不会关闭 autograd。每次前向仍会记录
    计算图，并保留反向传播所需的激活值，而反向传播根本不会发生。在 H200 上实测，ResNet-50 以 256 张
    224×224 图像为一批做前向，开启梯度时峰值显存为 20,857 MiB，在 `torch.no_grad()` 或
    `torch.inference_mode()` 下只有 2,548 MiB（少 8.2 倍），速度相同。评估会在本可容纳的批大小下显存
    溢出，甚至挤爆训练本身的显存。

    ## 示例
    ```python
    import torch

    def evaluate(model, val_loader):
        model.eval()
        correct = 0
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## 改为
    ```python
    import torch

    def evaluate(model, val_loader):
        model.eval()
        correct = 0
        with torch.inference_mode():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## 修复安全性
    首选修复把该区域（循环，或 `.eval()` 之后的语句）包进 `with torch.inference_mode():`。它是不安全的：
    其中创建的张量是推理张量，之后若参与 autograd 会报错 `RuntimeError: Inference tensors cannot be
    saved for backward`。改用 `with torch.no_grad():` 包裹是安全的（该区域没有反向传播），批量修复采用
    这一项。对于名称像评估函数的函数，第三个修复是给它加上 `@torch.inference_mode()` 装饰器（出于同样
    原因不安全）。修复会沿用你给 `torch` 起的别名，必要时添加 `import torch`。

    指南推荐使用 `torch.no_grad()`，并把 `torch.inference_mode()` 作为更彻底的选择；两者节省的显存相同，
    `inference_mode` 还会跳过视图和版本计数的跟踪。

    ## 参考
    - [`torch.no_grad`](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    - [Autograd 机制：局部关闭梯度计算](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    code = "TDR105"
    name = "eval-without-no-grad"
    fix_safety = Applicability.UNSAFE

    VALID = (
        # Already correct, in each spelling.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "with torch.no_grad():\n    y = model(x)\n",
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "with torch.inference_mode():\n    y = model(x)\n",
        "import torch as T\nmodel = T.nn.Linear(2, 2)\nmodel.eval()\n"
        "T.set_grad_enabled(False)\ny = model(x)\n",
        "from torch import no_grad\n@no_grad()\ndef evaluate(model, loader):\n"
        "    model.eval()\n    for x in loader:\n        model(x)\n",
        "import torch\n@torch.inference_mode()\ndef predict(model, x):\n    return model(x)\n",
        # A project's own wrapper around inference_mode / no_grad.
        "import torch\nfrom utils import smart_inference_mode\n@smart_inference_mode()\n"
        "def run(model, x):\n    model.eval()\n    return model(x)\n",
        # A smoke test in a model file: `test` without a loader is not an evaluation loop.
        "import torch\nclass Net(torch.nn.Module):\n    pass\n"
        "def test():\n    net = Net()\n    y = net(torch.randn(1, 3))\n    print(y.shape)\n",
        # A backward pass in the region: gradients are wanted (adversarial examples, Grad-CAM).
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "x.requires_grad_()\nloss = model(x).sum()\nloss.backward()\n",
        "import torch\ndef test(model, x):\n    out = model(x)\n"
        "    g = torch.autograd.grad(out.sum(), x)\n    return g\n",
        # The grad mode is chosen by a flag.
        "import torch\ndef validate(model, loader, train):\n    model.eval()\n"
        "    with torch.set_grad_enabled(train):\n        for x in loader:\n            model(x)\n",
        # eval() then train(): the forward call is back in training mode.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\nmodel.train()\n"
        "y = model(x)\nloss_fn(y).backward()\n",
        # A loss module is not a model.
        "import torch\ncriterion = torch.nn.CrossEntropyLoss()\n"
        "def evaluate(out, y):\n    return criterion(out, y)\n",
        # pytest files and unittest test cases.
        Valid(
            "import torch\ndef test_forward():\n    model = torch.nn.Linear(2, 2)\n"
            "    model.eval()\n    assert model(torch.ones(2)).shape == (2,)\n",
            filename="test_model.py",
        ),
        "import torch\nimport pytest\n@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_shapes(n):\n    model = torch.nn.Linear(n, 2)\n    model.eval()\n"
        "    assert model(torch.ones(n)).shape == (2,)\n",
        "import torch\nimport unittest\nclass T(unittest.TestCase):\n"
        "    def test_forward(self):\n        model = torch.nn.Linear(2, 2)\n"
        "        model.eval()\n        self.assertEqual(model(torch.ones(2)).shape, (2,))\n",
        # Lightning disables gradients in its evaluation hooks.
        "import torch\nimport lightning as L\nclass Lit(L.LightningModule):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.net = torch.nn.Linear(2, 2)\n"
        "    def validation_step(self, batch, idx):\n        return self.net(batch)\n",
        "import torch\nclass Lit:\n    def test_step(self, batch, idx):\n"
        "        return self.model(batch)\n",
        # A nested function is not run by the region itself.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "def later(x):\n    return model(x)\n",
        # The evaluation function is only called with gradients off.
        "import torch\ndef evaluate(model, x):\n    return model(x)\n"
        "with torch.no_grad():\n    evaluate(net, data)\n",
        # Named like an evaluation function, but its result is backpropagated by the caller.
        "import torch\nmodel = torch.nn.Linear(2, 2)\n"
        "def eval_loss(x):\n    return model(x).sum()\n"
        "def train(x):\n    loss = eval_loss(x) * 2\n    loss.backward()\n",
        # A parameter that callers fill with something other than a model.
        "import torch\n"
        "def predict(fn, x):\n    return fn(x)\n"
        "model = torch.nn.Linear(2, 2)\n"
        "a = predict(model, x)\nb = predict(len, x)\n",
        # Gradients turned off for the whole script.
        "import torch\ntorch.set_grad_enabled(False)\nmodel = torch.nn.Linear(2, 2)\n"
        "def predict(x):\n    return model(x)\n",
        # A frozen model builds no graph.
        "import torch\nteacher = torch.nn.Linear(2, 2)\nteacher.requires_grad_(False)\n"
        "teacher.eval()\nsoft = teacher(x)\n",
        # Not a model: a user object whose .eval() is something else.
        "import torch\nclass Expr:\n    def eval(self):\n        return 1\n"
        "def evaluate(expr):\n    return expr.eval()\n",
        # Methods of an nn.Module: the caller decides the grad mode.
        "import torch\nclass Net(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.body = torch.nn.Linear(2, 2)\n"
        "    def predict(self, x):\n        return self.body(x)\n",
        # A model whose base class the file cannot resolve (transformers' relative imports): its
        # predict* helpers run inside forward, during training too.
        "import torch\nfrom torch import nn\nfrom ...modeling_utils import PreTrainedModel\n"
        "class Seg(PreTrainedModel):\n"
        "    def __init__(self, config):\n        super().__init__(config)\n"
        "        self.class_predictor = nn.Linear(8, 3)\n"
        "    def forward(self, x):\n        return self.predict(x)\n"
        "    def predict(self, logits):\n        return self.class_predictor(logits)\n",
        # A training loop that does not mention an evaluation loader.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nfor x in train_loader:\n"
        "    loss = model(x).sum()\n    loss.backward()\n",
        # Notebook: the eval() and the guarded loop in one cell.
        Valid(
            "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
            "with torch.no_grad():\n    y = model(x)\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "def evaluate(model, val_loader):\n"
            "    model.eval()\n"
            "    correct = 0\n"
            "    for x, y in val_loader:\n"
            "        correct += (model(x).argmax(1) == y).sum().item()\n"
            "    return correct\n",
            fixed="import torch\n"
            "def evaluate(model, val_loader):\n"
            "    model.eval()\n"
            "    correct = 0\n"
            "    with torch.inference_mode():\n"
            "        for x, y in val_loader:\n"
            "            correct += (model(x).argmax(1) == y).sum().item()\n"
            "    return correct\n",
        ),
        # Statements after model.eval() at module level; the import is added.
        Invalid(
            "from torch import nn\n"
            "model = nn.Linear(4, 2)\n"
            "model.eval()\n"
            "preds = model(batch)\n"
            "print(preds)\n",
            fixed="from torch import nn\n"
            "import torch\n"
            "model = nn.Linear(4, 2)\n"
            "model.eval()\n"
            "with torch.inference_mode():\n"
            "    preds = model(batch)\n"
            "print(preds)\n",
        ),
        # An alias of torch is reused.
        Invalid(
            "import torch as T\n"
            "net = T.nn.Sequential(T.nn.Linear(4, 2))\n"
            "for x in test_loader:\n"
            "    out = net(x)\n",
            fixed="import torch as T\n"
            "net = T.nn.Sequential(T.nn.Linear(4, 2))\n"
            "with T.inference_mode():\n"
            "    for x in test_loader:\n"
            "        out = net(x)\n",
        ),
        # A model passed as an argument by every caller.
        Invalid(
            "import torch\n"
            "def infer(net, x):\n"
            "    return net(x)\n"
            "model = torch.nn.Linear(2, 2)\n"
            "y = infer(model, torch.ones(2))\n",
            fixed="import torch\n"
            "def infer(net, x):\n"
            "    with torch.inference_mode():\n"
            "        return net(x)\n"
            "model = torch.nn.Linear(2, 2)\n"
            "y = infer(model, torch.ones(2))\n",
        ),
        # A function named like an evaluation function, with a global model.
        Invalid(
            "import torch\n"
            "model = torch.nn.Linear(2, 2)\n"
            "def predict(x):\n"
            "    probs = model(x).softmax(-1)\n"
            "    return probs\n",
            fixed="import torch\n"
            "model = torch.nn.Linear(2, 2)\n"
            "def predict(x):\n"
            "    with torch.inference_mode():\n"
            "        probs = model(x).softmax(-1)\n"
            "    return probs\n",
        ),
        # The eval region of an epoch loop ends at the loop body's end; the training part
        # before it has its backward pass.
        Invalid(
            "import torch\n"
            "model = torch.nn.Linear(2, 2)\n"
            "for epoch in range(3):\n"
            "    model.train()\n"
            "    for x in train_loader:\n"
            "        model(x).sum().backward()\n"
            "    model.eval()\n"
            "    for x in val_loader:\n"
            "        out = model(x)\n"
            "    print(epoch)\n",
            fixed="import torch\n"
            "model = torch.nn.Linear(2, 2)\n"
            "for epoch in range(3):\n"
            "    model.train()\n"
            "    for x in train_loader:\n"
            "        model(x).sum().backward()\n"
            "    model.eval()\n"
            "    with torch.inference_mode():\n"
            "        for x in val_loader:\n"
            "            out = model(x)\n"
            "    print(epoch)\n",
        ),
        # A model held on self.
        Invalid(
            "import torch\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.model = torch.nn.Linear(2, 2)\n"
            "    def run(self, x):\n"
            "        self.model.eval()\n"
            "        return self.model(x)\n",
            fixed="import torch\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.model = torch.nn.Linear(2, 2)\n"
            "    def run(self, x):\n"
            "        self.model.eval()\n"
            "        with torch.inference_mode():\n"
            "            return self.model(x)\n",
        ),
        # A notebook cell.
        Invalid(
            "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\ny = model(x)\n",
            fixed="import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
            "with torch.inference_mode():\n    y = model(x)\n",
            notebook=True,
        ),
    )

    def check(self, ctx: Context) -> None:
        if _is_test_file(ctx.path) or _grad_off_globally(ctx):
            return
        frozen = _frozen_models(ctx)
        claimed: set[ast.Call] = set()
        for region in self._regions(ctx):
            if _trains(ctx, region.stmts, set()):
                continue
            calls = [
                call
                for call in _forward_calls(ctx, region.stmts)
                if not training.grad_disabled(ctx.sem, call) and dotted(_callee(call)) not in frozen
            ]
            if not calls or any(call in claimed for call in calls):
                continue
            claimed.update(calls)
            self._report(ctx, region, calls)

    # -- regions -------------------------------------------------------------------------
    def _regions(self, ctx: Context) -> list[_Region]:
        regions: list[_Region] = []
        sem = ctx.sem
        for call in sem.calls_by_attr.get("eval", ()):
            if call.args or call.keywords:
                continue
            assert isinstance(call.func, ast.Attribute)
            if ctx.kind(call.func.value) is not Kind.MODULE:
                continue
            stmt = sem.statement_of(call)
            if not isinstance(stmt, ast.Expr | ast.Assign) or _skipped_place(ctx, stmt):
                continue
            block, index = sem.block_of(stmt)
            following: list[ast.stmt] = []
            for item in block[index + 1 :]:
                if _calls_train(ctx, item):
                    break
                following.append(item)
            if _trains(ctx, following, set()):
                continue
            for part in _split_by_cell(ctx, following):
                regions.append(_Region(part, eval_call=call))
        for loop in training.all_loops(sem):
            name = terminal_name(loop.loader) if loop.loader is not None else None
            if name and _EVAL_LOADER.search(name) and not _skipped_place(ctx, loop.node):
                regions.append(_Region([loop.node]))
        for func in sem.functions:
            match = _EVAL_FUNCTION.match(func.name)
            if match is None or _skipped_place(ctx, func.body[0]):
                continue
            # `test` also names unit and smoke tests: require a loop over a loader.
            if match.group(1).lower() == "test" and not any(
                loop.is_batch_loop and sem.enclosing_function(loop.node) is func
                for loop in training.all_loops(sem)
            ):
                continue
            regions.append(_Region(list(func.body), function=func))
        return regions

    # -- reporting -----------------------------------------------------------------------
    def _report(self, ctx: Context, region: _Region, calls: list[ast.Call]) -> None:
        first = calls[0]
        eval_call = region.eval_call or _earlier_eval(ctx, first)
        related = []
        if eval_call is not None:
            related.append(
                ctx.related(
                    eval_call,
                    Text(
                        "`.eval()` switches layers to inference behaviour but keeps autograd on",
                        "`.eval()` 只切换层的推理行为，autograd 仍然开启",
                    ),
                )
            )
        target = ctx.segment(_callee(first))
        if len(target) > 40:
            target = "model"
        message = Text(
            f"`{target}(...)` is evaluated without `torch.no_grad()` or "
            "`torch.inference_mode()`, so autograd keeps activations for a backward pass that "
            "never runs",
            f"评估时调用 `{target}(...)` 未使用 `torch.no_grad()` 或 `torch.inference_mode()`，"
            "autograd 会为永远不会发生的反向传播保留激活值",
        )
        ctx.report(first, message, fixes=self._fixes(ctx, region, calls), related=related)

    def _fixes(self, ctx: Context, region: _Region, calls: list[ast.Call]) -> list[Fix]:
        ref = fixes.module_ref(ctx.sem, ctx.source)
        if ref is None:
            return []
        torch, imports = ref
        out: list[Fix] = []
        stmts = _covering(ctx, region.stmts, calls)
        if not any(
            isinstance(n, ast.Yield | ast.YieldFrom | ast.Await) for s in stmts for n in ast.walk(s)
        ):
            for mode, safety in (
                ("inference_mode", Applicability.UNSAFE),
                ("no_grad", Applicability.SAFE),
            ):
                edits = fixes.wrap_statements(ctx.source, stmts, f"with {torch}.{mode}()")
                if edits is not None:
                    out.append(
                        Fix(
                            Text(
                                f"Wrap in `with {torch}.{mode}():`",
                                f"包进 `with {torch}.{mode}():`",
                            ),
                            (*imports, *edits),
                            safety,
                        )
                    )
        func = region.function or _eval_named_function(ctx, region.stmts[0])
        if func is not None and isinstance(func, ast.FunctionDef):
            edit = _decorate(ctx, func, f"@{torch}.inference_mode()")
            if edit is not None:
                out.append(
                    Fix(
                        Text(
                            f"Decorate `{func.name}` with `@{torch}.inference_mode()`",
                            f"给 `{func.name}` 加上 `@{torch}.inference_mode()` 装饰器",
                        ),
                        (*imports, edit),
                        Applicability.UNSAFE,
                    )
                )
        return out


# ---- helpers ---------------------------------------------------------------------------------
def _is_test_file(path: str) -> bool:
    base = os.path.basename(path)
    return base.endswith(".py") and (
        base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
    )


def _grad_off_globally(ctx: Context) -> bool:
    """A script that runs ``torch.set_grad_enabled(False)`` at module level and never turns
    gradients back on."""
    calls = list(ctx.sem.calls_to("torch.set_grad_enabled"))
    off = [c for c in calls if training.is_grad_off(ctx.sem, c) and ctx.sem.at_module_level(c)]
    return bool(off) and len(off) == len(calls) and not any(ctx.sem.calls_to("torch.enable_grad"))


def _callee(call: ast.Call) -> ast.expr:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        return func.value
    return func


def _forward_calls(ctx: Context, stmts: list[ast.stmt]) -> list[ast.Call]:
    """Calls of a model in ``stmts`` (not in nested defs), in source order."""
    out = []
    for node in ctx.sem.walk_body(stmts):
        if not isinstance(node, ast.Call):
            continue
        callee = _callee(node)
        if isinstance(callee, ast.Name) and callee.id == "self":
            continue
        if _is_model(ctx, callee):
            out.append(node)
    return sorted(out, key=lambda c: (c.lineno, c.col_offset))


def _is_model(ctx: Context, expr: ast.expr) -> bool:
    """A module by construction or use, or a parameter every caller passes a module to."""
    kind = ctx.kind(expr)
    if kind is not None or not isinstance(expr, ast.Name):
        return kind is Kind.MODULE
    binding = ctx.sem.lookup(expr.id, expr)
    return binding is not None and kinds.argument_kind(ctx.sem, binding) is Kind.MODULE


def _trains(ctx: Context, stmts: list[ast.stmt], seen: set[ast.AST], depth: int = 0) -> bool:
    """Whether ``stmts`` (or local functions they call) compute gradients or manage grad mode."""
    memo = ctx.sem.memo
    for stmt in stmts:
        key = ("tdr105-stmt-trains", stmt)
        known = memo.get(key)
        if known is None:
            known = _statement_trains(ctx, stmt, seen, depth)
            memo[key] = known
        if known:
            return True
    return False


def _statement_trains(ctx: Context, stmt: ast.stmt, seen: set[ast.AST], depth: int) -> bool:
    sem = ctx.sem
    for node in sem.walk_body([stmt]):
        if isinstance(node, ast.Call):
            func = node.func
            qual = ctx.qualname(func)
            if qual in _AUTOGRAD_CALLS or (qual or "").startswith(
                ("torch.func.", "torch.autograd.functional.")
            ):
                return True
            if qual == "torch.set_grad_enabled" and not training.is_grad_off(sem, node):
                return True
            if isinstance(func, ast.Attribute):
                if func.attr in ("backward", "manual_backward"):
                    return True
                if func.attr == "requires_grad_" and not (
                    node.args and isinstance(node.args[0], ast.Constant) and not node.args[0].value
                ):
                    return True
                if func.attr == "step" and ctx.kind(func.value) in (Kind.OPTIMIZER, Kind.SCALER):
                    return True
            if any(k.arg == "requires_grad" and not is_false(k.value) for k in node.keywords):
                return True
            local = sem.local_function(func)
            if local is not None and local not in seen and depth < 6:
                seen.add(local)
                key = ("tdr105-trains", local)
                known = sem.memo.get(key)
                if known is None:
                    sem.memo[key] = False  # in progress: a recursive call adds nothing
                    known = _trains(ctx, list(local.body), seen, depth + 1)
                    sem.memo[key] = known
                if known:
                    return True
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "requires_grad"
                    and not is_false(node.value)
                ):
                    return True
    return False


def _frozen_models(ctx: Context) -> set[str]:
    """Models whose parameters never require grad (``m.requires_grad_(False)``)."""
    out: set[str] = set()
    for call in ctx.sem.calls_by_attr.get("requires_grad_", ()):
        if call.args and is_false(call.args[0]):
            assert isinstance(call.func, ast.Attribute)
            name = dotted(call.func.value)
            if name:
                out.add(name)
    return out


def _calls_train(ctx: Context, stmt: ast.stmt) -> bool:
    for node in ctx.sem.walk_body([stmt]):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "train"
            and (not node.args or not is_false(node.args[0]))
            and ctx.kind(node.func.value) is Kind.MODULE
        ):
            return True
    return False


def _split_by_cell(ctx: Context, stmts: list[ast.stmt]) -> list[list[ast.stmt]]:
    if not stmts:
        return []
    if not ctx.is_notebook:
        return [stmts]
    parts: list[list[ast.stmt]] = []
    current: int | None = None
    for stmt in stmts:
        cell = ctx.cell_of(stmt)
        if not parts or cell != current:
            parts.append([])
            current = cell
        parts[-1].append(stmt)
    return parts


def _skipped_place(ctx: Context, node: ast.AST) -> bool:
    """Test cases, Lightning hooks, nn.Module methods, and functions only called without grad."""
    sem = ctx.sem
    func = sem.enclosing_function(node)
    while func is not None:
        if any(
            (ctx.qualname(_decorator_target(d)) or "").startswith("pytest.")
            for d in func.decorator_list
        ):
            return True
        cls = sem.parent(func)
        if isinstance(cls, ast.ClassDef):
            if func.name in _LIGHTNING_STEPS:
                return True
            bases = sem.class_bases(cls)
            if any(b.rsplit(".", 1)[-1] in ("TestCase", "LightningModule") for b in bases):
                return True
            if kinds.class_kind(sem, cls) is Kind.MODULE or _defines_forward(cls):
                return True
        if _called_without_grad(ctx, func):
            return True
        func = sem.enclosing_function(func)
    return False


def _defines_forward(cls: ast.ClassDef) -> bool:
    """A class with a ``forward`` method is a model whose base the file cannot resolve
    (``class Net(PreTrainedModel)`` with a relative import): its ``predict*`` helpers are part of
    the forward pass, and the caller decides the grad mode."""
    return any(
        isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "forward"
        for stmt in cls.body
    )


def _decorator_target(decorator: ast.expr) -> ast.expr:
    """``pytest.mark.parametrize`` for ``@pytest.mark.parametrize(...)``."""
    while isinstance(decorator, ast.Call):
        decorator = decorator.func
    return decorator


def _called_without_grad(ctx: Context, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a call of ``func`` runs with gradients off, or its result is backpropagated."""
    sem = ctx.sem
    for call in (*sem.calls_by_name.get(func.name, ()), *sem.calls_by_attr.get(func.name, ())):
        if training.grad_disabled(sem, call) or _backpropagated(ctx, call):
            return True
    return False


def _backpropagated(ctx: Context, call: ast.Call) -> bool:
    """``f(x).backward()``, or ``loss = f(x)`` and later ``loss.backward()`` (or of an
    expression using ``loss``) in the same function."""
    sem = ctx.sem
    parent = sem.parent(call)
    while isinstance(parent, ast.expr):
        if isinstance(parent, ast.Attribute) and parent.attr == "backward":
            return True
        parent = sem.parent(parent)
    if not (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return False
    name = parent.targets[0].id
    scope = sem.enclosing_function(call) or sem.tree
    for other in sem.calls_by_attr.get("backward", ()):
        if sem.enclosing_function(other) is not (scope if scope is not sem.tree else None):
            continue
        assert isinstance(other.func, ast.Attribute)
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(other.func.value)):
            return True
    return False


def _earlier_eval(ctx: Context, call: ast.Call) -> ast.Call | None:
    """A ``.eval()`` call on the same model earlier in the same function, if any."""
    want = dotted(_callee(call))
    if want is None:
        return None
    func = ctx.sem.enclosing_function(call)
    best = None
    for ev in ctx.sem.calls_by_attr.get("eval", ()):
        assert isinstance(ev.func, ast.Attribute)
        if (
            dotted(ev.func.value) == want
            and ctx.sem.enclosing_function(ev) is func
            and (ev.lineno, ev.col_offset) < (call.lineno, call.col_offset)
        ):
            best = ev
    return best


def _covering(ctx: Context, stmts: list[ast.stmt], calls: list[ast.Call]) -> list[ast.stmt]:
    """The shortest run of ``stmts`` that holds every call."""
    indexes = [
        i
        for i, stmt in enumerate(stmts)
        if any(call is stmt or ctx.sem.is_inside(call, stmt) for call in calls)
    ]
    return stmts[indexes[0] : indexes[-1] + 1] if indexes else []


def _eval_named_function(
    ctx: Context, node: ast.AST
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    func = ctx.sem.enclosing_function(node)
    if func is not None and _EVAL_FUNCTION.match(func.name):
        return func
    return None


def _decorate(ctx: Context, func: ast.FunctionDef, decorator: str) -> Edit | None:
    row = min([func.lineno, *(d.lineno for d in func.decorator_list)])
    line = ctx.source.line(row)
    indent = ctx.source.indent_of(row)
    if not line[len(indent) :].startswith(("def ", "@")):
        return None
    return fixes.insert(Pos(row, 0), f"{indent}{decorator}{ctx.source.newline}")
