"""TDR105's VALID and INVALID examples: the rule (``rules/tdr105_eval_without_no_grad.py``)
declares them as its own, and the rule tests run them."""

from __future__ import annotations

from ..base import Invalid, Valid

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

# A trainer whose text never names torch: its batches and model come from the project's modules,
# one of which (reached through a package's __init__.py) imports torch.
_TRAINER_PY = (
    "import pkg.inputs as inputs\n"
    "from pkg.meter import Stats\n"
    "\n"
    "class Trainer(object):\n"
    "    def __init__(self, model, valid_loss):\n"
    "        self.model = model\n"
    "        self.valid_loss = valid_loss\n"
    "\n"
    "    def validate(self, valid_iter):\n"
    "        self.model.eval()\n"
    "        stats = Stats()\n"
    "        for batch in valid_iter:\n"
    "            src = inputs.features(batch)\n"
    "            out = self.model(src)\n"
    "            stats.update(self.valid_loss(out, batch.tgt))\n"
    "        self.model.train()\n"
    "        return stats\n"
)
_TRAINER_FILES = (
    ("pkg/__init__.py", ""),
    ("pkg/inputs/__init__.py", "from pkg.inputs.features import features\n"),
    ("pkg/meter.py", "class Stats:\n    def update(self, value):\n        self.last = value\n"),
)

