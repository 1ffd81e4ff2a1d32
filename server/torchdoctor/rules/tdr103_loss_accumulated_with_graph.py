from __future__ import annotations

import ast

from ..core import fixes, summaries, training, value_flow
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid

# A training step of another module that returns its backpropagated loss in a dict.
_ENGINE_PY = (
    "import torch.nn.functional as F\ndef train_step(model, batch, opt):\n    x, y = batch\n"
    "    out = model(x)\n    loss = F.cross_entropy(out, y)\n"
    "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
    "    return {'loss': loss, 'acc': (out.argmax(1) == y).float().mean().item()}\n"
)


# A trainer class of another module whose step returns its losses after backpropagating one.
_TRAINER_PY = (
    "from collections import namedtuple\nimport torch.nn.functional as F\n"
    "Losses = namedtuple('Losses', ['cls', 'reg', 'total'])\n"
    "class Trainer:\n    def __init__(self, model, opt):\n        self.model, self.opt = model, opt\n"
    "    def losses(self, x, y, box):\n        out, reg = self.model(x)\n"
    "        cls = F.cross_entropy(out, y)\n        reg = F.smooth_l1_loss(reg, box)\n"
    "        return Losses(cls, reg, cls + reg)\n"
    "    def train_step(self, x, y, box):\n        self.opt.zero_grad()\n"
    "        losses = self.losses(x, y, box)\n        losses.total.backward()\n"
    "        self.opt.step()\n        return losses\n"
)


# A loss function of another module that returns its loss with the dict of the terms it sums.
_LOSSES_PY = (
    "import torch.nn.functional as F\nclass DualLoss:\n    def __call__(self, out, y):\n"
    "        terms = {'cls': F.cross_entropy(out, y), 'box': F.l1_loss(out, y)}\n"
    "        return sum(terms.values()) / len(terms), terms\n"
    "def create_loss(cfg):\n    return DualLoss()\n"
)
_SOLVER = (
    "import torch\nfrom collections import defaultdict\nfrom losses import create_loss\n"
    "class Solver:\n    def __init__(self, model, opt, cfg):\n"
    "        self.model, self.opt = model, opt\n        self.loss_fn = create_loss(cfg)\n"
    "    def train_one_batch(self, x, y):\n        self.opt.zero_grad()\n"
    "        loss, terms = self.loss_fn(self.model(x), y)\n"
    "        loss.backward()\n        self.opt.step()\n        return terms\n"
    "    def train_one_epoch(self, loader):\n"
    "        totals = defaultdict(float)\n        for x, y in loader:\n"
    "            for name, value in self.train_one_batch(x, y).items():\n"
    "                totals[name] += value\n        return totals\n"
)


