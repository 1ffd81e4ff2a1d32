from __future__ import annotations

from ..core.context import Context
from ..core.model import Severity
from . import api_table
from .base import Invalid, Rule


class RemovedApiImport(Rule):
    """## What it does
    Checks for `from ... import` statements that import a PyTorch function removed for the
    target torch version (`from torch import solve`, ...), from the same table as TDR801.

    ## Why is this bad?
    The import still succeeds in torch 2.13 (the name is a stub), so nothing fails until the
    function is called: then it raises `RuntimeError: This function was deprecated since
    version 1.9 and is now removed.` (verified on 2.13). Flagging the import points at the
    place to change once for the whole file.

    ## Example
    ```python
    from torch import symeig
    ```

    ## Use instead
    ```python
    from torch.linalg import eigh
    ```

    ## Fix safety
    No fix: the replacements take different arguments, so every call has to change too
    (TDR801 reports each call).

    ## References
    - [`torch.linalg`](https://pytorch.org/docs/stable/linalg.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR004)
    """

    zh = """## 功能
    检查从 PyTorch 导入目标版本中已移除函数的 `from ... import` 语句（如 `from torch import solve`），
    与 TDR801 使用同一张表。

    ## 为什么不好？
    在 torch 2.13 中这类导入仍然成功（名字只是占位），直到调用时才抛出 `RuntimeError: This function was
    deprecated since version 1.9 and is now removed.`（已在 2.13 上核实）。在导入处报告，便于整个文件一次改好。

    ## 示例
    ```python
    from torch import symeig
    ```

    ## 改为
    ```python
    from torch.linalg import eigh
    ```

    ## 修复安全性
    不提供修复：替代函数的参数不同，每处调用也必须修改（TDR801 会逐个报告调用）。

    ## 参考
    - [`torch.linalg`](https://pytorch.org/docs/stable/linalg.html)
    - [从 TorchFix 迁移](../torchfix-migration.md)（TorchFix 代码 TOR004）
    """

    code = "TDR803"
    name = "removed-api-import"
    severity = Severity.ERROR
    tags = ("deprecated",)
    aliases = ("TOR004",)

    VALID = (
        "from torch.linalg import solve",
        "import torch\nfrom numpy.linalg import solve",
        "from torch import qr",  # deprecated, not removed: TDR805's
        "import torch.linalg",
    )
    INVALID = (
        Invalid("from torch import solve\n", fixed=None, lines=(1,)),
        Invalid("from torch import symeig as eig_sym, nn\n", fixed=None, lines=(1,)),
        Invalid("from torch import (\n    lstsq,\n    matrix_rank,\n)\n", fixed=None, lines=(2, 3)),
        Invalid("from torch import eig\n", fixed=None, notebook=True, lines=(1,)),
    )

    def check(self, ctx: Context) -> None:
        api_table.report_imports(ctx, "removed")
