from __future__ import annotations

from ..core.context import Context
from ..core.model import Applicability
from . import api_table
from .base import Invalid, Rule, Valid


class DeprecatedApiUse(Rule):
    """## What it does
    Checks for uses of deprecated PyTorch APIs that warn at run time or change behaviour, from
    one data table (`rules/api_table.py`): TorchFix's list (`torch.qr`, `torch.cholesky`,
    `torch.chain_matmul`, `torch.range`, `torch.lu`, `torch.lu_solve`,
    `torch.triangular_solve`, `torch.testing.assert_allclose`, `nn.utils.weight_norm`,
    `torch.backends.cuda.sdp_kernel`, `functorch.vmap`/`grad`/...) and what torch 2.13's own
    warnings add: `F.upsample*`, `torch.set_default_tensor_type`, `torch.cuda.FloatTensor(...)`
    and the other CUDA legacy constructors, `torch.cuda.memory_cached`,
    `torch.nn.utils.stateless.functional_call`, `torch.has_cuda` and friends,
    `torch.distributed.all_gather_into_tensor`/`reduce_scatter_tensor` and
    `torch.onnx.export(..., dynamo=False)`.

    Deprecations that only the documentation announces (`torch.norm`, `torch.svd`,
    `torch.ger`, `nn.UpsamplingNearest2d/Bilinear2d`, `torch.autograd.Variable`), CPU legacy
    constructors such as `torch.FloatTensor(...)` and TorchScript are reported by the opt-in
    TDR813 instead: on real training code they work as they always did, and changing them is
    style.

    A deprecated function used as a value counts too: assigned, chosen in a conditional or
    passed on (`norm_f = nn.utils.spectral_norm if sn else nn.utils.weight_norm`), unless the
    code picks it as a fallback after testing what the installed torch has (`hasattr(...)`,
    `torch.__version__`, an `except` clause). A CUDA legacy type counts when the name it is
    assigned to is called (`Tensor = torch.cuda.FloatTensor if cuda else ...`, then
    `Tensor(n, 1)`).

    Only rows that apply to the target torch version are reported (`target-version` in
    `[tool.torchdoctor]`, else the installed version, else the newest).

    ## Why is this bad?
    Deprecated APIs print warnings on every run and disappear in a later release; several have
    subtle differences from their replacements (`torch.range` includes its end point and
    returns floats; `torch.svd` returns `V`, not `Vh`). Moving early, with the table's
    mechanical fixes, is cheaper than debugging the release that removes them.

    Not in the table on purpose: `F.sigmoid` and `F.tanh` (once deprecated, they no longer warn
    in torch 2.13) and `nn.utils.spectral_norm` (its docs only announce a future deprecation).
    `torch.cuda.amp.*` is TDR401's.

    ## Example
    ```python
    import torch

    q, r = torch.qr(a, some=False)
    x = torch.range(0, 9)
    L = torch.cholesky(a, upper=True)
    ```

    ## Use instead
    ```python
    import torch

    q, r = torch.linalg.qr(a, mode="complete")
    x = torch.arange(0, 10)
    L = torch.linalg.cholesky(a).mH
    ```

    ## Fix safety
    Fixes are offered only where the replacement is known to behave the same for the arguments
    given, and are safe there (`qr`, `cholesky`, `chain_matmul`, `ger`, `lu`, upsampling,
    functorch, renamed functions, legacy constructors with literal sizes or data). Unsafe:
    `torch.range` → `torch.arange` (the result's dtype follows the arguments instead of being
    the default float dtype), `assert_allclose` → `assert_close` (stricter),
    `weight_norm` → `parametrizations.weight_norm` (the parameters `weight_g`/`weight_v`
    become `parametrizations.weight.original0/1`, in the state dict too, so checkpoints the
    fixed code writes do not load into code still using the old function; older checkpoints
    still load into the new one; the module's class becomes `ParametrizedLinear` and so on).
    That migration breaks code that relies on what only the old function makes, so no fix is
    offered when the file mentions `weight_g`/`weight_v` (the `name=` given plus `_g`/`_v`:
    an attribute, a state-dict key, a key remapping), calls `remove_weight_norm`, scripts a
    module with `torch.jit.script`, or pickles a whole module with `torch.save(model, ...)`
    (parametrized modules support neither), or when `name=` is not a literal. A fix never
    introduces an undefined name: it reuses the file's own spelling of `torch` and adds
    `import torch` when needed, or offers no fix when the name `torch` means something else.

    ## References
    - [Deprecations in `torch.linalg`](https://pytorch.org/docs/stable/linalg.html)
    - [`torch.func` migration from functorch](https://pytorch.org/docs/stable/func.migrating.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR101)
    """

    code = "TDR804"
    name = "deprecated-api-use"
    fix_safety = Applicability.UNSAFE
    tags = ("deprecated",)
    aliases = ("TOR101",)

    VALID = (
        "import torch\nq, r = torch.linalg.qr(a)",
        "import torch\nx = torch.arange(0, 10)",
        # Python's range, numpy's qr, a method named qr.
        "import torch\nimport numpy as np\nfor i in range(3):\n    q = np.linalg.qr(a)\n"
        "    r = m.qr()",
        # A local function with a deprecated name.
        "import torch\ndef cholesky(a):\n    return a\nL = cholesky(x)",
        # Shadowed in a function.
        "from torch import qr\ndef f(qr):\n    return qr(1)",
        # Not deprecated in torch 2.13.
        "import torch\nimport torch.nn.functional as F\ny = F.sigmoid(x) + F.tanh(x)",
        "import torch\nm = torch.nn.utils.spectral_norm(layer)",
        # The new ONNX exporter, and the default.
        "import torch\ntorch.onnx.export(m, (x,), 'm.onnx', dynamo=True)\n"
        "torch.onnx.export(m, (x,), 'm.onnx')",
        # Legacy type used as a type, not called.
        "import torch\ny = x.type(torch.FloatTensor)\nok = isinstance(x, torch.cuda.FloatTensor)",
        # Deprecated in the docs only, legacy spellings and TorchScript: TDR813's.
        "import torch\nn = torch.norm(x, dim=1)\nu, s, v = torch.svd(a)\ny = torch.ger(a, b)",
        "import torch\nfrom torch.autograd import Variable\nv = Variable(torch.FloatTensor([1.0]))",
        "import torch\nts = torch.jit.trace(model, example)\ntorch.jit.save(ts, 'm.pt')",
        # The parametrization already, and a local helper called weight_norm.
        "import torch\nfc = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 4))",
        "import torch\ndef weight_norm(m):\n    return m\nfc = weight_norm(torch.nn.Linear(4, 4))",
        # Removed (not deprecated): TDR801's.
        "import torch\nx = torch.solve(b, A)",
        Valid("import torch\nq, r = torch.linalg.qr(a)\n", notebook=True),
        # A fallback for an older torch, picked by testing what the installed one has.
        "import torch\nfrom torch import nn\n"
        "wn = (nn.utils.parametrizations.weight_norm if hasattr(nn.utils, 'parametrizations')\n"
        "      else nn.utils.weight_norm)\n",
        "import torch\nfrom torch import nn\ntry:\n    wn = nn.utils.parametrizations.weight_norm\n"
        "except AttributeError:\n    wn = nn.utils.weight_norm\n",
        # A legacy CUDA type kept in a name that is never called: a type, not a constructor.
        "import torch\nT = torch.cuda.FloatTensor if cuda else torch.FloatTensor\ny = x.type(T)\n",
    )
    INVALID = (
        # Chosen as a value and called through a name.
        Invalid(
            "import torch\nfrom torch import nn\n"
            "norm_f = nn.utils.spectral_norm if spectral else nn.utils.weight_norm\n"
            "conv = norm_f(nn.Conv1d(1, 32, 5))\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
            "valid = Tensor(imgs.size(0), 1).fill_(1.0)\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nq, r = torch.qr(a)",
            fixed="import torch\nq, r = torch.linalg.qr(a)",
            lines=(2,),
        ),
        Invalid(
            "import torch as T\nq, r = T.qr(a, some=False)",
            fixed='import torch as T\nq, r = T.linalg.qr(a, mode="complete")',
            lines=(2,),
        ),
        # Imported by name in a file that never imports torch: the fix adds the import.
        Invalid(
            "from torch import qr\nq, r = qr(a)\n",
            fixed="import torch\nfrom torch import qr\nq, r = torch.linalg.qr(a)\n",
            lines=(2,),
        ),
        # `torch` is another object here: no fix rather than a wrong one.
        Invalid("from torch import qr\ntorch = None\nq, r = qr(a)\n", fixed=None, lines=(3,)),
        Invalid(
            "import torch\nL = torch.cholesky(a, upper=True)",
            fixed="import torch\nL = torch.linalg.cholesky(a).mH",
            lines=(2,),
        ),
        Invalid("import torch\nL = torch.cholesky(a, flag)", fixed=None, lines=(2,)),
        Invalid(
            "import torch\ny = torch.chain_matmul(a, b, c)",
            fixed="import torch\ny = torch.linalg.multi_dot([a, b, c])",
            lines=(2,),
        ),
        Invalid(
            "import torch\nx = torch.range(0, 9)",
            fixed="import torch\nx = torch.arange(0, 10)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nx = torch.range(1, n - 1)",
            fixed="import torch\nx = torch.arange(1, n)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nx = torch.range(0, len(v), 2)",
            fixed="import torch\nx = torch.arange(0, len(v) + 1, 2)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nx = torch.range(5, 0, -1)",
            fixed="import torch\nx = torch.arange(5, -1, -1)",
            lines=(2,),
        ),
        Invalid("import torch\nx = torch.range(0, 1, 0.1)", fixed=None, lines=(2,)),
        Invalid(
            "import torch.nn.functional as F\ny = F.upsample(x, scale_factor=2)",
            fixed="import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2)",
            lines=(2,),
        ),
        Invalid(
            "import torch.nn.functional as F\ny = F.upsample_nearest(x, size=(4, 4))",
            fixed='import torch.nn.functional as F\ny = F.interpolate(x, size=(4, 4), mode="nearest")',
            lines=(2,),
        ),
        Invalid(
            "import torch\ntorch.testing.assert_allclose(a, b)",
            fixed="import torch\ntorch.testing.assert_close(a, b)",
            lines=(2,),
        ),
        Invalid(
            "import functorch\ny = functorch.vmap(f)(x)",
            fixed="import functorch\nimport torch\ny = torch.func.vmap(f)(x)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nfrom functorch import grad\ng = grad(f)(x)",
            fixed="import torch\nfrom functorch import grad\ng = torch.func.grad(f)(x)",
            lines=(3,),
        ),
        Invalid(
            "import torch\nx = torch.cuda.LongTensor([1, 2])",
            fixed='import torch\nx = torch.tensor([1, 2], dtype=torch.int64, device="cuda")',
            lines=(2,),
        ),
        Invalid(
            "import torch\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nif torch.has_cuda:\n    pass",
            fixed="import torch\nif torch.backends.cuda.is_built():\n    pass",
            lines=(2,),
        ),
        Invalid(
            "import torch\nm = torch.cuda.memory_cached()",
            fixed="import torch\nm = torch.cuda.memory_reserved()",
            lines=(2,),
        ),
        Invalid(
            "import torch.distributed as dist\ndist.all_gather_into_tensor(out, x)",
            fixed="import torch.distributed as dist\ndist.all_gather_single(out, x)",
            lines=(2,),
        ),
        Invalid(
            "import torch\ntorch.onnx.export(m, (x,), 'm.onnx', dynamo=False)",
            fixed=None,
            lines=(2,),
        ),
        # weight_norm: unsafe rename, unless the file relies on what only the old one makes.
        Invalid(
            "from torch import nn\nfc = nn.utils.weight_norm(nn.Linear(4, 4))\n",
            fixed="from torch import nn\nfc = nn.utils.parametrizations.weight_norm(nn.Linear(4, 4))\n",
            lines=(2,),
        ),
        Invalid(
            "import torch.nn as nn\nfc = nn.utils.weight_norm(nn.Linear(4, 4))\n"
            "fc.weight_g.data.fill_(1)\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nfrom torch.nn.utils import weight_norm\n"
            "conv = weight_norm(torch.nn.Conv1d(2, 2, 3), name='kernel')\n"
            "state = {k.replace('kernel_v', 'v'): t for k, t in conv.state_dict().items()}\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nfrom torch.nn.utils import weight_norm, remove_weight_norm\n"
            "fc = weight_norm(torch.nn.Linear(4, 4))\nremove_weight_norm(fc)\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nnet = torch.nn.Sequential(torch.nn.utils.weight_norm(torch.nn.Linear(4, 4)))\n"
            "torch.save(net, 'net.pt')\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nfc = torch.nn.utils.weight_norm(layer, name=param)\n",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\nq, r = torch.qr(a)\n",
            fixed="import torch\nq, r = torch.linalg.qr(a)\n",
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        api_table.report_uses(ctx, "deprecated")