# A translator that keeps the model a builder of another module switched to evaluation mode and
# returned in a tuple; its beam search runs a part of the model once per step (OpenNMT-py).
_TRANSLATOR_PY = (
    "import torch\n"
    "import tools.builder\n"
    "\n"
    "def build_translator(path):\n"
    "    opt, model, cfg = tools.builder.load_test_model(path)\n"
    "    return Translator(model, max_length=10)\n"
    "\n"
    "class Translator(object):\n"
    "    def __init__(self, model, max_length=100):\n"
    "        self.model = model\n"
    "        self.max_length = max_length\n"
    "\n"
    "    def translate_batch(self, x):\n"
    "        steps = []\n"
    "        for i in range(self.max_length):\n"
    "            x = self.model.fc(x)\n"
    "            steps.append(x.argmax(1))\n"
    "        return steps\n"
)
_BUILDER_PY = (
    "import torch\n"
    "from models import Net\n"
    "def load_test_model(path):\n"
    "    model = Net()\n"
    "    model.load_state_dict(torch.load(path))\n"
    "    model.eval()\n"
    "    return path, model, {}\n"
)
_TRANSLATOR_FILES = (("tools/__init__.py", ""), ("models.py", _NET_PY))


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
    # A helper that runs the model it is handed, already under no_grad inside.
    "import torch\n"
    "@torch.no_grad()\n"
    "def loss_over(loader, model):\n"
    "    return sum(model(x).sum().item() for x in loader)\n"
    "model = torch.nn.Linear(2, 2)\nmodel.eval()\nprint(loss_over(batches, model))\n",
    # The helper switches the model back to training: evaluation mode ends at its call, and
    # the single forward before it is not a loop.
    "import torch\n"
    "def fit(model, loader, opt):\n"
    "    model.train()\n"
    "    for x, y in loader:\n"
    "        opt.zero_grad()\n"
    "        torch.nn.functional.mse_loss(model(x), y).backward()\n"
    "        opt.step()\n"
    "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "model.eval()\nprint(model(x0))\nfit(model, train_loader, opt)\n",
    # The loss object handed to the shared epoch helper backpropagates in its `__call__`
    # (wrapping the call in no_grad would make that backward fail).
    Valid(
        "import torch\nfrom losses import LossCompute\n"
        "def run_epoch(data, model, loss_compute):\n"
        "    total = 0.0\n"
        "    for x, y in data:\n"
        "        total += loss_compute(model(x), y)\n"
        "    return total\n"
        "model = torch.nn.Linear(2, 2)\ncriterion = torch.nn.MSELoss()\n"
        "model.eval()\n"
        "valid_loss = run_epoch(valid_data, model, LossCompute(criterion, opt=None))\n",
        files=(
            (
                "losses.py",
                "class LossCompute:\n"
                "    def __init__(self, criterion, opt=None):\n"
                "        self.criterion, self.opt = criterion, opt\n"
                "    def __call__(self, out, y):\n"
                "        loss = self.criterion(out, y)\n"
                "        loss.backward()\n"
                "        if self.opt is not None:\n"
                "            self.opt.step()\n"
                "        return loss.item()\n",
            ),
        ),
    ),
    # A file named like a pytest module that holds tests (it imports pytest).
    Valid(
        "import pytest\nimport torch\n"
        "def check(model, loader):\n"
        "    model.eval()\n"
        "    for x in loader:\n"
        "        assert model(x).shape[1] == 2\n",
        filename="test_shapes.py",
    ),
    # A model handed back by a loader that leaves it in training mode: no evaluation code.
    Valid(
        "import torch\nfrom models import load\n"
        "model = load('w.pt')\n"
        "for x, y in loader:\n"
        "    torch.nn.functional.mse_loss(model(x), y).backward()\n",
        files=(
            (
                "models.py",
                "import torch\n"
                "def load(path):\n"
                "    model = torch.nn.Linear(2, 2)\n"
                "    model.load_state_dict(torch.load(path))\n"
                "    return model\n",
            ),
        ),
    ),
    # The same trainer in a project none of whose modules imports torch: not torch code.
    Valid(
        _TRAINER_PY,
        filename="trainer.py",
        files=(
            *_TRAINER_FILES,
            (
                "pkg/inputs/features.py",
                "import numpy as np\ndef features(batch):\n    return np.stack(batch.src)\n",
            ),
        ),
    ),
    # The builder hands back a model it never switched to evaluation mode; or the class
    # switches the model back to training.
    Valid(
        _TRANSLATOR_PY,
        filename="translator.py",
        files=(
            *_TRANSLATOR_FILES,
            ("tools/builder.py", _BUILDER_PY.replace("    model.eval()\n", "")),
        ),
    ),
    # The search runs in a method only called from one that a method calls with gradients off.
    Valid(
        _TRANSLATOR_PY.replace(
            "    def translate_batch(self, x):\n",
            "    def translate_batch(self, x):\n"
            "        with torch.no_grad():\n"
            "            return self._translate_batch(x)\n"
            "\n"
            "    def _translate_batch(self, x):\n"
            "        return self._search(x)\n"
            "\n"
            "    def _search(self, x):\n",
        ),
        filename="translator.py",
        files=(*_TRANSLATOR_FILES, ("tools/builder.py", _BUILDER_PY)),
    ),
    Valid(
        _TRANSLATOR_PY + "\n    def fit(self):\n        self.model.train()\n",
        filename="translator.py",
        files=(*_TRANSLATOR_FILES, ("tools/builder.py", _BUILDER_PY)),
    ),
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
                "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n",
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
    # A local helper runs the model over every batch; the call after `.eval()` is reported.
    Invalid(
        "import torch\nimport torch.nn.functional as F\n"
        "def loss_over(loader, model):\n"
        "    total = 0.0\n"
        "    for x, y in loader:\n"
        "        total += F.cross_entropy(model(x), y).item()\n"
        "    return total / len(loader)\n"
        "model = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "train_loss = loss_over(train_loader, model)\n"
        "val_loss = loss_over(val_loader, model)\n"
        "print(train_loss, val_loss)\n",
        fixed="import torch\nimport torch.nn.functional as F\n"
        "def loss_over(loader, model):\n"
        "    total = 0.0\n"
        "    for x, y in loader:\n"
        "        total += F.cross_entropy(model(x), y).item()\n"
        "    return total / len(loader)\n"
        "model = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "with torch.no_grad():\n"
        "    train_loss = loss_over(train_loader, model)\n"
        "    val_loss = loss_over(val_loader, model)\n"
        "print(train_loss, val_loss)\n",
        lines=(10,),
    ),
    # The forward runs in a helper of another module, called for every file of a loop after
    # `.eval()`: the loop is reported where it hands the model over (no fix: the helper's
    # code is not proven to need no autograd).
    Invalid(
        "import numpy as np\nimport torch\nfrom features import extract\n"
        "def extract_all(model, paths):\n"
        "    model.eval()\n"
        "    for path in paths:\n"
        "        feats = extract(model, np.load(path))\n"
        "        np.save(path + '.feat', feats.detach().numpy())\n"
        "model = torch.nn.Linear(3, 8)\n"
        "extract_all(model, paths)\n",
        fixed=None,
        files=(
            (
                "features.py",
                "import torch\n"
                "def extract(model, points):\n"
                "    return model(torch.from_numpy(points).float())\n",
            ),
        ),
        lines=(7,),
    ),
    # ... and a helper of the file that does so, called after `.eval()` at module level: the
    # call is reported, not the loop inside the helper.
    Invalid(
        "import numpy as np\nimport torch\nfrom features import extract\n"
        "def extract_all(model, paths):\n"
        "    model.eval()\n"
        "    for path in paths:\n"
        "        np.save(path + '.feat', extract(model, np.load(path)).detach().numpy())\n"
        "model = torch.nn.Linear(3, 8)\nmodel.eval()\n"
        "extract_all(model, paths)\n",
        fixed=None,
        files=(
            (
                "features.py",
                "import torch\n"
                "def extract(model, points):\n"
                "    return model(torch.from_numpy(points).float())\n",
            ),
        ),
        lines=(10,),
    ),
    # The model comes back from a loader of another module in evaluation mode (its class's
    # forward is read there, so the fix is safe); a warm-up forward runs under a condition,
    # the per-image forward is the one reported.
    Invalid(
        "import torch\nfrom models import load_eval\n"
        "def detect(source):\n"
        "    model = load_eval('w.pt')\n"
        "    for img in source:\n"
        "        if img.shape[0] != 1:\n"
        "            model(img)\n"
        "        pred = model(img)[0]\n"
        "        print(pred.argmax().item())\n"
        "detect(images)\n",
        fixed="import torch\nfrom models import load_eval\n"
        "def detect(source):\n"
        "    model = load_eval('w.pt')\n"
        "    with torch.no_grad():\n"
        "        for img in source:\n"
        "            if img.shape[0] != 1:\n"
        "                model(img)\n"
        "            pred = model(img)[0]\n"
        "            print(pred.argmax().item())\n"
        "detect(images)\n",
        files=(
            (
                "models.py",
                "import torch\n"
                "class Net(torch.nn.Module):\n"
                "    def __init__(self):\n"
                "        super().__init__()\n"
                "        self.fc = torch.nn.Linear(2, 2)\n"
                "    def forward(self, x):\n"
                "        return self.fc(x)\n"
                "def load_eval(path):\n"
                "    model = Net()\n"
                "    model.load_state_dict(torch.load(path))\n"
                "    model.eval()\n"
                "    return model\n",
            ),
        ),
        lines=(8,),
    ),
    # A script named like a pytest module that holds no tests (SlowFast's tools/test_net.py).
    Invalid(
        "import torch\n"
        "def perform_test(test_loader, model):\n"
        "    model.eval()\n"
        "    for inputs, labels in test_loader:\n"
        "        preds = model(inputs.cuda())\n"
        "        print((preds.argmax(1) == labels.cuda()).float().mean().item())\n"
        "def test(cfg):\n"
        "    perform_test(build_loader(cfg), build_model(cfg))\n",
        fixed=None,
        filename="test_net.py",
        lines=(5,),
    ),
    # Evaluation mode ends where a helper switches the model back to training (and trains
    # it): the evaluation before it is still reported.
    Invalid(
        "import torch\nimport torch.nn.functional as F\n"
        "def loss_over(loader, model):\n"
        "    return sum(F.mse_loss(model(x), y).item() for x, y in loader)\n"
        "def fit(model, loader, opt):\n"
        "    model.train()\n"
        "    for x, y in loader:\n"
        "        opt.zero_grad()\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        opt.step()\n"
        "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model.eval()\n"
        "print('before', loss_over(val_loader, model))\n"
        "fit(model, train_loader, opt)\n",
        fixed="import torch\nimport torch.nn.functional as F\n"
        "def loss_over(loader, model):\n"
        "    return sum(F.mse_loss(model(x), y).item() for x, y in loader)\n"
        "def fit(model, loader, opt):\n"
        "    model.train()\n"
        "    for x, y in loader:\n"
        "        opt.zero_grad()\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        opt.step()\n"
        "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model.eval()\n"
        "with torch.no_grad():\n"
        "    print('before', loss_over(val_loader, model))\n"
        "fit(model, train_loader, opt)\n",
        lines=(14,),
    ),
    # The file never names torch; a module of its project that it imports (through the
    # package's __init__.py) does: the model it evaluates is torch code.
    Invalid(
        _TRAINER_PY,
        fixed=None,
        filename="trainer.py",
        files=(
            *_TRAINER_FILES,
            (
                "pkg/inputs/features.py",
                "import torch\ndef features(batch):\n    return torch.stack(batch.src)\n",
            ),
        ),
        lines=(14,),
    ),
    # The model a builder of another module switched to evaluation mode and returned in a
    # tuple is handed to a class, whose methods run a part of it (`self.model.fc`) again and
    # again.
    Invalid(
        _TRANSLATOR_PY,
        fixed=None,
        filename="translator.py",
        files=(*_TRANSLATOR_FILES, ("tools/builder.py", _BUILDER_PY)),
        lines=(16,),
    ),
)
