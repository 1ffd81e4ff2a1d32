from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from functools import partial

from ..core import fixes, kinds, training
from ..core.context import Context
from ..core.evaluation import (
    Flow,
    Outcome,
    called_without_grad,
    callee,
    calls_train,
    forward_calls,
    frozen_models,
    grad_off_globally,
    mode_switch,
    referenced_as_value,
    repeats,
    safe_to_turn_grad_off,
    trains,
)
from ..core.kinds import Kind
from ..core.model import Applicability, Edit, Fix, Text
from ..core.semantic import dotted, terminal_name
from .base import Invalid, Rule, Valid

_EVAL_FUNCTION = re.compile(r"^_*(eval|valid|test|predict|infer)", re.I)
_EVAL_LOADER = re.compile(r"(^|_)(val|test|eval)", re.I)
# Lightning runs these with gradients already disabled.
_LIGHTNING_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
# A model class of another module (the multi-file examples' models.py).
_NET_PY = (
    "from torch import nn\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = nn.Linear(2, 2)\n"
    "    def forward(self, x):\n"
    "        return self.fc(x)\n"
)


@dataclass
class _Region:
    stmts: list[ast.stmt]  # the statements of one block that make up the region
    eval_call: ast.Call | None = None
    function: ast.FunctionDef | ast.AsyncFunctionDef | None = None  # a function region


