from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from enum import Enum
from functools import partial

from ..core import fixes, kinds, summaries, training
from ..core.context import Context
from ..core.kinds import MODULE_SELF_METHODS, Kind
from ..core.model import Applicability, Edit, Fix, Text
from ..core.semantic import (
    FUNCTION_NODES,
    Binding,
    Semantic,
    dotted,
    has_star_kwargs,
    is_false,
    keyword,
    terminal_name,
)
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
_AUTOGRAD_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward", "torch.enable_grad"})


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
    repeat: it runs inside a loop over a DataLoader or another iterator of data, over
    `range(...)`, a `while` loop, or a loop that appends or adds its output to something made
    before the loop. It is reported when it is not under `torch.no_grad()`,
    `torch.inference_mode()` or `torch.set_grad_enabled(False)`.

    Not reported:

    - a single forward (a demo cell, `predict(sentence)`, one batch to plot): its graph lives
      only until the output is dropped;
    - a file that never places anything on an accelerator — no name, attribute or keyword about
      CUDA, devices or GPUs (`.cuda()`, `.to(device)`, `device=`, `train_on_gpu`), no
      MPS/XPU/TPU, Accelerate, Fabric or `DataParallel`, no `"cuda"` string. In the real-code
      corpus such files are small CPU tutorials (MNIST MLPs, toy GANs) whose activations cost
      a few MiB of host memory; a large model evaluated on a CPU would still gain, and is
      missed;
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

    zh = """## 功能
    检查在开启梯度跟踪的评估代码中反复执行的模型前向调用。评估代码指：`model.eval()` 之后的语句（直到随后的
    `model.train()`）、名称以 `eval`、`valid`、`test`、`predict` 或 `infer` 开头的函数，或遍历名称含 `val`
    或 `test` 的加载器的循环。前向调用必须会重复执行：它位于遍历 DataLoader 或其他数据迭代器的循环、遍历
    `range(...)` 的循环、`while` 循环中，或位于把输出追加或累加到循环之前创建的对象中的循环里。若该调用不在
    `torch.no_grad()`、`torch.inference_mode()` 或 `torch.set_grad_enabled(False)` 之下，就会报告。

    不报告的情况：

    - 单次前向（演示单元格、`predict(sentence)`、为画图跑的一个批次）：它的计算图只存活到输出被丢弃为止；
    - 从不把任何东西放到加速器上的文件——没有与 CUDA、设备或 GPU 有关的名字、属性或关键字参数
      （`.cuda()`、`.to(device)`、`device=`、`train_on_gpu`），没有 MPS/XPU/TPU、Accelerate、Fabric 或
      `DataParallel`，也没有 `"cuda"` 字符串。在真实代码语料库中，这类文件都是小型 CPU 教程（MNIST MLP、
      玩具 GAN），其激活值只占几 MiB 主机内存；在 CPU 上评估的大模型仍能受益，但会被漏掉；
    - 需要 autograd 的区域：反向传播、`torch.autograd`/`torch.func`、优化器 step、`requires_grad_()`、重新开启
      梯度——无论在区域中，还是在它调用的函数中（本文件或项目其他模块的函数）——或以常量标志调用分析看不到内部的模型的前向
      （`model(im, label, make_adv=True)`：robustness 的 `AttackerModel` 在 `forward` 中运行 PGD 攻击）；
    - 计算结果随后被反向传播的区域（沿赋值、列表、返回值以及函数的调用方追踪）；
    - 测试（`test_*.py`、`*_test.py`、`tests.py`、`conftest.py`、`tests/` 目录下的文件、带 pytest 装饰器的函数、
      没有遍历加载器的 `test_*` 函数、unittest 用例）、Lightning 的评估钩子、`nn.Module` 类的方法、只在关闭梯度时
      调用或结果会被反向传播的函数，以及在文件中从未被调用、只作为值传来传去的函数（detectron2 的
      `inference_on_dataset` 在 `no_grad()` 下运行它们）。

    ## 为什么不好？
    `model.eval()` 只会把 dropout、batch norm 等层切换到推理行为，并不会关闭 autograd。每次前向仍会记录
    计算图，并保留反向传播所需的激活值，而反向传播根本不会发生。在 H200 上实测，ResNet-50 以 256 张
    224×224 图像为一批做前向，开启梯度时峰值显存为 20,857 MiB，在 `torch.no_grad()` 或
    `torch.inference_mode()` 下只有 2,548 MiB（少 8.2 倍），速度相同。评估会在本可容纳的批大小下显存
    溢出，甚至挤爆训练本身的显存。

    ## 示例
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

    ## 改为
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

    ## 修复安全性
    修复把区域中包含被报告调用的语句（通常是整个循环）包进 `with torch.no_grad():`。它是安全的，并且只有在分析
    能证明在那里关闭梯度除了 autograd 保留的内存之外什么都不改变时才会提供：

    1. 被包裹语句中的每个调用都是分析能看出不需要 autograd 的：除 `torch.autograd`、`torch.func` 和
       `torch.enable_grad` 之外的 torch 函数；标准库以及科学计算、绘图、进度条和日志库；张量、列表、字典、
       字符串和文件的方法；损失函数；由 torch、torchvision、timm、transformers 或 peft 构建的模型的前向，或由（本文件或
       项目其他模块中的）类构建、其 `forward`（及其调用的一切）同样通过检查的模型的前向；函数体通过检查的函数；
    2. 在那里由需要梯度的张量（模型的输出、它的参数、文件用 `requires_grad` 标记的张量）计算出的任何东西，在包裹
       之后都不会进入反向传播、`torch.autograd`、优化器、`requires_grad_()`、属性、闭包或分析看不到的调用——
       沿赋值、容器、循环、`return` 以及函数的调用方追踪；
    3. 这些语句中没有 `yield` 或 `await`（否则梯度模式会泄漏给调用方）。

    如果整个区域不满足条件——例如它还调用了对抗攻击的 `perturb`，或从你的项目中导入的辅助函数——而前向调用
    所在的语句本身满足，修复就只包裹这些语句。否则不提供修复（从另一个文件导入的模型类、由 `torch.load` 反序列化
    的模型、由文件中看不到的调用方传入的参数）：确认这段代码不需要梯度后请自行包裹。修复会沿用你给 `torch`
    起的别名，必要时添加 `import torch`。

    `torch.inference_mode()` 节省同样的内存，还会跳过视图和版本计数的跟踪，但在其中创建的张量之后永远不能进入
    autograd（`RuntimeError: Inference tensors cannot be saved for backward`），而本规则不检查这一点。因此修复
    写的是 `no_grad()`；TDR106（默认关闭）会对结果无法进入 autograd 的 `no_grad()` 块建议改用
    `inference_mode()`。

    ## 参考
    - [`torch.no_grad`](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    - [Autograd 机制：局部关闭梯度计算](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
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
        # A file that never uses an accelerator.
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\n"
        "for x, y in test_loader:\n    print((model(x).argmax(1) == y).sum().item())\n",
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
        if _is_test_file(ctx.path) or _grad_off_globally(ctx):
            return
        regions = self._regions(ctx)
        if not regions or not _uses_accelerator(ctx):
            return
        frozen = _frozen_models(ctx)
        claimed: set[ast.Call] = set()
        for region in regions:
            if _trains(ctx, region.stmts, set()):
                continue
            forwards = _forward_calls(ctx, region.stmts)
            if any(_mode_switch(ctx, call) for call in forwards):
                continue  # the forward may run an attack or another gradient computation
            calls = [
                call
                for call in forwards
                if not training.grad_disabled(ctx.sem, call)
                and dotted(_callee(call)) not in frozen
                and _repeats(ctx, call)
            ]
            if not calls or any(call in claimed for call in calls):
                continue
            claimed.update(calls)
            stmts = _covering(ctx, region.stmts, calls)
            if _Flow(ctx, stmts).outcome() is _Outcome.AUTOGRAD:
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
            for item in block[index + 1 :]:
                if _calls_train(ctx, item):
                    break
                following.append(item)
            if _trains(ctx, following, set()):
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
        if not _safe_to_wrap(ctx, candidate):
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


def _safe_to_wrap(ctx: Context, stmts: list[ast.stmt]) -> bool:
    """The precondition of the fix: turning gradients off around ``stmts`` changes nothing but
    the memory autograd would have kept. Every call in them is one the analysis can see needs
    no autograd (``_Seen``), they neither suspend (``yield``, ``await``: grad mode would leak
    to the caller) nor turn gradients back on, and nothing they compute from a tensor that
    requires grad reaches autograd or code the analysis cannot see afterwards (``_Flow``)."""
    sem = ctx.sem
    if not stmts or _trains(ctx, stmts, set()):
        return False
    seen = _Seen.of(ctx)
    for node in sem.walk_body(stmts):
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await):
            return False
        if isinstance(node, ast.Call) and not seen.call(node):
            return False
        if isinstance(node, ast.Lambda) and not all(
            seen.call(n) for n in ast.walk(node.body) if isinstance(n, ast.Call)
        ):
            return False
    return _Flow(ctx, stmts).outcome() is _Outcome.CLEAN


# ---- what the analysis can see ---------------------------------------------------------------
# Libraries whose functions never run autograd on the tensors they are given (the standard
# library, the scientific stack, plotting, progress bars, loggers, tokenizers). torch itself is
# handled apart: everything but its autograd entry points.
_SAFE_LIBRARIES = frozenset(
    {
        "builtins", "math", "cmath", "random", "time", "datetime", "os", "sys", "json", "csv",
        "pickle", "copy", "collections", "itertools", "operator", "string", "re", "logging",
        "warnings", "pprint", "pathlib", "shutil", "glob", "io", "statistics", "textwrap",
        "numpy", "scipy", "pandas", "sklearn", "matplotlib", "seaborn", "PIL", "cv2", "skimage",
        "imageio", "tqdm", "IPython", "torchvision", "torchaudio", "torchtext", "torchmetrics",
        "transformers", "tokenizers", "einops", "wandb", "tensorboardX", "mlflow", "rich",
        "yaml", "h5py", "nltk", "tiktoken", "sentencepiece",
    }
)  # fmt: skip
_SAFE_BUILTINS = frozenset(
    {
        "print", "len", "range", "enumerate", "zip", "sum", "min", "max", "abs", "round",
        "float", "int", "bool", "str", "list", "tuple", "dict", "set", "frozenset", "sorted",
        "reversed", "iter", "next", "isinstance", "issubclass", "hasattr", "getattr", "format",
        "repr", "open", "any", "all", "divmod", "pow", "hash", "id", "type", "slice", "map",
        "filter", "chr", "ord", "callable", "vars", "dir", "super",
    }
)  # fmt: skip
# Tensor methods (none of them differentiates); a method of this name on a value the analysis
# cannot type is taken to be the tensor method.
_TENSOR_METHODS = frozenset(
    {
        "abs", "add", "all", "allclose", "amax", "amin", "any", "argmax", "argmin", "argsort",
        "bfloat16", "bool", "byte", "ceil", "char", "chunk", "clamp", "clamp_", "clip", "clone",
        "contiguous", "copy_", "cos", "cpu", "cuda", "cumsum", "data_ptr", "detach", "detach_",
        "diag", "dim", "div", "double", "eq", "equal", "exp", "expand", "expand_as", "fill_",
        "flatten", "flip", "float", "floor", "gather", "ge", "gt", "half", "index_select",
        "int", "is_contiguous", "isfinite", "isnan", "item", "le", "log", "log_softmax", "long",
        "lt", "masked_fill", "masked_select", "matmul", "max", "mean", "median", "min", "mm",
        "mul", "narrow", "ndimension", "ne", "neg", "nelement", "nonzero", "norm", "numel",
        "numpy", "permute", "pow", "prod", "reshape", "reshape_as", "round", "rsqrt", "scatter",
        "sigmoid", "sign", "sin", "size", "softmax", "sort", "split", "sqrt", "squeeze", "std",
        "sub", "sum", "t", "tanh", "to", "tolist", "topk", "transpose", "type", "type_as",
        "unbind", "unique", "unsqueeze", "var", "view", "view_as", "zero_", "add_", "mul_",
        "sub_", "div_", "float_", "sum_to_size", "repeat", "roll", "where", "logsumexp",
        "exp_", "log_", "squeeze_", "unsqueeze_", "to_dense", "pin_memory", "share_memory_",
        "element_size", "stride", "storage_offset", "is_cuda", "get_device", "new_zeros",
        "new_ones", "new_empty", "new_full", "new_tensor", "cross", "dot", "bmm", "triu",
        "tril", "count_nonzero", "histc", "bincount", "kthvalue", "mode", "cummax", "cummin",
        "eq_", "logical_and", "logical_or", "logical_not", "bitwise_and", "masked_fill_",
        "index_fill_", "index_add_", "scatter_", "scatter_add_", "clamp_min", "clamp_max",
        "float_power", "square", "reciprocal", "frac", "trunc", "erf", "softplus", "relu",
    }
)  # fmt: skip
# Methods of lists, dicts, sets, strings and files.
_CONTAINER_METHODS = frozenset(
    {
        "append", "extend", "insert", "pop", "remove", "clear", "copy", "keys", "values",
        "items", "get", "update", "setdefault", "add", "discard", "sort", "reverse", "index",
        "count", "join", "format", "split", "strip", "rstrip", "lstrip", "replace",
        "startswith", "endswith", "lower", "upper", "write", "writelines", "flush", "close",
        "read", "readline", "readlines", "encode", "decode", "popleft", "appendleft",
    }
)  # fmt: skip
# Methods of a module that are not its forward and never differentiate.
_MODULE_METHODS = frozenset(
    {
        *MODULE_SELF_METHODS, "parameters", "named_parameters", "buffers", "named_buffers",
        "modules", "named_modules", "children", "named_children", "state_dict",
        "load_state_dict", "zero_grad", "apply", "register_buffer", "get_submodule",
    }
)  # fmt: skip
# Methods whose result is a Python value: the tensor they are called on goes no further.
_PYTHON_RESULT_METHODS = frozenset({"item", "tolist", "numpy", "size", "numel", "dim", "format"})
_PYTHON_RESULT_BUILTINS = frozenset(
    {"print", "len", "float", "int", "bool", "str", "repr", "format", "round", "isinstance"}
)
_STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})
_CONTAINER_BUILTINS = frozenset({"list", "dict", "set", "open", "defaultdict", "OrderedDict"})
_LIBRARY_MODELS = (
    "torch.nn.",
    "torchvision.models.",
    "torchaudio.models.",
    "transformers.",
    "timm.",
    "peft.",
)
# Modules whose forward runs the modules they are given.
_CONTAINER_MODULES = frozenset(
    {"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"}
)
_PASS_THROUGH = frozenset(
    {"torch.compile", "torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel",
     "torch.jit.script", "torch.jit.trace"}
)  # fmt: skip
# Attributes of a tensor that tell whether autograd tracked it: the wrap changes them.
_GRAD_STATE_ATTRIBUTES = frozenset({"requires_grad", "grad_fn", "is_leaf", "grad"})
_LIBRARY = "library"  # the origin of a module built by torch, torchvision, timm or transformers


class _Seen:
    """Which calls the analysis can see need no autograd: torch functions other than its
    autograd entry points, the libraries and builtins above, tensor and container methods,
    losses, the forward of a model built by torch, torchvision, timm or transformers or by a
    class of this file whose ``forward`` is itself seen, and functions of this file whose body
    is seen. Anything else — a function or model class imported from elsewhere, a model loaded
    from a pickle, a method the analysis cannot resolve — may need autograd."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sem = ctx.sem
        self._functions: dict[ast.AST, bool] = {}
        self._classes: dict[ast.ClassDef, bool] = {}

    @staticmethod
    def of(ctx: Context) -> _Seen:
        key = "tdr105-seen"
        found = ctx.sem.memo.get(key)
        if not isinstance(found, _Seen) or found.ctx is not ctx:
            found = _Seen(ctx)
            ctx.sem.memo[key] = found
        return found

    def call(self, call: ast.Call, depth: int = 0) -> bool:
        if depth > 8 or training.enters_autograd(self.sem, call):
            return False
        if not self._callables_seen(call, depth):
            return False
        func = call.func
        qual = training.torch_qualname(self.sem, func)
        if qual is not None:
            return _library_call(self.sem, call, qual)
        kind = self.ctx.kind(func)
        if kind in (Kind.MODULE, Kind.LOSS) or _is_model(self.ctx, func):
            return self.forward(func, depth)
        if isinstance(func, ast.Name):
            binding = self.sem.lookup(func.id, func)
            if binding is None:
                return func.id in _SAFE_BUILTINS
            local = self.sem.local_function(func)
            if local is not None:
                return self.function(local, depth)
            cls = self.sem.local_class(func)
            if cls is not None:
                init = _method(cls, "__init__")
                return init is None or self.function(init, depth)
            # An object made by a safe library (a tokenizer, a pipeline, a metric).
            return _safe_receiver(self.ctx, func) and not isinstance(binding.value, ast.Constant)
        if isinstance(func, ast.Attribute):
            return self._method_call(func, depth)
        if isinstance(func, ast.Subscript | ast.Call):  # self.layers[i](x), nn.Linear(2, 2)(x)
            return self.forward(func, depth)
        return False

    def _callables_seen(self, call: ast.Call, depth: int) -> bool:
        """Functions of this file and models passed to a call (``map(f, xs)``, ``key=f``,
        ``map(model, batches)``) may run in it."""
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Name):
                local = self.sem.local_function(arg)
                if local is not None and not self.function(local, depth + 1):
                    return False
                if local is None and _is_model(self.ctx, arg):
                    if training.torch_qualname(self.sem, call.func) is None and not (
                        isinstance(call.func, ast.Name) and call.func.id in _SAFE_BUILTINS
                    ):
                        continue  # handed to a call that is judged on its own
                    if not self.forward(arg, depth + 1):
                        return False
        return True

    def _method_call(self, func: ast.Attribute, depth: int) -> bool:
        attr, receiver = func.attr, func.value
        if (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        ):
            return self._super_method(func, depth)
        kind = self.ctx.kind(receiver)
        if kind in (Kind.MODULE, Kind.LOSS):
            if attr == "forward":
                return self.forward(receiver, depth)
            if attr in _MODULE_METHODS:
                return True
            origins = _origins(self.ctx, receiver)
            if origins is None:
                return False
            for origin in origins:
                if isinstance(origin, ast.ClassDef):
                    method = _method(origin, attr)
                    if method is None or not self.function(method, depth):
                        return False
            return True
        if kind in (Kind.LOADER, Kind.DATASET, Kind.SAMPLER, Kind.DEVICE, Kind.SCHEDULER):
            return True
        if kind is Kind.OPTIMIZER:
            return attr == "zero_grad"
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            cls = self.sem.enclosing_class(func)
            method = _method(cls, attr) if cls is not None else None
            return method is not None and self.function(method, depth)
        if attr in _TENSOR_METHODS:
            return True
        return attr in _CONTAINER_METHODS and _safe_receiver(self.ctx, receiver)

    def _super_method(self, func: ast.Attribute, depth: int) -> bool:
        """``super().method(...)`` in a class of this file: the bases' method."""
        cls = self.sem.enclosing_class(func)
        if cls is None:
            return False
        for base in cls.bases:
            local = self.sem.local_class(base)
            if local is not None:
                method = _method(local, func.attr)
                if method is not None and not self.function(method, depth + 1):
                    return False
            elif not (self.sem.qualname(base) or "").startswith(_LIBRARY_MODELS):
                return False
        return True

    def function(self, func: ast.AST, depth: int = 0) -> bool:
        known = self._functions.get(func)
        if known is not None:
            return known
        if depth > 6 or not isinstance(func, FUNCTION_NODES):
            return False
        self._functions[func] = True  # in progress: a recursive call adds nothing
        body = list(func.body)
        ok = not _trains(self.ctx, body, set()) and all(
            self.call(node, depth + 1)
            for node in self.sem.walk_body(body)
            if isinstance(node, ast.Call)
        )
        self._functions[func] = ok
        return ok

    def forward(self, module: ast.expr, depth: int = 0) -> bool:
        """Whether calling ``module`` runs code the analysis can see needs no autograd."""
        origins = _origins(self.ctx, module)
        if origins is None:
            return False
        return all(o == _LIBRARY or self.module_class(o, depth) for o in origins)

    def module_class(self, cls: ast.ClassDef | str, depth: int = 0) -> bool:
        if not isinstance(cls, ast.ClassDef):
            return False
        known = self._classes.get(cls)
        if known is not None:
            return known
        self._classes[cls] = True  # in progress
        forward = _method(cls, "forward") or _method(cls, "__call__")
        if forward is not None:
            ok = self.function(forward, depth + 1)
        else:
            # No forward of its own: the one it inherits, from torch or from a class of the file.
            ok = True
            for base in cls.bases:
                local = self.sem.local_class(base)
                if local is not None:
                    ok = ok and self.module_class(local, depth + 1)
                else:
                    qual = self.sem.qualname(base) or ""
                    ok = ok and qual.startswith(_LIBRARY_MODELS)
        self._classes[cls] = ok
        return ok


