from __future__ import annotations

import ast
import os
from functools import partial

from ..core import fixes, kinds, training
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule, Valid

_SEEDERS = frozenset({"manual_seed", "manual_seed_all", "seed_everything", "set_seed", "seed"})
_SEED_CALLS = {"random": "{}.seed(0)", "numpy": "{}.random.seed(0)", "torch": "{}.manual_seed(0)"}
# Seeding functions imported under another name (``from torch import manual_seed as ms``).
_SEED_FUNCTIONS = (
    "torch.manual_seed",
    "torch.random.manual_seed",
    "torch.cuda.manual_seed",
    "torch.cuda.manual_seed_all",
    "random.seed",
    "numpy.random.seed",
)


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
    The fix inserts a seeding block (`random`, NumPy when the file imports it, and `torch`)
    right after the file's first run of top-level imports, a blank row between them, before
    any other code draws a random number. Each module is spelled by the name an import of
    that run binds to it (`np` after `import numpy as np`); a module that the run does not
    import (`random` usually, or a module imported only further down the file or in a later
    notebook cell) is imported in that run, where isort would sort it, so every name the
    block uses is bound where it runs. In a notebook the block goes into the cell of the last
    of those imports, after them, and the new imports into the first cell's imports. No fix
    is offered when one of those names means something else in the file (`from numpy import
    random`, a parameter called `random`); NumPy is then left out when only its name is taken.
    It is unsafe: results change to a fixed, repeatable sequence (two runs print the same
    numbers), which is its purpose.

    ## References
    - [Reproducibility](https://pytorch.org/docs/stable/notes/randomness.html)
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
        # Seeding under other names: an alias, a module alias, a helper without "seed" in its name.
        "import torch\nfrom torch import manual_seed as ms\nms(3)\n"
        "for x in loader:\n    loss.backward()\n    opt.step()",
        "import torch\nimport numpy.random as npr\nnpr.seed(3)\n"
        "for x in loader:\n    loss.backward()\n    opt.step()",
        "import torch\ndef fix_rng(s):\n    torch.random.manual_seed(s)\nfix_rng(1)\n"
        "for x in loader:\n    loss.backward()\n    opt.step()",
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
            fixed="import random\n\nimport torch\n\nrandom.seed(0)\ntorch.manual_seed(0)\n"
            "for x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    optimizer.step()\n",
            lines=(4,),
        ),
        Invalid(
            "import numpy as np\nimport torch as T\nimport random\n"
            "for x in loader:\n    crit(model(x)).backward()\n    opt.step()\n",
            fixed="import numpy as np\nimport torch as T\nimport random\n\nrandom.seed(0)\n"
            "np.random.seed(0)\nT.manual_seed(0)\nfor x in loader:\n"
            "    crit(model(x)).backward()\n    opt.step()\n",
            lines=(5,),
        ),
        # A script whose training runs from its __main__ block.
        Invalid(
            "import torch\ndef train(model, loader, opt):\n    for x in loader:\n"
            "        model(x).sum().backward()\n        opt.step()\n"
            "if __name__ == '__main__':\n    train(net, data, optimizer)\n",
            fixed="import random\n\nimport torch\n\nrandom.seed(0)\ntorch.manual_seed(0)\n"
            "def train(model, loader, opt):\n    for x in loader:\n"
            "        model(x).sum().backward()\n        opt.step()\nif __name__ == '__main__':\n"
            "    train(net, data, optimizer)\n",
            lines=(4,),
        ),
        # NumPy is imported after other code, and torch by alias: the block goes after the
        # header and imports NumPy itself, so that every name it uses is bound where it runs.
        Invalid(
            "import torch as T\nmodel = build()\nimport numpy as np\n"
            "for x in loader:\n    crit(model(x)).backward()\n    opt.step()\n",
            fixed="import random\n\nimport numpy\nimport torch as T\n\nrandom.seed(0)\n"
            "numpy.random.seed(0)\nT.manual_seed(0)\nmodel = build()\nimport numpy as np\n"
            "for x in loader:\n    crit(model(x)).backward()\n    opt.step()\n",
            lines=(5,),
        ),
        # `random` and torch imported only further down: imported again in the block.
        Invalid(
            '"""Train."""\nimport os\nroot = os.getcwd()\nimport random\nimport torch\n'
            "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n",
            fixed='"""Train."""\nimport os\nimport random\n\nimport torch\n\nrandom.seed(0)\n'
            "torch.manual_seed(0)\nroot = os.getcwd()\nimport random\nimport torch\n"
            "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n",
            lines=(7,),
        ),
        # `random` means something else in the file: no fix rather than a wrong name.
        Invalid(
            "import torch\nfrom numpy import random\n"
            "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\ndef pick(random):\n    return random\n"
            "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n",
            fixed=None,
            lines=(5,),
        ),
        Invalid(
            "import torch\nimport numpy as np\n"
            "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n",
            fixed="import torch\nimport numpy as np\nimport random\n\nrandom.seed(0)\n"
            "np.random.seed(0)\ntorch.manual_seed(0)\nfor x in loader:\n"
            "    model(x).sum().backward()\n    opt.step()\n",
            notebook=True,
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        if any(sem.calls_by_attr.get(n) or sem.calls_by_name.get(n) for n in _SEEDERS):
            return
        if _calls_seed_helper(sem) or _is_test_file(ctx.path):
            return
        if next(sem.calls_to(*_SEED_FUNCTIONS), None) is not None:
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
            fixes=partial(self._seed_fix, ctx),
        )

    @staticmethod
    def _any_step(ctx: Context) -> bool:
        return any(
            isinstance(c.func, ast.Attribute) and kinds.is_optimizer(ctx.sem, c.func.value)
            for c in ctx.sem.calls_by_attr.get("step", ())
        )

    @staticmethod
    def _seed_fix(ctx: Context) -> Fix | None:
        """Seed right after the import header, spelling each module by the name the header
        binds to it, or importing it in the inserted block: every name the block uses is bound
        where it runs, before any other code of the file has drawn a random number."""
        sem = ctx.sem
        modules = ["random", "numpy", "torch"] if _imports_numpy(sem) else ["random", "torch"]
        imports: list[str] = []
        seeds: list[str] = []
        for module in modules:
            ref = fixes.header_module_ref(sem, module)
            if ref is None:
                if module == "numpy":
                    continue  # NumPy's own name is taken: seed the other two
                return None
            name, line = ref
            if line is not None:
                imports.append(line)
            seeds.append(_SEED_CALLS[module].format(name))
        code = ctx.source.newline.join(seeds)
        return Fix(
            Text("Seed random, NumPy and torch", "为 random、NumPy 和 torch 设定种子"),
            tuple(fixes.header_edits(sem, ctx.source, imports, code, ctx.notebook)),
            Applicability.UNSAFE,
        )


def _imports_numpy(sem: Semantic) -> bool:
    """The file imports NumPy at module level (anywhere: the seed block imports it itself when
    the import comes after the header)."""
    return any(
        bs and all(b.how == "import" and b.qualname == "numpy" for b in bs)
        for bs in sem.scopes[sem.tree].bindings.values()
    )


def _calls_seed_helper(sem: Semantic) -> bool:
    """A call of a function whose name contains ``seed`` (``random_seed``, ``init_seeds``)."""
    names = (*sem.calls_by_name, *sem.calls_by_attr)
    return any("seed" in n.lower() and n != "initial_seed" for n in names)


def _is_test_file(path: str) -> bool:
    base = os.path.basename(path)
    return base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
