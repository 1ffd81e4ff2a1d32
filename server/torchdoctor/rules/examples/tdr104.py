"""TDR104's VALID and INVALID examples: the rule (``rules/tdr104_retain_graph_in_loop.py``)
declares them as its own, and the rule tests run them."""

from __future__ import annotations

from ..base import Invalid, Valid

# A helper module that makes style targets from a network's features (the multi-file
# examples' features.py): the features carry the graph of the network's parameters.
_FEATURES_PY = (
    "import torch\n"
    "def gram(x):\n"
    "    return x @ x.t()\n"
    "def style_targets(net, img):\n"
    "    feats = net(img)\n"
    "    return [gram(f) for f in feats]\n"
)
# The same targets made from detached features.
_DETACHED_FEATURES_PY = (
    "import torch\n"
    "def gram(x):\n"
    "    return x @ x.t()\n"
    "def style_targets(net, img):\n"
    "    feats = net(img).detach()\n"
    "    return [gram(f) for f in feats]\n"
)
# A loss helper of another module: a fresh graph at each call.
_LOSSES_PY = (
    "import torch\n"
    "def step_loss(model, x, y):\n"
    "    out = model(x)\n"
    "    return torch.nn.functional.cross_entropy(out, y)\n"
)

VALID = (
    "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()",
    # Two backward passes through one graph: retain_graph is needed.
    "import torch\nfor x in loader:\n    a, b = model(x)\n    a.backward(retain_graph=True)\n"
    "    b.backward()\n    opt.step()",
    "import torch\nfor x in loader:\n    g = torch.autograd.grad(l1, p, retain_graph=True)\n"
    "    torch.autograd.grad(l2, p)",
    # Outside a loop.
    "import torch\nloss.backward(retain_graph=True)",
    "import torch\nfor x in loader:\n    loss.backward(retain_graph=False)",
    # One graph, built before the loop, backpropagated many times (torch's autograd tests).
    "import torch\ndef f(model, x):\n    loss = model(x).sum()\n    for _ in range(10):\n"
    "        loss.backward(retain_graph=True)\n",
    "import torch\nimport torch.distributed.autograd as dist_autograd\n"
    "def f(context_id, t):\n    loss = (t * 2).sum()\n    for _ in range(100):\n"
    "        dist_autograd.backward(context_id, [loss], retain_graph=True)\n",
    # Fabric's backward with a second backward pass after it.
    "import torch\nfrom lightning.fabric import Fabric\nfabric = Fabric()\n"
    "for x in loader:\n"
    "    loss = model(x).sum()\n"
    "    fabric.backward(loss, retain_graph=True)\n"
    "    fabric.backward(loss * 2)\n",
    # A GAN whose generator loss goes through the discriminator's graph on the same fakes
    # (not detached for D): the generator's backward needs that graph again.
    "import torch\n"
    "from models import Discriminator, Generator\n"
    "D, G = Discriminator(), Generator()\n"
    "bce = torch.nn.BCELoss()\n"
    "ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)\n"
    "dataset = torch.utils.data.TensorDataset(torch.randn(64, 3, 8, 8))\n"
    "for step, (real,) in enumerate(torch.utils.data.DataLoader(dataset, batch_size=8)):\n"
    "    fake = G(torch.randn(8, 16))\n"
    "    d_loss = bce(D(real), ones) + bce(D(fake), zeros)\n"
    "    opt_d.zero_grad()\n"
    "    d_loss.backward(retain_graph=True)\n"
    "    opt_d.step()\n"
    "    if step % 5 == 0:\n"
    "        g_loss = bce(D(fake), ones)\n"
    "        opt_g.zero_grad()\n"
    "        g_loss.backward()\n"
    "        opt_g.step()\n",
    # Style transfer (d2l): the style targets are made before the loop by a helper from the
    # features of a network whose parameters require grad; every step backpropagates through
    # them again.
    "import torch\n"
    "net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())\n"
    "def gram(x):\n"
    "    return x @ x.t()\n"
    "def get_inits(x, styles):\n"
    "    opt = torch.optim.Adam([x.requires_grad_()])\n"
    "    return x, [gram(y) for y in styles], opt\n"
    "def train(x, styles, steps):\n"
    "    x, targets, opt = get_inits(x, styles)\n"
    "    for step in range(steps):\n"
    "        opt.zero_grad()\n"
    "        l = sum(((gram(f) - t) ** 2).mean() for f, t in zip(net(x), targets))\n"
    "        l.backward(retain_graph=True)\n"
    "        opt.step()\n"
    "    return x\n"
    "style_x = torch.rand(1, 3, 32, 32)\n"
    "out = train(torch.rand(1, 3, 32, 32), [net(style_x)], 100)\n",
    # The same, with the targets made by a helper of another module.
    Valid(
        "import torch\n"
        "from features import gram, style_targets\n"
        "net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())\n"
        "targets = style_targets(net, torch.rand(1, 3, 32, 32))\n"
        "x = torch.rand(1, 3, 32, 32, requires_grad=True)\n"
        "opt = torch.optim.Adam([x])\n"
        "for step in range(300):\n"
        "    opt.zero_grad()\n"
        "    loss = sum(((gram(f) - t) ** 2).mean() for f, t in zip(net(x), targets))\n"
        "    loss.backward(retain_graph=True)\n"
        "    opt.step()\n",
        files=(("features.py", _FEATURES_PY),),
    ),
    # A method's parameter: its caller passes features made with autograd on.
    "import torch\n"
    "from torch import nn\n"
    "net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())\n"
    "class Styler:\n"
    "    def fit(self, x, target):\n"
    "        opt = torch.optim.Adam([x])\n"
    "        for step in range(100):\n"
    "            loss = ((net(x) - target) ** 2).mean()\n"
    "            loss.backward(retain_graph=True)\n"
    "            opt.step()\n"
    "s = Styler()\n"
    "s.fit(torch.rand(1, 3, 8, 8, requires_grad=True), net(torch.rand(1, 3, 8, 8)))\n",
    # Heads trained one after another on one trunk output made before the inner loop.
    "import torch\n"
    "trunk = torch.nn.Linear(4, 8)\n"
    "heads = [torch.nn.Linear(8, 2) for _ in range(3)]\n"
    "opts = [torch.optim.SGD(h.parameters(), lr=0.1) for h in heads]\n"
    "crit = torch.nn.CrossEntropyLoss()\n"
    "dataset = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))\n"
    "for x, y in torch.utils.data.DataLoader(dataset):\n"
    "    feats = trunk(x)\n"
    "    for head, opt in zip(heads, opts):\n"
    "        loss = crit(head(feats), y)\n"
    "        loss.backward(retain_graph=True)\n"
    "        opt.step()\n",
)