def _library_call(sem: Semantic, call: ast.Call, qual: str) -> bool:
    top = qual.split(".", 1)[0]
    if top == "torch":
        if qual in _AUTOGRAD_CALLS or qual.startswith(("torch.autograd.", "torch.func.")):
            return False
        if qual in ("torch.is_grad_enabled", "torch.is_inference_mode_enabled"):
            return False  # its answer is what the wrap changes
        if qual in ("torch.set_grad_enabled", "torch.inference_mode"):
            return training.is_grad_off(sem, call)
        return True
    return top in _SAFE_LIBRARIES


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for stmt in cls.body:
        if isinstance(stmt, FUNCTION_NODES) and stmt.name == name:
            return stmt
    return None


def _safe_receiver(ctx: Context, receiver: ast.expr) -> bool:
    """A string, or a name bound to a list, dict, set, string, file or an object made by one
    of the safe libraries (``csv.writer(f)``, ``plt.subplots()``)."""
    if isinstance(receiver, ast.Constant | ast.JoinedStr):
        return True
    if not isinstance(receiver, ast.Name):
        return False
    binding = ctx.sem.lookup(receiver.id, receiver)
    if binding is None or binding.value is None:
        return False
    value = binding.value
    if binding.index is not None and isinstance(value, ast.Tuple | ast.List):
        if binding.index >= len(value.elts):
            return False
        value = value.elts[binding.index]
    if isinstance(
        value,
        ast.List
        | ast.Dict
        | ast.Set
        | ast.Tuple
        | ast.Constant
        | ast.JoinedStr
        | ast.ListComp
        | ast.DictComp
        | ast.SetComp,
    ):
        return True
    if isinstance(value, ast.Call):
        qual = ctx.qualname(value.func)
        if qual is not None:
            return qual.split(".", 1)[0] in _SAFE_LIBRARIES
        return isinstance(value.func, ast.Name) and (
            value.func.id in _CONTAINER_BUILTINS and ctx.sem.lookup(value.func.id, value) is None
        )
    return False


