from __future__ import annotations

import ast

from ..core import data, kinds, pickling
from ..core.context import Context
from ..core.data import is_literal
from ..core.model import Severity, Text
from ..core.semantic import Semantic, keyword
from .base import Invalid, Rule, Valid

_CALLABLE_ARGS = ("collate_fn", "worker_init_fn")
_TRANSFORM_ARGS = ("transform", "target_transform", "transforms")
# A dataset class of another module that keeps a lambda on itself.
_DATA_PY = (
    "from torch.utils.data import Dataset\n"
    "class Captions(Dataset):\n"
    "    def __init__(self, tokenizer):\n"
    "        self.prep = lambda text: tokenizer(text)[0]\n"
    "    def __getitem__(self, i):\n"
    "        return self.prep('a photo')\n"
    "class Plain(Dataset):\n"
    "    def __init__(self, tokenizer):\n"
    "        self.tokenizer = tokenizer\n"
)
_AUG_PY = (
    "from torchvision import transforms\n"
    "def build_transforms():\n"
    "    return transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x * 2)])\n"
    "def build_plain():\n"
    "    return transforms.Compose([transforms.ToTensor()])\n"
)


class UnpicklableWorkerCallable(Rule):
    """## What it does
    Checks for a DataLoader with workers that is given a `lambda` or a nested function as
    `collate_fn=` or `worker_init_fn=`, or whose dataset was built with a `lambda` transform
    or with a pipeline that holds one (`transforms.Compose([transforms.Lambda(lambda x: ...)])`,
    through a name, or returned by a function of the file or of another module of the project),
    or whose dataset class keeps one on `self` (`self.prep = lambda t: tok(t)[0]`), or whose
    dataset is a webdataset pipeline with one in a stage (`wds.WebLoader` too). Arguments
    passed in a dict spread with `**kwargs` count, and so does a nested function that a helper
    returns (`transforms.Lambda(expand(3))` where `expand` returns its inner function). In a
    library module, the rule also checks the transform pipelines that the functions listed in
    `__all__` return: their users hand them to datasets of loaders with workers.

    ## Why is this bad?
    Under the `spawn` start method — the default on macOS and Windows, and what many cluster
    setups choose — the DataLoader pickles these callables to send them to each worker. Lambdas
    and functions defined inside other functions cannot be pickled, and iteration fails with
    `AttributeError: Can't pickle local object '...<lambda>'` (or `Can't get local object`). The
    code works on a Linux laptop (fork) and breaks on the next machine.

    ## Example
    ```python
    loader = DataLoader(ds, num_workers=4, collate_fn=lambda batch: pad(batch, 0))
    ```

    ## Use instead
    ```python
    import functools

    loader = DataLoader(ds, num_workers=4, collate_fn=functools.partial(pad, value=0))
    ```
    or define the function at module level.

    ## Fix safety
    No fix is offered: the callable has to move to module level or become a `functools.partial`.

    ## References
    - [Platform-specific behaviours of multi-process data loading](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    """

    code = "TDR308"
    name = "unpicklable-worker-callable"
    severity = Severity.WARNING

    VALID = (
        "from torch.utils.data import DataLoader\ndef collate(b):\n    return b\n"
        "DataLoader(ds, num_workers=4, collate_fn=collate)",
        # No workers: nothing is pickled.
        "from torch.utils.data import DataLoader\nDataLoader(ds, collate_fn=lambda b: b)",
        "from torch.utils.data import DataLoader\n"
        "DataLoader(ds, num_workers=0, collate_fn=lambda b: b)",
        "import functools\nfrom torch.utils.data import DataLoader\n"
        "DataLoader(ds, num_workers=2, collate_fn=functools.partial(pad, value=0))",
        # A method of a module-level class pickles fine.
        "from torch.utils.data import DataLoader\nclass C:\n    def __call__(self, b):\n"
        "        return b\nDataLoader(ds, num_workers=2, collate_fn=C())",
        # A pipeline of another module without lambdas; no workers for one with a lambda.
        Valid(
            "from torch.utils.data import DataLoader\nfrom torchvision import datasets\n"
            "from aug import build_plain, build_transforms\n"
            "ds = datasets.CIFAR10('data', transform=build_plain())\n"
            "loader = DataLoader(ds, num_workers=4)\n"
            "ds2 = datasets.CIFAR10('data', transform=build_transforms())\n"
            "loader2 = DataLoader(ds2, num_workers=0)\n",
            files=(("aug.py", _AUG_PY),),
        ),
        # The spread dict passes a module-level function; another one sets no workers.
        "from torch.utils.data import DataLoader\ndef init(worker_id):\n    pass\n"
        "args = dict(num_workers=2, worker_init_fn=init)\nloader = DataLoader(ds, **args)\n",
        "from torch.utils.data import DataLoader\ndef make(ds):\n"
        "    def init(worker_id):\n        pass\n"
        "    args = dict(num_workers=0, worker_init_fn=init)\n    return DataLoader(ds, **args)\n",
        # The helper returns a module-level function, not a nested one.
        "from torch.utils.data import DataLoader\nfrom torchvision import datasets, transforms\n"
        "def gray(im):\n    return im.convert('L')\ndef pick():\n    return gray\n"
        "ds = datasets.MNIST('data', transform=transforms.Lambda(pick()))\n"
        "loader = DataLoader(ds, num_workers=4)\n",
        # The dataset keeps its lambda, but decides itself what is pickled.
        "from torch.utils.data import DataLoader, Dataset\nclass Words(Dataset):\n"
        "    def __init__(self):\n        self.prep = lambda t: t.lower()\n"
        "    def __getstate__(self):\n        return {}\n"
        "loader = DataLoader(Words(), num_workers=4)\n",
        # Exported: a pipeline without lambdas, and a lambda that is no pipeline; a pipeline
        # with a lambda that only a function the module does not export returns.
        "from torchvision import transforms\n__all__ = ['preprocess', 'activation']\n"
        "def preprocess(n):\n    return transforms.Compose([transforms.Resize(n)])\n"
        "def activation():\n    return lambda x: x.clamp(min=0)\n"
        "def debug_view():\n"
        "    return transforms.Compose([transforms.Lambda(lambda im: im.convert('L'))])\n",
        # A webdataset pipeline whose stages hold module-level functions only.
        "import torch\nimport webdataset as wds\ndef first(text):\n    return text[0]\n"
        "pipeline = [wds.SimpleShardList(urls)]\npipeline.extend([wds.map_dict(text=first)])\n"
        "dataset = wds.DataPipeline(*pipeline)\n"
        "loader = wds.WebLoader(dataset.with_epoch(10), batch_size=None, num_workers=4)\n",
        # A dataset of another module that keeps only plain values.
        Valid(
            "from torch.utils.data import DataLoader\nfrom data import Plain\n"
            "loader = DataLoader(Plain(str.split), num_workers=4)\n",
            files=(("data.py", _DATA_PY),),
        ),
    )
    INVALID = (
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, num_workers=4, collate_fn=lambda b: b)",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\ndef make(ds):\n    def init(worker_id):\n        pass\n"
            "    return torch.utils.data.DataLoader(ds, num_workers=2, worker_init_fn=init)",
            fixed=None,
            lines=(5,),
        ),
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "train_ds = ImageFolder(root, transform=lambda img: img.convert('RGB'))\n"
            "loader = DataLoader(train_ds, num_workers=8)",
            fixed=None,
            lines=(2,),
        ),
        # A lambda inside a Compose pipeline, through a name.
        Invalid(
            "from torch.utils.data import DataLoader\nfrom torchvision import datasets, transforms\n"
            "tf = transforms.Compose([transforms.Lambda(lambda im: im.convert('RGB')), "
            "transforms.ToTensor()])\n"
            "ds = datasets.CIFAR10('data', transform=tf)\n"
            "loader = DataLoader(ds, num_workers=4)\n",
            fixed=None,
            lines=(3,),
        ),
        # The pipeline is built by a function of another module: reported where it is passed.
        Invalid(
            "from torch.utils.data import DataLoader\nfrom torchvision import datasets\n"
            "from aug import build_transforms\n"
            "ds = datasets.CIFAR10('data', transform=build_transforms())\n"
            "loader = DataLoader(ds, num_workers=4)\n",
            fixed=None,
            files=(("aug.py", _AUG_PY),),
            lines=(4,),
        ),
        # A nested `worker_init_fn` reaches the loader through the dict `**loader_args` spreads.
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "def main(ds):\n"
            "    def init(worker_id):\n"
            "        pass\n"
            "    loader_args = dict(\n"
            "        num_workers=2,\n"
            "        worker_init_fn=init,\n"
            "    )\n"
            "    return DataLoader(ds, **loader_args)\n",
            fixed=None,
            lines=(7,),
        ),
        # A helper returns its nested function, which a Lambda transform puts into the pipeline.
        Invalid(
            "from torch.utils.data import DataLoader, Dataset\n"
            "from torchvision import transforms\n"
            "def expand(channels):\n"
            "    def inner(t):\n"
            "        return t.expand(channels, -1, -1)\n"
            "    return inner\n"
            "class Images(Dataset):\n"
            "    def __init__(self, channels):\n"
            "        self.transform = transforms.Compose([\n"
            "            transforms.ToTensor(),\n"
            "            transforms.Lambda(expand(channels)),\n"
            "        ])\n"
            "loader = DataLoader(Images(3), num_workers=4)\n",
            fixed=None,
            lines=(11,),
        ),
        # A helper of the file returns the pipeline: the lambda is reported where it is.
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "from torchvision import datasets, transforms\n"
            "def build():\n"
            "    return transforms.Compose([transforms.Lambda(lambda im: im.convert('RGB'))])\n"
            "ds = datasets.CIFAR10('data', transform=build())\n"
            "loader = DataLoader(ds, num_workers=4)\n",
            fixed=None,
            lines=(4,),
        ),
        # A library's exported function returns a pipeline with a lambda: its users' datasets
        # cannot go to spawn workers.
        Invalid(
            "from torchvision.transforms import Compose, Resize, ToTensor\n"
            "__all__ = ['load']\n"
            "def _transform(n_px):\n"
            "    return Compose([\n"
            "        Resize(n_px),\n"
            "        lambda image: image.convert('RGB'),\n"
            "        ToTensor(),\n"
            "    ])\n"
            "def load(name):\n"
            "    return build(name), _transform(224)\n",
            fixed=None,
            lines=(6,),
        ),
        # A webdataset pipeline: a stage added to the list of stages holds a lambda.
        Invalid(
            "import torch\n"
            "import webdataset as wds\n"
            "pipeline = [wds.SimpleShardList(urls)]\n"
            "pipeline.extend([\n"
            "    wds.map_dict(text=lambda text: tokenizer(text)[0]),\n"
            "])\n"
            "dataset = wds.DataPipeline(*pipeline)\n"
            "dataset = dataset.with_epoch(100)\n"
            "loader = wds.WebLoader(dataset, batch_size=None, num_workers=4)\n",
            fixed=None,
            lines=(5,),
        ),
        # A dataset class of another module keeps a lambda on `self`.
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "from data import Captions\n"
            "dataset = Captions(str.split)\n"
            "loader = DataLoader(dataset, num_workers=4)\n",
            fixed=None,
            files=(("data.py", _DATA_PY),),
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        if "__all__" in sem.scopes[sem.tree].bindings:
            for func, node in pickling.exported_pipelines(sem):
                what = Text(
                    f"the transform pipeline `{func.name}` returns",
                    f"`{func.name}` 返回的变换流水线",
                )
                self._report(ctx, node, what, "")
        for call in sem.calls_to("torch.utils.data.DataLoader", *pickling.LOADERS):
            if not any(not is_literal(v, 0) for v in data.loader_values(sem, call, "num_workers")):
                continue
            for name in _CALLABLE_ARGS:
                for given in data.loader_values(sem, call, name):
                    if pickling.is_local_callable(sem, given):
                        self._report(ctx, given, Text(f"`{name}`", f"`{name}`"))
            dataset = data.loader_argument(call, "dataset")
            if dataset is None:
                continue
            # A pipeline built of stages (webdataset's ``DataPipeline(*stages)``).
            self._report_all(ctx, dataset, pickling.unpicklable(sem, dataset, True), None)
            made = kinds.constructor_call(sem, dataset)
            if made is None:
                continue
            for name in _TRANSFORM_ARGS:
                kw = keyword(made, name)
                if kw is None:
                    continue
                if isinstance(kw.value, ast.Lambda):
                    self._report(ctx, kw.value, _dataset_part(name))
                    continue
                self._report_all(ctx, kw.value, pickling.unpicklable(sem, kw.value), name)
            self._report_all(ctx, dataset, pickling.held_by_instance(sem, made), None)

    def _report_all(
        self,
        ctx: Context,
        value: ast.AST,
        found: list[tuple[Semantic, ast.AST]],
        name: str | None,
    ) -> None:
        """Report what pickling a dataset argument (``name``) or the dataset itself (None)
        meets: here at each node, or once at ``value`` for those in another module."""
        what = _dataset_part(name) if name else Text("the dataset", "数据集")
        elsewhere = False
        for _owner, node in found:
            where = ctx.elsewhere(node)
            if where is None:
                self._report(ctx, node, what, inside="")
            elif not elsewhere:
                elsewhere = True
                self._report(ctx, value, what, inside=where)

    @staticmethod
    def _report(ctx: Context, node: ast.AST, what: Text, inside: str | None = None) -> None:
        if inside is None:
            en = f"{what.en} is a lambda or nested function"
            zh = f"{what.zh} 是 lambda 或嵌套函数"
        else:  # a lambda inside a transform pipeline (``Compose([Lambda(lambda x: ...)])``)
            place = f" ({inside})" if inside else ""
            en = f"{what.en} holds a lambda or nested function{place}"
            zh = f"{what.zh} 中含有 lambda 或嵌套函数{place}"
        ctx.report(
            node,
            Text(
                f"{en}: with the `spawn` start method (macOS, "
                "Windows) workers fail with `Can't pickle local object`",
                f"{zh}：在 `spawn` 启动方式下（macOS、Windows），worker 会因 "
                "`Can't pickle local object` 而失败",
            ),
        )


def _dataset_part(name: str) -> Text:
    return Text(f"the dataset's `{name}`", f"数据集的 `{name}`")