INVALID = (
    Invalid(
        "import torch\nfor x, y in loader:\n    loss = crit(model(x), y)\n"
        "    loss.backward(retain_graph=True)\n    opt.step()",
        fixed=None,
        lines=(4,),
    ),
    Invalid(
        "import torch\nfor step in range(100):\n    loss = model(torch.randn(4, 2)).sum()\n"
        "    torch.autograd.backward(loss, retain_graph=True)",
        fixed=None,
        lines=(4,),
    ),
    # `retain_graph` passed by position: Tensor.backward(gradient, retain_graph).
    Invalid(
        "import torch\nfor x, y in loader:\n    loss = crit(model(x), y)\n"
        "    loss.backward(None, True)\n    opt.step()",
        fixed=None,
        lines=(4,),
    ),
    # Fabric's backward: the loss is built in the loop (the launcher is not the tensor).
    Invalid(
        "import torch\nfrom lightning.fabric import Fabric\nfabric = Fabric()\n"
        "for x in loader:\n"
        "    loss = model(x).sum()\n"
        "    fabric.backward(loss, retain_graph=True)\n"
        "    opt.step()\n",
        fixed=None,
        lines=(6,),
    ),
    # StarGAN: the fakes are detached for the discriminator, and the generator step builds
    # its own graph: the later backward goes through none of D's graph.
    Invalid(
        "import torch\n"
        "from models import Discriminator, Generator, gradient_penalty\n"
        "generator, discriminator = Generator(), Discriminator()\n"
        "dataset = torch.utils.data.TensorDataset(torch.randn(64, 3, 8, 8), torch.rand(64, 5))\n"
        "dataloader = torch.utils.data.DataLoader(dataset, batch_size=16)\n"
        "for i, (imgs, labels) in enumerate(dataloader):\n"
        "    c = torch.randint(0, 2, (imgs.size(0), 5)).float()\n"
        "    fake_imgs = generator(imgs, c)\n"
        "    optimizer_D.zero_grad()\n"
        "    real_validity, pred_cls = discriminator(imgs)\n"
        "    fake_validity, _ = discriminator(fake_imgs.detach())\n"
        "    gp = gradient_penalty(discriminator, imgs.data, fake_imgs.data)\n"
        "    loss_D = -torch.mean(real_validity) + torch.mean(fake_validity) + 10 * gp\n"
        "    loss_D.backward(retain_graph=True)\n"
        "    optimizer_D.step()\n"
        "    if i % 5 == 0:\n"
        "        optimizer_G.zero_grad()\n"
        "        gen_imgs = generator(imgs, c)\n"
        "        pred_fake, _ = discriminator(gen_imgs)\n"
        "        loss_G = -torch.mean(pred_fake)\n"
        "        loss_G.backward()\n"
        "        optimizer_G.step()\n",
        fixed=None,
        lines=(14,),
    ),
    # OpenNMT: each shard's loss is computed by a method a subclass overrides, from the
    # shard's own inputs, and backpropagated once.
    Invalid(
        "import torch\n"
        "class LossComputeBase(torch.nn.Module):\n"
        "    def _compute_loss(self, batch, output, target):\n"
        "        return NotImplementedError\n"
        "    def sharded_compute_loss(self, batch, output, shard_size, normalization):\n"
        "        for shard in shards(self._make_shard_state(batch, output), shard_size):\n"
        "            loss, stats = self._compute_loss(batch, **shard)\n"
        "            loss.div(float(normalization)).backward(retain_graph=True)\n"
        "class NMTLossCompute(LossComputeBase):\n"
        "    def __init__(self, generator):\n"
        "        super().__init__()\n"
        "        self.generator = generator\n"
        "        self.criterion = torch.nn.NLLLoss()\n"
        "    def _compute_loss(self, batch, output, target):\n"
        "        scores = self.generator(output.view(-1, output.size(2)))\n"
        "        loss = self.criterion(scores, target.view(-1))\n"
        "        return loss, loss.item()\n",
        fixed=None,
        lines=(8,),
    ),
    # Carried state: each backward goes through every earlier iteration's graph (that is why
    # retain_graph is needed), reported as a state to detach.
    # An RNN state carried across batches from the model's output: `s.detach()` returns a
    # new tensor that is thrown away, so each backward goes through the previous batches'
    # graphs (d2l's train_and_predict_rnn_nn).
    Invalid(
        "import torch\n"
        "def train(model, data_iter, loss, optm):\n"
        "    state = model.begin_state(batch_size=32)\n"
        "    for X, Y in data_iter:\n"
        "        for s in state:\n"
        "            s.detach()\n"
        "        output, state = model(X, state)\n"
        "        l = loss(output, Y).mean()\n"
        "        optm.zero_grad()\n"
        "        l.backward(retain_graph=True)\n"
        "        optm.step()\n",
        fixed=None,
        lines=(10,),
    ),
    # The same without any detach (NYU-DLSP20's echo experiment).
    Invalid(
        "import torch\n"
        "from sequential_tasks import EchoData, SimpleRNN\n"
        "train_data_gen = EchoData(series_length=20000, batch_size=5)\n"
        "model, criterion = SimpleRNN(1, 4), torch.nn.BCELoss()\n"
        "optimizer = torch.optim.RMSprop(model.parameters(), lr=0.001)\n"
        "hidden = model.init_hidden(32)\n"
        "for xs, ys in train_data_gen:\n"
        "    y_pred, hidden = model(xs, hidden)\n"
        "    loss = criterion(y_pred, ys)\n"
        "    optimizer.zero_grad()\n"
        "    loss.backward(retain_graph=True)\n"
        "    optimizer.step()\n",
        fixed=None,
        lines=(11,),
    ),
    # A model whose `forward` keeps its LSTM state on the module for the next call: each
    # backward goes through the previous batches' graphs.
    Invalid(
        "import torch\n"
        "from torch import nn\n"
        "class RNNModel(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lstm = nn.LSTM(4, 8)\n"
        "        self.hidden = None\n"
        "    def forward(self, x):\n"
        "        out, self.hidden = self.lstm(x, self.hidden)\n"
        "        return out\n"
        "ds = torch.utils.data.TensorDataset(torch.randn(8, 2, 4), torch.randn(8, 2, 8))\n"
        "model = RNNModel()\n"
        "crit = nn.MSELoss()\n"
        "for x, y in torch.utils.data.DataLoader(ds):\n"
        "    loss = crit(model(x), y)\n"
        "    loss.backward(retain_graph=True)\n",
        fixed=None,
        lines=(16,),
    ),
    # The state kept on the trainer and carried across iterations.
    Invalid(
        "import torch\n"
        "from torch import nn\n"
        "class Trainer:\n"
        "    def __init__(self):\n"
        "        self.rnn = nn.LSTM(4, 8)\n"
        "        self.hidden = None\n"
        "        self.crit = nn.MSELoss()\n"
        "    def fit(self, loader):\n"
        "        for x, y in loader:\n"
        "            out, self.hidden = self.rnn(x, self.hidden)\n"
        "            loss = self.crit(out, y)\n"
        "            loss.backward(retain_graph=True)\n",
        fixed=None,
        lines=(12,),
    ),
    # A carried RNN state detached at the start of each iteration: every backward goes
    # through this iteration's graph only.
    Invalid(
        "import torch\n"
        "hidden = model.init_hidden(32)\n"
        "for xs, ys in loader:\n"
        "    hidden = hidden.detach()\n"
        "    y_pred, hidden = model(xs, hidden)\n"
        "    loss = criterion(y_pred, ys)\n"
        "    loss.backward(retain_graph=True)\n"
        "    optimizer.step()\n",
        fixed=None,
        lines=(7,),
    ),
    Invalid(
        "import torch\n"
        "def train(model, data_iter, loss, optm):\n"
        "    state = model.begin_state(batch_size=32)\n"
        "    for X, Y in data_iter:\n"
        "        for s in state:\n"
        "            s.detach_()\n"
        "        output, state = model(X, state)\n"
        "        l = loss(output, Y).mean()\n"
        "        l.backward(retain_graph=True)\n"
        "        optm.step()\n",
        fixed=None,
        lines=(9,),
    ),
    # The trainer's state detached at the start of each iteration.
    Invalid(
        "import torch\n"
        "from torch import nn\n"
        "class Trainer:\n"
        "    def __init__(self):\n"
        "        self.rnn = nn.LSTM(4, 8)\n"
        "        self.hidden = None\n"
        "        self.crit = nn.MSELoss()\n"
        "    def fit(self, loader):\n"
        "        for x, y in loader:\n"
        "            self.hidden = tuple(h.detach() for h in self.hidden)\n"
        "            out, self.hidden = self.rnn(x, self.hidden)\n"
        "            loss = self.crit(out, y)\n"
        "            loss.backward(retain_graph=True)\n",
        fixed=None,
        lines=(13,),
    ),
    # The same method, its caller passing detached features.
    Invalid(
        "import torch\n"
        "from torch import nn\n"
        "net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())\n"
        "class Styler:\n"
        "    def fit(self, x, target):\n"
        "        opt = torch.optim.Adam([x])\n"
        "        for step in range(100):\n"
        "            loss = ((net(x) - target) ** 2).mean()\n"
        "            loss.backward(retain_graph=True)\n"
        "            opt.step()\n"
        "s = Styler()\n"
        "s.fit(torch.rand(1, 3, 8, 8, requires_grad=True), net(torch.rand(1, 3, 8, 8)).detach())\n",
        fixed=None,
        lines=(9,),
    ),
    # Style targets made before the loop from detached features, by a helper of another
    # module: nothing made before the loop carries a graph.
    Invalid(
        "import torch\n"
        "from features import gram, style_targets\n"
        "net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())\n"
        "targets = style_targets(net, torch.rand(1, 3, 32, 32))\n"
        "x = torch.rand(1, 3, 32, 32, requires_grad=True)\n"
        "opt = torch.optim.Adam([x])\n"
        "for step in range(300):\n"
        "    opt.zero_grad()\n"
        "    loss = sum(((gram(f) - t) ** 2).mean() for f, t in zip(net(x), targets))\n"
        "    loss.backward(retain_graph=True)\n"
        "    opt.step()\n",
        fixed=None,
        lines=(10,),
        files=(("features.py", _DETACHED_FEATURES_PY),),
    ),
    # The loss made by a helper of another module, anew at each step.
    Invalid(
        "import torch\n"
        "from losses import step_loss\n"
        "model = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in loader:\n"
        "    loss = step_loss(model, x, y)\n"
        "    opt.zero_grad()\n"
        "    loss.backward(retain_graph=True)\n"
        "    opt.step()\n",
        fixed=None,
        lines=(8,),
        files=(("losses.py", _LOSSES_PY),),
    ),
)