def _origins(ctx: Context, expr: ast.AST, depth: int = 0) -> set[ast.ClassDef | str] | None:
    """Where the module ``expr`` comes from: ``_LIBRARY`` (built by torch, torchvision, timm or
    transformers) or classes of this file; None when the analysis cannot tell (a model
    unpickled by ``torch.load``, built by an imported factory or class, a parameter some caller
    fills with such a model)."""
    sem = ctx.sem.owner(expr)  # the facts of the module ``expr`` is in (this or a project one)
    if depth > 8:
        return None
    if isinstance(expr, ast.Call):
        func = expr.func
        qual = ctx.qualname(func)
        if qual is not None:
            if qual in _PASS_THROUGH:
                return _origins(ctx, expr.args[0], depth + 1) if expr.args else None
            if qual in _CONTAINER_MODULES:
                return _union(ctx, _elements(expr), depth, empty=set())
            if qual.startswith(_LIBRARY_MODELS):
                return {_LIBRARY}
            defined = sem.definition(func)  # a class or factory of another project module
            if defined is None or defined[0] is sem:
                return None
            module, node = defined
            if isinstance(node, ast.ClassDef):
                return {node}
            if isinstance(node, FUNCTION_NODES):
                return _union(ctx, module.returns(node), depth)
            return None
        if isinstance(func, ast.Attribute):
            if func.attr in MODULE_SELF_METHODS:
                return _origins(ctx, func.value, depth + 1)
            if func.attr == "from_pretrained":
                owner = ctx.qualname(func.value) or ""
                return {_LIBRARY} if owner.startswith(("transformers.", "peft.")) else None
            return None
        cls = sem.local_class(func)
        if cls is not None:
            return {cls}
        local = sem.local_function(func)
        if local is not None:
            return _union(ctx, sem.returns(local), depth)
        return None
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None:
            return None
        if binding.how == "assign" and binding.index is None and binding.value is not None:
            return _origins(ctx, binding.value, depth + 1)
        if binding.how == "param":
            return _union(ctx, _passed_values(sem, binding), depth)
        if binding.how == "loop":  # for layer in self.layers
            loop = sem.parent(binding.node)
            while isinstance(loop, ast.Tuple | ast.List | ast.Starred):
                loop = sem.parent(loop)
            if isinstance(loop, ast.For | ast.AsyncFor | ast.comprehension):
                return _origins(ctx, loop.iter, depth + 1)
        return None
    if isinstance(expr, ast.Subscript):  # self.layers[i]
        return _origins(ctx, expr.value, depth + 1)
    if isinstance(expr, ast.Starred):
        return _origins(ctx, expr.value, depth + 1)
    if isinstance(expr, ast.List | ast.Tuple | ast.ListComp | ast.GeneratorExp):
        return _union(ctx, _elements(expr), depth, empty=set())
    if isinstance(expr, ast.Attribute):
        if isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = sem.enclosing_class(expr)
            values = sem.self_attr_values.get((cls, expr.attr), []) if cls else []
            return _union(ctx, values, depth)
        # A submodule of a library model (`model.encoder`, `resnet.fc`).
        base = _origins(ctx, expr.value, depth + 1)
        return base if base == {_LIBRARY} else None
    return None