class EvalWithoutNoGrad(Rule):
    """## What it does
    Checks for forward calls of a model that run again and again in evaluation code with
    gradient tracking on. Evaluation code is the statements after `model.eval()` (up to a later
    `model.train()`), a function whose name starts with `eval`, `valid`, `test`, `predict` or
    `infer`, or a loop over a loader whose name contains `val` or `test`. The forward must
    repeat: it runs inside a loop whose items reach the forward (whatever the iterable is
    called: `val_loader`, `val_data`, `data`), a loop over `range(...)`, a `while` loop, or a loop that appends or adds its output to something made
    before the loop. It is reported when it is not under `torch.no_grad()`,
    `torch.inference_mode()` or `torch.set_grad_enabled(False)`.

    Not reported:

    - a single forward (a demo cell, `predict(sentence)`, one batch to plot): its graph lives
      only until the output is dropped;
    - regions that need autograd: a backward pass, `torch.autograd`/`torch.func`, an optimizer
      step, `requires_grad_()`, gradients turned back on — in the region or in a function it
      calls, of the file or of another module of the project — or the forward of a model the analysis cannot see into called with a
      constant flag (`model(im, label, make_adv=True)`: robustness's `AttackerModel` runs a PGD
      attack inside `forward`);
    - regions whose results are backpropagated later (followed through assignments, lists,
      returns and the callers of the function);
    - tests (`test_*.py`, `*_test.py`, `tests.py`, `conftest.py`, files under `tests/`,
      pytest-decorated functions, `test_*` functions without a loop over a loader, unittest
      cases), Lightning's evaluation hooks, methods of `nn.Module` classes, functions only
      called with gradients off or whose result is backpropagated, and functions never called
      in the file but passed around as values (detectron2's `inference_on_dataset` runs them
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

    VALID = (
        # Already correct, in each spelling.
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
        "with torch.no_grad():\n    for x in test_loader:\n        y = model(x.cuda())\n",
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
        "with torch.inference_mode():\n    for x in test_loader:\n        y = model(x.cuda())\n",
        "import torch as T\nmodel = T.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
        "T.set_grad_enabled(False)\nfor x in test_loader:\n    y = model(x.cuda())\n",
        "from torch import no_grad\n@no_grad()\ndef evaluate(model, loader):\n"
        "    model.eval()\n    for x in loader:\n        model(x.cuda())\n",
        "import torch\n@torch.inference_mode()\ndef predict(model, loader):\n"
        "    return [model(x.cuda()) for x in loader]\n",
        # `torch` through a star import (sgrvinod's eval.py: `from utils import *`).
        "from utils import *\nmodel = torch.load('model.pt')\nmodel.eval()\nwith torch.no_grad():\n"
        "    for images in test_loader:\n        out = model(images.to(device))\n",
        # A project's own wrapper around inference_mode / no_grad.
        "import torch\nfrom utils import smart_inference_mode\n@smart_inference_mode()\n"
        "def run(model, loader):\n    model.eval()\n"
        "    return [model(x.cuda()) for x in loader]\n",
        # A single forward: a demo cell, one sentence, one batch to plot.
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
        "images, labels = next(iter(val_loader))\nout = model(images.cuda())\nprint(out[:5])\n",
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
        "def predict_sentiment(model, tensor):\n    model.eval()\n"
        "    return torch.sigmoid(model(tensor.cuda())).item()\n"
        "predict_sentiment(model, x)\n",
        # A loop over a few models is not a loop over data.
        "import torch\nmodels = [torch.nn.Linear(2, 2).cuda() for _ in range(3)]\n"
        "for m in models:\n    m.eval()\n    print(m(x_test.cuda()).argmax(1))\n",
        # A smoke test in a model file: `test` without a loader is not an evaluation loop.
        "import torch\nclass Net(torch.nn.Module):\n    pass\n"
        "def test():\n    net = Net().cuda()\n    for _ in range(3):\n"
        "        print(net(torch.randn(1, 3, device='cuda')).shape)\n",
        # A backward pass in the region: gradients are wanted (adversarial examples, Grad-CAM).
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
        "for x in test_loader:\n    x = x.cuda().requires_grad_()\n"
        "    model(x).sum().backward()\n",
        "import torch\ndef test(model, x):\n    out = model(x.cuda())\n"
        "    g = torch.autograd.grad(out.sum(), x)\n    return g\n",
        # A helper of the file that differentiates, called in the loop.
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
        "def saliency(x):\n    x.requires_grad_()\n    model(x).max().backward()\n"
        "    return x.grad\n"
        "model.eval()\nfor x in test_loader:\n    s = saliency(x.cuda())\n"
        "    print(model(x.cuda()).argmax(1), s.shape)\n",
        # A model the analysis cannot see into, called with a mode flag: robustness's
        # AttackerModel runs a PGD attack inside forward when `make_adv=True`.
        "import torch\nfrom robustness.model_utils import make_and_restore_model\n"
        "model, _ = make_and_restore_model(arch='resnet50', dataset=ds)\nmodel.eval()\n"
        "for im, label in test_loader:\n"
        "    _, im_adv = model(im.cuda(), label.cuda(), make_adv=True, **kwargs)\n"
        "    pred, _ = model(im_adv)\n",
        # The grad mode is chosen by a flag.
        "import torch\ndef validate(model, loader, train):\n    model.eval()\n"
        "    with torch.set_grad_enabled(train):\n        for x in loader:\n"
        "            model(x.cuda())\n",
        # eval() then train(): the forward call is back in training mode.
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\nmodel.train()\n"
        "for x in train_loader:\n    y = model(x.cuda())\n    loss_fn(y).backward()\n",
        # What the evaluation loop computes is backpropagated later, through a return.
        "import torch\nbackbone = torch.nn.Linear(4, 4).cuda()\n"
        "head = torch.nn.Linear(4, 2).cuda()\n"
        "def features(model, val_loader):\n    out = []\n    for x in val_loader:\n"
        "        out.append(model(x.cuda()))\n    return torch.cat(out)\n"
        "f = features(backbone, val_loader)\nhead(f).sum().backward()\n",
        # A loss module is not a model.
        "import torch\ncriterion = torch.nn.CrossEntropyLoss()\n"
        "def evaluate(val_loader):\n"
        "    return [criterion(o.cuda(), y.cuda()) for o, y in val_loader]\n",
        # pytest files and unittest test cases.
        Valid(
            "import torch\ndef test_forward():\n    model = torch.nn.Linear(2, 2).cuda()\n"
            "    model.eval()\n    for n in range(3):\n"
            "        assert model(torch.ones(2).cuda()).shape == (2,)\n",
            filename="test_model.py",
        ),
        Valid(
            "import torch\ndef check_cache():\n    att = torch.nn.Linear(8, 8).cuda()\n"
            "    att.eval()\n    for _ in range(4):\n        att(torch.ones(8).cuda())\n",
            filename="tests.py",
        ),
        "import torch\nimport pytest\n@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_shapes(n):\n    model = torch.nn.Linear(n, 2).cuda()\n    model.eval()\n"
        "    for _ in range(3):\n        assert model(torch.ones(n).cuda()).shape == (2,)\n",
        "import torch\ndef test_kv_cache():\n    model = torch.nn.Linear(2, 2).cuda()\n"
        "    model.eval()\n    for step in range(3):\n        model(torch.ones(2).cuda())\n",
        "import torch\nimport unittest\nclass T(unittest.TestCase):\n"
        "    def test_forward(self):\n        model = torch.nn.Linear(2, 2).cuda()\n"
        "        model.eval()\n        for x in test_loader:\n"
        "            self.assertEqual(model(x.cuda()).shape, (2,))\n",
        # Lightning disables gradients in its evaluation hooks.
        "import torch\nimport lightning as L\nclass Lit(L.LightningModule):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.net = torch.nn.Linear(2, 2)\n"
        "    def validation_step(self, loader, idx):\n"
        "        return [self.net(b.cuda()) for b in loader]\n",
        "import torch\nclass Lit:\n    def __init__(self):\n"
        "        self.model = torch.nn.Linear(2, 2).cuda()\n"
        "    def test_step(self, loader, idx):\n"
        "        return [self.model(b.cuda()) for b in loader]\n",
        # A nested function is not run by the region itself.
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
        "def later(loader):\n    return [model(x.cuda()) for x in loader]\n",
        # The evaluation function is only called with gradients off.
        "import torch\nnet = torch.nn.Linear(2, 2).cuda()\n"
        "def evaluate(model, loader):\n    return [model(x.cuda()) for x in loader]\n"
        "with torch.no_grad():\n    evaluate(net, val_loader)\n",
        # Never called here, only handed to code that runs it (detectron2's
        # inference_on_dataset turns gradients off itself).
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
        "def eval_wrapper(loader):\n    return [model(x.cuda()) for x in loader]\n"
        "inference_on_dataset(eval_wrapper, val_loader)\n",
        # Named like an evaluation function, but its result is backpropagated by the caller.
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
        "def eval_loss(loader):\n    return sum(model(x.cuda()).sum() for x in loader)\n"
        "def train(xs):\n    loss = eval_loss(xs) * 2\n    loss.backward()\n",
        # A parameter that callers fill with something other than a model.
        "import torch\n"
        "def predict(fn, loader):\n    return [fn(x.cuda()) for x in loader]\n"
        "model = torch.nn.Linear(2, 2)\n"
        "a = predict(model, val_loader)\nb = predict(len, val_loader)\n",
        # Gradients turned off for the whole script.
        "import torch\ntorch.set_grad_enabled(False)\nmodel = torch.nn.Linear(2, 2).cuda()\n"
        "def predict(loader):\n    return [model(x.cuda()) for x in loader]\n",
        # A frozen model builds no graph.
        "import torch\nteacher = torch.nn.Linear(2, 2).cuda()\nteacher.requires_grad_(False)\n"
        "teacher.eval()\nfor x in train_loader:\n    soft = teacher(x.cuda())\n",
        # Not a model: a user object whose .eval() is something else.
        "import torch\nclass Expr:\n    def eval(self):\n        return 1\n"
        "def evaluate(loader):\n"
        "    return [e.eval() for e in loader if torch.cuda.is_available()]\n",
        # Methods of an nn.Module: the caller decides the grad mode.
        "import torch\nclass Net(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.body = torch.nn.Linear(2, 2)\n"
        "    def predict(self, loader):\n"
        "        return [self.body(x.cuda()) for x in loader]\n",
        # A model whose base class the file cannot resolve (transformers' relative imports): its
        # predict* helpers run inside forward, during training too.
        "import torch\nfrom torch import nn\nfrom ...modeling_utils import PreTrainedModel\n"
        "class Seg(PreTrainedModel):\n"
        "    def __init__(self, config):\n        super().__init__(config)\n"
        "        self.class_predictor = nn.Linear(8, 3)\n"
        "    def forward(self, x):\n        return self.predict(x)\n"
        "    def predict(self, loader):\n"
        "        return [self.class_predictor(x.cuda()) for x in loader]\n",
        # A training loop that does not mention an evaluation loader.
        "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nfor x in train_loader:\n"
        "    loss = model(x.cuda()).sum()\n    loss.backward()\n",
        # Notebook: the eval() and the guarded loop in one cell.
        Valid(
            "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
            "with torch.no_grad():\n    for x in val_loader:\n        y = model(x.cuda())\n",
            notebook=True,
        ),
        # The evaluation loop calls an attack of another module that backpropagates.
        Valid(
            "import torch\nfrom attacks import pgd\n"
            "model = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
            "for x in val_loader:\n"
            "    x_adv = pgd(model, x.cuda())\n"
            "    y = model(x_adv)\n",
            files=(
                (
                    "attacks.py",
                    "import torch\n"
                    "def pgd(model, x):\n"
                    "    x = x.clone().requires_grad_(True)\n"
                    "    model(x).sum().backward()\n"
                    "    return (x + 0.01 * x.grad.sign()).detach()\n",
                ),
            ),
        ),
        # `model = model.cuda()` keeps the model evaluated before it: the training after it
        # is still part of the region, which needs autograd.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\nmodel = model.cuda()\n"
        "for x, y in loader:\n    loss = model(x.cuda()).sum()\n    loss.backward()\n",
        # A loop over a literal tuple runs a fixed handful of forwards.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "for size in (1, 8):\n    print(model(torch.randn(size, 2)).shape)\n",
        # The loop's items never reach the forward: one input, printed once per name.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nx = torch.randn(1, 2)\nmodel.eval()\n"
        "y = model(x)\nfor name in names:\n    print(name, y)\n",
        # Loaders kept in a dict: the validation loop runs under no_grad.
        "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n"
        "model = nn.Linear(4, 2).cuda()\n"
        "loaders = {'train': DataLoader(train_ds, 32), 'val': DataLoader(val_ds, 32)}\n"
        "model.eval()\n"
        "with torch.no_grad():\n"
        "    for x, y in loaders['val']:\n"
        "        print(model(x.cuda()).argmax(1).tolist())\n",
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "import torchvision\n"
            "def evaluate(model, val_loader, device):\n"
            "    model.eval()\n"
            "    correct = 0\n"
            "    for x, y in val_loader:\n"
            "        x, y = x.to(device), y.to(device)\n"
            "        correct += (model(x).argmax(1) == y).sum().item()\n"
            "    return correct\n"
            "device = torch.device('cuda')\n"
            "model = torchvision.models.resnet18().to(device)\n"
            "print(evaluate(model, val_loader, device))\n",
            fixed="import torch\n"
            "import torchvision\n"
            "def evaluate(model, val_loader, device):\n"
            "    model.eval()\n"
            "    correct = 0\n"
            "    with torch.no_grad():\n"
            "        for x, y in val_loader:\n"
            "            x, y = x.to(device), y.to(device)\n"
            "            correct += (model(x).argmax(1) == y).sum().item()\n"
            "    return correct\n"
            "device = torch.device('cuda')\n"
            "model = torchvision.models.resnet18().to(device)\n"
            "print(evaluate(model, val_loader, device))\n",
            lines=(8,),
        ),
        # Statements after model.eval() at module level; the import is added.
        Invalid(
            "from torch import nn\n"
            "model = nn.Linear(4, 2).cuda()\n"
            "model.eval()\n"
            "for batch in test_loader:\n"
            "    preds = model(batch.cuda())\n"
            "    print(preds.argmax(1).tolist())\n",
            fixed="import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2).cuda()\n"
            "model.eval()\nwith torch.no_grad():\n    for batch in test_loader:\n"
            "        preds = model(batch.cuda())\n        print(preds.argmax(1).tolist())\n",
            lines=(5,),
        ),
        # A notebook-like script: the evaluation of one model, then a new model trained under
        # the same name (it starts in training mode, so the first evaluation ends there).
        Invalid(
            "import torch\n"
            "from torch import nn\n"
            "model = nn.Linear(4, 2).cuda()\n"
            "model.eval()\n"
            "for batch in test_loader:\n"
            "    print(model(batch.cuda()).argmax(1))\n"
            "model = nn.Linear(4, 2).cuda()\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x, y in train_loader:\n"
            "    opt.zero_grad()\n"
            "    nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()\n"
            "    opt.step()\n",
            fixed="import torch\n"
            "from torch import nn\n"
            "model = nn.Linear(4, 2).cuda()\n"
            "model.eval()\n"
            "with torch.no_grad():\n"
            "    for batch in test_loader:\n"
            "        print(model(batch.cuda()).argmax(1))\n"
            "model = nn.Linear(4, 2).cuda()\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x, y in train_loader:\n"
            "    opt.zero_grad()\n"
            "    nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()\n"
            "    opt.step()\n",
            lines=(6,),
        ),
        # An alias of torch is reused; a loop over a test loader needs no eval().
        Invalid(
            "import torch as T\n"
            "net = T.nn.Sequential(T.nn.Linear(4, 2)).to('cuda')\n"
            "for x in test_loader:\n"
            "    out = net(x.to('cuda'))\n",
            fixed="import torch as T\n"
            "net = T.nn.Sequential(T.nn.Linear(4, 2)).to('cuda')\n"
            "with T.no_grad():\n"
            "    for x in test_loader:\n"
            "        out = net(x.to('cuda'))\n",
            lines=(4,),
        ),
        # A class of the file whose forward the analysis can see.
        Invalid(
            "import torch\n"
            "import torch.nn.functional as F\n"
            "class Net(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.fc = torch.nn.Linear(4, 2)\n"
            "    def forward(self, x):\n"
            "        return F.relu(self.fc(x))\n"
            "model = Net().cuda()\n"
            "model.eval()\n"
            "test_loss = 0.0\n"
            "for x, y in test_loader:\n"
            "    x, y = x.cuda(), y.cuda()\n"
            "    test_loss += F.cross_entropy(model(x), y).item()\n"
            "print(test_loss)\n",
            fixed="import torch\n"
            "import torch.nn.functional as F\n"
            "class Net(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.fc = torch.nn.Linear(4, 2)\n"
            "    def forward(self, x):\n"
            "        return F.relu(self.fc(x))\n"
            "model = Net().cuda()\n"
            "model.eval()\n"
            "test_loss = 0.0\n"
            "with torch.no_grad():\n"
            "    for x, y in test_loader:\n"
            "        x, y = x.cuda(), y.cuda()\n"
            "        test_loss += F.cross_entropy(model(x), y).item()\n"
            "print(test_loss)\n",
            lines=(14,),
        ),
        # The eval region of an epoch loop ends at the loop body's end; the training part
        # before it has its backward pass.
        Invalid(
            "import torch\n"
            "model = torch.nn.Linear(2, 2).cuda()\n"
            "for epoch in range(3):\n"
            "    model.train()\n"
            "    for x in train_loader:\n"
            "        model(x.cuda()).sum().backward()\n"
            "    model.eval()\n"
            "    for x in val_loader:\n"
            "        out = model(x.cuda())\n"
            "    print(epoch)\n",
            fixed="import torch\n"
            "model = torch.nn.Linear(2, 2).cuda()\n"
            "for epoch in range(3):\n"
            "    model.train()\n"
            "    for x in train_loader:\n"
            "        model(x.cuda()).sum().backward()\n"
            "    model.eval()\n"
            "    with torch.no_grad():\n"
            "        for x in val_loader:\n"
            "            out = model(x.cuda())\n"
            "    print(epoch)\n",
            lines=(9,),
        ),
        # One forward per epoch whose output is kept: every epoch's graph stays alive.
        Invalid(
            "import torch\n"
            "G = torch.nn.Linear(8, 4).cuda()\n"
            "fixed_z = torch.randn(16, 8, device='cuda')\n"
            "samples = []\n"
            "for epoch in range(3):\n"
            "    G.eval()\n"
            "    samples.append(G(fixed_z))\n"
            "    G.train()\n"
            "torch.save(samples, 'samples.pt')\n",
            fixed="import torch\n"
            "G = torch.nn.Linear(8, 4).cuda()\n"
            "fixed_z = torch.randn(16, 8, device='cuda')\n"
            "samples = []\n"
            "for epoch in range(3):\n"
            "    G.eval()\n"
            "    with torch.no_grad():\n"
            "        samples.append(G(fixed_z))\n"
            "    G.train()\n"
            "torch.save(samples, 'samples.pt')\n",
            lines=(7,),
        ),
        # The loop also runs an attack the analysis cannot see into: only the forward
        # statement is wrapped.
        Invalid(
            "import torch\n"
            "import torchvision\n"
            "from attacks import pgd\n"
            "model = torchvision.models.resnet18().cuda()\n"
            "model.eval()\n"
            "correct = 0\n"
            "for x, y in test_loader:\n"
            "    x, y = x.cuda(), y.cuda()\n"
            "    x_adv = pgd(model, x, y)\n"
            "    correct += (model(x_adv).argmax(1) == y).sum().item()\n",
            fixed="import torch\n"
            "import torchvision\n"
            "from attacks import pgd\n"
            "model = torchvision.models.resnet18().cuda()\n"
            "model.eval()\n"
            "correct = 0\n"
            "for x, y in test_loader:\n"
            "    x, y = x.cuda(), y.cuda()\n"
            "    x_adv = pgd(model, x, y)\n"
            "    with torch.no_grad():\n"
            "        correct += (model(x_adv).argmax(1) == y).sum().item()\n",
            lines=(10,),
        ),
        # A model class imported from elsewhere: reported, but no fix (its forward may need
        # autograd, the analysis cannot tell).
        Invalid(
            "import torch\n"
            "from mymodels import Net\n"
            "model = Net().cuda()\n"
            "model.eval()\n"
            "for x, y in test_loader:\n"
            "    out = model(x.cuda())\n"
            "    print(out.argmax(1).eq(y.cuda()).sum().item())\n",
            fixed=None,
            lines=(6,),
        ),
        # The outputs go to a helper the analysis cannot see: no fix.
        Invalid(
            "import torch\n"
            "from metrics import update_confusion\n"
            "model = torch.nn.Linear(2, 2).cuda()\n"
            "model.eval()\n"
            "for x, y in val_loader:\n"
            "    logits = model(x.cuda())\n"
            "    update_confusion(logits, y)\n",
            fixed=None,
            lines=(6,),
        ),
        # A model held on self.
        Invalid(
            "import torch\n"
            "class Evaluator:\n"
            "    def __init__(self):\n"
            "        self.model = torch.nn.Linear(2, 2).cuda()\n"
            "    def run(self, loader):\n"
            "        self.model.eval()\n"
            "        total = 0.0\n"
            "        for x in loader:\n"
            "            total += self.model(x.cuda()).sum().item()\n"
            "        return total\n",
            fixed="import torch\n"
            "class Evaluator:\n"
            "    def __init__(self):\n"
            "        self.model = torch.nn.Linear(2, 2).cuda()\n"
            "    def run(self, loader):\n"
            "        self.model.eval()\n"
            "        total = 0.0\n"
            "        with torch.no_grad():\n"
            "            for x in loader:\n"
            "                total += self.model(x.cuda()).sum().item()\n"
            "        return total\n",
            lines=(9,),
        ),
        # A notebook cell.
        Invalid(
            "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
            "for x in val_loader:\n    y = model(x.cuda())\n",
            fixed="import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.eval()\n"
            "with torch.no_grad():\n    for x in val_loader:\n        y = model(x.cuda())\n",
            notebook=True,
            lines=(5,),
        ),
        # The model is a class of another module, held on `self` and evaluated in a method.
        Invalid(
            "import torch\nfrom models import Net\n"
            "class Trainer:\n"
            "    def __init__(self, val_loader):\n"
            "        self.model = Net().cuda()\n"
            "        self.val_loader = val_loader\n"
            "    def run_validation(self):\n"
            "        self.model.eval()\n"
            "        for x in self.val_loader:\n"
            "            out = self.model(x.cuda())\n",
            fixed="import torch\nfrom models import Net\n"
            "class Trainer:\n"
            "    def __init__(self, val_loader):\n"
            "        self.model = Net().cuda()\n"
            "        self.val_loader = val_loader\n"
            "    def run_validation(self):\n"
            "        self.model.eval()\n"
            "        with torch.no_grad():\n"
            "            for x in self.val_loader:\n"
            "                out = self.model(x.cuda())\n",
            files=(("models.py", _NET_PY),),
            lines=(10,),
        ),
        # The iterable's name says nothing (`val_data`): its items are fed to the forward.
        Invalid(
            "import torch\n"
            "model = torch.nn.Linear(2, 2)\n"
            "val_data = [(torch.randn(4, 2), torch.randn(4)) for _ in range(8)]\n"
            "model.eval()\n"
            "correct = 0\n"
            "for x, y in val_data:\n"
            "    correct += (model(x).argmax(1) == y).sum().item()\n",
            fixed="import torch\n"
            "model = torch.nn.Linear(2, 2)\n"
            "val_data = [(torch.randn(4, 2), torch.randn(4)) for _ in range(8)]\n"
            "model.eval()\n"
            "correct = 0\n"
            "with torch.no_grad():\n"
            "    for x, y in val_data:\n"
            "        correct += (model(x).argmax(1) == y).sum().item()\n",
            lines=(7,),
        ),
        # On the CPU too: the loop keeps autograd's bookkeeping whatever the device.
        Invalid(
            "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
            "for x, y in test_loader:\n    print((model(x).argmax(1) == y).sum().item())\n",
            fixed="import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
            "with torch.no_grad():\n    for x, y in test_loader:\n"
            "        print((model(x).argmax(1) == y).sum().item())\n",
            lines=(5,),
        ),
        # `self.model` holds a constructor parameter: a module by its use (`.eval()`). Its
        # forward cannot be read, so no fix.
        Invalid(
            "import torch\n"
            "class Evaluator:\n"
            "    def __init__(self, model, data):\n"
            "        self.model = model\n"
            "        self.data = data\n"
            "    def run(self):\n"
            "        self.model.eval()\n"
            "        outs = []\n"
            "        for batch in self.data:\n"
            "            outs.append(self.model(batch).argmax(1))\n"
            "        return outs\n",
            fixed=None,
            lines=(10,),
        ),
        # torch, nn and DataLoader come from a star import of a project module.
        Invalid(
            "from models.common import *\n"
            "model = nn.Linear(2, 2)\n"
            "model.eval()\n"
            "for x in DataLoader(torch.randn(64, 2), batch_size=8):\n"
            "    print(model(x).sum().item())\n",
            fixed="from models.common import *\n"
            "model = nn.Linear(2, 2)\n"
            "model.eval()\n"
            "with torch.no_grad():\n"
            "    for x in DataLoader(torch.randn(64, 2), batch_size=8):\n"
            "        print(model(x).sum().item())\n",
            files=(
                ("models/__init__.py", ""),
                (
                    "models/common.py",
                    "import torch\nimport torch.nn as nn\n"
                    "from torch.utils.data import DataLoader\n",
                ),
            ),
            lines=(5,),
        ),
        # An evaluation helper with no device in its module; the caller runs it on the GPU.
        Invalid(
            "import torch\n"
            "def evaluate(model, loader):\n"
            "    model.eval()\n"
            "    correct = 0\n"
            "    for x, y in loader:\n"
            "        correct += (model(x).argmax(1) == y).sum().item()\n"
            "    return correct\n",
            fixed=None,
            filename="evaluation.py",
            files=(
                (
                    "train.py",
                    "import torch\nfrom evaluation import evaluate\n"
                    "model = torch.nn.Linear(2, 2).cuda()\nprint(evaluate(model, loader))\n",
                ),
            ),
            lines=(6,),
        ),
        # Loaders kept in a dict (filled by item), the loop over one of them.
        Invalid(
            "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n"
            "model = nn.Linear(4, 2).cuda()\n"
            "loaders = {}\n"
            "loaders['train'] = DataLoader(train_ds, 32, shuffle=True)\n"
            "loaders['val'] = DataLoader(val_ds, 32)\n"
            "model.eval()\n"
            "for x, y in loaders['val']:\n"
            "    print(model(x.cuda()).argmax(1).tolist())\n",
            fixed="import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n"
            "model = nn.Linear(4, 2).cuda()\n"
            "loaders = {}\n"
            "loaders['train'] = DataLoader(train_ds, 32, shuffle=True)\n"
            "loaders['val'] = DataLoader(val_ds, 32)\n"
            "model.eval()\n"
            "with torch.no_grad():\n"
            "    for x, y in loaders['val']:\n"
            "        print(model(x.cuda()).argmax(1).tolist())\n",
            lines=(10,),
        ),
    )

    def check(self, ctx: Context) -> None:
        if _is_test_file(ctx.path) or grad_off_globally(ctx):
            return
        regions = self._regions(ctx)
        if not regions:
            return
        frozen = frozen_models(ctx)
        claimed: set[ast.Call] = set()
        for region in regions:
            if trains(ctx, region.stmts):
                continue
            forwards = forward_calls(ctx, region.stmts)
            if any(mode_switch(ctx, call) for call in forwards):
                continue  # the forward may run an attack or another gradient computation
            calls = [
                call
                for call in forwards
                if not training.grad_disabled(ctx.sem, call)
                and dotted(callee(call)) not in frozen
                and repeats(ctx, call)
            ]
            if not calls or any(call in claimed for call in calls):
                continue
            claimed.update(calls)
            stmts = _covering(ctx, region.stmts, calls)
            if Flow(ctx, stmts).outcome() is Outcome.AUTOGRAD:
                continue  # what the region computes is backpropagated later
            self._report(ctx, region, calls, stmts)

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
            receiver = dotted(call.func.value)
            for item in block[index + 1 :]:
                if _ends_eval_mode(item, receiver) or calls_train(ctx, item):
                    break
                following.append(item)
            if trains(ctx, following):
                continue
            for part in _split_by_cell(ctx, following):
                regions.append(_Region(part, eval_call=call))
        for loop in training.all_loops(sem):
            if not isinstance(loop.node, ast.For | ast.AsyncFor) or not any(
                _EVAL_LOADER.search(terminal_name(candidate) or "")
                for candidate in training.iterated_candidates(loop.node.iter)
            ):
                continue  # what it iterates is not named like an evaluation loader
            name = terminal_name(loop.loader) if loop.loader is not None else None
            if name and _EVAL_LOADER.search(name) and not _skipped_place(ctx, loop.node):
                regions.append(_Region([loop.node]))
        for func in sem.functions:
            match = _EVAL_FUNCTION.match(func.name)
            if match is None or _skipped_place(ctx, func.body[0]):
                continue
            # `test` also names unit and smoke tests: require a loop over a loader.
            if match.group(1).lower() == "test" and not _has_batch_loop(ctx, func):
                continue
            regions.append(_Region(list(func.body), function=func))
        return regions

    # -- reporting -----------------------------------------------------------------------
    def _report(
        self, ctx: Context, region: _Region, calls: list[ast.Call], stmts: list[ast.stmt]
    ) -> None:
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
        target = ctx.segment(callee(first))
        if len(target) > 40:
            target = "model"
        message = Text(
            f"`{target}(...)` is evaluated without `torch.no_grad()` or "
            "`torch.inference_mode()`, so autograd keeps activations for a backward pass that "
            "never runs",
            f"评估时调用 `{target}(...)` 未使用 `torch.no_grad()` 或 `torch.inference_mode()`，"
            "autograd 会为永远不会发生的反向传播保留激活值",
        )
        ctx.report(first, message, fixes=partial(_no_grad_fix, ctx, stmts, calls), related=related)


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
    for call in calls:
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


# ---- helpers ---------------------------------------------------------------------------------
def _is_test_file(path: str) -> bool:
    """A file pytest collects (``test_*.py``, ``*_test.py``), a ``tests.py``, a
    ``conftest.py``, or a file under a ``tests/`` folder."""
    base = os.path.basename(path)
    parts = re.split(r"[\\/]", path)[:-1]
    return base.endswith(".py") and (
        base.startswith("test_")
        or base.endswith("_test.py")
        or base in ("tests.py", "conftest.py")
        or "tests" in parts
    )


def _ends_eval_mode(stmt: ast.stmt, receiver: str | None) -> bool:
    """Whether ``stmt`` ends what a ``receiver.eval()`` before it governs: it binds
    ``receiver`` to another value (a new model starts in training mode), or switches it to
    evaluation again (the region of that call follows from there)."""
    if receiver is None:
        return False
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(dotted(t) == receiver for t in targets) or stmt.value is None:
            return False
        # `model = model.to(device)`, `model = DDP(model)`: the same model, still evaluating.
        return not any(
            isinstance(n, ast.Name | ast.Attribute) and dotted(n) == receiver
            for n in ast.walk(stmt.value)
        )
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "eval"
            and not stmt.value.args
            and dotted(func.value) == receiver
        )
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
    """Test cases, Lightning hooks, nn.Module methods, functions only called without grad or
    whose result is backpropagated, and functions only passed around as values."""
    sem = ctx.sem
    func = sem.enclosing_function(node)
    while func is not None:
        if any(
            (ctx.qualname(_decorator_target(d)) or "").startswith("pytest.")
            for d in func.decorator_list
        ):
            return True
        if func.name.startswith("test_") and not _has_batch_loop(ctx, func):
            return True  # a pytest-style test, not an evaluation over data
        cls = sem.parent(func)
        if isinstance(cls, ast.ClassDef):
            if func.name in _LIGHTNING_STEPS:
                return True
            bases = sem.class_bases(cls)
            if any(b.rsplit(".", 1)[-1] in ("TestCase", "LightningModule") for b in bases):
                return True
            if kinds.class_kind(sem, cls) is Kind.MODULE or _defines_forward(cls):
                return True
        if called_without_grad(ctx, func) or _only_passed_as_value(ctx, func):
            return True
        func = sem.enclosing_function(func)
    return False


def _has_batch_loop(ctx: Context, func: ast.AST) -> bool:
    return any(
        loop.is_batch_loop and ctx.sem.enclosing_function(loop.node) is func
        for loop in training.all_loops(ctx.sem)
    )


def _only_passed_as_value(ctx: Context, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Never called in the file but handed to other code (``inference_on_dataset(model,
    ...)`` with ``model = eval_wrapper``, ``return eval_wrapper``): that code decides the grad
    mode, and usually turns gradients off."""
    sem = ctx.sem
    if sem.calls_by_name.get(func.name) or sem.calls_by_attr.get(func.name):
        return False
    return referenced_as_value(sem, func)


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


def _earlier_eval(ctx: Context, call: ast.Call) -> ast.Call | None:
    """A ``.eval()`` call on the same model earlier in the same function, if any."""
    want = dotted(callee(call))
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
