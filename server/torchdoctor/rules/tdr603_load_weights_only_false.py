from __future__ import annotations

import ast

from ..core import checkpoints, fixes, torch_version
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import argument, has_star_kwargs, is_false, is_none, keyword
from .base import Invalid, Rule

LOADS = ("torch.load", "torch.serialization.load")


class LoadWeightsOnlyFalse(Rule):
    """## What it does
    Checks for `torch.load(..., weights_only=False)`, except a round trip: loading the temporary
    file or in-memory buffer that the same function has just written with `torch.save` (tests
    that save a whole model and read it back), which cannot hold anyone else's pickle.

    A `torch.load(...)` without `weights_only=` (TorchFix's TOR102) is reported by what it does
    on the target torch version (`target-version`, else the installed one):

    - before 2.6, where `weights_only` still defaults to `False`, as a warning;
    - from 2.6, where the default is `True`, as information: the load is safe as long as nobody
      sets `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`, the switch that turns the default off for every
      `torch.load` that does not pass `weights_only` (a common workaround for old checkpoints
      that fail to load, often set for a whole container), and as long as the code never runs on
      an older torch;
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
    `weights_only=`, the fix adds `weights_only=True`; it is unsafe because, before 2.6 or where
    `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1` is set, a checkpoint holding other objects then fails to
    load until they are allowed. No fix is offered with a custom `pickle_module=`: torch refuses
    `weights_only=True` together with it.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [`torch.serialization.add_safe_globals`](https://pytorch.org/docs/stable/notes/serialization.html#weights-only)
    - [Python `pickle` security warning](https://docs.python.org/3/library/pickle.html)
    """

    zh = """## 功能
    检查 `torch.load(..., weights_only=False)`，往返读写除外：读取同一函数刚用 `torch.save` 写入的临时文件或内存
    缓冲区（保存整个模型再读回的测试），其中不可能有别人的 pickle。

    未传 `weights_only=` 的 `torch.load(...)`（对应 TorchFix 的 TOR102）按它在目标 torch 版本
    （`target-version`，否则为已安装的版本）上的行为报告：

    - 早于 2.6 时，`weights_only` 的默认值仍为 `False`，报告为警告；
    - 自 2.6 起默认值为 `True`，报告为提示信息：只要没有人设置 `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`（它会让所有
      未传 `weights_only` 的 `torch.load` 关闭默认保护，是旧检查点加载失败时常见的变通办法，常对整个容器生效），
      且代码不会在更旧的 torch 上运行，这次加载就是安全的；
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
    对 `weights_only=False` 不提供修复：对可信文件保留它可能是有意的选择，而需要放行哪些类只能由你决定。对于未传
    `weights_only=` 的调用，修复会添加 `weights_only=True`；它是不安全的：在 2.6 之前，或设置了
    `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1` 时，含有其他对象的检查点在这些对象被放行之前将无法加载。传入自定义
    `pickle_module=` 时不提供修复：torch 不接受它与 `weights_only=True` 同时使用。

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
        # A local function named load.
        "import torch\ndef load(path, weights_only=True):\n    return path\n"
        "x = load('a', weights_only=False)",
        # torch.load shadowed by a parameter.
        "from torch import load\ndef restore(load, path):\n"
        "    return load(path, weights_only=False)\n",
    )
    INVALID = (
        Invalid(
            'import torch\nckpt = torch.load("ckpt.pt", map_location="cpu", weights_only=False)',
            fixed=None,
        ),
        # Implicit weights_only (information from torch 2.6; a warning before).
        Invalid(
            'import torch\nsd = torch.load("m.pt", map_location="cpu")',
            fixed='import torch\nsd = torch.load("m.pt", map_location="cpu", weights_only=True)',
        ),
        Invalid(
            "from torch import load\nsd = load(\n    path,\n    map_location=device,\n)\n",
            fixed="from torch import load\nsd = load(\n    path,\n    map_location=device,\n    weights_only=True,\n)\n",
        ),
        # A custom pickle module makes the default False.
        Invalid(
            "import dill\nimport torch\nobj = torch.load(path, pickle_module=dill)", fixed=None
        ),
        Invalid("import pickle\nimport torch\nobj = torch.load(path, 'cpu', pickle)", fixed=None),
        Invalid(
            "import torch as T\nckpt = T.load(path, weights_only=False, map_location='cpu')",
            fixed=None,
        ),
        Invalid(
            "from torch import load as torch_load\n"
            "ckpt = torch_load('ckpt.pt', map_location='cpu', weights_only=False)",
            fixed=None,
        ),
        Invalid(
            "import torch.serialization\n"
            "ckpt = torch.serialization.load('a.pt', map_location='cpu', weights_only=False)",
            fixed=None,
        ),
        Invalid(
            "import torch\nckpt = torch.load('ckpt.pt', map_location='cpu', weights_only=False)\n",
            fixed=None,
            notebook=True,
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
                else:
                    self._report_implicit(ctx, call)
                continue
            if not is_false(kw.value) or checkpoints.round_trip(ctx.sem, call):
                continue
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
            fixes=[self._add_weights_only(ctx, call)],
        )

    def _report_implicit(self, ctx: Context, call: ast.Call) -> None:
        ctx.report(
            call,
            Text(
                "`torch.load` relies on the default `weights_only=True`: "
                "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1` in the environment, or a torch older than "
                "2.6, makes this load unpickle arbitrary objects; pass `weights_only=True`",
                "`torch.load` 依赖默认的 `weights_only=True`：环境中设置了 "
                "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`，或 torch 早于 2.6 时，这次加载会反序列化任意对象；"
                "请显式传入 `weights_only=True`",
            ),
            fixes=[self._add_weights_only(ctx, call)],
            severity=Severity.INFO,
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
