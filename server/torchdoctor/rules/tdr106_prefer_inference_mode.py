from __future__ import annotations

import ast
from functools import partial

from ..core import fixes, inference, kinds, training
from ..core.context import Context
from ..core.kinds import MODULE_SELF_METHODS, Kind
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import LOOP_NODES, is_false, keyword
from .base import Invalid, Rule, Valid

# Module methods that create new parameter tensors (as inference tensors, in inference mode).
# (``eval()``/``train()`` only set a flag.)
_REBUILDING_METHODS = (MODULE_SELF_METHODS - {"eval", "train"}) | {
    "apply",
    "register_buffer",
    "register_parameter",
}


class PreferInferenceMode(Rule):
    """## What it does
    Suggests `torch.inference_mode()` for a `with torch.no_grad():` block, or a function
    decorated with `@torch.no_grad()`, whose results cannot reach autograd. Inside, there is no
    `.backward()`, `torch.autograd`/`torch.func` call, `.requires_grad_()`, `.retain_grad()`,
    `.register_hook()`, `requires_grad=True`, `nn.Parameter(...)`, optimizer built over its
    tensors or `torch.enable_grad()`; no in-place update (`p.mul_(d)`, `p.copy_(q)`) of a tensor
    made outside it; nothing stored into an attribute, an object (`setattr`) or a subscript of a
    tensor made outside; no function of the file that stores a tensor outside itself or
    differentiates; no module converted. What it computes is then followed after it: names
    assigned in the block and the lists filled in it, and what the decorated function returns
    at each of its calls in the file. They may only be read — turned into numbers
    (`loss.item()`), printed, concatenated, saved to a file. They must not be combined with the
    output of a model or a helper (an inference tensor would be saved for backward), given to a
    module, a loss, an optimizer or a function of the project that differentiates or keeps
    state, differentiated (or anything computed from them), updated in place, stored on `self`
    or a global, returned, or read in a nested function. A decorated function that returns a tensor and that no code of the file
    calls is not reported, nor is a block that runs a single forward pass (no loop in it or
    around it, no call of a project function that loops over a model or a loader it is given):
    it saves too little. Blocks that export or trace a model (`torch.onnx.export`,
    `torch.jit.trace`...) are left alone: the TorchScript-based ONNX exporter fails under
    inference mode.

    ## Why is this bad?
    `torch.inference_mode()` is `no_grad()` plus less bookkeeping: tensors created in it skip
    view tracking and version counters, which saves a little time per operation. The guide
    calls it the more efficient choice for inference. The gain is small: measured on an H200,
    a ResNet-50 forward pass at batch 256 took the same peak memory under both (2,548 MiB, 8.2x
    less than with gradients on) and the same time; on a CPU, `bench/cpu_inference_mode.py`
    (tiny MLP, batch 1, where per-operation overhead dominates) showed no difference beyond
    run-to-run noise on a shared machine. That is why the rule is off by default and only a
    hint.

    The risk runs the other way: a tensor created in inference mode can never enter autograd
    later (`RuntimeError: Inference tensors cannot be saved for backward`) and cannot be
    updated in place outside inference mode. The rule therefore stays silent whenever a result
    of the block may be used in those ways, which is the common case for targets computed under
    `no_grad()` and used in a loss (teacher outputs, target networks).

    ## Example
    ```python
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## Use instead
    ```python
    model.eval()
    correct = 0
    with torch.inference_mode():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## Fix safety
    The fix replaces `torch.no_grad()` (or the decorator `@torch.no_grad`) with
    `torch.inference_mode()`. It is offered only under the precondition above: what the block
    or the function makes is only read after it, so no tensor of it can reach a later
    `.backward()` (on anything computed from it), a module, an optimizer step,
    `requires_grad_()` or an in-place update — the uses that raise `RuntimeError: Inference
    tensors cannot be saved for backward` or fail on an in-place update of an inference
    tensor. A block whose results do reach them is not reported, so no edit is offered.

    It stays unsafe: code the rule cannot see may still keep a tensor made in the block — a
    call of the decorated function in another module, a library function given a result, a
    model's `forward` that caches one in a buffer or attribute, a forward hook, a library
    helper with a cache — or need autograd inside it: a helper that turns gradients back on
    with `torch.enable_grad()` works under `no_grad()` but not under `inference_mode()`, which
    `enable_grad()` does not lift.

    ## References
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    - [Inference mode](https://pytorch.org/docs/stable/notes/autograd.html#inference-mode)
    """

    code = "TDR106"
    name = "prefer-inference-mode"
    severity = Severity.HINT
    default = False
    fix_safety = Applicability.UNSAFE

    VALID = (
        # Exports and traces (the TorchScript-based ONNX exporter fails under inference mode).
        "import torch\nmodel = torch.nn.Linear(2, 2)\nwith torch.no_grad():\n"
        "    torch.onnx.export(model, torch.randn(1, 2), 'model.onnx')\n",
        "import torch\nfrom torch import onnx\ndef export(model, x):\n    with torch.no_grad():\n"
        "        onnx.export(model, x, 'model.onnx', do_constant_folding=True)\n",
        # A result is used after the block (a target for a loss).
        "import torch\nimport torch.nn.functional as F\n"
        "for x, y in loader:\n"
        "    with torch.no_grad():\n        target = teacher(x)\n"
        "    loss = F.mse_loss(student(x), target)\n    loss.backward()\n",
        # Stored into an outer list, an attribute, a subscript; returned.
        "import torch\npreds = []\n"
        "with torch.no_grad():\n"
        "    for x in loader:\n        preds.append(model(x))\n"
        "loss_fn(student(x), torch.cat(preds)).backward()\n",
        "import torch\n"
        "class EMA:\n"
        "    def update(self, x):\n"
        "        with torch.no_grad():\n            self.shadow = self.model(x)\n",
        "import torch\n"
        "def predict(model, x):\n"
        "    with torch.no_grad():\n        return model(x)\n",
        "import torch\nout = torch.empty(10, 3)\n"
        "with torch.no_grad():\n    for i, x in enumerate(loader):\n        out[i] = model(x)\n",
        # Gradients come back on inside, or a backward pass.
        "import torch\n"
        "with torch.no_grad():\n"
        "    with torch.enable_grad():\n        model(x).sum().backward()\n",
        "import torch\nwith torch.no_grad():\n    w = torch.zeros(3, requires_grad=True)\n",
        # Module conversion inside the block would create inference parameters.
        "import torch\nwith torch.no_grad():\n    model.half()\n",
        # Already inference mode; a no_grad that is not torch's.
        "import torch\nwith torch.inference_mode():\n    model(x)\n",
        "import torch\n"
        "from contextlib import nullcontext as no_grad\n"
        "with no_grad():\n    print(model(x).sum().item())\n",
        # A name assigned in the loop's body and read on the next iteration.
        "import torch\n"
        "for x in loader:\n"
        "    if prev is not None:\n        loss = (model(x) - prev).sum()\n"
        "    with torch.no_grad():\n        prev = model(x)\n",
        # `.detach()` of an inference tensor is still an inference tensor: a detached target
        # used in a loss later.
        "import torch\n"
        "with torch.no_grad():\n    feats = backbone(x).detach()\n"
        "head(feats).sum().backward()\n",
        "import torch\ncache = []\n"
        "with torch.no_grad():\n    for x in loader:\n        cache.append(backbone(x).detach())\n"
        "head(torch.cat(cache)).sum().backward()\n",
        # A helper of the file that keeps what it is given, or stores it on an object.
        "import torch\ncache = []\n"
        "def remember(t):\n    cache.append(t)\n"
        "with torch.no_grad():\n    remember(backbone(x))\n"
        "head(torch.cat(cache)).sum().backward()\n",
        "import torch\nwith torch.no_grad():\n    setattr(state, 'target', teacher(x))\n",
        # A helper of the file that turns gradients back on (enable_grad does not lift
        # inference mode).
        "import torch\n"
        "def attack(model, x):\n    with torch.enable_grad():\n"
        "        x = x.clone().requires_grad_()\n        model(x).sum().backward()\n"
        "    return x.grad.sign().sum().item()\n"
        "with torch.no_grad():\n    print(attack(model, x))\n",
        # An optimizer built over a tensor made in the block.
        "import torch\nwith torch.no_grad():\n    torch.optim.SGD([init(x)], lr=0.1)\n",
        # A later notebook cell reads the result.
        Valid(
            "import torch\nwith torch.no_grad():\n    feats = backbone(x)\n"
            "head(feats).sum().backward()\n",
            notebook=True,
        ),
        # A decorated function whose result a loss reads (a teacher's targets).
        "import torch\nimport torch.nn.functional as F\n"
        "@torch.no_grad()\ndef targets(x):\n    return teacher(x).softmax(-1)\n"
        "for x in loader:\n    t = targets(x)\n"
        "    F.kl_div(student(x).log_softmax(-1), t).backward()\n",
        # A decorated function returning a tensor that no code of the file is seen using.
        "import torch\n@torch.no_grad()\ndef embed(model, x):\n    return model(x)\n",
        # Read later, but combined with a model's output (saved for its backward).
        "import torch\n"
        "with torch.no_grad():\n    anchor = sum(encoder(x) for x in xs)\n"
        "loss = (encoder(x) - anchor).pow(2).mean()\n",
        # Updated in place after the block: not allowed on an inference tensor.
        "import torch\n"
        "with torch.no_grad():\n    running = torch.stack([model(x) for x in xs])\n"
        "running[running < 0] = 0\nprint(running.sum().item())\n",
        # A single forward pass: too little to gain.
        "import torch\nwith torch.no_grad():\n    print(model(x).argmax(1).tolist())\n",
        # A decorated EMA update: parameters made outside are updated in place.
        "import torch\n"
        "@torch.no_grad()\ndef update_ema(ema, model, decay=0.999):\n"
        "    for e, p in zip(ema.parameters(), model.parameters()):\n"
        "        e.mul_(decay).add_(p, alpha=1 - decay)\n",
        # Given after the block to a helper of the file that differentiates it.
        "import torch\n"
        "def fit(f):\n    head(f).sum().backward()\n"
        "with torch.no_grad():\n    feats = torch.cat([backbone(x) for x in xs])\n"
        "fit(feats)\n",
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "def accuracy(model, loader):\n"
            "    model.eval()\n"
            "    correct = total = 0\n"
            "    with torch.no_grad():\n"
            "        for x, y in loader:\n"
            "            pred = model(x).argmax(1)\n"
            "            correct += (pred == y).sum().item()\n"
            "            total += y.size(0)\n"
            "    return correct / total\n",
            fixed="import torch\n"
            "def accuracy(model, loader):\n"
            "    model.eval()\n"
            "    correct = total = 0\n"
            "    with torch.inference_mode():\n"
            "        for x, y in loader:\n"
            "            pred = model(x).argmax(1)\n"
            "            correct += (pred == y).sum().item()\n"
            "            total += y.size(0)\n"
            "    return correct / total\n",
            lines=(5,),
        ),
        # The loop variables are bound again by a later loop before they are read.
        Invalid(
            "import torch\n"
            "model.eval()\n"
            "with torch.no_grad():\n"
            "    for x, y in val_loader:\n"
            "        print(model(x).argmax(1).eq(y).float().mean().item())\n"
            "model.train()\n"
            "for x, y in train_loader:\n"
            "    loss_fn(model(x), y).backward()\n",
            fixed="import torch\n"
            "model.eval()\n"
            "with torch.inference_mode():\n"
            "    for x, y in val_loader:\n"
            "        print(model(x).argmax(1).eq(y).float().mean().item())\n"
            "model.train()\n"
            "for x, y in train_loader:\n"
            "    loss_fn(model(x), y).backward()\n",
            lines=(3,),
        ),
        # Imported name: the fix spells it through the torch module.
        Invalid(
            "import torch\nfrom torch import no_grad\n"
            "with no_grad():\n    for x in xs:\n        print(model(x).mean().item())\n",
            fixed="import torch\nfrom torch import no_grad\n"
            "with torch.inference_mode():\n    for x in xs:\n        print(model(x).mean().item())\n",
            lines=(3,),
        ),
        Invalid(
            "import torch as T\n"
            "with T.no_grad(), open('log.txt', 'w') as f:\n"
            "    for x in xs:\n        f.write(str(float(model(x).sum())))\n",
            fixed="import torch as T\n"
            "with T.inference_mode(), open('log.txt', 'w') as f:\n"
            "    for x in xs:\n        f.write(str(float(model(x).sum())))\n",
            notebook=True,
            lines=(2,),
        ),
        # A decorated validation function that returns a number; a tensor it makes and
        # fills in is its own.
        Invalid(
            "import torch\nimport torch.nn.functional as F\n"
            "@torch.no_grad()\n"
            "def validate(model, loader):\n"
            "    model.eval()\n"
            "    losses = torch.zeros(len(loader))\n"
            "    for k, (x, y) in enumerate(loader):\n"
            "        losses[k] = F.cross_entropy(model(x), y)\n"
            "    model.train()\n"
            "    return losses.mean().item()\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "@torch.inference_mode()\n"
            "def validate(model, loader):\n"
            "    model.eval()\n"
            "    losses = torch.zeros(len(loader))\n"
            "    for k, (x, y) in enumerate(loader):\n"
            "        losses[k] = F.cross_entropy(model(x), y)\n"
            "    model.train()\n"
            "    return losses.mean().item()\n",
            lines=(3,),
        ),
        # A sampler returns a tensor; its only caller saves it to an image file.
        Invalid(
            "import torch\nfrom torch import nn\nfrom torchvision.utils import save_image\n"
            "class Diffusion(nn.Module):\n"
            "    @torch.no_grad\n"
            "    def sample(self, n):\n"
            "        x = torch.randn(n, 3, 8, 8)\n"
            "        for t in range(10):\n            x = x - self.net(x)\n"
            "        return x.clamp(0, 1)\n"
            "def log_samples(diffusion, step):\n"
            "    images = torch.cat([diffusion.sample(4) for _ in range(2)])\n"
            "    save_image(images, f'sample-{step}.png', nrow=4)\n",
            fixed="import torch\nfrom torch import nn\nfrom torchvision.utils import save_image\n"
            "class Diffusion(nn.Module):\n"
            "    @torch.inference_mode()\n"
            "    def sample(self, n):\n"
            "        x = torch.randn(n, 3, 8, 8)\n"
            "        for t in range(10):\n            x = x - self.net(x)\n"
            "        return x.clamp(0, 1)\n"
            "def log_samples(diffusion, step):\n"
            "    images = torch.cat([diffusion.sample(4) for _ in range(2)])\n"
            "    save_image(images, f'sample-{step}.png', nrow=4)\n",
            lines=(5,),
        ),
        # Predictions kept in a list and only printed after the block.
        Invalid(
            "import torch\npreds = []\n"
            "with torch.no_grad():\n"
            "    for x in loader:\n        preds.append(model(x).argmax(1))\n"
            "print(torch.cat(preds).bincount())\n",
            fixed="import torch\npreds = []\n"
            "with torch.inference_mode():\n"
            "    for x in loader:\n        preds.append(model(x).argmax(1))\n"
            "print(torch.cat(preds).bincount())\n",
            lines=(3,),
        ),
        # Results written into a dict after the block (an item of a dict, not of a tensor).
        Invalid(
            "import torch\nrows = []\n"
            "with torch.no_grad():\n"
            "    for x in loader:\n        rows.append(model(x).softmax(-1).cpu())\n"
            "table = {}\n"
            "for i, row in enumerate(rows):\n    table[f'p{i}'] = row.numpy()\n",
            fixed="import torch\nrows = []\n"
            "with torch.inference_mode():\n"
            "    for x in loader:\n        rows.append(model(x).softmax(-1).cpu())\n"
            "table = {}\n"
            "for i, row in enumerate(rows):\n    table[f'p{i}'] = row.numpy()\n",
            lines=(3,),
        ),
        # Given after the block to a helper of the file that only writes it to a file.
        Invalid(
            "import torch\n"
            "def save(preds, path):\n    torch.save(preds, path)\n"
            "with torch.no_grad():\n    preds = torch.cat([model(x) for x in xs])\n"
            "save(preds, 'preds.pt')\n",
            fixed="import torch\n"
            "def save(preds, path):\n    torch.save(preds, path)\n"
            "with torch.inference_mode():\n    preds = torch.cat([model(x) for x in xs])\n"
            "save(preds, 'preds.pt')\n",
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for with_ in sem.withs:
            item = next(
                (
                    i
                    for i in with_.items
                    if isinstance(i.context_expr, ast.Call)
                    and ctx.qualname(i.context_expr.func) == "torch.no_grad"
                    and i.optional_vars is None
                ),
                None,
            )
            if item is None or not _repeats(ctx, with_) or _keeps_results(ctx, with_, with_.body):
                continue
            self._report(ctx, item.context_expr)
        for func in ast.walk(sem.tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            decorator = next((d for d in func.decorator_list if _is_no_grad(ctx, d)), None)
            if decorator is None or _keeps_results(ctx, func, func.body):
                continue
            self._report(ctx, decorator)

    def _report(self, ctx: Context, node: ast.expr) -> None:
        ctx.report(
            node,
            Text(
                "Nothing computed under `torch.no_grad()` here reaches autograd: "
                "`torch.inference_mode()` does the same with less overhead",
                "此处 `torch.no_grad()` 下计算的结果都不会进入自动求导："
                "`torch.inference_mode()` 作用相同且开销更小",
            ),
            fixes=partial(_to_inference_mode, ctx, node),
        )


def _repeats(ctx: Context, with_: ast.With | ast.AsyncWith) -> bool:
    """Whether the block does work again and again: it runs in a loop, has one inside, or
    calls a function of the project that loops. (A single forward pass saves too little to
    be worth a finding.)"""
    sem = ctx.sem
    if training.enclosing_loops(sem, with_):
        return True
    for node in sem.walk_body(with_.body):
        if isinstance(node, (*LOOP_NODES, ast.comprehension)):
            return True
        if isinstance(node, ast.Call) and any(
            kinds.kind(sem, a) is Kind.MODULE or kinds.is_loader(sem, a)
            for a in (*node.args, *(k.value for k in node.keywords))
        ):
            # A function of the project that loops, given a model or a loader.
            defined = sem.owner(node).function_def(node.func)
            if defined is not None and any(
                isinstance(n, LOOP_NODES) for n in defined[0].walk(defined[1])
            ):
                return True
    return False


def _is_no_grad(ctx: Context, decorator: ast.expr) -> bool:
    """``@torch.no_grad()`` or ``@torch.no_grad``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(decorator, ast.Call) and (decorator.args or decorator.keywords):
        return False
    return ctx.qualname(target) == "torch.no_grad"


def _keeps_results(ctx: Context, region: ast.AST, body: list[ast.stmt]) -> bool:
    """Whether anything made in the block (or the decorated function) may outlive it in a
    way an inference tensor does not allow, or enter autograd."""
    sem = ctx.sem
    function = isinstance(region, ast.FunctionDef | ast.AsyncFunctionDef)
    assigned: set[str] = set()
    returned: list[ast.expr] = []
    for node in sem.walk_body(body):
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Global | ast.Nonlocal):
            return True
        if isinstance(node, ast.Return):
            if not function:
                return True
            if node.value is not None and not inference.python_result(node.value):
                returned.append(node.value)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.NamedExpr):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            plain = training.is_python_value(node.value)
            for target in targets:
                if isinstance(target, ast.Attribute | ast.Subscript) and not plain:
                    if not inference.made_in(sem, target, region):
                        return True
                if not plain:
                    assigned |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.For | ast.AsyncFor | ast.withitem):  # (comprehensions: own scope)
            bound = node.optional_vars if isinstance(node, ast.withitem) else node.target
            if bound is not None:
                assigned |= {n.id for n in ast.walk(bound) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Call) and inference.in_place_outside(sem, node, region):
            return True
        elif isinstance(node, ast.Call) and inference.local_store(sem, node, region):
            assigned.add(inference.local_store(sem, node, region) or "")
        elif isinstance(node, ast.Call) and _call_keeps(ctx, node, region):
            return True
    if function:
        assert isinstance(region, ast.FunctionDef | ast.AsyncFunctionDef)
        return bool(returned) and not inference.callers_only_read(sem, region)
    kept = {name for name in assigned if training.read_later(sem, name, region)}
    return bool(kept) and not inference.only_read_later(sem, kept, region)


def _call_keeps(ctx: Context, call: ast.Call, with_: ast.AST, depth: int = 0) -> bool:
    """Whether a call in the block differentiates, turns gradients on, hands a tensor to
    autograd (``requires_grad_``, an optimizer, ``nn.Parameter``), converts a module, stores a
    tensor into a container read after the block or into an object (``setattr``), or is a
    function of this file that stores one outside itself."""
    func = call.func
    qual = ctx.qualname(func)
    if qual in inference.AUTOGRAD_CALLS or training.enters_autograd(ctx.sem, call):
        return True
    if qual is not None and qual.startswith(("torch.onnx.", "torch.jit.")):
        return True  # the TorchScript-based ONNX exporter fails under inference mode
    requires = keyword(call, "requires_grad")
    if requires is not None and not is_false(requires.value):
        return True
    values = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(func, ast.Name):
        if func.id == "setattr" and ctx.sem.lookup("setattr", func) is None:
            return not all(training.is_python_value(a) for a in values[2:])
        local = ctx.sem.local_function(func)
        return local is not None and _stores_outside(ctx, local, depth)
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in inference.AUTOGRAD_METHODS:
        return True
    if func.attr == "step" and any(
        kinds.is_optimizer(ctx.sem, v) for v in (func.value, *call.args[:1])
    ):
        return True  # optimizer state made in inference mode fails a later step outside it
    if func.attr in _REBUILDING_METHODS and isinstance(ctx.sem.parent(call), ast.Expr):
        return True  # model.half(), model.to(device): new parameter tensors
    if func.attr in inference.STORING_METHODS and not all(
        inference.python_arg(ctx.sem, a) for a in values
    ):
        receiver = func.value
        while isinstance(receiver, ast.Attribute | ast.Subscript):
            receiver = receiver.value
        if not isinstance(receiver, ast.Name):
            return True
        if isinstance(with_, ast.FunctionDef | ast.AsyncFunctionDef):
            binding = ctx.sem.lookup(receiver.id, call)
            return binding is None or binding.scope is not with_  # a local dies with the call
        return training.read_later(ctx.sem, receiver.id, with_)
    return False


def _stores_outside(ctx: Context, func: ast.AST, depth: int) -> bool:
    """Whether a function of this file, run in the block, may keep a tensor beyond its own
    call or needs autograd: it declares ``global``/``nonlocal``, assigns a tensor to an
    attribute or a subscript, appends one to a container it did not make, turns gradients on
    or differentiates (``torch.enable_grad()`` does not lift inference mode), or calls a
    function that does. (What it returns is followed at the call.)"""
    key = ("tdr106-stores-outside", func)
    known = ctx.sem.memo.get(key)
    if isinstance(known, bool):
        return known
    if depth > 6:
        return True
    ctx.sem.memo[key] = False  # in progress: a recursive call adds nothing
    assert isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef)
    sem = ctx.sem
    found = False
    for node in sem.walk_body(func.body):
        if isinstance(node, ast.Global | ast.Nonlocal | ast.Yield | ast.YieldFrom):
            found = True
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found = not training.is_python_value(node.value) and any(
                isinstance(t, ast.Attribute | ast.Subscript) and not inference.made_in(sem, t, func)
                for t in targets
            )
        elif isinstance(node, ast.Call):
            inner = node.func
            stored = [*node.args, *(k.value for k in node.keywords)]
            if inference.in_place_outside(sem, node, func):
                found = True  # ``param.sub_(lr * param.grad)``: updates tensors made outside
            elif (
                ctx.qualname(inner) in inference.AUTOGRAD_CALLS
                or training.enters_autograd(sem, node)
                or (isinstance(inner, ast.Attribute) and inner.attr in inference.AUTOGRAD_METHODS)
            ):
                found = True  # gradients on, or a backward pass: inference mode breaks it
            elif (
                isinstance(inner, ast.Attribute)
                and inner.attr in inference.STORING_METHODS
                and not all(inference.python_arg(sem, a) for a in stored)
            ):
                receiver = inner.value
                while isinstance(receiver, ast.Attribute | ast.Subscript):
                    receiver = receiver.value
                binding = (
                    sem.lookup(receiver.id, receiver) if isinstance(receiver, ast.Name) else None
                )
                found = binding is None or binding.scope is not func
            elif isinstance(inner, ast.Name) and inner.id == "setattr":
                found = True
            else:
                local = sem.local_function(inner)
                found = local is not None and _stores_outside(ctx, local, depth + 1)
        if found:
            break
    ctx.sem.memo[key] = found
    return found


def _to_inference_mode(ctx: Context, node: ast.expr) -> Fix | None:
    func = node.func if isinstance(node, ast.Call) else node
    edits: list[Edit] = []
    if isinstance(func, ast.Attribute) and ctx.qualname(func.value) == "torch":
        text = f"{ctx.segment(func.value)}.inference_mode()"
    else:
        ref = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
        if ref is None:
            return None
        name, edits = ref
        text = f"{name}.inference_mode()"
    return Fix(
        Text("Use `torch.inference_mode()`", "改用 `torch.inference_mode()`"),
        (fixes.replace(ctx.source, node, text), *edits),
        Applicability.UNSAFE,
    )