def _elements(expr: ast.expr) -> list[ast.expr | None]:
    """The modules a container is built from: ``nn.Sequential(a, b)``, ``nn.ModuleList([a,
    b])``, ``[Block() for _ in range(n)]``, ``nn.ModuleDict({"a": a})``; None for an element the
    analysis cannot list."""
    parts: list[ast.expr] = []
    if isinstance(expr, ast.Call):
        parts = [*expr.args, *(k.value for k in expr.keywords)]
    elif isinstance(expr, ast.List | ast.Tuple):
        parts = list(expr.elts)
    elif isinstance(expr, ast.ListComp | ast.GeneratorExp):
        return [expr.elt]
    out: list[ast.expr | None] = []
    for part in parts:
        if isinstance(part, ast.List | ast.Tuple | ast.ListComp | ast.GeneratorExp):
            out.extend(_elements(part))
        elif isinstance(part, ast.Dict):
            out.extend(part.values)
        else:
            out.append(part)
    return out


def _union(
    ctx: Context, values: list, depth: int, empty: set[ast.ClassDef | str] | None = None
) -> set[ast.ClassDef | str] | None:
    if not values:
        return empty
    out: set[ast.ClassDef | str] = set()
    for value in values:
        if value is None:
            return None
        found = _origins(ctx, value, depth + 1)
        if found is None:
            return None
        out |= found
    return out


