from __future__ import annotations

import ast

from ..engine import fixes, torch_version
from ..engine.context import Context
from ..engine.model import Applicability, Fix, Text
from ..engine.semantic import has_star_kwargs, is_false, keyword
from .base import Invalid, Rule

LOADS = ("torch.load", "torch.serialization.load")


class LoadWeightsOnlyFalse(Rule):
    """## What it does
    Checks for `torch.load(..., weights_only=False)`, except a round trip: loading the temporary
    file or in-memory buffer that the same function has just written with `torch.save` (tests
    that save a whole model and read it back), which cannot hold anyone else's pickle.

    When the target torch version (`target-version`, else the installed one) is older than 2.6,
    where `weights_only` still defaults to `False`, a `torch.load(...)` without `weights_only=`
    is reported too (TorchFix's TOR102).

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
    `weights_only=` on torch before 2.6, the fix adds `weights_only=True`; it is unsafe because a
    checkpoint holding other objects then fails to load until they are allowed.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [`torch.serialization.add_safe_globals`](https://pytorch.org/docs/stable/notes/serialization.html#weights-only)
    - [Python `pickle` security warning](https://docs.python.org/3/library/pickle.html)
    """

    zh = """## 功能
    检查 `torch.load(..., weights_only=False)`，往返读写除外：读取同一函数刚用 `torch.save` 写入的临时文件或内存
    缓冲区（保存整个模型再读回的测试），其中不可能有别人的 pickle。

    当目标 torch 版本（`target-version`，否则为已安装的版本）早于 2.6 时——此时 `weights_only` 的默认值仍为
    `False`——未传 `weights_only=` 的 `torch.load(...)` 也会被报告（对应 TorchFix 的 TOR102）。

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
    对 `weights_only=False` 不提供修复：对可信文件保留它可能是有意的选择，而需要放行哪些类只能由你决定。对于目标版本
    早于 2.6 且未传 `weights_only=` 的调用，修复会添加 `weights_only=True`；它是不安全的：含有其他对象的检查点在这些
    对象被放行之前将无法加载。

    ## 参考
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [`torch.serialization.add_safe_globals`](https://pytorch.org/docs/stable/notes/serialization.html#weights-only)
    - [Python `pickle` 安全警告](https://docs.python.org/zh-cn/3/library/pickle.html)
    """

    code = "TDR603"
    name = "load-weights-only-false"
    fix_safety = Applicability.UNSAFE

    VALID = (
        'import torch\nsd = torch.load("m.pt", map_location="cpu")',
        'import torch\nsd = torch.load("m.pt", map_location="cpu", weights_only=True)',
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
                if old_default and not has_star_kwargs(call) and len(call.args) < 4:
                    self._report_missing(ctx, call)
                continue
            value = kw.value
            if not is_false(value):
                continue
            if ctx.sem.round_trip(call):
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
    def _report_missing(ctx: Context, call: ast.Call) -> None:
        fix = Fix(
            Text("Add `weights_only=True`", "添加 `weights_only=True`"),
            (fixes.add_keyword(ctx.source, call, "weights_only=True"),),
            Applicability.UNSAFE,
        )
        ctx.report(
            call,
            Text(
                "`torch.load` without `weights_only=`: before PyTorch 2.6 it unpickles arbitrary "
                "objects by default; pass `weights_only=True`",
                "`torch.load` 未指定 `weights_only=`：在 PyTorch 2.6 之前默认会反序列化任意对象；"
                "请传入 `weights_only=True`",
            ),
            fixes=[fix],
        )
