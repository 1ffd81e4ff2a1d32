from __future__ import annotations

import ast
import os

from ..core import fixes, kinds, training
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule, Valid

_SEEDERS = frozenset({"manual_seed", "manual_seed_all", "seed_everything", "set_seed", "seed"})


class UnseededTraining(Rule):
    """## What it does
    Checks for a script with a training loop (`.backward()` and an optimizer step) that never
    seeds its random number generators (`torch.manual_seed`, Lightning's `seed_everything`,
    transformers' `set_seed`, `random.seed`, `np.random.seed`, or any function of the project
    whose name contains `seed`, such as timm's `random_seed` or YOLOv5's `init_seeds`). Off by
    default.

    Only scripts are checked: notebooks, and files that run their training when executed (an
    `if __name__ == "__main__":` block, the loop at module level, or a module-level call of one
    of their functions). Library modules with a training step (optimizer wrappers, trainer
    classes) and test files are not: the seed belongs to the script that uses them.

    ## Why is this bad?
    Weight initialisation, data shuffling, dropout and augmentations all draw random numbers.
    Unseeded, two runs of the same code give different curves, and a change cannot be told
    apart from noise. Seeding is the first of the guide's reproducibility steps (then
    `torch.use_deterministic_algorithms(True)`, `CUBLAS_WORKSPACE_CONFIG`, and a seeded
    `generator=` for the DataLoader, TDR309).

    ## Example
    ```python
    import torch

    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import random

    import torch

    random.seed(0)
    torch.manual_seed(0)

    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    The fix inserts a seeding block after the imports (`random`, NumPy when imported, and
    `torch`). It is unsafe: results change to a fixed, repeatable sequence.

    ## References
    - [Reproducibility](https://pytorch.org/docs/stable/notes/randomness.html)
    """

    zh = """## 功能
    检查含有训练循环（`.backward()` 与优化器更新）、却从未给随机数生成器设定种子（`torch.manual_seed`、Lightning 的
    `seed_everything`、transformers 的 `set_seed`、`random.seed`、`np.random.seed`，或名称中含 `seed` 的项目函数，如 timm 的 `random_seed`、YOLOv5 的
    `init_seeds`）的脚本。默认关闭。

    只检查脚本：notebook，以及运行时执行训练的文件（有 `if __name__ == "__main__":` 块、循环位于模块顶层，或在模块
    顶层调用本文件的函数）。带训练步骤的库模块（优化器封装、训练器类）和测试文件不检查：种子应由使用它们的脚本设定。

    ## 为什么不好？
    权重初始化、数据打乱、dropout 和数据增强都要取随机数。不设种子时，同一份代码跑两次得到的曲线不同，无法区分一次
    修改带来的变化与随机波动。设定种子是指南中可复现性步骤的第一步（其后是 `torch.use_deterministic_algorithms(True)`、
    `CUBLAS_WORKSPACE_CONFIG`，以及为 DataLoader 提供带种子的 `generator=`，见 TDR309）。

    ## 示例
    ```python
    import torch

    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## 改为
    ```python
    import random

    import torch

    random.seed(0)
    torch.manual_seed(0)

    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## 修复安全性
    修复会在导入语句之后插入一段设定种子的代码（`random`、已导入时的 NumPy，以及 `torch`）。它是不安全的：结果会变成
    一个固定、可重复的序列。

    ## 参考
    - [可复现性](https://pytorch.org/docs/stable/notes/randomness.html)
    """

    code = "TDR701"
    name = "unseeded-training"
    severity = Severity.INFO
    default = False
    fix_safety = Applicability.UNSAFE

    VALID = (
        "import torch\ntorch.manual_seed(0)\nfor x in loader:\n    loss.backward()\n    opt.step()",
        "import torch\nimport lightning as L\nL.seed_everything(42)\n"
        "for x in loader:\n    loss.backward()\n    opt.step()",
        "import torch\nfrom transformers import set_seed\nset_seed(1)\n"
        "for x in loader:\n    loss.backward()\n    opt.step()",
        # No training loop.
        "import torch\ny = model(x)",
        # A seed helper of the project (timm's random_seed, YOLOv5's init_seeds).
        "import torch\nfrom timm.utils import random_seed\nrandom_seed(42, 0)\n"
        "for x in loader:\n    loss.backward()\n    opt.step()",
        "import torch\nfrom utils.general import init_seeds\ninit_seeds(1)\n"
        "for x in loader:\n    loss.backward()\n    opt.step()",
        # A library module: an optimizer wrapper or a trainer class, nothing runs on its own.
        "import torch\nclass FP16Optimizer:\n    def step(self, loss):\n"
        "        loss.backward()\n        self.optimizer.step()\n",
        "import torch\ndef train_epoch(model, loader, optimizer):\n    for x in loader:\n"
        "        model(x).sum().backward()\n        optimizer.step()\n",
        # A test file.
        Valid(
            "import torch\nfor x in loader:\n    loss.backward()\n    opt.step()\n",
            filename="test_training.py",
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    optimizer.step()\n",
            fixed="import torch\nimport random\nrandom.seed(0)\ntorch.manual_seed(0)\n"
            "for x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    optimizer.step()\n",
        ),
        Invalid(
            "import numpy as np\nimport torch as T\nimport random\n"
            "for x in loader:\n    crit(model(x)).backward()\n    opt.step()\n",
            fixed="import numpy as np\nimport torch as T\nimport random\n"
            "random.seed(0)\nnp.random.seed(0)\nT.manual_seed(0)\n"
            "for x in loader:\n    crit(model(x)).backward()\n    opt.step()\n",
        ),
        # A script whose training runs from its __main__ block.
        Invalid(
            "import torch\ndef train(model, loader, opt):\n    for x in loader:\n"
            "        model(x).sum().backward()\n        opt.step()\n"
            "if __name__ == '__main__':\n    train(net, data, optimizer)\n",
            fixed="import torch\nimport random\nrandom.seed(0)\ntorch.manual_seed(0)\n"
            "def train(model, loader, opt):\n    for x in loader:\n"
            "        model(x).sum().backward()\n        opt.step()\n"
            "if __name__ == '__main__':\n    train(net, data, optimizer)\n",
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        if any(sem.calls_by_attr.get(n) or sem.calls_by_name.get(n) for n in _SEEDERS):
            return
        if _calls_seed_helper(sem) or _is_test_file(ctx.path):
            return
        backward = next(
            (c for c in sem.calls_by_attr.get("backward", ()) if training.is_backward(sem, c)), None
        )
        if backward is None or (
            not training.optimizer_steps(sem, ctx.tree) and not self._any_step(ctx)
        ):
            return
        if ctx.notebook is None and not sem.runs_as_script(backward):
            return
        ctx.report(
            backward,
            Text(
                "this training script never seeds its random number generators: runs cannot be "
                "reproduced",
                "该训练脚本从未设定随机数种子：结果无法复现",
            ),
            fixes=[self._seed_fix(ctx)],
        )

    @staticmethod
    def _any_step(ctx: Context) -> bool:
        return any(
            isinstance(c.func, ast.Attribute) and kinds.is_optimizer(ctx.sem, c.func.value)
            for c in ctx.sem.calls_by_attr.get("step", ())
        )

    @staticmethod
    def _seed_fix(ctx: Context) -> Fix | None:
        sem, source = ctx.sem, ctx.source
        edits: list[Edit] = []
        lines: list[str] = []
        random_ref = fixes.module_ref(sem, source, "random")
        torch_ref = fixes.module_ref(sem, source, "torch")
        if random_ref is None or torch_ref is None:
            return None
        edits.extend(random_ref[1])
        lines.append(f"{random_ref[0]}.seed(0)")
        numpy = next(
            (
                name
                for name, bs in sem.scopes[sem.tree].bindings.items()
                if bs and all(b.how == "import" and b.qualname == "numpy" for b in bs)
            ),
            None,
        )
        if numpy:
            lines.append(f"{numpy}.random.seed(0)")
        edits.extend(torch_ref[1])
        lines.append(f"{torch_ref[0]}.manual_seed(0)")
        nl = source.newline
        anchor = fixes.import_edit(sem, source, nl.join(lines))
        edits.append(anchor)
        return Fix(
            Text("Seed random, NumPy and torch", "为 random、NumPy 和 torch 设定种子"),
            tuple(edits),
            Applicability.UNSAFE,
        )


def _calls_seed_helper(sem: Semantic) -> bool:
    """A call of a function whose name contains ``seed`` (``random_seed``, ``init_seeds``)."""
    names = (*sem.calls_by_name, *sem.calls_by_attr)
    return any("seed" in n.lower() and n != "initial_seed" for n in names)


def _is_test_file(path: str) -> bool:
    base = os.path.basename(path)
    return base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