def _passed_values(sem: Semantic, binding: Binding) -> list[ast.expr | None]:
    """What the callers of a function of this file pass for one of its parameters (None for
    a call the analysis cannot read); empty when nothing in the file calls it."""
    func = binding.scope
    if not isinstance(func, FUNCTION_NODES):
        return []
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    out: list[ast.expr | None] = []
    for call in sem.calls_by_name.get(func.name, ()):
        if sem.local_function(call.func) is not func:
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or has_star_kwargs(call):
            return [None]
        value: ast.expr | None = None
        if binding.name in positional and positional.index(binding.name) < len(call.args):
            value = call.args[positional.index(binding.name)]
        else:
            kw = keyword(call, binding.name)
            value = kw.value if kw is not None else None
        out.append(value)
    return out


# ---- where the region's results go -----------------------------------------------------------
class _Outcome(Enum):
    CLEAN = "clean"  # only into code the analysis can see needs no autograd
    AUTOGRAD = "autograd"  # into a backward pass, an optimizer, requires_grad_...
    UNSEEN = "unseen"  # into code the analysis cannot see (it may differentiate them)


class _Flow:
    """Follows what ``stmts`` compute from tensors that require grad — the outputs of the
    models they call, parameters, and names the file marks with ``requires_grad`` — through
    assignments, containers, loops, returns and callers, to where they are used: a call that
    hands them to autograd, a call the analysis cannot see, an attribute (read who knows
    where), or nowhere that matters."""

    _LIMIT = 2000

    def __init__(self, ctx: Context, stmts: list[ast.stmt]) -> None:
        self.ctx = ctx
        self.sem = ctx.sem
        self.stmts = stmts
        self.seen = _Seen.of(ctx)
        self.tainted: set[ast.AST] = set()  # binding nodes that hold such a value
        self.todo: list[ast.AST] = []
        self.visited: set[ast.AST] = set()
        self.callers_followed: set[ast.AST] = set()

    def outcome(self) -> _Outcome:
        """``AUTOGRAD`` as soon as a value reaches autograd; else ``UNSEEN`` when one reached
        code the analysis cannot see; else ``CLEAN``."""
        marked = _requires_grad_names(self.ctx)
        for node in self.sem.walk_body(self.stmts):
            seed = (isinstance(node, ast.Call) and self._makes_grad_tensor(node)) or (
                isinstance(node, ast.Name) and node.id in marked
            )
            if seed:
                self.todo.append(node)
        result = _Outcome.CLEAN
        steps = 0
        while self.todo:
            steps += 1
            if steps > self._LIMIT:
                return _Outcome.UNSEEN
            node = self.todo.pop()
            if node in self.visited:
                continue
            self.visited.add(node)
            found = self._climb(node)
            if found is _Outcome.AUTOGRAD:
                return found
            if found is _Outcome.UNSEEN:
                result = found
        return result

    def _makes_grad_tensor(self, call: ast.Call) -> bool:
        """A model's forward, or its ``parameters()``."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _MODULE_METHODS:
            return func.attr in ("parameters", "named_parameters") and (
                self.ctx.kind(func.value) is Kind.MODULE
            )
        return self.ctx.kind(_callee(call)) in (Kind.MODULE, Kind.LOSS)

    def _inside(self, node: ast.AST) -> bool:
        return any(node is s or self.sem.is_inside(node, s) for s in self.stmts)

    def _taint(self, target: ast.AST) -> _Outcome:
        """``target`` of an assignment now holds a tainted value."""
        sem = self.sem
        if isinstance(target, ast.Tuple | ast.List | ast.Starred):
            parts = target.elts if not isinstance(target, ast.Starred) else [target.value]
            for part in parts:
                found = self._taint(part)
                if found is not _Outcome.CLEAN:
                    return found
            return _Outcome.CLEAN
        if isinstance(target, ast.Subscript):
            base = target.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if not isinstance(base, ast.Name):
                return _Outcome.UNSEEN
            binding = sem.lookup(base.id, base)
            if binding is None:
                return _Outcome.UNSEEN
            return self._taint_binding(binding.node, base.id)
        if isinstance(target, ast.Name):
            return self._taint_binding(target, target.id)
        return _Outcome.UNSEEN  # an attribute: read where the analysis does not follow

    def _taint_binding(self, node: ast.AST, name: str) -> _Outcome:
        if node in self.tainted:
            return _Outcome.CLEAN
        self.tainted.add(node)
        for load in self.sem.names.get(name, ()):
            binding = self.sem.lookup(name, load)
            if binding is not None and binding.node is node:
                self.todo.append(load)
        return _Outcome.CLEAN

    def _climb(self, node: ast.AST) -> _Outcome:
        sem = self.sem
        child = node
        for parent in sem.ancestors(node):
            if isinstance(parent, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
                return (
                    _Outcome.CLEAN
                    if child in getattr(parent, "decorator_list", ())
                    else (_Outcome.UNSEEN if isinstance(parent, ast.Lambda) else _Outcome.CLEAN)
                )
            if isinstance(parent, ast.Call):
                found = self._through_call(parent, child)
                if found is not None:
                    return found
            elif isinstance(parent, ast.Attribute):
                grand = sem.parent(parent)
                if isinstance(grand, ast.Call) and grand.func is parent:
                    child = parent
                    continue  # a method of the tainted value: decided at the call
                if parent.attr in ("shape", "dtype", "device", "ndim", "is_cuda"):
                    return _Outcome.CLEAN
                if parent.attr in _GRAD_STATE_ATTRIBUTES:
                    return _Outcome.UNSEEN  # reads what the wrap changes
            elif isinstance(parent, ast.Subscript):
                if child is not parent.value:
                    return _Outcome.CLEAN  # an index selects, it carries no gradient
            elif isinstance(parent, ast.FormattedValue | ast.JoinedStr):
                return _Outcome.CLEAN
            elif isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                if child is not parent.value or training.is_python_value(parent.value):
                    return _Outcome.CLEAN
                targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
                for target in targets:
                    found = self._taint(target)
                    if found is not _Outcome.CLEAN:
                        return found
                return _Outcome.CLEAN
            elif isinstance(parent, ast.AugAssign):
                if child is not parent.value or training.is_python_value(parent.value):
                    return _Outcome.CLEAN
                return self._taint(parent.target)
            elif isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension):
                if child is parent.iter:
                    found = self._taint(parent.target)
                    if found is not _Outcome.CLEAN or isinstance(parent, ast.For | ast.AsyncFor):
                        return found
                    continue  # the comprehension's result carries it on
                return _Outcome.CLEAN
            elif isinstance(parent, ast.withitem):
                if child is parent.context_expr and parent.optional_vars is not None:
                    return self._taint(parent.optional_vars)
                return _Outcome.CLEAN
            elif isinstance(parent, ast.Return | ast.Yield | ast.YieldFrom):
                return self._to_callers(parent)
            elif isinstance(parent, ast.stmt):
                return _Outcome.CLEAN  # a test, an expression statement, assert, del...
            child = parent
        return _Outcome.CLEAN

    def _through_call(self, call: ast.Call, child: ast.AST) -> _Outcome | None:
        """A tainted value reaches ``call`` (as an argument or as the receiver of a method):
        the outcome, or None to keep following the call's result."""
        if child is call.func and not isinstance(child, ast.Attribute):
            return _Outcome.CLEAN  # calling a tainted callable: not a tensor
        if training.enters_autograd(self.sem, call):
            return _Outcome.AUTOGRAD
        inside = self._inside(call)
        if not inside and not self.seen.call(call):
            return _Outcome.UNSEEN
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr in _PYTHON_RESULT_METHODS:
                return _Outcome.CLEAN
            if func.attr in _STORING_METHODS and child is not func:
                return self._taint(func.value)  # the container now holds it
        elif isinstance(func, ast.Name) and func.id in _PYTHON_RESULT_BUILTINS:
            return _Outcome.CLEAN
        return None

    def _to_callers(self, node: ast.AST) -> _Outcome:
        """A tainted value is returned or yielded: follow the calls of the function."""
        sem = self.sem
        func = sem.enclosing_function(node)
        if func is None or func in self.callers_followed:
            return _Outcome.CLEAN if func is not None else _Outcome.UNSEEN
        self.callers_followed.add(func)
        if len(self.callers_followed) > 3:
            return _Outcome.UNSEEN
        calls = [
            c for c in sem.calls_by_name.get(func.name, ()) if sem.local_function(c.func) is func
        ]
        if not calls or _referenced_as_value(sem, func):
            return _Outcome.UNSEEN  # called from code the analysis cannot see
        self.todo.extend(calls)
        return _Outcome.CLEAN


