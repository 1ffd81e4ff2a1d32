from __future__ import annotations

import ast

from ..core import fixes, kinds
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Fix, Text
from ..core.semantic import has_star_kwargs, keyword
from .base import Invalid, Rule


class LoadWithoutMapLocation(Rule):
    """## What it does
    Checks for `torch.load(...)` calls without `map_location=`.

    ## Why is this bad?
    `torch.load` restores every tensor onto the device it was saved from. A checkpoint written
    on a GPU machine fails to load on a CPU-only machine with `RuntimeError: Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is False`, and on a
    machine with fewer GPUs it lands on the wrong one, or fills GPU 0 of every process in a
    distributed job before you move it.

    ## Example
    ```python
    import torch

    state = torch.load("checkpoint.pt")
    ```

    ## Use instead
    ```python
    import torch

    state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
    ```

    ## Fix safety
    The fix adds `map_location="cpu"`, or `map_location=device` when a `device` variable is in
    scope. It is safe: tensors are moved to a device the code then uses anyway.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [Saving and loading models across devices](https://pytorch.org/tutorials/beginner/saving_loading_models.html)
    """

    zh = """## 功能
    检查没有传入 `map_location=` 的 `torch.load(...)` 调用。

    ## 为什么不好？
    `torch.load` 会把每个张量恢复到保存时所在的设备上。在 GPU 机器上保存的检查点，放到只有 CPU
    的机器上加载会报错 `RuntimeError: Attempting to deserialize object on a CUDA device but
    torch.cuda.is_available() is False`；在 GPU 较少的机器上会落到错误的卡上，分布式任务中每个进程都会先把
    数据堆到 0 号卡上。

    ## 示例
    ```python
    import torch

    state = torch.load("checkpoint.pt")
    ```

    ## 改为
    ```python
    import torch

    state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
    ```

    ## 修复安全性
    修复会添加 `map_location="cpu"`；当作用域中有 `device` 变量时添加 `map_location=device`。
    这是安全的：张量会被放到代码随后本就会使用的设备上。

    ## 参考
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [跨设备保存与加载模型](https://pytorch.org/tutorials/beginner/saving_loading_models.html)
    """

    code = "TDR602"
    name = "load-without-map-location"
    fix_safety = Applicability.SAFE
    aliases = ()

    VALID = (
        'import torch\nstate = torch.load("ckpt.pt", map_location="cpu")',
        'import torch\nstate = torch.load("ckpt.pt", "cpu")',
        "import torch\nstate = torch.load(path, **kwargs)",
        # A local function called load is not torch.load.
        "import torch\ndef load(p):\n    return p\nstate = load('x')",
        # Shadowed inside a function.
        "from torch import load\ndef f(load):\n    return load('x')",
        # numpy's load, pickle's load.
        "import numpy as np\nimport torch\nx = np.load('a.npy')",
        "import pickle\nimport torch\nx = pickle.load(open('a', 'rb'))",
    )
    INVALID = (
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt")',
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="cpu")',
        ),
        Invalid(
            "import torch as T\nstate = T.load(path, weights_only=True)",
            fixed='import torch as T\nstate = T.load(path, weights_only=True, map_location="cpu")',
        ),
        Invalid(
            "from torch import load\nsd = load('m.pt')",
            fixed="from torch import load\nsd = load('m.pt', map_location=\"cpu\")",
        ),
        Invalid(
            "import torch\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "def restore(path):\n"
            "    return torch.load(path)\n",
            fixed="import torch\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "def restore(path):\n"
            "    return torch.load(path, map_location=device)\n",
        ),
        Invalid(
            "import torch\nsd = torch.load(\n    'm.pt',\n)\n",
            fixed="import torch\nsd = torch.load(\n    'm.pt',\n    map_location=\"cpu\",\n)\n",
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to("torch.load"):
            if len(call.args) >= 2 or keyword(call, "map_location") or has_star_kwargs(call):
                continue
            if any(isinstance(a, ast.Starred) for a in call.args):
                continue
            target = self._device_name(ctx, call)
            value = target if target else '"cpu"'
            fix = Fix(
                Text(f"Add `map_location={value}`", f"添加 `map_location={value}`"),
                (fixes.add_keyword(ctx.source, call, f"map_location={value}"),),
                Applicability.SAFE,
            )
            ctx.report(
                call,
                Text(
                    "`torch.load` without `map_location`: tensors return to the device they "
                    "were saved from, which may not exist here",
                    "`torch.load` 未指定 `map_location`：张量会回到保存时的设备上，而该设备在这里可能不存在",
                ),
                fixes=[fix],
            )

    @staticmethod
    def _device_name(ctx: Context, call: ast.Call) -> str | None:
        for name in ("device", "dev"):
            binding = ctx.sem.lookup(name, call)
            if binding is None:
                continue
            if binding.how == "param" and name == "device":
                return name
            if binding.how == "assign" and (
                kinds.binding_kind(ctx.sem, binding) is Kind.DEVICE
                or _is_device_expr(binding.value)
            ):
                return name
        return None


def _is_device_expr(value: ast.expr | None) -> bool:
    """``"cuda" if ... else "cpu"``, ``"cuda:0"``, ``f"cuda:{rank}"``."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.split(":")[0] in ("cuda", "cpu", "mps", "xpu")
    if isinstance(value, ast.IfExp):
        return _is_device_expr(value.body) and _is_device_expr(value.orelse)
    if isinstance(value, ast.JoinedStr):
        first = value.values[0] if value.values else None
        return isinstance(first, ast.Constant) and str(first.value).startswith(("cuda", "cpu"))
    return False
