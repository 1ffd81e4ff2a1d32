"""TDR103's VALID and INVALID examples: the rule (``rules/tdr103_loss_accumulated_with_graph.py``)
declares them as its own, and the rule tests run them."""

from __future__ import annotations

from ..base import Invalid, Valid

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


# A running meter of another module: it adds what ``update`` is handed.
_METER_PY = (
    "class AverageMeter:\n"
    "    def __init__(self):\n        self.sum, self.count = 0, 0\n"
    "    def update(self, val, n=1):\n"
    "        self.val = val\n        self.sum += val * n\n        self.count += n\n"
    "        self.avg = self.sum / self.count\n"
)
# A meter of several values: ``update`` adds each item of the list it is handed.
_METERS_PY = (
    "class Meters:\n"
    "    def __init__(self, n):\n        self._sum = [0] * n\n"
    "    def update(self, values):\n"
    "        for idx, v in enumerate(values):\n            self._sum[idx] += v\n"
)
# A runner whose training step backpropagates the sum of two losses a helper returns with
# them, and hands the two terms to its meter (SpareNet's runners).
_RUNNER_PY = (
    "import torch\nfrom meters import Meters\n"
    "class Runner:\n"
    "    def __init__(self, model, opt):\n"
    "        self.model, self.opt = model, opt\n        self.losses = Meters(2)\n"
    "    def completion(self, x, y):\n"
    "        out = self.model(x)\n"
    "        coarse = (out - y).abs().mean()\n        fine = (out - y).pow(2).mean()\n"
    "        total = coarse + fine * 0.5\n"
    "        return total, coarse, fine\n"
    "    def train_step(self, x, y):\n"
    "        total, coarse, fine = self.completion(x, y)\n"
    "        self.opt.zero_grad()\n        total.backward()\n        self.opt.step()\n"
    "        self.losses.update([coarse * 1000, fine * 1000])\n"
)
_METER_LOOP = (
    "import torch.nn.functional as F\nfrom meter import AverageMeter\nmeter = AverageMeter()\n"
    "for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n"
    "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
    "    meter.update(loss, x.size(0))\nprint(meter.avg)\n"
)


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
    "import torch\ntotal = 0\nfor x, y in loader:\n    out = model(x)\n    total += out.sum()\n",
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
    # Running meters handed numbers, or a meter that keeps only the last value.
    Valid(
        _METER_LOOP.replace("meter.update(loss,", "meter.update(loss.item(),"),
        files=(("meter.py", _METER_PY),),
    ),
    Valid(
        _RUNNER_PY.replace("[coarse * 1000, fine * 1000]", "[coarse.item(), fine.item()]"),
        filename="runner.py",
        files=(("meters.py", _METERS_PY),),
    ),
    Valid(
        _METER_LOOP,
        files=(
            (
                "meter.py",
                "class AverageMeter:\n    def update(self, val, n=1):\n        self.val = val\n",
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
    # A running meter of another module adds the loss it is handed, with its graph.
    Invalid(
        _METER_LOOP,
        fixed=_METER_LOOP.replace("meter.update(loss,", "meter.update(loss.item(),"),
        files=(("meter.py", _METER_PY),),
        lines=(9,),
    ),
    # A training step hands the terms of the loss it backpropagates to a meter kept on self,
    # which adds each item of the list.
    Invalid(
        _RUNNER_PY,
        fixed=_RUNNER_PY.replace("[coarse * 1000,", "[(coarse * 1000).item(),"),
        filename="runner.py",
        files=(("meters.py", _METERS_PY),),
        lines=(18, 18),
    ),
)