def _requires_grad_names(ctx: Context) -> set[str]:
    """Names the file marks as holding tensors that require grad: ``x.requires_grad_()``,
    ``x.requires_grad = True``, ``x = torch.zeros(..., requires_grad=True)``,
    ``x = nn.Parameter(...)``."""
    key = "tdr105-requires-grad"
    known = ctx.sem.memo.get(key)
    if isinstance(known, set):
        return known
    out: set[str] = set()
    sem = ctx.sem
    for call in sem.calls_by_attr.get("requires_grad_", ()):
        assert isinstance(call.func, ast.Attribute)
        if not (call.args and is_false(call.args[0])) and isinstance(call.func.value, ast.Name):
            out.add(call.func.value.id)
    for node in sem.assigns:
        value = node.value
        marks = isinstance(value, ast.Call) and (
            any(k.arg == "requires_grad" and not is_false(k.value) for k in value.keywords)
            or ctx.qualname(value.func) == "torch.nn.Parameter"
        )
        for target in node.targets:
            if isinstance(target, ast.Name) and marks:
                out.add(target.id)
            if (
                isinstance(target, ast.Attribute)
                and target.attr == "requires_grad"
                and isinstance(target.value, ast.Name)
                and not is_false(value)
            ):
                out.add(target.value.id)
    sem.memo[key] = out
    return out


