from __future__ import annotations

import ast
import os
from functools import partial

from ..core import arguments, checkpoints, fixes, torch_version
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import is_false, is_none
from .base import Invalid, Rule, Valid

LOADS = ("torch.load", "torch.serialization.load")


# A saving helper of another module (the multi-file examples' utils.py), and a script that
# resumes from what it saves through it.
_SAVE_HELPER = "import torch\ndef save_checkpoint(state, path):\n    torch.save(state, path)\n"
_RESUME = (
    "import argparse\nimport torch\nfrom utils import save_checkpoint\n"
    "args = argparse.ArgumentParser().parse_args()\n"
    "model = torch.nn.Linear(2, 2)\n"
    "if args.resume:\n"
    "    ckpt = torch.load(args.resume, map_location='cpu')\n"
    "    model.load_state_dict(ckpt['model'])\n"
    "    epochs = ckpt['args']['epochs']\n"
)


class LoadWeightsOnlyFalse(Rule):
    """## What it does
    Checks for `torch.load(..., weights_only=False)`, except a round trip, which cannot hold
    anyone else's pickle.

    A round trip loads the temporary file or in-memory buffer that the same function has just
    written with `torch.save` (tests that save a whole model and read it back), or any path
    that the same function, or the same module-level block (a `with` statement), has just
    written (a cache of dataset objects read back at once, where `weights_only=False` is
    needed).

    A `torch.load(...)` without `weights_only=` (TorchFix's TOR102) is reported by what it does
    on the target torch version (`target-version`, else the installed one):

    - before 2.6, where `weights_only` still defaults to `False`, as a warning;
    - from 2.6, where the default is `True`, only when the code shows that the load will
      **fail** (`UnpicklingError`) because the checkpoint holds objects the default refuses:
      the loaded value, or an item of it, is used as a module (`model = torch.load(p)` or
      `model = ckpt["model"]`, then `model.eval()` or `model(x)`, also after `model =
      model.cuda()`; only that variable's own uses count, not another value of the same
      name), a key of it is read through attributes (`ckpt["args"].lr`), or this file's own
      `torch.save` (or a saving helper of another module of the project it hands the
      checkpoint to, `save_checkpoint(state, path)`) writes such objects under the keys the load reads (`{"args": args}` with
      `args = parser.parse_args()`, a whole module, an optimizer object, a numpy array) or as
      the whole object to the path the load reads. The default refuses the **whole file**,
      whatever key the code reads afterwards: a load is also reported when any save of the
      project puts such an object (an `argparse.Namespace`, a yacs `CfgNode` or omegaconf
      config, a numpy array, an instance of a dataclass or another class of the project, a
      module, a dataset) into the file it reads — this file's `torch.save` of the same path (keys added
      with `ckpt["args"] = args` count), a saving helper of another module
      (`save_on_master(*args, **kwargs)`), a save writing a checkpoint dict that holds every
      key the load reads (two at least: the same checkpoint format), or another script in
      the same folder writing the same file name (`train.py` saves what `test.py` loads).
      These are errors: the load fails. Loads inside
      `torch.serialization.safe_globals([...])`, in a `try` whose handler loads the file again,
      or in a file that calls `add_safe_globals`,
      are left alone;
    - with a custom `pickle_module=`, where the default is `False` on every version, as a
      warning.

    Calls in code for other torch versions (an `except TypeError:` handler, a branch of an `if`
    that tests a version) are left alone.

    ## Why is this bad?
    With `weights_only=False`, `torch.load` runs Python's full unpickler: a checkpoint can name
    any importable function and have it called while loading. A model file downloaded from the
    internet, a shared drive or a colleague's bucket can then run arbitrary code on your
    machine, with your credentials.

    Since PyTorch 2.6 `weights_only` defaults to `True`: tensors, state dicts, dicts, lists,
    numbers and strings load without it, and anything else must be allowed by name. Passing
    `weights_only=False` switches that protection off for the whole file.

    ## Example
    ```python
    import torch

    checkpoint = torch.load("checkpoint.pt", map_location="cpu", weights_only=False)
    ```

    ## Use instead
    Leave the default (`weights_only=True`). When the checkpoint holds classes of your own,
    allow exactly those:
    ```python
    import torch

    from mylib.config import TrainConfig

    torch.serialization.add_safe_globals([TrainConfig])
    checkpoint = torch.load("checkpoint.pt", map_location="cpu")
    ```
    `torch.serialization.safe_globals([...])` does the same as a context manager, and
    `torch.serialization.get_unsafe_globals_in_checkpoint(path)` lists what a file needs.
    Better still, save only tensors and plain containers (`model.state_dict()`).

    ## Fix safety
    No fix is offered for `weights_only=False`: keeping it may be a deliberate choice for a file
    you trust, and the classes to allow can only be chosen by you. For a call without
    `weights_only=` before 2.6, the fix adds `weights_only=True`; it is unsafe because a
    checkpoint holding other objects then fails to load until they are allowed. A load that
    fails from 2.6 gets no fix: what to change (the save, the allowed classes, or trusting the
    file) is the user's choice, and `weights_only=True` is what already fails. No fix is offered
    with a custom `pickle_module=`: torch refuses `weights_only=True` together with it.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [`torch.serialization.add_safe_globals`](https://pytorch.org/docs/stable/notes/serialization.html#weights-only)
    - [Python `pickle` security warning](https://docs.python.org/3/library/pickle.html)
    """

    code = "TDR603"
    name = "load-weights-only-false"
    fix_safety = Applicability.UNSAFE

    VALID = (
        'import torch\nsd = torch.load("m.pt", map_location="cpu", weights_only=True)',
        # The arguments may hold weights_only.
        "import torch\ndef restore(path, **options):\n    return torch.load(path, **options)\n",
        # A fallback for a torch without weights_only.
        "import torch\ndef read(path):\n    try:\n        return torch.load(path, weights_only=True)\n"
        "    except TypeError:\n        return torch.load(path)\n",
        "import torch\nif TORCH_VERSION < (1, 13):\n    sd = torch.load(p)\n"
        "else:\n    sd = torch.load(p, weights_only=True)\n",
        # Round trip without weights_only.
        "import io\nimport torch\ndef check(model):\n    b = io.BytesIO()\n"
        "    torch.save(model.state_dict(), b)\n    b.seek(0)\n    return torch.load(b)\n",
        # Not a literal: the caller decides.
        "import torch\ndef restore(path, trusted):\n"
        '    return torch.load(path, map_location="cpu", weights_only=not trusted)\n',
        # Other libraries' load functions.
        "import torch\nimport numpy as np\nx = np.load('a.npy', allow_pickle=False)\n"
        "y = np.load('b.npz', weights_only=False)",
        # A round trip: the function reads back what it has just saved.
        "import io\nimport torch\ndef check(model):\n    b = io.BytesIO()\n"
        "    torch.save(model, b)\n    b.seek(0)\n    return torch.load(b, weights_only=False)\n",
        "import tempfile\nimport torch\ndef check(model):\n"
        "    with tempfile.NamedTemporaryFile() as tmp:\n        torch.save(model, tmp.name)\n"
        "        return torch.load(tmp.name, weights_only=False)\n",
        # A cache the function writes and reads back at once: its own objects.
        "import torch\ndef cached(dataset, path):\n    torch.save(dataset, path)\n"
        "    return torch.load(path, weights_only=False)\n",
        "import os\nimport tempfile\nimport torch\nwith tempfile.TemporaryDirectory() as d:\n"
        "    torch.save(model, os.path.join(d, 'm.pt'))\n"
        "    again = torch.load(os.path.join(d, 'm.pt'), weights_only=False)\n",
        "import torch\nif build:\n    torch.save(items, 'cache.pt')\n"
        "    items = torch.load('cache.pt', weights_only=False)\n",
        # Another value of the same name is the module, not what was loaded.
        "import torch\nfrom torch import nn\nmodel = torch.load(path)\nprint(sorted(model))\n"
        "model = nn.Linear(2, 2)\nmodel.eval()\n",
        "import torch\nsd = torch.load(path)\nnet = Net()\nnet.load_state_dict(sd)\nnet.eval()\n",
        # From torch 2.6 the default loads tensors, state dicts and plain containers.
        'import torch\nsd = torch.load("m.pt", map_location="cpu")',
        "import torch\nmodel.load_state_dict(torch.load(path))",
        "import torch\nckpt = torch.load(path)\nmodel.load_state_dict(ckpt['model'])\n"
        "epoch = ckpt['epoch']\nn = ckpt['model'].keys()",
        # The saved dict holds only tensors and plain values: `vars(args)`, a state dict.
        "import torch\ndef save(model, args, path):\n"
        "    torch.save({'model': model.state_dict(), 'args': vars(args)}, path)\n"
        "def load(path):\n    return torch.load(path)['args']\n",
        # The project allows its classes.
        "import torch\nfrom mylib import Config\ntorch.serialization.add_safe_globals([Config])\n"
        "model = torch.load(path)\nmodel.eval()\n",
        "import torch\nwith torch.serialization.safe_globals([Net]):\n"
        "    model = torch.load(path)\nmodel.eval()\n",
        # A local function named load.
        "import torch\ndef load(path, weights_only=True):\n    return path\n"
        "x = load('a', weights_only=False)",
        # torch.load shadowed by a parameter.
        "from torch import load\ndef restore(load, path):\n"
        "    return load(path, weights_only=False)\n",
        # The same through the helper, with the arguments saved as a dict.
        Valid(
            _RESUME
            + "save_checkpoint({'model': model.state_dict(), 'args': vars(args)}, 'ckpt.pt')\n",
            files=(("utils.py", _SAVE_HELPER),),
        ),
        # A positional spread may hold `pickle_module`.
        "import torch\nsd = torch.load(path, 'cpu', *extra)\n",
        # The file it saves the Namespace to is not the one it loads: another format, one key.
        "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
        "torch.save({'model': model.state_dict(), 'args': args}, 'last.pt')\n"
        "model.load_state_dict(torch.load('pretrained.pt')['model'])\n",
        # Plain containers made from the config: `vars(args)`, `OmegaConf.to_container`.
        "import torch\nfrom omegaconf import OmegaConf\ncfg = OmegaConf.load('c.yaml')\n"
        "torch.save({'model': net.state_dict(), 'cfg': OmegaConf.to_container(cfg)}, 'c.pt')\n"
        "ckpt = torch.load('c.pt')\n",
        # Another script of the project writes a file of another name.
        Valid(
            "import torch\nsd = torch.load('weights.pt', map_location='cpu')\n",
            files=(
                (
                    "train.py",
                    "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
                    "torch.save({'args': args}, 'run_args.pt')\n",
                ),
            ),
        ),
        # A failure is caught and the file loaded again with the class allowed.
        "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
        "torch.save({'model': 1, 'args': args}, 'ckpt.pt')\ntry:\n"
        "    ckpt = torch.load('ckpt.pt')\nexcept Exception:\n"
        "    with torch.serialization.safe_globals([argparse.Namespace]):\n"
        "        ckpt = torch.load('ckpt.pt')\n",
    )
    INVALID = (
        Invalid(
            'import torch\nckpt = torch.load("ckpt.pt", map_location="cpu", weights_only=False)',
            fixed=None,
            lines=(2,),
        ),
        # From torch 2.6, loads that fail: the value is a module, or holds a Namespace.
        Invalid(
            "import torch\nmodel = torch.load('model.pt')\nmodel.eval()\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid("import torch\nnet = torch.load(path)\ny = net(x)\n", fixed=None, lines=(2,)),
        # Through `model = model.cuda()`, or an item of the checkpoint.
        Invalid(
            "import torch\nmodel = torch.load(opt.model)\nif opt.cuda:\n"
            "    model = model.cuda()\nmodel.eval()\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nckpt = torch.load(path)\nmodel = ckpt['model']\nmodel.eval()\n",
            fixed=None,
            lines=(2,),
        ),
        # The file pickles a whole module to the path the load reads.
        Invalid(
            "import os\nimport torch\nfrom torch import nn\nnet = nn.Linear(2, 2)\n"
            "out = os.path.join(args.out, 'net.pt')\ntorch.save(net, out)\n"
            "restored = torch.load(os.path.join(args.out, 'net.pt'))\n",
            fixed=None,
            lines=(7,),
        ),
        # Written and read back by top-level statements: not one block, the file outlives it.
        Invalid(
            "import torch\ntorch.save(items, 'cache.pt')\n"
            "items = torch.load('cache.pt', weights_only=False)\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nckpt = torch.load(path, map_location='cpu')\nlr = ckpt['args'].lr\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
            "def save(model, path):\n"
            "    torch.save({'model': model.state_dict(), 'args': args}, path)\n"
            "def resume(model, path):\n"
            "    ckpt = torch.load(path, map_location='cpu')\n"
            "    model.load_state_dict(ckpt['model'])\n    return ckpt['args']\n",
            fixed=None,
            lines=(7,),
        ),
        Invalid(
            "import numpy as np\nimport torch\ntorch.save(np.sin(np.arange(10)), 'wave.pt')\n"
            "data = torch.load('wave.pt')\n",
            fixed=None,
            lines=(4,),
        ),
        # A custom pickle module makes the default False.
        Invalid(
            "import dill\nimport torch\nobj = torch.load(path, pickle_module=dill)",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import pickle\nimport torch\nobj = torch.load(path, 'cpu', pickle)",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch as T\nckpt = T.load(path, weights_only=False, map_location='cpu')",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "from torch import load as torch_load\n"
            "ckpt = torch_load('ckpt.pt', map_location='cpu', weights_only=False)",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch.serialization\n"
            "ckpt = torch.serialization.load('a.pt', map_location='cpu', weights_only=False)",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nckpt = torch.load('ckpt.pt', map_location='cpu', weights_only=False)\n",
            fixed=None,
            notebook=True,
            lines=(2,),
        ),
        # The checkpoint it resumes from is written by a saving helper of another module.
        Invalid(
            _RESUME + "save_checkpoint({'model': model.state_dict(), 'args': args}, 'ckpt.pt')\n",
            fixed=None,
            files=(("utils.py", _SAVE_HELPER),),
            lines=(7,),
        ),
        # `pickle_module` passed by position.
        Invalid(
            "import dill\nimport torch\nsd = torch.load(path, 'cpu', dill)\n",
            fixed=None,
            lines=(3,),
        ),
        # The whole file is refused, whatever key the code reads: the checkpoint format its own
        # `save_on_master(*args, **kwargs)` helper writes, with the arguments in it.
        Invalid(
            "import argparse\nimport torch\nfrom misc import save_on_master\n"
            "args = argparse.ArgumentParser().parse_args()\n"
            "if args.resume:\n    checkpoint = torch.load(args.resume, map_location='cpu')\n"
            "    model.load_state_dict(checkpoint['model'])\n"
            "    optimizer.load_state_dict(checkpoint['optimizer'])\n"
            "for epoch in range(10):\n"
            "    save_on_master({'model': model.state_dict(), 'optimizer': optimizer.state_dict(),"
            " 'args': args}, 'checkpoint.pth')\n",
            fixed=None,
            files=(
                (
                    "misc.py",
                    "import torch\ndef save_on_master(*args, **kwargs):\n"
                    "    if is_main_process():\n        torch.save(*args, **kwargs)\n",
                ),
            ),
            lines=(6,),
        ),
        # A key added by subscript, a yacs config, an instance of a dataclass.
        Invalid(
            "import torch\nfrom yacs.config import CfgNode as CN\ncfg = CN()\n"
            "def save(model, path):\n    state = {'model': model.state_dict()}\n"
            "    state['cfg'] = cfg\n    torch.save(state, path)\n"
            "save(net, 'best.pth')\nnet.load_state_dict(torch.load('best.pth')['model'])\n",
            fixed=None,
            lines=(9,),
        ),
        Invalid(
            "from dataclasses import dataclass\nimport torch\n@dataclass\nclass Config:\n"
            "    lr: float = 0.1\n"
            "torch.save({'model': net.state_dict(), 'config': Config()}, 'out.pt')\n"
            "net.load_state_dict(torch.load('out.pt')['model'])\n",
            fixed=None,
            lines=(7,),
        ),
        # A dataset cache: the Dataset object itself is refused.
        Invalid(
            "import torch\nfrom torch.utils.data import TensorDataset\n"
            "def build(x, path):\n    torch.save(TensorDataset(x), path)\n"
            "def restore(path):\n    return torch.load(path)\n"
            "build(x, 'cache.pt')\nds = restore('cache.pt')\n",
            fixed=None,
            lines=(6,),
        ),
        # Another script of the project writes the file name this one reads.
        Invalid(
            "import torch\nsd = torch.load('checkpoints/model.pt', map_location='cpu')\n"
            "net.load_state_dict(sd['model'])\n",
            fixed=None,
            files=(
                (
                    "train.py",
                    "import argparse\nimport os\nimport torch\n"
                    "args = argparse.ArgumentParser().parse_args()\n"
                    "torch.save({'model': net.state_dict(), 'args': args},"
                    " os.path.join(args.out, 'model.pt'))\n",
                ),
            ),
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        old_default = torch_version.before(ctx.settings, "2.6")
        for call in ctx.sem.calls_to(*LOADS):
            bound = arguments.bind(call, arguments.LOAD)
            kw = bound.keyword("weights_only")
            if kw is None:
                if (
                    bound.unknown("weights_only")
                    or bound.unknown("pickle_module")
                    or checkpoints.round_trip(ctx.sem, call)
                    or ctx.sem.in_version_fallback(call, ("TypeError",))
                ):
                    continue  # the arguments may hold it, the file is the function's own, or
                    # the code is for a torch without `weights_only`
                pickler = bound.value("pickle_module")
                if pickler is not None and not is_none(pickler):
                    self._report_custom_pickler(ctx, call)
                elif old_default:
                    self._report_missing(ctx, call)
                elif not _allows_globals(ctx, call) and not _retried(ctx, call):
                    evidence = _unpicklable(ctx, call)
                    if evidence is not None:
                        self._report_fails(ctx, call, evidence)
                continue
            if not is_false(kw.value) or checkpoints.round_trip(ctx.sem, call, lasting=True):
                continue  # the function (or block) reads back the file it has just written
            ctx.report(
                kw,
                Text(
                    "`torch.load(..., weights_only=False)` unpickles arbitrary objects: a "
                    "malicious checkpoint can run code when it is loaded",
                    "`torch.load(..., weights_only=False)` 会反序列化任意对象：恶意检查点在加载时即可执行代码",
                ),
            )

    @staticmethod
    def _add_weights_only(ctx: Context, call: ast.Call) -> Fix:
        return Fix(
            Text("Add `weights_only=True`", "添加 `weights_only=True`"),
            (fixes.add_keyword(ctx.source, call, "weights_only=True"),),
            Applicability.UNSAFE,
        )

    def _report_missing(self, ctx: Context, call: ast.Call) -> None:
        ctx.report(
            call,
            Text(
                "`torch.load` without `weights_only=`: before PyTorch 2.6 it unpickles arbitrary "
                "objects by default; pass `weights_only=True`",
                "`torch.load` 未指定 `weights_only=`：在 PyTorch 2.6 之前默认会反序列化任意对象；"
                "请传入 `weights_only=True`",
            ),
            fixes=partial(self._add_weights_only, ctx, call),
        )

    @staticmethod
    def _report_fails(ctx: Context, call: ast.Call, evidence: tuple[ast.AST, Text]) -> None:
        where, what = evidence
        ctx.report(
            call,
            Text(
                f"`torch.load` fails on PyTorch 2.6+ (`UnpicklingError`): the checkpoint holds "
                f"{what.en}, which the default `weights_only=True` refuses; save "
                "`state_dict()` or `vars(args)` instead, or allow the classes with "
                "`torch.serialization.add_safe_globals([...])` (`weights_only=False` only for "
                "files you trust)",
                f"`torch.load` 在 PyTorch 2.6+ 上会失败（`UnpicklingError`）：检查点中含有"
                f"{what.zh}，默认的 `weights_only=True` 会拒绝加载；请改为保存 `state_dict()` 或 "
                "`vars(args)`，或用 `torch.serialization.add_safe_globals([...])` 放行这些类"
                "（只对可信文件使用 `weights_only=False`）",
            ),
            related=[ctx.related(where, Text("what shows it", "依据"))]
            if where is not call
            else [],
            severity=Severity.ERROR,
        )

    @staticmethod
    def _report_custom_pickler(ctx: Context, call: ast.Call) -> None:
        ctx.report(
            call,
            Text(
                "`torch.load(..., pickle_module=...)` without `weights_only=` unpickles arbitrary "
                "objects: with a custom pickle module the default is `weights_only=False`",
                "`torch.load(..., pickle_module=...)` 未指定 `weights_only=` 时会反序列化任意对象："
                "使用自定义 pickle 模块时默认值为 `weights_only=False`",
            ),
        )


_PLAIN_ATTRS = checkpoints.PLAIN_ATTRS
_MODULE_ATTRS = checkpoints.MODULE_ATTRS
_ARGS = Text("an `argparse.Namespace`", "`argparse.Namespace`")
_MODULE = Text("a whole module", "整个模块")
_OBJECT = Text(
    "a Python object other than tensors and plain containers", "张量和普通容器之外的 Python 对象"
)
_HELD = {
    checkpoints.NAMESPACE: _ARGS,
    checkpoints.CONFIG: Text(
        "a config object (yacs `CfgNode`, omegaconf)", "配置对象（yacs `CfgNode`、omegaconf）"
    ),
    checkpoints.NUMPY: Text("a numpy array", "numpy 数组"),
    checkpoints.MODULE: _MODULE,
    checkpoints.DATACLASS: Text("an instance of a class of the project", "项目中某个类的实例"),
    checkpoints.OBJECT: _OBJECT,
}


def _allows_globals(ctx: Context, call: ast.Call) -> bool:
    """The load runs inside ``torch.serialization.safe_globals([...])``, or the file allows
    classes with ``add_safe_globals``: the project already chose what to unpickle."""
    if any(ctx.sem.calls_to("torch.serialization.add_safe_globals")):
        return True
    for with_node in ctx.sem.enclosing_withs(call):
        for item in with_node.items:
            if ctx.qualname(getattr(item.context_expr, "func", item.context_expr)) == (
                "torch.serialization.safe_globals"
            ):
                return True
    return False


def _retried(ctx: Context, call: ast.Call) -> bool:
    """The load runs in a ``try`` whose handler loads again: a failure is caught."""
    child: ast.AST = call
    for anc in ctx.sem.ancestors(call):
        if isinstance(anc, ast.Try) and any(child is s for s in anc.body):
            for handler in anc.handlers:
                if any(
                    isinstance(n, ast.Call) and ctx.qualname(n.func) in LOADS
                    for n in ast.walk(handler)
                ):
                    return True
        child = anc
    return False


def _saved_objects(ctx: Context) -> dict[str, tuple[ast.AST, Text]]:
    """What this file's saves write into checkpoint dicts that ``weights_only=True``
    refuses, by the dict key it is saved under (computed once per file)."""
    known = ctx.sem.memo.get("tdr603-saved-objects")
    if isinstance(known, dict):
        return known
    out: dict[str, tuple[ast.AST, Text]] = {}
    ctx.sem.memo["tdr603-saved-objects"] = out
    for written in checkpoints.writes(ctx.sem):
        for held in written.held:
            if held.key is not None:
                out.setdefault(held.key, (held.node, _HELD[held.what]))
    return out


def _unpicklable(ctx: Context, call: ast.Call) -> tuple[ast.AST, Text] | None:
    """Where the code shows that what this load reads holds objects ``weights_only=True``
    refuses: the loaded value used as a module or an item of it read through attributes, the
    keys it reads saved with such objects by this file, or any such object put into the file
    it reads by a save of the project (this file's, a helper's, another script's)."""
    sem = ctx.sem
    used = checkpoints.module_use(sem, call)
    if used is not None:
        return used, _MODULE
    for use in checkpoints.value_uses(sem, call) or ():
        outer = sem.parent(use)
        if not (isinstance(outer, ast.Subscript) and outer.value is use):
            continue
        key, above = outer.slice, sem.parent(outer)
        if isinstance(above, ast.Assign):
            used = checkpoints.module_use(sem, outer)  # model = ckpt["model"]; model.eval()
            if used is not None:
                return used, _MODULE
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            saved = _saved_objects(ctx)
            if key.value in saved:
                return saved[key.value]
            if isinstance(above, ast.Attribute) and above.attr not in _PLAIN_ATTRS:
                return above, _MODULE if above.attr in _MODULE_ATTRS else _OBJECT
    for written in checkpoints.writers_of(sem, call):
        for held in written.held:
            what = _HELD[held.what]
            if written.sem is sem:
                return held.node, what
            name = os.path.basename(written.sem.path or "")
            return call, Text(f"{what.en} (saved by `{name}`)", f"{what.zh}（由 `{name}` 保存）")
    return None
