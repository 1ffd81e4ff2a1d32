from __future__ import annotations

from ..core.context import Context
from ..core.model import Applicability, Severity
from . import api_table
from .base import Invalid, Rule, Valid


class LegacyApiUse(Rule):
    """## What it does
    Checks for uses of PyTorch APIs that are deprecated only in the documentation, or legacy
    spellings that behave as they always did, from the same table as TDR804
    (`rules/api_table.py`): `torch.norm`, `torch.svd`, `torch.ger`,
    `nn.UpsamplingNearest2d/Bilinear2d`, `torch.autograd.Variable`, CPU legacy constructors such
    as `torch.FloatTensor(...)` and `torch.LongTensor(...)`, and TorchScript (`torch.jit.script`,
    `trace`, `save`, `load`...).

    Off by default (`extend-select = ["TDR813"]` turns it on): none of these prints a warning in
    a training run or changes a result, so on real code they are style. Deprecations that warn
    or change behaviour are TDR804's.

    ## Why is this bad?
    These spellings still work, but their replacements are where new features and fixes land:
    `torch.linalg.vector_norm`/`matrix_norm` and `torch.linalg.svd` are the maintained linear
    algebra (and `torch.svd` returns `V`, not `Vh`); since PyTorch 0.4 a tensor tracks gradients
    itself and `Variable(x)` is `x`; a legacy constructor called with sizes returns
    uninitialised memory, where `torch.empty` says so in its name; TorchScript gets no new
    features, and `torch.compile`/`torch.export` replace it. Moving is worth it when you touch
    the code anyway.

    ## Example
    ```python
    import torch
    from torch.autograd import Variable

    x = Variable(torch.FloatTensor([1.0, 2.0]))
    n = torch.norm(x)
    ```

    ## Use instead
    ```python
    import torch

    x = torch.tensor([1.0, 2.0])
    n = torch.linalg.vector_norm(x)
    ```

    ## Fix safety
    As for TDR804: fixes are offered only where the replacement is known to behave the same for
    the arguments given (`torch.ger`, upsampling modules, legacy constructors with literal
    sizes or data), and are safe there. `Variable(x)` gets no fix: it also detaches `x` from
    its graph, so dropping it can change gradients.

    ## References
    - [Deprecations in `torch.linalg`](https://pytorch.org/docs/stable/linalg.html)
    - [Tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR101)
    """

    zh = """## 功能
    根据与 TDR804 相同的数据表（`rules/api_table.py`）检查只在文档中宣布弃用的 PyTorch API，以及行为一如既往的
    旧式写法：`torch.norm`、`torch.svd`、`torch.ger`、`nn.UpsamplingNearest2d/Bilinear2d`、
    `torch.autograd.Variable`、`torch.FloatTensor(...)`、`torch.LongTensor(...)` 等 CPU 旧式构造函数，以及
    TorchScript（`torch.jit.script`、`trace`、`save`、`load` 等）。

    默认关闭（`extend-select = ["TDR813"]` 开启）：这些写法在训练运行中都不会打印警告，也不会改变结果，
    因此在真实代码中属于风格问题。会警告或行为有变的弃用由 TDR804 负责。

    ## 为什么不好？
    这些写法仍然可用，但新功能和修复都落在它们的替代品上：`torch.linalg.vector_norm`/`matrix_norm` 和
    `torch.linalg.svd` 才是持续维护的线性代数接口（而且 `torch.svd` 返回 `V` 而不是 `Vh`）；自 PyTorch 0.4
    起张量自己记录梯度，`Variable(x)` 就是 `x`；以尺寸调用旧式构造函数会返回未初始化的内存，而
    `torch.empty` 的名字就说明了这一点；TorchScript 不再获得新功能，由 `torch.compile`/`torch.export` 取代。
    在顺手修改这段代码时迁移是值得的。

    ## 示例
    ```python
    import torch
    from torch.autograd import Variable

    x = Variable(torch.FloatTensor([1.0, 2.0]))
    n = torch.norm(x)
    ```

    ## 改为
    ```python
    import torch

    x = torch.tensor([1.0, 2.0])
    n = torch.linalg.vector_norm(x)
    ```

    ## 修复安全性
    与 TDR804 相同：只有在已知替代品对给定参数行为相同时才提供修复（`torch.ger`、上采样模块、带字面量尺寸或
    数据的旧式构造函数），这些修复是安全的。`Variable(x)` 不提供修复：它还会把 `x` 从计算图上分离，删掉它可能
    改变梯度。

    ## 参考
    - [`torch.linalg` 中的弃用](https://pytorch.org/docs/stable/linalg.html)
    - [张量创建操作](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [从 TorchFix 迁移](../torchfix-migration.md)（TorchFix 代码 TOR101）
    """

    code = "TDR813"
    name = "legacy-api-use"
    severity = Severity.INFO
    default = False
    fix_safety = Applicability.SAFE
    tags = ("deprecated",)
    aliases = ("TOR101",)

    VALID = (
        "import torch\nn = torch.linalg.vector_norm(x)\nx = torch.tensor([1.0])",
        # Deprecations that warn at run time: TDR804's.
        "import torch\nq, r = torch.qr(a)\nx = torch.cuda.FloatTensor(2)",
        # A legacy type used as a type, not called; a method named norm.
        "import torch\ny = x.type(torch.FloatTensor)\nn = x.norm(dim=1)",
        # A local function with a legacy name.
        "import torch\ndef Variable(x):\n    return x\nv = Variable(1)",
        Valid("import torch\nx = torch.zeros(2)\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\ny = torch.ger(u, v)",
            fixed="import torch\ny = torch.outer(u, v)",
            lines=(2,),
        ),
        Invalid("import torch\nn = torch.norm(x, dim=1)", fixed=None, lines=(2,)),
        Invalid(
            "import torch.nn as nn\nup = nn.UpsamplingBilinear2d(scale_factor=2)",
            fixed="import torch.nn as nn\n"
            'up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)',
            lines=(2,),
        ),
        Invalid(
            "import torch\nx = torch.FloatTensor(2, 3)",
            fixed="import torch\nx = torch.empty(2, 3, dtype=torch.float32)",
            lines=(2,),
        ),
        Invalid("import torch\nx = torch.FloatTensor(t)", fixed=None, lines=(2,)),
        Invalid(
            "import torch\nfrom torch.autograd import Variable\nv = Variable(x)",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\n@torch.jit.script\ndef f(x):\n    return x\n", fixed=None, lines=(2,)
        ),
        Invalid("import torch\nts = torch.jit.trace(model, example)", fixed=None, lines=(2,)),
        Invalid("import torch\nn = torch.norm(x)\n", fixed=None, notebook=True, lines=(2,)),
    )

    def check(self, ctx: Context) -> None:
        api_table.report_uses(ctx, "deprecated", opt_in=True)
