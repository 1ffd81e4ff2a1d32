from __future__ import annotations

import ast
import os
from functools import partial

from ..core import checkpoints, fixes, torch_version
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import argument, has_star_kwargs, is_false, is_none, keyword
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

    zh = """## 功能
    检查 `torch.load(..., weights_only=False)`，往返读写除外，其中不可能有别人的 pickle。

    往返读写是指读取同一函数刚用 `torch.save` 写入的临时文件或内存缓冲区（保存整个模型再读回的测试），或读取
    同一函数、同一个模块级代码块（`with` 语句）刚写入的任何路径（写入后立即读回的数据集对象缓存，这时需要
    `weights_only=False`）。

    未传 `weights_only=` 的 `torch.load(...)`（对应 TorchFix 的 TOR102）按它在目标 torch 版本
    （`target-version`，否则为已安装的版本）上的行为报告：

    - 早于 2.6 时，`weights_only` 的默认值仍为 `False`，报告为警告；
    - 自 2.6 起默认值为 `True`，只有当代码表明这次加载会**失败**（`UnpicklingError`）时才报告——检查点中含有
      默认设置拒绝的对象：加载结果或其中的条目被当作模块使用（`model = torch.load(p)` 或
      `model = ckpt["model"]`，之后 `model.eval()` 或 `model(x)`，经过 `model = model.cuda()` 也算；只看这个
      变量自己的使用，不看同名的其他值），通过属性读取其中的键（`ckpt["args"].lr`），或本文件自己的
      `torch.save`（或它把检查点交给的、项目其他模块中的保存辅助函数 `save_checkpoint(state, path)`）在加载读取的键下写入了这类对象（`{"args": args}` 且 `args = parser.parse_args()`、整个模块、
      优化器对象、numpy 数组），或把这类对象整个写入了加载读取的路径。默认设置会拒绝**整个文件**，无论代码之后读取哪个键：只要项目中的任一保存
      把这类对象（`argparse.Namespace`、yacs `CfgNode` 或 omegaconf 配置、numpy 数组、dataclass 或项目中其他类的
      实例、模块、数据集）写入加载读取的文件，就会报告——本文件对同一路径的 `torch.save`（用 `ckpt["args"] = args` 添加的
      键也算）、其他模块的保存辅助函数（`save_on_master(*args, **kwargs)`）、写入的检查点字典包含加载读取的全部键
      （至少两个：同一种检查点格式）的保存，或同一文件夹中写入同名文件的另一个脚本（`train.py` 保存、`test.py`
      加载）。这些是错误：加载会失败。位于
      `torch.serialization.safe_globals([...])` 之内的加载、位于其处理分支会再次加载该文件的 `try` 中的加载，
      或文件中调用了 `add_safe_globals` 时，不报告；
    - 传入自定义 `pickle_module=` 时，任何版本的默认值都是 `False`，报告为警告。

    用于其他 torch 版本的代码（`except TypeError:` 分支、检测版本的 `if` 分支）中的调用不会被报告。

    ## 为什么不好？
    设置 `weights_only=False` 时，`torch.load` 使用 Python 完整的反序列化器（unpickler）：检查点文件可以指定
    任意可导入的函数，并在加载时调用它。从网上下载、从共享盘或同事的存储桶拿到的模型文件，就可能以你的身份
    在你的机器上执行任意代码。

    自 PyTorch 2.6 起，`weights_only` 默认为 `True`：张量、state dict、字典、列表、数字和字符串无需它即可
    加载，其他对象需要按名称显式放行。传入 `weights_only=False` 会关闭对整个文件的这层保护。

    ## 示例
    ```python
    import torch

    checkpoint = torch.load("checkpoint.pt", map_location="cpu", weights_only=False)
    ```

    ## 改为
    保留默认值（`weights_only=True`）。检查点中含有自定义类时，只放行这些类：
    ```python
    import torch

    from mylib.config import TrainConfig

    torch.serialization.add_safe_globals([TrainConfig])
    checkpoint = torch.load("checkpoint.pt", map_location="cpu")
    ```
    `torch.serialization.safe_globals([...])` 以上下文管理器的形式完成同样的事，
    `torch.serialization.get_unsafe_globals_in_checkpoint(path)` 可以列出文件需要放行的对象。
    更好的做法是只保存张量和普通容器（`model.state_dict()`）。

    ## 修复安全性
    对 `weights_only=False` 不提供修复：对可信文件保留它可能是有意的选择，而需要放行哪些类只能由你决定。在 2.6
    之前未传 `weights_only=` 的调用，修复会添加 `weights_only=True`；它是不安全的：含有其他对象的检查点在这些
    对象被放行之前将无法加载。自 2.6 起会失败的加载不提供修复：改什么（保存方式、放行的类，还是信任该文件）由
    用户决定，而 `weights_only=True` 正是已经会失败的设置。传入自定义 `pickle_module=` 时不提供修复：torch
    不接受它与 `weights_only=True` 同时使用。

    ## 参考
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [`torch.serialization.add_safe_globals`](https://pytorch.org/docs/stable/notes/serialization.html#weights-only)
    - [Python `pickle` 安全警告](https://docs.python.org/zh-cn/3/library/pickle.html)
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
            kw = keyword(call, "weights_only")
            if kw is None:
                if (
                    has_star_kwargs(call)
                    or len(call.args) > 3
                    or any(isinstance(a, ast.Starred) for a in call.args)
                    or checkpoints.round_trip(ctx.sem, call)
                    or ctx.sem.in_version_fallback(call, ("TypeError",))
                ):
                    continue  # the arguments may hold it, the file is the function's own, or
                    # the code is for a torch without `weights_only`
                pickler = argument(call, "pickle_module", 2)
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
