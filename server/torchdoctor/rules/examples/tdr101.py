"""TDR101's VALID and INVALID examples: the rule (``rules/tdr101_view_on_transposed.py``)
declares them as its own, and the rule tests run them."""

from __future__ import annotations

from ..base import Invalid, Valid

VALID = (
    "import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
    "import torch\nx = torch.randn(3, 4)\ny = x.t().contiguous().view(-1)",
    "import torch\nx = torch.randn(3, 4)\ny = x.view(-1)",
    # numpy: .view takes a dtype, never a shape.
    "import numpy as np\nimport torch\narr = np.zeros((3, 4))\nv = arr.T.view(np.float32)",
    "import numpy as np\nimport torch\nv = np.zeros((3, 4)).transpose().view(np.ndarray)",
    # A tensor reinterpreted as another dtype: a dtype argument, not a shape.
    "import torch\nx = torch.randn(3, 4)\nb = x.t().view(torch.int32)",
    "import torch\nx = torch.randn(3, 4)\nb = x.t().view(dtype=torch.int32)",
    "import torch\nx = torch.randn(3, 4)\nb = x.t().view(y.dtype)",
    "import torch\ndef f(x, dtype):\n    return x.t().view(dtype)",
    # A user class with its own .t() and .view().
    "import torch\n"
    "class Matrix:\n"
    "    def t(self):\n        return self\n"
    "    def view(self, *shape):\n        return shape\n"
    "m = Matrix()\nv = m.t().view(2, 3)",
    "import torch\n"
    "class Grid:\n"
    "    def view(self, *shape):\n        return shape\n"
    "def f(g):\n    return g.transpose(0, 1).view(2, 3)",
    # pandas.
    "import pandas as pd\nimport torch\ndf = pd.DataFrame({'a': [1]})\nv = df.T.view(2)",
    # Permutations that keep the order.
    "import torch\nx = torch.randn(2, 3, 4)\ny = x.permute(0, 1, 2).view(-1)",
    "import torch\nx = torch.randn(2, 3)\ny = x.transpose(1, 1).view(-1)",
    # The name is reassigned from its own view: the view reads the earlier value.
    "import torch\nh = torch.randn(6, 4)\nh = h.view(2, 3, 4).permute(1, 0, 2)",
    # Reassigned to a contiguous tensor before the view.
    "import torch\nx = torch.randn(3, 4)\ny = x.t()\ny = y.contiguous()\nz = y.view(-1)",
    "import torch\nx = torch.randn(3, 4)\ny = x.t()\ny = torch.randn(4, 3)\nz = y.view(-1)",
    # The name assigned from a transpose lives in another function.
    "import torch\ny = torch.randn(3, 4).t()\ndef f(y):\n    return y.view(-1)",
    # The transpose comes after the view.
    "import torch\nx = torch.randn(3, 4)\nz = x.view(-1)\ny = x.t()",
    # Views that split dimensions, or merge dimensions the permutation kept in order: they
    # work (found in transformers, timm).
    "import torch\ndef f(x, b, c, h, w):\n    return x.permute(1, 2, 0).view(b, c, h, w)",
    "import torch\ndef f(x, dim):\n    return x.permute(0, 2, 3, 1).view(1, -1, dim)",
    "import torch\ndef f(x, b, c, h, w):\n    return x.transpose(1, 2).view(b, c, h, w)",
    "import torch\ndef f(t, n, s):\n    return t.permute(1, 0).view(1, n, s, s)",
    "import torch\ndef f(w, k):\n    return w.T.view(4, -1, k)",
    "import torch\ndef f(x):\n    return x.permute(2, 0, 1).view(4, 6)",
    # The literal is the whole moved dimension: 4 channels viewed as (..., 4).
    "import torch\nx = torch.randn(2, 4, 5, 5)\ny = x.permute(0, 2, 3, 1).view(2, -1, 4)",
    # The number of dimensions is not written out.
    "import torch\ndef f(x, b, c, size):\n    return x.transpose(1, 2).view(b, c, *size)",
    "import torch\ndef f(x, shape):\n    return x.transpose(1, 2).view(shape)",
    "import torch\ndef f(x, dims):\n    return x.permute(*dims).view(-1)",
    # A file that does not import torch.
    "import mylib\ny = mylib.torch_like().t().view(-1)",
    Valid(
        "import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
        notebook=True,
    ),
    # The `-1` merges dimensions that stay neighbours (`h` and `w`).
    "import torch\ndef f(x):\n    b, c, f, h, w = x.shape\n"
    "    return x.permute(0, 2, 1, 3, 4).view(b, f, c, -1)",
    # The layout followed through the code: a copy in the default format, or a slice of
    # one row along a dimension (``correct[:1]`` views as one row), ends it.
    "import torch\ndef f(pred, t):\n    c = pred.t().eq(t).contiguous()\n    return c[:5].view(-1)",
    "import torch\ndef f(pred, t):\n    c = pred.t().eq(t)\n    return c[:1].view(-1)",
    "import torch\ndef f(pred, t):\n    c = pred.t().eq(t)\n    return c[:, 2:3].view(-1)",
    "import torch\ndef f(pred, t):\n    c = pred.t().eq(t)\n    return c[0].view(-1)",
    "import torch\ndef f(x):\n    return x.t().clone(memory_format=torch.contiguous_format).view(-1)",
    # TensorIterator lays the result out like its first operand: `t` is contiguous here.
    "import torch\ndef f(pred, t):\n    return t.eq(pred.t()).view(-1)",
    "import torch\ndef f(pred, t):\n    return (t == pred.t()).view(-1)",
    # Reductions and softmax return contiguous tensors; so does arithmetic on an expand.
    "import torch\ndef f(x):\n    return x.t().sum(0).view(-1)",
    "import torch\ndef f(x):\n    return x.t().softmax(1).view(-1)",
    "import torch\ndef f(x):\n    return (x.expand(4, 3) + 1).view(12)",
    # The name is rebound before the view, or the slice is taken of another tensor.
    "import torch\n"
    "def f(output, target, ks):\n"
    "    _, pred = output.topk(max(ks), 1, True, True)\n"
    "    pred = pred.t()\n"
    "    correct = pred.eq(target.view(1, -1).expand_as(pred))\n"
    "    correct = correct.contiguous()\n"
    "    return [correct[:k].view(-1).float().sum(0) for k in ks]",
    "import torch\ndef f(x, y):\n    c = x.t().eq(0)\n    c = y.eq(0)\n    return c[:3].view(-1)",
    # numpy: a transposed array compared, then viewed as another dtype.
    "import numpy as np\nimport torch\nm = np.zeros((3, 4)).T\nb = (m > 0).view(np.uint8)",
    # A user class whose .t() and .eq() return its own objects.
    "import torch\n"
    "class Grid:\n"
    "    def t(self):\n        return self\n"
    "    def eq(self, other):\n        return self\n"
    "    def view(self, *shape):\n        return shape\n"
    "g = Grid()\nv = g.t().eq(1).view(-1)",
    # One channel of a batch: a view that keeps the batch apart works; so does an index
    # on the first dimension, one without dimensions after it, or a copy.
    "import torch\ndef f(x, n):\n    return x[:, 0, ...].view(n, -1)",
    "import torch\ndef f(x):\n    return x[0, ...].view(-1)",
    "import torch\ndef f(x):\n    return x[:, 0].view(-1)",
    "import torch\ndef f(x):\n    return x[:, 0, ...].reshape(-1)",
    "import torch\ndef f(x):\n    return (x[:, 0, ...] * 2).view(-1)",
    # A tensor of indices copies: the result is contiguous.
    "import torch\ndef f(x, idx):\n    return x[:, idx, ...].view(-1)",
    # The function is only passed whole tensors and slices of the first dimension.
    "import torch\n"
    "def flat(t):\n    return t.view(-1)\n"
    "def f(x):\n"
    "    return [flat(x[i, ...]) for i in range(x.shape[0])] + [flat(x)]\n",
)
INVALID = (
    # A literal size that splits the moved channels (an SSD box head: 9 anchors x 4): the
    # view merges the spatial dimensions with part of the channels.
    Invalid(
        "import torch\ndef boxes(x, n):\n    return x.permute(0, 2, 3, 1).view(n, -1, 4)\n",
        fixed="import torch\ndef boxes(x, n):\n"
        "    return x.permute(0, 2, 3, 1).reshape(n, -1, 4)\n",
        lines=(3,),
    ),
    Invalid(
        "import torch\nx = torch.randn(2, 36, 5, 5)\ny = x.permute(0, 2, 3, 1).view(2, -1, 4)\n",
        fixed="import torch\nx = torch.randn(2, 36, 5, 5)\n"
        "y = x.permute(0, 2, 3, 1).reshape(2, -1, 4)\n",
        lines=(3,),
    ),
    Invalid(
        "import torch\nx = torch.randn(3, 4)\ny = x.t().view(-1)",
        fixed="import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
        lines=(3,),
    ),
    Invalid(
        "import torch\ndef f(x):\n    return x.transpose(1, 2).view(x.size(0), -1)",
        fixed="import torch\ndef f(x):\n    return x.transpose(1, 2).reshape(x.size(0), -1)",
        lines=(3,),
    ),
    Invalid(
        "import torch as T\nx = T.zeros(2, 3, 4)\ny = x.permute(2, 0, 1).view(-1)",
        fixed="import torch as T\nx = T.zeros(2, 3, 4)\ny = x.permute(2, 0, 1).reshape(-1)",
        lines=(3,),
    ),
    Invalid(
        "import torch\nx = torch.zeros(2, 3)\ny = x.T.view(6)",
        fixed="import torch\nx = torch.zeros(2, 3)\ny = x.T.reshape(6)",
        lines=(3,),
    ),
    Invalid(
        "import torch\ndef f(x):\n    return x.mT.view(-1)",
        fixed="import torch\ndef f(x):\n    return x.mT.reshape(-1)",
        lines=(3,),
    ),
    Invalid(
        "import torch\ndef f(x):\n    return x.permute([0, 2, 1]).view((x.size(0), -1))",
        fixed="import torch\ndef f(x):\n    return x.permute([0, 2, 1]).reshape((x.size(0), -1))",
        lines=(3,),
    ),
    Invalid(
        "import torch\ndef f(q):\n    return q.transpose(-2, -1).view(-1)",
        fixed="import torch\ndef f(q):\n    return q.transpose(-2, -1).reshape(-1)",
        lines=(3,),
    ),
    Invalid(
        "import torch\ndef f(x):\n    y = x.swapaxes(0, 1)\n    return y.view(-1)",
        fixed="import torch\ndef f(x):\n    y = x.swapaxes(0, 1)\n    return y.reshape(-1)",
        lines=(4,),
    ),
    Invalid(
        "import torch\ndef f(x):\n    return x.expand(4, 3).view(12)",
        fixed="import torch\ndef f(x):\n    return x.expand(4, 3).reshape(12)",
        lines=(3,),
    ),
    Invalid(
        "from torch import transpose\ndef f(x):\n    return transpose(x, 0, 1).view(-1)",
        fixed="from torch import transpose\ndef f(x):\n    return transpose(x, 0, 1).reshape(-1)",
        lines=(3,),
    ),
    Invalid(
        "import torch\nx = torch.randn(3, 4)\ny = (\n    x.movedim(0, 1)\n    .view(-1)\n)",
        fixed="import torch\nx = torch.randn(3, 4)\ny = (\n    x.movedim(0, 1)\n    .reshape(-1)\n)",
        lines=(4,),
    ),
    Invalid(
        "import torch\nx = torch.randn(3, 4)\ny = x.t().view(-1)",
        fixed="import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
        notebook=True,
        lines=(3,),
    ),
    # The top-k accuracy helper: `correct` has the strides of `pred.t()` (an elementwise
    # comparison keeps its first operand's layout), and a slice of two or more rows of it
    # cannot be flattened without a copy.
    Invalid(
        "import torch\n"
        "def accuracy(output, target, topk=(1,)):\n"
        "    maxk = max(topk)\n"
        "    _, pred = output.topk(maxk, 1, True, True)\n"
        "    pred = pred.t()\n"
        "    correct = pred.eq(target.view(1, -1).expand_as(pred))\n"
        "    res = []\n"
        "    for k in topk:\n"
        "        correct_k = correct[:k].view(-1).float().sum(0, keepdim=True)\n"
        "        res.append(correct_k)\n"
        "    return res\n",
        fixed="import torch\n"
        "def accuracy(output, target, topk=(1,)):\n"
        "    maxk = max(topk)\n"
        "    _, pred = output.topk(maxk, 1, True, True)\n"
        "    pred = pred.t()\n"
        "    correct = pred.eq(target.view(1, -1).expand_as(pred))\n"
        "    res = []\n"
        "    for k in topk:\n"
        "        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)\n"
        "        res.append(correct_k)\n"
        "    return res\n",
        lines=(9,),
    ),
    Invalid(
        "import torch\n"
        "def errors(preds, labels, ks):\n"
        "    _, inds = torch.topk(preds, max(ks), dim=1)\n"
        "    inds = inds.t()\n"
        "    correct = inds.eq(labels.view(1, -1).expand_as(inds))\n"
        "    return [correct[:k, :].view(-1).float().sum() for k in ks]\n",
        fixed="import torch\n"
        "def errors(preds, labels, ks):\n"
        "    _, inds = torch.topk(preds, max(ks), dim=1)\n"
        "    inds = inds.t()\n"
        "    correct = inds.eq(labels.view(1, -1).expand_as(inds))\n"
        "    return [correct[:k, :].reshape(-1).float().sum() for k in ks]\n",
        lines=(6,),
    ),
    # The view's sizes name the permuted tensor's dimensions: the `-1` must merge the batch
    # and frame dimensions, which the permutation took apart.
    Invalid(
        "import torch\ndef decode(latents):\n    b, c, f, h, w = latents.shape\n"
        "    latents = latents[:, :, 1:]\n"
        "    return latents.permute(0, 2, 1, 3, 4).view(-1, c, 1, h, w)\n",
        fixed="import torch\ndef decode(latents):\n    b, c, f, h, w = latents.shape\n"
        "    latents = latents[:, :, 1:]\n"
        "    return latents.permute(0, 2, 1, 3, 4).reshape(-1, c, 1, h, w)\n",
        lines=(5,),
    ),
    # Copies in the default `preserve_format` keep the permuted strides: `.clone()` too.
    Invalid(
        "import torch\ndef f(x):\n    return x.t().clone().view(-1)",
        fixed="import torch\ndef f(x):\n    return x.t().clone().reshape(-1)",
        lines=(3,),
    ),
    Invalid(
        "import torch\ndef f(x):\n    y = (2 * x.transpose(0, 1)).float()\n    return y.view(-1)",
        fixed="import torch\ndef f(x):\n"
        "    y = (2 * x.transpose(0, 1)).float()\n    return y.reshape(-1)",
        lines=(4,),
    ),
    Invalid(
        "import torch\ndef f(x):\n    return (x.t() > 0)[..., :2].view(-1)",
        fixed="import torch\ndef f(x):\n    return (x.t() > 0)[..., :2].reshape(-1)",
        lines=(3,),
    ),
    # One channel of a batch, flattened.
    Invalid(
        "import torch\ndef f(x):\n    return x[:, 0, ...].view(-1)",
        fixed="import torch\ndef f(x):\n    return x[:, 0, ...].reshape(-1)",
        lines=(3,),
    ),
    # A Dice score: the per-class helper passes channel slices to the function that
    # flattens its inputs (Pytorch-UNet's `multiclass_dice_coeff`).
    Invalid(
        "import torch\n"
        "def dice(input, target):\n"
        "    inter = torch.dot(input.view(-1), target.reshape(-1))\n"
        "    return 2 * inter / (input.sum() + target.sum())\n"
        "def multiclass_dice(input, target):\n"
        "    total = 0\n"
        "    for channel in range(input.shape[1]):\n"
        "        total += dice(input[:, channel, ...], target[:, channel, ...])\n"
        "    return total / input.shape[1]\n",
        fixed="import torch\n"
        "def dice(input, target):\n"
        "    inter = torch.dot(input.reshape(-1), target.reshape(-1))\n"
        "    return 2 * inter / (input.sum() + target.sum())\n"
        "def multiclass_dice(input, target):\n"
        "    total = 0\n"
        "    for channel in range(input.shape[1]):\n"
        "        total += dice(input[:, channel, ...], target[:, channel, ...])\n"
        "    return total / input.shape[1]\n",
        lines=(3,),
    ),
)