class LossAccumulatedWithGraph(Rule):
    """## What it does
    Checks training loops that accumulate a loss tensor — `total += loss`,
    `total = total + loss`, `losses.append(loss)` — without `.item()` or `.detach()`. A loss
    is the result of `criterion(...)` where `criterion` is an `nn.*Loss`, of
    `F.cross_entropy(...)`/`F.*_loss(...)`, of `nn.MSELoss()(...)`, arithmetic on one, or a
    tensor that is `.backward()`-ed.

    The loss may come from a helper, of this file or of another module: a training step that
    returns its loss after `backward()` (`total += train_step(...)`), a dict whose `'loss'` was
    backpropagated, the values of `.items()` of a returned dict (also a dict whose values a
    loss function sums into the loss it returns, when that loss is backpropagated: `loss, terms
    = loss_fn(...)`, `loss.backward()`, `return terms`), or the parts unpacked from an
    object returned after the backward pass of one of its attributes (`losses.total.backward()`
    then `return losses`, a trainer's method called on its instance).

    ## Why is this bad?
    A loss tensor carries its autograd graph. Adding it to a running total (or keeping it in a
    list) links every iteration's graph to an object that outlives the iteration, so none of
    them is freed: memory grows with every batch until the epoch ends, or until the process runs
    out of memory. When the loss was never backpropagated (evaluation with gradients on, or a
    logged auxiliary loss) every saved activation stays alive: measured on an H200, summing the
    losses of 50 iterations of an MLP (1024→4096→10, batch 512) peaked at 409 MiB as tensors and
    24 MiB with `.item()`; on a CPU (`bench/cpu_loss_accumulation.py`, torch 2.13) the surviving
    graphs hold 403 MiB after 50 iterations, and 0 MiB with `.item()`. After `.backward()` the
    activations are freed, but the total still requires grad and the chain of autograd nodes
    behind it grows by every operation of every iteration. The PyTorch FAQ shows this exact loop as the first cause of memory
    growth.

    It is a leak even when the total is only printed or logged later. The rule stays silent
    when the accumulation runs under `torch.no_grad()`/`torch.inference_mode()` (or the loss
    was computed there), when the accumulator is reset inside the loop, when the accumulated
    value is itself backpropagated, and when it is returned from a loop that has no backward
    pass of its own (summing the losses of an unrolled sequence for one backward pass by the
    caller is intended), also through other totals (`loc += part / n` in a loss module's
    `forward`, then `return loc`). A total returned from a loop that trains is still reported.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    ```

    ## Use instead
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    ```

    ## Fix safety
    Two fixes: `.detach()` keeps a tensor with the same values, dtype and device, only without
    the graph; `.item()` turns the total into a Python float.

    `.detach()` is safe where the rule can follow every read of the total (and of the values
    computed from it: arithmetic, containers, a plain name assigned from it, and in a notebook
    the calls of the function that returns it; a `.py` module's function may be called from
    another module, so a returned total is not proven there) to a use that only reads the
    number: an f-string or `str.format`, `print`/`str`/`float`/`int`/`len`, a
    comparison or an `if`, `.item()`/`.tolist()`/`.detach()`, tensor methods such as
    `.cpu()`/`.mean()` and `torch.*` functions whose results end the same way, or a logger
    call (`add_scalar`, `log`, `log_metric`, `info`, `set_postfix`...). A printed tensor then
    no longer shows `grad_fn=<...>`, the graph the finding is about; nothing else changes.
    Anywhere else (the total is an attribute or a dict item, is returned to callers the file
    does not show, is stored, pickled, passed to another function, or its `.requires_grad`,
    `.grad_fn` or `.numpy()` is used) it is unsafe: that code might differentiate it or notice.
    It is the first fix when it is safe, so `--fix` applies it. For `append` the same
    conditions hold for every read of the list (`append`/`extend` themselves read nothing).

    `.item()` is always unsafe: the sum is then made in Python's double precision instead of
    the loss's float32, so the digits printed can differ (a `:.4f` average of 100 losses differs
    in about one run of 200), a printed value loses its `tensor(...)` form, `.item()` waits
    for the GPU on every iteration, and it raises on a loss with more than one element
    (`reduction="none"`). It is not offered when a read of the total needs a tensor (a tensor
    method or attribute, indexing, a `torch.*` function): the float would break it.

    ## References
    - [PyTorch FAQ: accumulating history across the training loop](https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory)
    - [`Tensor.item`](https://pytorch.org/docs/stable/generated/torch.Tensor.item.html)
    - [`Tensor.detach`](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    """

    code = "TDR103"
    name = "loss-accumulated-with-graph"
    severity = Severity.WARNING
    fix_safety = Applicability.UNSAFE

    VALID = (
        # A loss module that sums per-sample losses and returns their mean to be backpropagated.
        "import torch\nimport torch.nn.functional as F\n"
        "def ctc_cost(outputs, targets, n):\n    total = 0\n    for o, t in zip(outputs, targets):\n"
        "        total += F.ctc_loss(o, t, il, tl)\n    cost = total / n\n    return cost\n",
        "import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\ntotal = 0.0\n"
        "for x, y in loader:\n"
        "    loss = crit(model(x), y)\n    loss.backward()\n    total += loss.item()\n",
        # Terms of the loss a loss module's forward returns, summed through a second total.
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
        "class BoxLoss(nn.Module):\n    def forward(self, preds, targets):\n        loc = 0.0\n"
        "        for i in range(len(targets)):\n            part = 0.0\n"
        "            for j in range(len(targets[i])):\n"
        "                part += F.smooth_l1_loss(preds[i][j], targets[i][j], reduction='sum')\n"
        "            loc += part / len(targets[i])\n"
        "        loss = loc / len(targets) + self.weight\n"
        "        return loss, loc\n",
        "import torch\nfrom torch import nn\nmse = nn.MSELoss()\ndef rollout(model, xs, ys):\n"
        "    total = 0\n    for t in range(len(xs)):\n        step = 0\n"
        "        for k in range(3):\n            step += mse(model(xs[t], k), ys[t])\n"
        "        total += step\n"
        "    return {'loss': total}\n",
        # Under no_grad, or the loss computed there.
        "import torch\nimport torch.nn.functional as F\nloss_sum = 0\nwith torch.no_grad():\n"
        "    for x, y in val_loader:\n"
        "        loss_sum += F.cross_entropy(model(x), y)\n",
        "import torch\nimport torch.nn.functional as F\ntotal = 0\nfor x, y in val_loader:\n"
        "    with torch.inference_mode():\n        loss = F.mse_loss(model(x), y)\n"
        "    total += loss\n",
        "import torch\nimport torch.nn.functional as F\n@torch.no_grad()\n"
        "def evaluate(model, loader):\n    losses = []\n"
        "    for x, y in loader:\n        losses.append(F.cross_entropy(model(x), y))\n"
        "    return torch.stack(losses).mean()\n",
        # Summing per-step losses of an unrolled sequence before one backward pass.
        "import torch\nimport torch.nn.functional as F\nfor x, y in loader:\n    total = 0\n"
        "    for t in range(x.size(1)):\n        total += F.mse_loss(model(x[:, t]), y[:, t])\n"
        "    total.backward()\n    opt.step()\n",
        "import torch\nimport torch.nn.functional as F\ndef rollout_loss(model, xs, ys):\n"
        "    loss = 0\n    for t in range(len(xs)):\n"
        "        loss = loss + F.l1_loss(model(xs[t]), ys[t])\n"
        "    return loss\n",
        "import torch\nimport torch.nn.functional as F\nlosses = []\nfor step in range(10):\n"
        "    losses.append(F.mse_loss(model(x), y))\n"
        "torch.stack(losses).sum().backward()\n",
        # Detached or converted.
        "import torch\nfrom torch import nn\ncrit = nn.MSELoss()\nhist = []\nfor x, y in loader:\n"
        "    loss = crit(model(x), y)\n    loss.backward()\n"
        "    hist.append(loss.detach())\n    hist.append(float(loss))\n",
        # A local criterion that is not a torch loss, and a non-loss value.
        "import torch\ndef criterion(a, b):\n    return abs(a - b)\ntotal = 0\n"
        "for x, y in loader:\n    total += criterion(x, y)\n",
        "import torch\ntotal = 0\n"
        "for x, y in loader:\n    out = model(x)\n    total += out.sum()\n",
        # Outside any repeating loop (a loop over a fixed collection of heads).
        "import torch\nimport torch.nn.functional as F\ntotal = 0\n"
        "for head in heads:\n    total += F.mse_loss(head(x), y)\n",
        Valid(
            "import torch\nimport torch.nn.functional as F\nrunning = 0.0\n"
            "for x, y in loader:\n    running += F.mse_loss(model(x), y).item()\n",
            notebook=True,
        ),
        # A training-step helper that returns the loss as a number.
        "import torch\nimport torch.nn.functional as F\ndef train_step(model, x, y, opt):\n"
        "    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n    opt.step()\n"
        "    return loss.item()\ntotal = 0.0\n"
        "for x, y in loader:\n    total += train_step(model, x, y, opt)\n",
        # A helper that returns a dict of detached values; evaluation helpers under no_grad.
        "import torch\nimport torch.nn.functional as F\ndef train_step(model, batch, opt):\n"
        "    loss = F.mse_loss(model(batch[0]), batch[1])\n    loss.backward()\n    opt.step()\n"
        "    return {'loss': loss.detach(), 'lr': opt.param_groups[0]['lr']}\n@torch.no_grad()\n"
        "def eval_step(model, batch):\n    return F.mse_loss(model(batch[0]), batch[1])\n"
        "history = []\nlogs = []\nval = 0\nfor batch in loader:\n"
        "    out = train_step(model, batch, opt)\n"
        "    history.append(out['loss'])\n    logs.append(out)\n"
        "    val += eval_step(model, batch)\n",
        # Across modules: the helper of engine.py hands back plain numbers.
        Valid(
            "import torch\nfrom engine import train_step\nmeters = {}\nfor epoch in range(3):\n"
            "    for batch in loader:\n"
            "        for name, value in train_step(model, batch, opt).items():\n"
            "            meters[name] = meters.get(name, 0) + value\n",
            files=(
                (
                    "engine.py",
                    "import torch.nn.functional as F\ndef train_step(model, batch, opt):\n"
                    "    loss = F.cross_entropy(model(batch[0]), batch[1])\n"
                    "    loss.backward()\n    opt.step()\n"
                    "    return {'loss': loss.item()}\n",
                ),
            ),
        ),
        # The dict's loss is backpropagated, and only detached values are kept.
        "import torch\noutputs = []\nfor i, batch in enumerate(loader):\n"
        "    output = module.training_step(batch, i)\n    output['loss'].backward()\n"
        "    optimizer.step()\n"
        "    outputs.append({k: v.detach() for k, v in output.items()})\n",
        # The backpropagated item is replaced by its detached value before the dict is kept.
        "import torch\noutputs = []\nfor i, batch in enumerate(loader):\n"
        "    output = module.training_step(batch, i)\n    output['loss'].backward()\n"
        "    optimizer.step()\n    output['loss'] = output['loss'].detach()\n"
        "    outputs.append(output)\n",
        # Across modules: the parts of a trainer's step result are read as numbers.
        Valid(
            "import torch\nfrom trainer import Trainer\ntrainer = Trainer(model, opt)\ntotal_loss = 0.0\n"
            "for i, (x, y, box) in enumerate(gen):\n"
            "    cls, reg, total = trainer.train_step(x, y, box)\n"
            "    total_loss += total.item()\n",
            files=(("trainer.py", _TRAINER_PY),),
        ),
        # The loss function's dict holds detached copies, not the terms of the loss it returns.
        Valid(
            _SOLVER,
            files=(
                (
                    "losses.py",
                    "import torch.nn.functional as F\n"
                    "class DualLoss:\n    def __call__(self, out, y):\n"
                    "        cls, box = F.cross_entropy(out, y), F.l1_loss(out, y)\n"
                    "        return cls + box, {'cls': cls.detach(), 'box': box.detach()}\n"
                    "def create_loss(cfg):\n    return DualLoss()\n",
                ),
            ),
        ),
    )
    INVALID = (
        # Only printed: `.detach()` is safe and comes first.
        Invalid(
            "import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\ntotal = 0.0\n"
            "for x, y in loader:\n"
            "    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()\n"
            "    total += loss\n"
            "print(total / len(loader))\n",
            fixed="import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\ntotal = 0.0\n"
            "for x, y in loader:\n"
            "    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()\n"
            "    total += loss.detach()\n"
            "print(total / len(loader))\n",
            lines=(9,),
        ),
        # append: detach; functional alias; the loss times the batch size.
        Invalid(
            "import torch.nn.functional as Fn\nhistory = []\nfor epoch in range(3):\n"
            "    for x, y in loader:\n"
            "        history.append(Fn.nll_loss(model(x), y) * x.size(0))\n",
            fixed="import torch.nn.functional as Fn\n"
            "history = []\nfor epoch in range(3):\n    for x, y in loader:\n"
            "        history.append((Fn.nll_loss(model(x), y) * x.size(0)).detach())\n",
            lines=(5,),
        ),
        # total = total + loss with an inline loss module.
        Invalid(
            "import torch\nfrom torch.nn import MSELoss\ndef train(model, loader):\n"
            "    running = torch.zeros(())\n    for x, y in loader:\n"
            "        running = running + MSELoss()(model(x), y)\n"
            "    print(running)\n",
            fixed="import torch\nfrom torch.nn import MSELoss\n"
            "def train(model, loader):\n    running = torch.zeros(())\n    for x, y in loader:\n"
            "        running = running + MSELoss()(model(x), y).detach()\n"
            "    print(running)\n",
            lines=(6,),
        ),
        # An attribute other methods can read: both fixes unsafe, `.item()` first.
        Invalid(
            "import torch\nclass Trainer:\n    def fit(self):\n        self.stats = {'loss': 0}\n"
            "        while True:\n            out = self.model(next(self.it))\n"
            "            loss = out.loss\n            loss.backward()\n"
            "            self.stats['loss'] += loss\n",
            fixed="import torch\n"
            "class Trainer:\n    def fit(self):\n        self.stats = {'loss': 0}\n"
            "        while True:\n            out = self.model(next(self.it))\n"
            "            loss = out.loss\n            loss.backward()\n"
            "            self.stats['loss'] += loss.item()\n",
            lines=(9,),
        ),
        # Returned from a loop that trains, to callers this file does not show: unsafe.
        Invalid(
            "import torch\nimport torch.nn.functional as F\ndef train_epoch(model, loader, opt):\n"
            "    total = 0.0\n    for x, y in loader:\n"
            "        loss = F.cross_entropy(model(x), y)\n"
            "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
            "        total += loss\n"
            "    return total / len(loader)\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def train_epoch(model, loader, opt):\n    total = 0.0\n    for x, y in loader:\n"
            "        loss = F.cross_entropy(model(x), y)\n"
            "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
            "        total += loss.item()\n"
            "    return total / len(loader)\n",
            lines=(10,),
        ),
        # ... and to a caller that uses it as a tensor: no `.item()`, `.detach()` unsafe.
        Invalid(
            "import torch\nimport torch.nn.functional as F\ndef train_epoch(model, loader, opt):\n"
            "    total = 0.0\n    for x, y in loader:\n"
            "        loss = F.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        opt.step()\n        total += loss\n"
            "    return total / len(loader)\n"
            "curve = torch.stack([train_epoch(net, data, sgd) for _ in range(3)])\n"
            "torch.save(curve, 'curve.pt')\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def train_epoch(model, loader, opt):\n    total = 0.0\n    for x, y in loader:\n"
            "        loss = F.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        opt.step()\n        total += loss.detach()\n"
            "    return total / len(loader)\n"
            "curve = torch.stack([train_epoch(net, data, sgd) for _ in range(3)])\n"
            "torch.save(curve, 'curve.pt')\n",
            lines=(9,),
        ),
        # ... and to a caller that formats it, compares it and logs it: safe in a notebook
        # (the whole program), unsafe in a module that others may import.
        Invalid(
            "import torch\nimport torch.nn.functional as F\ndef train_epoch(model, loader, opt):\n"
            "    total = 0\n    for x, y in loader:\n        loss = F.mse_loss(model(x), y)\n"
            "        loss.backward()\n        opt.step()\n        total = total + loss\n"
            "    return total / len(loader)\nbest = float('inf')\nfor epoch in range(5):\n"
            "    avg = train_epoch(net, data, sgd)\n"
            "    writer.add_scalar('train/loss', avg, epoch)\n"
            "    if avg < best:\n        best = float(avg)\n"
            "    print(f'{epoch}: {avg:.4f}')\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def train_epoch(model, loader, opt):\n    total = 0\n    for x, y in loader:\n"
            "        loss = F.mse_loss(model(x), y)\n        loss.backward()\n        opt.step()\n"
            "        total = total + loss.detach()\n    return total / len(loader)\n"
            "best = float('inf')\nfor epoch in range(5):\n    avg = train_epoch(net, data, sgd)\n"
            "    writer.add_scalar('train/loss', avg, epoch)\n"
            "    if avg < best:\n        best = float(avg)\n"
            "    print(f'{epoch}: {avg:.4f}')\n",
            notebook=True,
            lines=(9,),
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\ndef train_epoch(model, loader, opt):\n"
            "    total = 0\n    for x, y in loader:\n        loss = F.mse_loss(model(x), y)\n"
            "        loss.backward()\n        opt.step()\n        total = total + loss\n"
            "    return total / len(loader)\nbest = float('inf')\nfor epoch in range(5):\n"
            "    avg = train_epoch(net, data, sgd)\n"
            "    writer.add_scalar('train/loss', avg, epoch)\n"
            "    if avg < best:\n        best = float(avg)\n"
            "    print(f'{epoch}: {avg:.4f}')\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def train_epoch(model, loader, opt):\n    total = 0\n    for x, y in loader:\n"
            "        loss = F.mse_loss(model(x), y)\n        loss.backward()\n        opt.step()\n"
            "        total = total + loss.item()\n    return total / len(loader)\n"
            "best = float('inf')\nfor epoch in range(5):\n    avg = train_epoch(net, data, sgd)\n"
            "    writer.add_scalar('train/loss', avg, epoch)\n"
            "    if avg < best:\n        best = float(avg)\n"
            "    print(f'{epoch}: {avg:.4f}')\n",
            lines=(9,),
        ),
        # A use that needs a tensor (`.cpu()`): `.item()` would break it, `.detach()` is safe.
        Invalid(
            "import torch\nimport torch.nn.functional as F\ntrain_loss = 0\n"
            "for x, y in loader:\n    loss = F.l1_loss(model(x), y)\n    loss.backward()\n"
            "    train_loss += loss\n"
            "train_loss /= len(loader)\nprint(train_loss.cpu())\n",
            fixed="import torch\nimport torch.nn.functional as F\ntrain_loss = 0\n"
            "for x, y in loader:\n    loss = F.l1_loss(model(x), y)\n    loss.backward()\n"
            "    train_loss += loss.detach()\n"
            "train_loss /= len(loader)\nprint(train_loss.cpu())\n",
            lines=(7,),
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\nrunning = 0.0\n"
            "for x, y in loader:\n    running += F.mse_loss(model(x), y)\n",
            fixed="import torch\nimport torch.nn.functional as F\nrunning = 0.0\n"
            "for x, y in loader:\n    running += F.mse_loss(model(x), y).detach()\n",
            notebook=True,
            lines=(5,),
        ),
        # A training-step helper returns the backpropagated loss; the caller sums it.
        Invalid(
            "import torch\nimport torch.nn.functional as F\ndef train_step(model, x, y, opt):\n"
            "    opt.zero_grad()\n    loss = F.cross_entropy(model(x), y)\n"
            "    loss.backward()\n    opt.step()\n    return loss\ntotal = 0.0\n"
            "for x, y in loader:\n    total += train_step(model, x, y, opt)\n"
            "print(total)\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def train_step(model, x, y, opt):\n    opt.zero_grad()\n"
            "    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n    opt.step()\n"
            "    return loss\ntotal = 0.0\n"
            "for x, y in loader:\n    total += train_step(model, x, y, opt).detach()\n"
            "print(total)\n",
            lines=(11,),
        ),
        # Across modules: the dict of engine.py holds the backpropagated loss; its 'loss' is
        # appended (`.detach()` applies), and so is the whole dict (no fix).
        Invalid(
            "import torch\nfrom engine import train_step\nhistory = []\nlogs = []\n"
            "for epoch in range(3):\n    for batch in loader:\n"
            "        out = train_step(model, batch, opt)\n        history.append(out['loss'])\n"
            "        logs.append(out)\n"
            "print(history)\n",
            fixed="import torch\nfrom engine import train_step\n"
            "history = []\nlogs = []\nfor epoch in range(3):\n    for batch in loader:\n"
            "        out = train_step(model, batch, opt)\n"
            "        history.append(out['loss'].detach())\n        logs.append(out)\n"
            "print(history)\n",
            files=(("engine.py", _ENGINE_PY),),
            lines=(8, 9),
        ),
        # The values of `.items()` of the returned dict: one of them carries the graph.
        Invalid(
            "import torch\nfrom engine import train_step\nmeters = {'loss': 0.0, 'acc': 0.0}\n"
            "for batch in loader:\n    for name, value in train_step(model, batch, opt).items():\n"
            "        meters[name] += value\n",
            fixed=None,
            files=(("engine.py", _ENGINE_PY),),
            lines=(6,),
        ),
        # Accelerate's backward, on an accelerator whose name says nothing.
        Invalid(
            "import torch\nfrom accelerate import Accelerator\nacc = Accelerator()\n"
            "model, opt, loader = acc.prepare(model, opt, loader)\ntotal_loss = 0\n"
            "for batch in loader:\n    outputs = model(**batch)\n    loss = outputs.loss\n"
            "    acc.backward(loss)\n    opt.step()\n    total_loss += loss\n"
            "print(total_loss / len(loader))\n",
            fixed="import torch\nfrom accelerate import Accelerator\n"
            "acc = Accelerator()\nmodel, opt, loader = acc.prepare(model, opt, loader)\n"
            "total_loss = 0\nfor batch in loader:\n    outputs = model(**batch)\n"
            "    loss = outputs.loss\n    acc.backward(loss)\n    opt.step()\n"
            "    total_loss += loss.detach()\n"
            "print(total_loss / len(loader))\n",
            lines=(11,),
        ),
        # The dict whose 'loss' was backpropagated is kept whole (no fix), and its loss too.
        Invalid(
            "import torch\noutputs = []\nlosses = []\nfor i, batch in enumerate(loader):\n"
            "    optimizer.zero_grad()\n    output = module.training_step(batch, i)\n"
            "    output['loss'].backward()\n    optimizer.step()\n    outputs.append(output)\n"
            "    losses.append(output['loss'])\n"
            "print(len(outputs), losses)\n",
            fixed=None,
            lines=(9, 10),
        ),
        # Across modules: a trainer's step backpropagates `losses.total` and returns `losses`;
        # the caller unpacks the losses and sums them with their graphs.
        Invalid(
            "import torch\nfrom trainer import Trainer\ntrainer = Trainer(model, opt)\ntotal_loss = 0.0\n"
            "for i, (x, y, box) in enumerate(gen):\n"
            "    cls, reg, total = trainer.train_step(x, y, box)\n"
            "    total_loss += total\n"
            "print(total_loss / len(gen))\n",
            fixed="import torch\nfrom trainer import Trainer\ntrainer = Trainer(model, opt)\ntotal_loss = 0.0\n"
            "for i, (x, y, box) in enumerate(gen):\n"
            "    cls, reg, total = trainer.train_step(x, y, box)\n"
            "    total_loss += total.detach()\n"
            "print(total_loss / len(gen))\n",
            files=(("trainer.py", _TRAINER_PY),),
            lines=(7,),
        ),
        # Across modules: the dict the loss function sums into the backpropagated loss is handed
        # back by the training step; its values are summed with their graphs.
        Invalid(
            _SOLVER,
            fixed=_SOLVER.replace("totals[name] += value", "totals[name] += value.item()"),
            files=(("losses.py", _LOSSES_PY),),
            lines=(18,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for node, acc, value in training.accumulations(sem):
            name = training.accumulator_name(acc)
            if name is None:
                continue
            held: str | None = summaries.TENSOR if training.holds_loss(sem, value) else None
            loop = None
            if held is None:
                # Through what helpers return (`total += train_step(...)`, `out["loss"]`):
                # asked only inside a loop that runs with gradients on.
                loop = summaries.iteration_loop(sem, node)
                if loop is None or training.grad_disabled(sem, node):
                    continue
                held = summaries.carried_graph(sem, value)
                if held is None or (held == summaries.CONTAINER and not isinstance(node, ast.Call)):
                    continue
            loop = loop or summaries.iteration_loop(sem, node)
            if loop is None or training.grad_disabled(sem, node):
                continue
            scope = sem.enclosing_function(node) or sem.tree
            # A loop that backpropagates each iteration (itself or in a helper it calls) cannot
            # mean to differentiate the total later; one that does not may be summing an
            # unrolled sequence for its caller.
            trains = summaries.trains(sem, loop.node.body)
            if training.rebound_in(sem, name, loop.node.body, node) or training.escapes(
                sem, name, scope, returns=not trains
            ):
                continue
            if isinstance(node, ast.Call) and not value_flow.is_list(ctx.sem, acc):
                continue
            flow = value_flow.follow(sem, acc, whole=ctx.notebook is not None)
            if not trains and flow.returned:
                continue  # terms of the loss a function returns (a loss module's forward)
            self._report(ctx, node, value, flow, tensor=held == summaries.TENSOR)

    @staticmethod
    def _report(
        ctx: Context, node: ast.AST, value: ast.expr, flow: value_flow.Flow, *, tensor: bool = True
    ) -> None:
        if not tensor:
            # A dict (or a value of one) that holds the loss: `.detach()` would not apply.
            ctx.report(
                value,
                Text(
                    "This value holds a loss with its autograd graph: every iteration's graph "
                    "stays in memory; keep `loss.detach()` or `loss.item()` instead",
                    "这个值带着损失及其计算图：每次迭代的计算图都留在内存里；"
                    "请改为保存 `loss.detach()` 或 `loss.item()`",
                ),
            )
            return
        text = ctx.segment(value)
        if not isinstance(value, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
            text = f"({text})"
        detach = Fix(
            Text("Add `.detach()`", "加上 `.detach()`"),
            (fixes.replace(ctx.source, value, f"{text}.detach()"),),
            Applicability.UNSAFE if flow.unsafe else Applicability.SAFE,
        )
        if isinstance(node, ast.Call):
            message = Text(
                "The loss is kept in a list with its autograd graph: every iteration's graph "
                "stays in memory; append `loss.detach()`",
                "损失连同其计算图被保存在列表中：每次迭代的计算图都留在内存里；请追加 `loss.detach()`",
            )
            choices = [detach]
        elif flow.tensor:
            # `.item()` would break a use that needs a tensor (`total.cpu()`, `torch.stack`).
            message = Text(
                "The loss is accumulated with its autograd graph: every iteration's graph "
                "stays in memory; add `loss.detach()`",
                "累加损失时带上了它的计算图：每次迭代的计算图都留在内存里；请加上 `loss.detach()`",
            )
            choices = [detach]
        else:
            message = Text(
                "The loss is accumulated with its autograd graph: every iteration's graph "
                "stays in memory; add `loss.item()` (or `loss.detach()`)",
                "累加损失时带上了它的计算图：每次迭代的计算图都留在内存里；请加上 `loss.item()`"
                "（或 `loss.detach()`）",
            )
            item = Fix(
                Text("Add `.item()`", "加上 `.item()`"),
                (fixes.replace(ctx.source, value, f"{text}.item()"),),
                Applicability.UNSAFE,
            )
            choices = [item, detach] if flow.unsafe else [detach, item]
        ctx.report(value, message, fixes=choices)
