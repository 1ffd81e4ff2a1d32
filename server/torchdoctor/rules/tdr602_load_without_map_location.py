from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, checkpoints, distributed, fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule, Valid


class LoadWithoutMapLocation(Rule):
    """## What it does
    Checks for `torch.load(...)` calls without `map_location=`, where the checkpoint may come
    from another machine.

    Not reported when the file itself shows where the tensors are, or that they load where
    they were written:

    - the file saves the path it reads (a save to the same literal, format string, variable,
      `os.path.join` of the same parts, or a parameter its callers pass the same path; a save
      helper or checkpoint handler given that file name): it reads back its own output,
      typically resuming on the training machine;
    - every `torch.save` of the file writes CPU data (`.cpu()` values, a module moved to the CPU
      just before, `FullStateDictConfig(offload_to_cpu=True)`), or another script in the same
      folder saves CPU data to the file name it reads (`export.py` writes `net.pt` after
      `net.cpu()`);
    - the code needs CUDA anyway: it moves to CUDA unconditionally (`.cuda()`, `device =
      "cuda"`, DeepSpeed) and shows no CPU fallback (no `torch.cuda.is_available()` test, no
      `"cpu"` device);
    - another load of the same path picks a device, or the load resumes training (it restores
      an optimizer's state, or a module the file also saves or trains) in a script without a
      CPU fallback;
    - what it loads is numpy data (`torch.from_numpy(data[...])`, `.numpy()`).

    A resume in a script with a CPU fallback (`--device cpu`, `"cuda" if ... else "cpu"`) is
    reported, even of a path the file saves: the checkpoint comes from a GPU run, and the CPU
    run fails to load it (a run reloading the weights it has just saved, or has just trained,
    in the same function is left alone). In a script of several processes (it calls `init_process_group`, wraps a
    model in `DistributedDataParallel`, makes an Accelerate `Accelerator`, or reads `local_rank`) a load is reported even when
    the file saves the same path, resumes, or needs CUDA anyway: every rank loads the tensors
    onto the device that saved them, GPU 0, before moving them.

    A file with a CPU fallback is reported even when it saves the path it reads, if another
    script of its folder that can run on CUDA saves weights that may be on the GPU to the
    same file name (`train.py` writes `model.pth` from a model on `device`; a notebook beside
    it writes and reads `model.pth` too): the file it reads may be the GPU run's.

    Code that needs CUDA anyway is still reported when a module-level name keeps what the
    load returns (or an item of it that goes to `load_state_dict`) while the module-level code
    trains, with no `del`: the checkpoint's tensors load onto the GPU they were saved from and
    stay there for the whole run, a second copy of the restored weights (and optimizer state)
    in GPU memory.

    A load of a file that the code downloads (`urllib.request.urlretrieve`,
    `torch.hub.download_url_to_file`...) was made elsewhere: it is reported whatever the file
    also saves there (unless the code needs CUDA anyway or the data is numpy).

    ## Why is this bad?
    `torch.load` restores every tensor onto the device it was saved from. A checkpoint written
    on a GPU machine fails to load on a CPU-only machine with `RuntimeError: Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is False`, and on a
    machine with fewer GPUs it lands on the wrong one, or fills GPU 0 of every process in a
    distributed job before you move it. Inference and deployment entry points with a CPU
    fallback (`"cuda" if torch.cuda.is_available() else "cpu"`, a `--cuda` flag) are where
    this bites: they load a file that training wrote on a GPU.

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
    With a device variable in scope, `map_location=device` puts the tensors where the code
    uses them.

    ## Fix safety
    The fix adds `map_location=<device>` with a device variable that is certainly bound at the
    load: `self.device` in a method when the class's `__init__` assigns it unconditionally
    (and the load is not in `__init__` before that), else a parameter named `device` (or
    `dev`), or an earlier assignment of `device`, `DEVICE` or `dev` that runs on every path to
    the load (at module level, before the function that loads). Otherwise it adds
    `map_location="cpu"`. It is safe
    when the device cannot be observed: the loaded value is dropped, or it (or its items:
    `ckpt["model"]`) only goes to `load_state_dict` of a module, optimizer, scheduler or
    scaler, which copy it to where their own tensors are; and the inserted name certainly
    holds a device (a `torch.device(...)` or a device string, a parameter whose callers pass
    one). Otherwise the fix is unsafe: code that uses the loaded tensors directly (a whole
    pickled module, saved features) now finds them on the mapped device, and a parameter
    named `device` may hold a GPU index, which `map_location` does not accept (one whose
    default is such a constant, `device=0`, is not used: the fix adds `"cpu"` then).

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [Saving and loading models across devices](https://pytorch.org/tutorials/beginner/saving_loading_models.html)
    """

    code = "TDR602"
    name = "load-without-map-location"
    fix_safety = Applicability.UNSAFE
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
        # The file reads back what it saves: the same literal, format string, join, variable.
        "import torch\ntorch.save(net.state_dict(), 'run3.pt')\n"
        "net.load_state_dict(torch.load('run3.pt'))\n",
        "import torch\nif opt.start > 0:\n"
        "    gen.load_state_dict(torch.load('out/%s/gen_%d.pth' % (opt.name, opt.start)))\n"
        "for epoch in range(opt.start, 9):\n"
        "    torch.save(gen.state_dict(), f'out/{opt.name}/gen_{epoch}.pth')\n",
        "import torch\nfor epoch in range(5):\n"
        "    torch.save(net.state_dict(), f'ckpt/net_e{epoch}.pt')\n"
        "net.load_state_dict(torch.load('ckpt/net_e4.pt'))\n",
        "import os.path as osp\nimport torch as T\n"
        "T.save(sd, osp.join(args.out, 'best.pt'))\nsd = T.load(osp.join(args.out, 'best.pt'))\n",
        "import torch\ndef store(obj, where):\n    torch.save(obj, where)\n"
        "def restore(where):\n    return torch.load(where)\n"
        "store(net.state_dict(), 'w.pt')\nnet.load_state_dict(restore('w.pt'))\n",
        "import torch\ndef export(model, ckpt_path):\n"
        "    with open(ckpt_path, 'wb') as fh:\n        torch.save(model, fh)\n"
        "def reload(ckpt_path):\n    with open(ckpt_path, 'rb') as fh:\n"
        "        return torch.load(fh)\n"
        "export(net, CKPT)\nnet = reload(CKPT)\n",
        "import torch\ndef fit(net, save_to):\n    torch.save(net.state_dict(), save_to)\n"
        "fit(net, 'best.bin')\nnet.load_state_dict(torch.load('best.bin'))\n",
        # Every save of the file writes CPU data.
        "import torch\ntorch.save(feats.cpu(), args.dump)\nfeats = torch.load(args.feats)\n",
        "import torch\ndef train(net, path):\n    net.eval().cpu()\n"
        "    torch.save(net.state_dict(), path)\n"
        "def predict(args):\n    return torch.load(args.weights)\n",
        "import torch\nfrom torch.distributed.fsdp import FullStateDictConfig\n"
        "policy = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)\n"
        "def save(model, path):\n"
        "    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, policy):\n"
        "        state = model.state_dict()\n    torch.save(state, path)\n"
        "def load(model, cfg):\n    model.load_state_dict(torch.load(cfg.full_path))\n",
        # The code needs CUDA anyway: no CPU fallback anywhere.
        "import torch\nmodel = Net().cuda()\nmodel.load_state_dict(torch.load(args.weights))\n",
        "import torch\nDEVICE = 'cuda'\nnet = Net().to(DEVICE)\nsd = torch.load(args.weights)\n",
        # Another load of the same path picks the device.
        "import torch\nif args.gpu is None:\n    ckpt = torch.load(args.resume)\nelse:\n"
        "    ckpt = torch.load(args.resume, map_location=f'cuda:{args.gpu}')\n",
        # Resuming training: the optimizer's state, a module the file trains (no CPU fallback).
        "import torch\nmodel.cuda()\n"
        "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\n"
        "optimizer.load_state_dict(ckpt['optimizer'])\n",
        # The run reloads the best weights it has just saved, on the same device.
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "def fit(net, opt, loader):\n    for x in loader:\n"
        "        net(x.to(device)).sum().backward()\n        opt.step()\n"
        "    torch.save(net.state_dict(), 'best.pt')\n"
        "    net.load_state_dict(torch.load('best.pt'))\n",
        # Several processes reading a dataset cache the file writes: CPU data.
        "import torch\nfrom torch.utils.data import TensorDataset\n"
        "def cached(local_rank, path, x):\n    if local_rank == 0:\n"
        "        torch.save(TensorDataset(x), path)\n    torch.distributed.barrier()\n"
        "    return torch.load(path, weights_only=False)\n",
        # Another script of the project saves CPU weights to the file name this one reads.
        Valid(
            "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "net.load_state_dict(torch.load('export/net.pt'))\n",
            files=(
                (
                    "export.py",
                    "import torch\nnet.cpu()\ntorch.save(net.state_dict(), 'net.pt')\n",
                ),
            ),
        ),
        # The script beside it writes that file name from the CPU... or runs on CPU only.
        Valid(
            "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "torch.save(net.cpu().state_dict(), 'model.pth')\n"
            "net.load_state_dict(torch.load('model.pth'))\n",
            files=(("train.py", "import torch\ntorch.save(net.state_dict(), 'model.pth')\n"),),
        ),
        # CUDA only, the checkpoint deleted before training (or held by a function's local).
        "import torch\nmodel = Net().cuda()\nckpt = torch.load(args.resume)\n"
        "model.load_state_dict(ckpt['model'])\ndel ckpt\n"
        "opt = torch.optim.Adam(model.parameters())\n"
        "for x in loader:\n    model(x.cuda()).sum().backward()\n    opt.step()\n",
        "import torch\nmodel = Net().cuda()\n"
        "def restore(path):\n    ckpt = torch.load(path)\n"
        "    model.load_state_dict(ckpt['model'])\nrestore(args.resume)\n"
        "opt = torch.optim.Adam(model.parameters())\n"
        "for x in loader:\n    model(x.cuda()).sum().backward()\n    opt.step()\n",
        # numpy data has no device.
        "import torch\ndata = torch.load('wave.pt')\nx = torch.from_numpy(data[3:, :-1])\n",
        # `map_location` passed by position.
        "import torch\nsd = torch.load(path, 'cpu')\n",
    )
    INVALID = (
        # A resume in a script with a CPU fallback: the checkpoint comes from a GPU run.
        Invalid(
            "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\n"
            "optimizer.load_state_dict(ckpt['optimizer'])\n",
            fixed="import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "ckpt = torch.load(args.resume, map_location=device)\n"
            "model.load_state_dict(ckpt['model'])\n"
            "optimizer.load_state_dict(ckpt['optimizer'])\n",
            lines=(3,),
        ),
        Invalid(
            "import torch\nfrom torch import nn, optim\n"
            "device = torch.device('cuda' if args.cuda else 'cpu')\n"
            "net = nn.Linear(2, 2).to(device)\n"
            "if args.net:\n    net.load_state_dict(torch.load(args.net))\n"
            "opt = optim.Adam(net.parameters())\n",
            fixed="import torch\nfrom torch import nn, optim\n"
            "device = torch.device('cuda' if args.cuda else 'cpu')\n"
            "net = nn.Linear(2, 2).to(device)\n"
            "if args.net:\n    net.load_state_dict(torch.load(args.net, map_location=device))\n"
            "opt = optim.Adam(net.parameters())\n",
            lines=(6,),
        ),
        # Several processes: every rank loads onto the device that saved, even the file's own
        # checkpoint, even when the code needs CUDA anyway.
        Invalid(
            "import torch\nimport torch.distributed as dist\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "dist.init_process_group('nccl')\nmodel = DDP(net.cuda())\n"
            "model.load_state_dict(torch.load('ckpt.pt'))\n"
            "torch.save(model.state_dict(), 'ckpt.pt')\n",
            fixed="import torch\nimport torch.distributed as dist\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "dist.init_process_group('nccl')\nmodel = DDP(net.cuda())\n"
            "model.load_state_dict(torch.load('ckpt.pt', map_location=\"cpu\"))\n"
            "torch.save(model.state_dict(), 'ckpt.pt')\n",
            lines=(6,),
        ),
        # Accelerate: every process resumes from the file its run wrote on GPU 0.
        Invalid(
            "import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
            "class Trainer:\n    def save(self, n):\n"
            "        torch.save(self.model.state_dict(), f'results/model-{n}.pt')\n"
            "    def load(self, n):\n"
            "        data = torch.load(f'results/model-{n}.pt')\n"
            "        self.model.load_state_dict(data)\n",
            fixed="import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
            "class Trainer:\n    def save(self, n):\n"
            "        torch.save(self.model.state_dict(), f'results/model-{n}.pt')\n"
            "    def load(self, n):\n"
            "        data = torch.load(f'results/model-{n}.pt', map_location=\"cpu\")\n"
            "        self.model.load_state_dict(data)\n",
            lines=(8,),
        ),
        Invalid(
            "import torch\ntorch.cuda.set_device(args.local_rank)\nnet.cuda()\n"
            "ckpt = torch.load(args.resume)\nnet.load_state_dict(ckpt['net'])\n"
            "optimizer.load_state_dict(ckpt['optimizer'])\n",
            fixed="import torch\ntorch.cuda.set_device(args.local_rank)\nnet.cuda()\n"
            'ckpt = torch.load(args.resume, map_location="cpu")\n'
            "net.load_state_dict(ckpt['net'])\n"
            "optimizer.load_state_dict(ckpt['optimizer'])\n",
            lines=(4,),
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt")',
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="cpu")',
            lines=(2,),
        ),
        Invalid(
            "import torch as T\nstate = T.load(path, weights_only=True)",
            fixed='import torch as T\nstate = T.load(path, weights_only=True, map_location="cpu")',
            lines=(2,),
        ),
        Invalid(
            "from torch import load\nsd = load('m.pt')",
            fixed="from torch import load\nsd = load('m.pt', map_location=\"cpu\")",
            lines=(2,),
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
            lines=(4,),
        ),
        Invalid(
            "import torch.serialization\nsd = torch.serialization.load('m.pt')\n",
            fixed="import torch.serialization\n"
            "sd = torch.serialization.load('m.pt', map_location=\"cpu\")\n",
            lines=(2,),
        ),
        # A format string that any file name would match is not the same path.
        Invalid(
            "import torch\ntorch.save(net.state_dict(), f'{run}.pt')\n"
            "net.load_state_dict(torch.load('pretrained.pt'))\n",
            fixed="import torch\ntorch.save(net.state_dict(), f'{run}.pt')\n"
            "net.load_state_dict(torch.load('pretrained.pt', map_location=\"cpu\"))\n",
            lines=(3,),
        ),
        Invalid(
            "import torch\nsd = torch.load(\n    'm.pt',\n)\n",
            fixed="import torch\nsd = torch.load(\n    'm.pt',\n    map_location=\"cpu\",\n)\n",
            lines=(2,),
        ),
        # An inference entry point with a CPU fallback, loading what training wrote elsewhere.
        Invalid(
            "import torch\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "net = Net().to(DEVICE)\nnet.load_state_dict(torch.load(args.weights))\n",
            fixed="import torch\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "net = Net().to(DEVICE)\n"
            "net.load_state_dict(torch.load(args.weights, map_location=DEVICE))\n",
            lines=(4,),
        ),
        # Names alike, values not: the save writes another file than the load reads.
        Invalid(
            "import torch\ndef train(model):\n    path = 'last.pt'\n"
            "    torch.save(model.state_dict(), path)\n"
            "def serve(model, path):\n    model.load_state_dict(torch.load(path))\n",
            fixed="import torch\ndef train(model):\n    path = 'last.pt'\n"
            "    torch.save(model.state_dict(), path)\n"
            "def serve(model, path):\n"
            '    model.load_state_dict(torch.load(path, map_location="cpu"))\n',
            lines=(6,),
        ),
        # Two parameters of the same name are not the same path.
        Invalid(
            "import torch\ndef store(obj, where):\n    torch.save(obj, where)\n"
            "def restore(where):\n    return torch.load(where)\n",
            fixed="import torch\ndef store(obj, where):\n    torch.save(obj, where)\n"
            "def restore(where):\n"
            '    return torch.load(where, map_location="cpu")\n',
            lines=(5,),
        ),
        # A training script beside it writes the same file name from the GPU: the file read
        # may be that run's, even though this file saves it too.
        Invalid(
            "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "torch.save(net.state_dict(), 'model.pth')\n"
            "net.load_state_dict(torch.load('model.pth'))\n",
            fixed="import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "torch.save(net.state_dict(), 'model.pth')\n"
            "net.load_state_dict(torch.load('model.pth', map_location=device))\n",
            files=(
                (
                    "gpt_train.py",
                    "import torch\n"
                    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                    "model.to(device)\ntrain(model)\n"
                    "torch.save(model.state_dict(), 'model.pth')\n",
                ),
            ),
            lines=(4,),
        ),
        # CUDA only, but a global keeps the checkpoint's GPU tensors while the script trains.
        Invalid(
            "import torch\nif args.resume:\n    loaded = torch.load(args.resume)\n"
            "    hparams, weights = loaded['hparams'], loaded['weights']\n"
            "model = Net(**hparams).cuda()\nmodel.load_state_dict(weights)\n"
            "opt = torch.optim.Adam(model.parameters())\n"
            "for x in loader:\n    model(x.cuda()).sum().backward()\n    opt.step()\n"
            "torch.save({'hparams': hparams, 'weights': model.state_dict()}, 'model.pt')\n",
            fixed="import torch\nif args.resume:\n"
            '    loaded = torch.load(args.resume, map_location="cpu")\n'
            "    hparams, weights = loaded['hparams'], loaded['weights']\n"
            "model = Net(**hparams).cuda()\nmodel.load_state_dict(weights)\n"
            "opt = torch.optim.Adam(model.parameters())\n"
            "for x in loader:\n    model(x.cuda()).sum().backward()\n    opt.step()\n"
            "torch.save({'hparams': hparams, 'weights': model.state_dict()}, 'model.pt')\n",
            lines=(3,),
        ),
        # Downloaded: made elsewhere, even if the code saves there too.
        Invalid(
            "import urllib.request\nimport torch\n"
            "urllib.request.urlretrieve(URL, 'ckpt/net.pt')\n"
            "net.load_state_dict(torch.load('ckpt/net.pt'))\n"
            "torch.save(net.state_dict(), 'ckpt/net.pt')\n",
            fixed="import urllib.request\nimport torch\n"
            "urllib.request.urlretrieve(URL, 'ckpt/net.pt')\n"
            "net.load_state_dict(torch.load('ckpt/net.pt', map_location=\"cpu\"))\n"
            "torch.save(net.state_dict(), 'ckpt/net.pt')\n",
            lines=(4,),
        ),
        # CUDA only under a flag: the CPU path loads a GPU checkpoint.
        Invalid(
            "import torch\nmodel = torch.load(opt.model)\nif opt.cuda:\n    model = model.cuda()\n",
            fixed='import torch\nmodel = torch.load(opt.model, map_location="cpu")\n'
            "if opt.cuda:\n    model = model.cuda()\n",
            lines=(2,),
        ),
        # `device` is bound only in one branch, or after the load: "cpu".
        Invalid(
            "import torch\nif args.gpu:\n    device = torch.device('cuda')\n"
            "sd = torch.load(args.weights)\n",
            fixed="import torch\nif args.gpu:\n    device = torch.device('cuda')\n"
            'sd = torch.load(args.weights, map_location="cpu")\n',
            lines=(4,),
        ),
        Invalid(
            "import torch\ndef restore(path):\n    return torch.load(path)\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
            fixed="import torch\ndef restore(path):\n"
            '    return torch.load(path, map_location="cpu")\n'
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
            lines=(3,),
        ),
        # The class's own device, a parameter.
        Invalid(
            "import torch\nclass Predictor:\n    def __init__(self, net):\n"
            "        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "        self.net = net.to(self.device)\n"
            "    def restore(self, path):\n"
            "        self.net.load_state_dict(torch.load(path))\n",
            fixed="import torch\nclass Predictor:\n    def __init__(self, net):\n"
            "        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "        self.net = net.to(self.device)\n"
            "    def restore(self, path):\n"
            "        self.net.load_state_dict(torch.load(path, map_location=self.device))\n",
            lines=(7,),
        ),
        Invalid(
            "import torch\ndef restore(net, path, device):\n"
            "    net.load_state_dict(torch.load(path))\n",
            fixed="import torch\ndef restore(net, path, device):\n"
            "    net.load_state_dict(torch.load(path, map_location=device))\n",
            lines=(3,),
        ),
        # A GPU index is no map_location: "cpu".
        Invalid(
            "import torch\ndef restore(net, path, device=0):\n"
            "    net.load_state_dict(torch.load(path))\n",
            fixed="import torch\ndef restore(net, path, device=0):\n"
            '    net.load_state_dict(torch.load(path, map_location="cpu"))\n',
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_to(*checkpoints.LOADS):
            if arguments.bind(call, arguments.LOAD).may_pass("map_location"):
                continue
            if not _made_here(sem, call):
                ctx.report(
                    call,
                    Text(
                        "`torch.load` without `map_location`: tensors return to the device they "
                        "were saved from, which may not exist here",
                        "`torch.load` 未指定 `map_location`：张量会回到保存时的设备上，而该设备在这里可能不存在",
                    ),
                    fixes=partial(_fix, ctx, call),
                )
                continue
            step = _held_on_gpu(sem, call)
            if step is not None:
                name = checkpoints.loaded_name(sem, call)
                ctx.report(
                    call,
                    Text(
                        f"`torch.load` without `map_location` in code that runs on CUDA: the "
                        f"checkpoint's tensors load onto the GPU and stay referenced by the "
                        f"global `{name.id if name else ''}` while the script trains, a second "
                        "copy of the restored state in GPU memory",
                        f"在只运行于 CUDA 的代码中 `torch.load` 未指定 `map_location`：检查点的张量被加载到 GPU 上，"
                        f"并在脚本训练期间一直被全局变量 `{name.id if name else ''}` 引用，"
                        "GPU 显存中多出一份恢复状态的副本",
                    ),
                    fixes=partial(_fix, ctx, call),
                    related=[ctx.related(step, Text("training runs here", "训练在此进行"))],
                )


def _made_here(sem: Semantic, call: ast.Call) -> bool:
    """The file itself shows where the checkpoint's tensors live, or that the devices are
    the ones it was written on: it saves the path it reads, it saves only CPU data (or
    another script of the project saves CPU data to the file name it reads), it needs CUDA
    anyway, another load of the same path picks a device, or the load resumes this file's
    own training. In a script of several processes (a process group, DDP, ``local_rank``)
    only CPU data and a device picked elsewhere count: every rank loads onto the device that
    saved. A resume in a script with a CPU fallback is not its own output either: the
    checkpoint comes from a GPU run."""
    if checkpoints.read_as_numpy(sem, call):
        return True
    several = distributed.multi_process(sem)
    if checkpoints.needs_cuda(sem, call) and not several:
        return True
    if checkpoints.downloaded(sem, call):
        return False
    if checkpoints.saves_only_cpu(sem) or any(
        arguments.value(other, arguments.LOAD, "map_location") is not None
        for other in checkpoints.same_path_loads(sem, call)
    ):
        return True
    elsewhere = checkpoints.saved_elsewhere(sem, call)
    if elsewhere and all(
        checkpoints.writes_cpu(w.sem, w.call) for w in elsewhere if w.sem.qualname(w.call.func)
    ):
        return True
    if checkpoints.cpu_fallback(sem) and checkpoints.written_on_gpu_elsewhere(sem, call):
        return False  # a training script beside it writes that file from the GPU
    if several:
        if checkpoints.round_trip(sem, call):
            return True  # a buffer or temporary file the same function has just written
        saves = checkpoints.saves_writing(sem, call)
        return bool(saves) and all(_data_only(sem, save) for save in saves)
    if checkpoints.restores_training(sem, call) and not _after_training(sem, call):
        return not checkpoints.cpu_fallback(sem)
    return checkpoints.written_here(sem, call)


def _held_on_gpu(sem: Semantic, call: ast.Call) -> ast.Call | None:
    """A load exempt only because the code needs CUDA anyway, whose checkpoint a module-level
    name keeps while the script trains (the training step), when the file's checkpoints are
    GPU data (not all of its saves write CPU data)."""
    if (
        checkpoints.read_as_numpy(sem, call)
        or not checkpoints.needs_cuda(sem, call)
        or checkpoints.saves_only_cpu(sem)
    ):
        return None
    return checkpoints.held_while_training(sem, call)


def _data_only(sem: Semantic, save: ast.Call) -> bool:
    """A save of data built by the code (a cache of tokenized samples), not weights."""
    return not checkpoints.holds_weights(sem, save)


_TRAINING_CALLS = ("step", "backward", "run", "fit")


def _after_training(sem: Semantic, call: ast.Call) -> bool:
    """The load follows a save of the same path or a training call (``optimizer.step()``,
    ``trainer.run(...)``) in the same function (or at module level): the run reloads what it
    has just trained and written, on the same device, rather than resuming."""
    function = sem.enclosing_function(call)
    here = (call.lineno, call.col_offset)
    earlier = [
        *checkpoints.saves_writing(sem, call),
        *(c for name in _TRAINING_CALLS for c in sem.calls_by_attr.get(name, ())),
    ]
    return any(
        sem.enclosing_function(other) is function and (other.lineno, other.col_offset) < here
        for other in earlier
    )


def _fix(ctx: Context, call: ast.Call) -> Fix:
    """``map_location=<device>`` when a device variable is bound here, else ``"cpu"``; safe
    when the loaded tensors are only copied (or dropped) and the name certainly holds a
    device."""
    found = checkpoints.device_name(ctx.sem, call)
    value, device = found if found is not None else ('"cpu"', True)
    safe = device and checkpoints.only_copied(ctx.sem, call)
    return Fix(
        Text(f"Add `map_location={value}`", f"添加 `map_location={value}`"),
        (fixes.add_keyword(ctx.source, call, f"map_location={value}"),),
        Applicability.SAFE if safe else Applicability.UNSAFE,
    )