def _referenced_as_value(sem: Semantic, func: ast.AST) -> bool:
    """Whether the function's name is used other than by calling it (passed, returned,
    stored): code the analysis cannot see may call it."""
    assert isinstance(func, FUNCTION_NODES)
    for load in sem.names.get(func.name, ()):
        parent = sem.parent(load)
        if not (isinstance(parent, ast.Call) and parent.func is load):
            binding = sem.lookup(func.name, load)
            if binding is not None and binding.node is func:
                return True
    return False


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
            helper = summaries.summary(sem, func) if sem.project is not None else None
            if helper is not None and helper.sem is not sem:
                if helper.autograd or "backward" in helper.methods:
                    return True  # project code of another module that needs autograd
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
        if _called_without_grad(ctx, func) or _only_passed_as_value(ctx, func):
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
    return _referenced_as_value(sem, func)


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


# ---- evidence that the forward matters -------------------------------------------------------
# Names, attributes and keywords that show a file places work on an accelerator.
_ACCELERATOR_NAME = re.compile(
    r"cuda|device|gpu|accelerat|fabric|dataparallel|(^|_)(mps|xpu|tpu|npu|hpu)(_|$)", re.I
)
_ACCELERATOR_STRING = re.compile(r"^(cuda|mps|xpu|gpu|npu|hpu)(:\d+)?$", re.I)
# What the source text holds where a device string is written (quotes around it): files with
# none are spared a scan of every node.
_QUOTED_ACCELERATOR = re.compile(r"[\"'](cuda|mps|xpu|gpu|npu|hpu)(:\d+)?[\"']", re.I)
# Loops over these iterate data (``for batch in data_iter``, ``for x, y in val_batches``).
_DATA_ITERABLE = re.compile(r"loader|iter|batch|(^|_)dl$|dataset", re.I)


