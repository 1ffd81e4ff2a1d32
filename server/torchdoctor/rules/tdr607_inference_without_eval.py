from __future__ import annotations

import ast
import bisect
import re
from functools import partial

from ..core import fixes, kinds, summaries, training
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Fix, Text
from ..core.semantic import FUNCTION_NODES, Semantic, dotted
from .base import Invalid, Rule, Valid

# What makes a module behave differently in training and evaluation mode.
_MODE_DEPENDENT = re.compile(r"dropout|batchnorm|batch_norm|\.training\b", re.I)
# Calls after which the code is training, not running inference.
_TRAINING = ("backward", "step", "fit", "run")

_NET = (
    "import torch\nfrom torch import nn\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = nn.Linear(4, 2)\n"
    "        self.drop = nn.Dropout(0.5)\n"
    "    def forward(self, x):\n"
    "        return self.fc(self.drop(x))\n"
)


class InferenceWithoutEval(Rule):
    """## What it does
    Checks for a model whose weights are loaded with `load_state_dict(...)` and which then
    runs a forward pass in the same function (or at the top level of a script or notebook)
    without `model.eval()`, in code that does not train (no `backward()`, optimizer step,
    `model.train()` or trainer's `run`/`fit` there).

    Not reported when the model is put in evaluation mode anywhere before the forward
    (`model.eval()`, `model.train(False)`, `Net().to(device).eval()`), when it comes from a
    function that calls `.eval()` or from `from_pretrained(...)` (which returns a model in
    evaluation mode), when it is a parameter of the function (its caller chose the mode), or
    when its class is defined in the project and uses neither dropout nor batch norm (nor
    `self.training`): there the mode changes nothing.

    ## Why is this bad?
    A module starts in training mode, and loading a state dict does not change the mode.
    Dropout then zeroes random activations at inference, so predictions are noisy and differ
    from run to run, and batch norm normalises each batch with its own statistics instead of
    the running averages learnt in training (and updates those averages with the test data).
    Accuracy drops, sometimes a lot for small batches, and nothing fails. PyTorch's saving and
    loading tutorial says it plainly: call `model.eval()` before running inference.

    ## Example
    ```python
    model = resnet50()
    model.load_state_dict(torch.load("model.pt", map_location="cpu"))
    with torch.no_grad():
        logits = model(images)
    ```

    ## Use instead
    ```python
    model = resnet50()
    model.load_state_dict(torch.load("model.pt", map_location="cpu"))
    model.eval()
    with torch.no_grad():
        logits = model(images)
    ```

    ## Fix safety
    The fix inserts `model.eval()` right after the statement that loads the weights. It is
    unsafe: the model's outputs change (the point of the fix: dropout off, batch norm on its
    running statistics), and code the analysis cannot see may rely on training mode (a
    function of another module that trains the model afterwards without calling
    `model.train()`).

    ## References
    - [Saving and loading models for inference](https://pytorch.org/tutorials/beginner/saving_loading_models.html#save-load-state-dict-recommended)
    - [`Module.eval`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval)
    """

    code = "TDR607"
    name = "inference-without-eval"
    fix_safety = Applicability.UNSAFE

    VALID = (
        # eval() after the load, before it, or chained at construction.
        _NET + "model = Net()\nmodel.load_state_dict(torch.load('m.pt'))\nmodel.eval()\n"
        "y = model(x)\n",
        _NET + "model = Net()\nmodel.eval()\nmodel.load_state_dict(torch.load('m.pt'))\n"
        "y = model(x)\n",
        _NET + "model = Net().to('cpu').eval()\nmodel.load_state_dict(torch.load('m.pt'))\n"
        "y = model(x)\n",
        _NET + "model = Net()\nmodel.load_state_dict(torch.load('m.pt'))\nmodel.train(False)\n"
        "y = model(x)\n",
        # Resuming training: backward and step follow.
        _NET + "model = Net()\nmodel.load_state_dict(torch.load('m.pt'))\n"
        "for x, t in loader:\n    loss = (model(x) - t).pow(2).mean()\n"
        "    loss.backward()\n    opt.step()\n",
        # Put in evaluation mode when built, then moved.
        _NET + "net = Net().eval()\nnet = net.to('cpu')\nnet.load_state_dict(torch.load('m.pt'))\n"
        "y = net(x)\n",
        # A parameter: the caller chose the mode.
        _NET + "def predict(model, x):\n    model.load_state_dict(torch.load('m.pt'))\n"
        "    return model(x)\n",
        # No dropout or batch norm in the class: the mode changes nothing.
        "import torch\nfrom torch import nn\nclass Lin(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
        "model = Lin()\nmodel.load_state_dict(torch.load('m.pt'))\ny = model(x)\n",
        # from_pretrained returns a model in evaluation mode.
        "import torch\nfrom transformers import AutoModel\n"
        "model = AutoModel.from_pretrained('bert-base-uncased')\n"
        "model.load_state_dict(torch.load('ft.pt'))\nout = model(**batch)\n",
        # A helper of another module puts it in evaluation mode.
        Valid(
            "import torch\nfrom build import make_model\nmodel = make_model()\n"
            "model.load_state_dict(torch.load('m.pt'))\ny = model(x)\n",
            files=(
                (
                    "build.py",
                    "from torchvision.models import resnet18\n"
                    "def make_model():\n    return resnet18().eval()\n",
                ),
            ),
        ),
        # The forward runs in another function.
        _NET + "model = Net()\nmodel.load_state_dict(torch.load('m.pt'))\nserve(model)\n",
    )
    INVALID = (
        Invalid(
            _NET + "model = Net()\nmodel.load_state_dict(torch.load('m.pt', map_location='cpu'))\n"
            "with torch.no_grad():\n    y = model(x)\n",
            fixed=_NET + "model = Net()\n"
            "model.load_state_dict(torch.load('m.pt', map_location='cpu'))\nmodel.eval()\n"
            "with torch.no_grad():\n    y = model(x)\n",
            lines=(11,),
        ),
        # A torchvision model (batch norm), in a function, moved to the device.
        Invalid(
            "import torch\nfrom torchvision.models import resnet50\n"
            "def predict(path, images):\n    net = resnet50()\n"
            "    net.load_state_dict(torch.load(path, map_location='cpu'))\n"
            "    net = net.to('cuda')\n    return net(images).argmax(1)\n",
            fixed="import torch\nfrom torchvision.models import resnet50\n"
            "def predict(path, images):\n    net = resnet50()\n"
            "    net.load_state_dict(torch.load(path, map_location='cpu'))\n    net.eval()\n"
            "    net = net.to('cuda')\n    return net(images).argmax(1)\n",
            lines=(5,),
        ),
        # Held on self.
        Invalid(
            "import torch\nfrom torchvision import models\nclass Predictor:\n"
            "    def __init__(self, path):\n        self.model = models.resnet18()\n"
            "        self.model.load_state_dict(torch.load(path, map_location='cpu'))\n"
            "        self.first = self.model(torch.zeros(1, 3, 224, 224))\n",
            fixed="import torch\nfrom torchvision import models\nclass Predictor:\n"
            "    def __init__(self, path):\n        self.model = models.resnet18()\n"
            "        self.model.load_state_dict(torch.load(path, map_location='cpu'))\n"
            "        self.model.eval()\n"
            "        self.first = self.model(torch.zeros(1, 3, 224, 224))\n",
            lines=(6,),
        ),
        Invalid(
            _NET + "model = Net()\nmodel.load_state_dict(torch.load('m.pt', map_location='cpu'))\n"
            "preds = [model(b) for b in batches]\n",
            fixed=_NET + "model = Net()\n"
            "model.load_state_dict(torch.load('m.pt', map_location='cpu'))\nmodel.eval()\n"
            "preds = [model(b) for b in batches]\n",
            notebook=True,
            lines=(11,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for load in sem.calls_by_attr.get("load_state_dict", ()):
            assert isinstance(load.func, ast.Attribute)
            receiver = load.func.value
            name = dotted(receiver)
            if name is None or not _module(ctx, receiver):
                continue
            forward = _forward_after(sem, load, name)
            if forward is None or _mode_set(sem, load, receiver, name, forward):
                continue
            ctx.report(
                load,
                Text(
                    f"`{name}` runs a forward pass after `load_state_dict` without "
                    f"`{name}.eval()`: dropout and batch norm stay in training mode",
                    f"`{name}` 在 `load_state_dict` 之后未调用 `{name}.eval()` 就执行前向传播："
                    "dropout 和 batch norm 仍处于训练模式",
                ),
                related=[ctx.related(forward, Text("the forward pass", "前向传播"))],
                fixes=partial(_fix, ctx, load, name),
            )


def _module(ctx: Context, receiver: ast.expr) -> bool:
    found = ctx.kind(receiver)
    return found is Kind.MODULE or (
        found is None
        and not kinds.is_optimizer(ctx.sem, receiver)
        and not kinds.is_scheduler(ctx.sem, receiver)
        and kinds.constructor_call(ctx.sem, receiver) is not None
        and kinds.kind(ctx.sem, kinds.constructor_call(ctx.sem, receiver)) is Kind.MODULE
    )


def _same_scope(sem: Semantic, a: ast.AST, b: ast.AST) -> bool:
    return sem.enclosing_function(a) is sem.enclosing_function(b)


def _forward_after(sem: Semantic, load: ast.Call, name: str) -> ast.Call | None:
    """The first call of the model (``model(x)``, ``model.forward(x)``) after the load in the
    same function."""
    here = (load.lineno, load.col_offset)
    for call in _calls_after(sem, name, here):
        func = call.func
        target = func.value if isinstance(func, ast.Attribute) and func.attr == "forward" else func
        if dotted(target) != name or (call.lineno, call.col_offset) <= here:
            continue
        if _same_scope(sem, call, load) or _in_expression_scope(sem, call, load):
            return call  # the first, in source order
    return None


def _calls_after(sem: Semantic, name: str, here: tuple[int, int]) -> list[ast.Call]:
    """The calls that may call ``name`` (indexed under its last part, and ``.forward(...)``
    calls) after ``here``, in source order (sorted once per name and file)."""
    key = ("tdr607-calls", name.rsplit(".", 1)[-1])
    known = sem.memo.get(key)
    if not isinstance(known, tuple):
        last = key[1]
        calls = sorted(
            {
                *sem.calls_by_name.get(last, ()),
                *sem.calls_by_attr.get(last, ()),
                *sem.calls_by_attr.get("forward", ()),
            },
            key=lambda c: (c.lineno, c.col_offset),
        )
        known = ([(c.lineno, c.col_offset) for c in calls], calls)
        sem.memo[key] = known
    positions, calls = known
    return calls[bisect.bisect_right(positions, here) :]


def _in_expression_scope(sem: Semantic, call: ast.Call, load: ast.Call) -> bool:
    """A comprehension or lambda around ``call`` inside the load's function."""
    for anc in sem.ancestors(call):
        if isinstance(anc, FUNCTION_NODES):
            return False
        if sem.enclosing_function(anc) is sem.enclosing_function(load) and isinstance(
            anc, ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp
        ):
            return True
    return False


def _mode_set(
    sem: Semantic, load: ast.Call, receiver: ast.expr, name: str, forward: ast.Call
) -> bool:
    """Whether the code sets the mode itself, trains, or the mode cannot matter."""
    end = (forward.lineno, forward.col_offset)
    for method in ("eval", "train"):
        for call in sem.calls_by_attr.get(method, ()):
            assert isinstance(call.func, ast.Attribute)
            if dotted(call.func.value) != name:
                continue
            if method == "eval" and (call.lineno, call.col_offset) < end:
                return True
            if method == "train" and (_same_scope(sem, call, load) or call.args):
                return True  # training here, or `train(False)`
    for method in _TRAINING:
        if any(_same_scope(sem, c, load) for c in sem.calls_by_attr.get(method, ())):
            return True
    if training.backward_calls(sem, sem.enclosing_function(load) or sem.tree):
        return True
    if isinstance(receiver, ast.Name):
        binding = sem.lookup(receiver.id, receiver)
        if binding is None or binding.how not in ("assign",):
            return True  # a parameter, an import, a loop variable: made elsewhere
        if binding.value is not None and _evaluated(sem, binding.value):
            return True
    elif isinstance(receiver, ast.Attribute):
        values = (
            sem.self_attr_values.get((sem.enclosing_class(receiver), receiver.attr), [])  # type: ignore[arg-type]
            if isinstance(receiver.value, ast.Name) and receiver.value.id == "self"
            else []
        )
        if not values or any(_evaluated(sem, v) for v in values):
            return True
    return not _mode_matters(sem, receiver)


def _evaluated(sem: Semantic, value: ast.expr, depth: int = 0) -> bool:
    """A value already in evaluation mode: ``Net().eval()`` (through ``.to()``..., and
    ``net = net.to(device)`` after it), a ``from_pretrained(...)`` model, or the result of a
    function that calls ``.eval()``."""
    node: ast.expr = value
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("eval", "from_pretrained"):
            return True
        if node.func.attr not in kinds.MODULE_SELF_METHODS:
            break
        node = node.func.value
    if isinstance(node, ast.Name) and node is not value and depth < 4:
        binding = sem.lookup(node.id, node)
        if binding is not None and binding.how == "assign" and binding.value is not None:
            return _evaluated(sem, binding.value, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
        helper = summaries.summary(sem, node.func)
        if helper is not None and "eval" in helper.methods:
            return True
    return False


def _mode_matters(sem: Semantic, receiver: ast.expr) -> bool:
    """False when the model's class is defined in the project and neither it nor anything
    in its module uses dropout, batch norm or ``self.training``."""
    made = kinds.constructor_call(sem, receiver)
    if made is None:
        return True
    defined = sem.class_def(made.func)
    if defined is None:
        return True
    owner, _cls = defined
    text = owner.memo.get("project-text")
    if not isinstance(text, str):
        text = ast.unparse(owner.tree)
    return _MODE_DEPENDENT.search(text) is not None


def _fix(ctx: Context, load: ast.Call, name: str) -> Fix | None:
    stmt = ctx.sem.statement_of(load)
    edit = fixes.insert_statement_after(ctx.source, stmt, f"{name}.eval()")
    if edit is None:
        return None
    return Fix(
        Text(f"Insert `{name}.eval()` after the load", f"在加载之后插入 `{name}.eval()`"),
        (edit,),
        Applicability.UNSAFE,
    )