def _uses_accelerator(ctx: Context) -> bool:
    """Whether anything in the file may run on an accelerator: a name, attribute or keyword
    about CUDA, devices or GPUs (``.cuda()``, ``.to(device)``, ``device=``,
    ``torch.cuda.is_available()``, ``train_on_gpu``), MPS/XPU/TPU, Accelerate, Fabric or
    DataParallel, or a device string (``"cuda:0"``)."""
    sem = ctx.sem
    key = "tdr105-accelerator"
    known = sem.memo.get(key)
    if isinstance(known, bool):
        return known
    found = (
        any(_ACCELERATOR_NAME.search(name) for name in sem.names)
        or any(_ACCELERATOR_NAME.search(attr) for attr in sem.attributes)
        or any(
            kw.arg is not None and _ACCELERATOR_NAME.search(kw.arg)
            for call in sem.calls
            for kw in call.keywords
        )
        or (
            _QUOTED_ACCELERATOR.search(ctx.source.text) is not None
            and any(
                type(node) is ast.Constant
                and isinstance(node.value, str)
                and _ACCELERATOR_STRING.match(node.value) is not None
                for node in sem.order  # every node, already listed (``ast.walk`` lists them)
            )
        )
    )
    sem.memo[key] = found
    return found


def _repeats(ctx: Context, call: ast.Call) -> bool:
    """Whether a forward call runs again and again: inside a loop (same function) over a
    DataLoader or another iterator of data, over ``range(...)``, a ``while`` loop, a loop around
    a batch loop, or any loop that appends or adds its output to something that outlives the
    iteration. A single forward (a demo cell, ``predict(sentence)``) keeps one graph until its
    output is dropped, which is not worth reporting."""
    sem = ctx.sem
    for loop in training.enclosing_loops(sem, call):
        if training.repeats(sem, loop):
            return True
        node = loop.node
        if isinstance(node, ast.For | ast.AsyncFor) and _iterates_data(node.iter):
            return True
        if _accumulates(ctx, call, loop.node):
            return True
    child: ast.AST = call
    for anc in sem.ancestors(call):  # [model(x) for x in loader], sum(... for x in loader)
        if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            break
        if isinstance(anc, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            if any(child is g.iter for g in anc.generators):
                child = anc
                continue
            for gen in anc.generators:
                it = gen.iter
                if _iterates_data(it) or (
                    isinstance(it, ast.Call) and terminal_name(it.func) in ("range", "count")
                ):
                    return True
                if isinstance(it, ast.Name | ast.Attribute) and kinds.is_loader(sem, it):
                    return True
        child = anc
    return False


def _iterates_data(expr: ast.expr) -> bool:
    for _ in range(4):
        if isinstance(expr, ast.Call) and terminal_name(expr.func) in (
            "enumerate", "tqdm", "iter", "zip", "track", "islice"
        ):  # fmt: skip
            if terminal_name(expr.func) == "iter":
                return True
            if not expr.args:
                return False
            if terminal_name(expr.func) == "zip":
                return any(_iterates_data(a) for a in expr.args)
            expr = expr.args[0]
        else:
            break
    name = terminal_name(expr)
    if isinstance(expr, ast.Subscript):
        name = terminal_name(expr.value)  # loaders["test"]
    return bool(name) and _DATA_ITERABLE.search(name or "") is not None


def _accumulates(ctx: Context, call: ast.Call, loop: ast.AST) -> bool:
    """``outs.append(model(x))`` or ``y = model(x)`` then ``outs.append(y)`` / ``acc += y`` in
    the loop, into something made before it."""
    sem = ctx.sem
    stmt = sem.statement_of(call)
    names = set()
    if isinstance(stmt, ast.Assign):
        names = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for acc_node, acc, value in training.accumulations(sem):
        if not sem.is_inside(acc_node, loop) or training.is_python_value(value):
            continue
        holds = (
            sem.is_inside(call, value)
            or call is value
            or any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(value))
        )
        base = training.accumulator_name(acc)
        if holds and base is not None:
            binding = sem.lookup(base.split(".")[0], acc)
            if binding is None or not sem.is_inside(binding.node, loop):
                return True
    return False


def _mode_switch(ctx: Context, call: ast.Call) -> bool:
    """A forward of a model the analysis cannot see into, called with a constant flag
    (``model(im, label, make_adv=True)``): the flag may switch the forward into code that
    needs autograd (robustness's ``AttackerModel`` runs a PGD attack inside ``forward``)."""
    flags = [
        kw
        for kw in call.keywords
        if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool | str)
    ]
    return bool(flags) and _origins(ctx, _callee(call)) is None
