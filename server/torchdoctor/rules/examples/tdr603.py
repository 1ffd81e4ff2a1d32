"""TDR603's VALID and INVALID examples: the rule (``rules/tdr603_load_weights_only_false.py``)
declares them as its own, and the rule tests run them."""

from __future__ import annotations

from ..base import Invalid, Valid

# A saving helper of another module (the multi-file examples' utils.py), and a script that
# resumes from what it saves through it.
_SAVE_HELPER = "import torch\ndef save_checkpoint(state, path):\n    torch.save(state, path)\n"
_RESUME = (
    "import argparse\nimport torch\nfrom utils import save_checkpoint\n"
    "args = argparse.ArgumentParser().parse_args()\n"
    "model = torch.nn.Linear(2, 2)\n"
    "if args.resume:\n"
    "    ckpt = torch.load(args.resume, map_location='cpu')\n"
    "    model.load_state_dict(ckpt['model'])\n"
    "    epochs = ckpt['args']['epochs']\n"
)

# A package module of the project that saves training checkpoints with the run's arguments in
# them (``self.args.model`` is read: an object, not a plain value), and a script that reads a
# checkpoint named on the command line: the path cannot be followed, the keys it reads can.
_SAVER_PY = (
    "import torch\n"
    "class CheckpointSaver:\n"
    "    def __init__(self, model, args=None):\n"
    "        self.model = model\n"
    "        self.args = args\n"
    "    def save(self, path, epoch, metric=None):\n"
    "        state = {'epoch': epoch, 'state_dict': self.model.state_dict()}\n"
    "        if self.args is not None:\n"
    "            state['arch'] = self.args.model\n"
    "            state['args'] = self.args\n"
    "        if metric is not None:\n"
    "            state['metric'] = metric\n"
    "        torch.save(state, path)\n"
)
_SAVER = (("train/__init__.py", ""), ("train/saver.py", _SAVER_PY))
_METRIC_OF = (
    "import sys\nimport torch\n"
    "def metric_of(path):\n"
    "    checkpoint = torch.load(path, map_location='cpu')\n"
    "    if 'metric' in checkpoint:\n"
    "        return checkpoint['metric']\n"
    "    elif 'metrics' in checkpoint and 'metric_name' in checkpoint:\n"
    "        return checkpoint['metrics'][checkpoint['metric_name']]\n"
    "    return None\n"
    "print(metric_of(sys.argv[1]))\n"
)
# A save helper of a package module whose config parameter is an object (``cfg.lr`` is read).
_CKPT_PY = (
    "import torch\n"
    "def save_checkpoint(model, optimizer, cfg, path):\n"
    "    print('saving at lr', cfg.lr)\n"
    "    torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(),"
    " 'cfg': cfg}, path)\n"
)
_RESUME_ARGV = (
    "import sys\nimport torch\n"
    "ckpt = torch.load(sys.argv[1], map_location='cpu')\n"
    "model.load_state_dict(ckpt['model'])\n"
    "optimizer.load_state_dict(ckpt['optimizer'])\n"
)


VALID = (
    'import torch\nsd = torch.load("m.pt", map_location="cpu", weights_only=True)',
    # The arguments may hold weights_only.
    "import torch\ndef restore(path, **options):\n    return torch.load(path, **options)\n",
    # A fallback for a torch without weights_only.
    "import torch\ndef read(path):\n    try:\n        return torch.load(path, weights_only=True)\n"
    "    except TypeError:\n        return torch.load(path)\n",
    "import torch\nif TORCH_VERSION < (1, 13):\n    sd = torch.load(p)\n"
    "else:\n    sd = torch.load(p, weights_only=True)\n",
    # Round trip without weights_only.
    "import io\nimport torch\ndef check(model):\n    b = io.BytesIO()\n"
    "    torch.save(model.state_dict(), b)\n    b.seek(0)\n    return torch.load(b)\n",
    # Not a literal: the caller decides.
    "import torch\ndef restore(path, trusted):\n"
    '    return torch.load(path, map_location="cpu", weights_only=not trusted)\n',
    # Other libraries' load functions.
    "import torch\nimport numpy as np\nx = np.load('a.npy', allow_pickle=False)\n"
    "y = np.load('b.npz', weights_only=False)",
    # A round trip: the function reads back what it has just saved.
    "import io\nimport torch\ndef check(model):\n    b = io.BytesIO()\n"
    "    torch.save(model, b)\n    b.seek(0)\n    return torch.load(b, weights_only=False)\n",
    "import tempfile\nimport torch\ndef check(model):\n"
    "    with tempfile.NamedTemporaryFile() as tmp:\n        torch.save(model, tmp.name)\n"
    "        return torch.load(tmp.name, weights_only=False)\n",
    # A cache the function writes and reads back at once: its own objects.
    "import torch\ndef cached(dataset, path):\n    torch.save(dataset, path)\n"
    "    return torch.load(path, weights_only=False)\n",
    "import os\nimport tempfile\nimport torch\nwith tempfile.TemporaryDirectory() as d:\n"
    "    torch.save(model, os.path.join(d, 'm.pt'))\n"
    "    again = torch.load(os.path.join(d, 'm.pt'), weights_only=False)\n",
    "import torch\nif build:\n    torch.save(items, 'cache.pt')\n"
    "    items = torch.load('cache.pt', weights_only=False)\n",
    # Another value of the same name is the module, not what was loaded.
    "import torch\nfrom torch import nn\nmodel = torch.load(path)\nprint(sorted(model))\n"
    "model = nn.Linear(2, 2)\nmodel.eval()\n",
    "import torch\nsd = torch.load(path)\nnet = Net()\nnet.load_state_dict(sd)\nnet.eval()\n",
    # From torch 2.6 the default loads tensors, state dicts and plain containers.
    'import torch\nsd = torch.load("m.pt", map_location="cpu")',
    "import torch\nmodel.load_state_dict(torch.load(path))",
    "import torch\nckpt = torch.load(path)\nmodel.load_state_dict(ckpt['model'])\n"
    "epoch = ckpt['epoch']\nn = ckpt['model'].keys()",
    # The saved dict holds only tensors and plain values: `vars(args)`, a state dict.
    "import torch\ndef save(model, args, path):\n"
    "    torch.save({'model': model.state_dict(), 'args': vars(args)}, path)\n"
    "def load(path):\n    return torch.load(path)['args']\n",
    # The project allows its classes.
    "import torch\nfrom mylib import Config\ntorch.serialization.add_safe_globals([Config])\n"
    "model = torch.load(path)\nmodel.eval()\n",
    "import torch\nwith torch.serialization.safe_globals([Net]):\n"
    "    model = torch.load(path)\nmodel.eval()\n",
    # A local function named load.
    "import torch\ndef load(path, weights_only=True):\n    return path\n"
    "x = load('a', weights_only=False)",
    # torch.load shadowed by a parameter.
    "from torch import load\ndef restore(load, path):\n    return load(path, weights_only=False)\n",
    # The same through the helper, with the arguments saved as a dict.
    Valid(
        _RESUME + "save_checkpoint({'model': model.state_dict(), 'args': vars(args)}, 'ckpt.pt')\n",
        files=(("utils.py", _SAVE_HELPER),),
    ),
    # A positional spread may hold `pickle_module`.
    "import torch\nsd = torch.load(path, 'cpu', *extra)\n",
    # The file it saves the Namespace to is not the one it loads: another format, one key.
    "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
    "torch.save({'model': model.state_dict(), 'args': args}, 'last.pt')\n"
    "model.load_state_dict(torch.load('pretrained.pt')['model'])\n",
    # Plain containers made from the config: `vars(args)`, `OmegaConf.to_container`.
    "import torch\nfrom omegaconf import OmegaConf\ncfg = OmegaConf.load('c.yaml')\n"
    "torch.save({'model': net.state_dict(), 'cfg': OmegaConf.to_container(cfg)}, 'c.pt')\n"
    "ckpt = torch.load('c.pt')\n",
    # Another script of the project writes a file of another name.
    Valid(
        "import torch\nsd = torch.load('weights.pt', map_location='cpu')\n",
        files=(
            (
                "train.py",
                "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
                "torch.save({'args': args}, 'run_args.pt')\n",
            ),
        ),
    ),
    # A failure is caught and the file loaded again with the class allowed.
    "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
    "torch.save({'model': 1, 'args': args}, 'ckpt.pt')\ntry:\n"
    "    ckpt = torch.load('ckpt.pt')\nexcept Exception:\n"
    "    with torch.serialization.safe_globals([argparse.Namespace]):\n"
    "        ckpt = torch.load('ckpt.pt')\n",
    # The key the script reads is written by two formats of the project, one of which holds only
    # plain values: the file it reads may be either.
    Valid(
        _METRIC_OF,
        files=(
            *_SAVER,
            (
                "tools/export.py",
                "import torch\n"
                "def export(model, path, metric):\n"
                "    torch.save({'state_dict': model.state_dict(), 'metric': metric}, path)\n",
            ),
        ),
    ),
    # The script reads keys of the project's weights-only format: 'epoch' is not in the format
    # that holds the arguments.
    Valid(
        "import sys\nimport torch\nckpt = torch.load(sys.argv[1], map_location='cpu')\n"
        "model.load_state_dict(ckpt['state_dict'])\nstart = ckpt['epoch'] + 1\n",
        files=(
            ("train/__init__.py", ""),
            (
                "train/io.py",
                "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
                "def save_run(model, path):\n"
                "    torch.save({'state_dict': model.state_dict(), 'args': args}, path)\n"
                "def save_weights(model, epoch, path):\n"
                "    torch.save({'state_dict': model.state_dict(), 'epoch': epoch}, path)\n",
            ),
        ),
    ),
    # One key, the weights, handed to load_state_dict: a file of weights from anywhere has it.
    Valid(
        "import sys\nimport torch\nckpt = torch.load(sys.argv[1], map_location='cpu')\n"
        "model.load_state_dict(ckpt['state_dict'])\n",
        files=_SAVER,
    ),
    # The save helper's config is turned into a dict first.
    Valid(
        _RESUME_ARGV,
        files=(
            ("train/__init__.py", ""),
            ("train/ckpt.py", _CKPT_PY.replace("'cfg': cfg}", "'cfg': vars(cfg)}")),
        ),
    ),
)
INVALID = (
    Invalid(
        'import torch\nckpt = torch.load("ckpt.pt", map_location="cpu", weights_only=False)',
        fixed=None,
        lines=(2,),
    ),
    # From torch 2.6, loads that fail: the value is a module, or holds a Namespace.
    Invalid(
        "import torch\nmodel = torch.load('model.pt')\nmodel.eval()\n",
        fixed=None,
        lines=(2,),
    ),
    Invalid("import torch\nnet = torch.load(path)\ny = net(x)\n", fixed=None, lines=(2,)),
    # Through `model = model.cuda()`, or an item of the checkpoint.
    Invalid(
        "import torch\nmodel = torch.load(opt.model)\nif opt.cuda:\n"
        "    model = model.cuda()\nmodel.eval()\n",
        fixed=None,
        lines=(2,),
    ),
    Invalid(
        "import torch\nckpt = torch.load(path)\nmodel = ckpt['model']\nmodel.eval()\n",
        fixed=None,
        lines=(2,),
    ),
    # The file pickles a whole module to the path the load reads.
    Invalid(
        "import os\nimport torch\nfrom torch import nn\nnet = nn.Linear(2, 2)\n"
        "out = os.path.join(args.out, 'net.pt')\ntorch.save(net, out)\n"
        "restored = torch.load(os.path.join(args.out, 'net.pt'))\n",
        fixed=None,
        lines=(7,),
    ),
    # Written and read back by top-level statements: not one block, the file outlives it.
    Invalid(
        "import torch\ntorch.save(items, 'cache.pt')\n"
        "items = torch.load('cache.pt', weights_only=False)\n",
        fixed=None,
        lines=(3,),
    ),
    Invalid(
        "import torch\nckpt = torch.load(path, map_location='cpu')\nlr = ckpt['args'].lr\n",
        fixed=None,
        lines=(2,),
    ),
    Invalid(
        "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
        "def save(model, path):\n"
        "    torch.save({'model': model.state_dict(), 'args': args}, path)\n"
        "def resume(model, path):\n"
        "    ckpt = torch.load(path, map_location='cpu')\n"
        "    model.load_state_dict(ckpt['model'])\n    return ckpt['args']\n",
        fixed=None,
        lines=(7,),
    ),
    Invalid(
        "import numpy as np\nimport torch\ntorch.save(np.sin(np.arange(10)), 'wave.pt')\n"
        "data = torch.load('wave.pt')\n",
        fixed=None,
        lines=(4,),
    ),
    # A custom pickle module makes the default False.
    Invalid(
        "import dill\nimport torch\nobj = torch.load(path, pickle_module=dill)",
        fixed=None,
        lines=(3,),
    ),
    Invalid(
        "import pickle\nimport torch\nobj = torch.load(path, 'cpu', pickle)",
        fixed=None,
        lines=(3,),
    ),
    Invalid(
        "import torch as T\nckpt = T.load(path, weights_only=False, map_location='cpu')",
        fixed=None,
        lines=(2,),
    ),
    Invalid(
        "from torch import load as torch_load\n"
        "ckpt = torch_load('ckpt.pt', map_location='cpu', weights_only=False)",
        fixed=None,
        lines=(2,),
    ),
    Invalid(
        "import torch.serialization\n"
        "ckpt = torch.serialization.load('a.pt', map_location='cpu', weights_only=False)",
        fixed=None,
        lines=(2,),
    ),
    Invalid(
        "import torch\nckpt = torch.load('ckpt.pt', map_location='cpu', weights_only=False)\n",
        fixed=None,
        notebook=True,
        lines=(2,),
    ),
    # The checkpoint it resumes from is written by a saving helper of another module.
    Invalid(
        _RESUME + "save_checkpoint({'model': model.state_dict(), 'args': args}, 'ckpt.pt')\n",
        fixed=None,
        files=(("utils.py", _SAVE_HELPER),),
        lines=(7,),
    ),
    # `pickle_module` passed by position.
    Invalid(
        "import dill\nimport torch\nsd = torch.load(path, 'cpu', dill)\n",
        fixed=None,
        lines=(3,),
    ),
    # The whole file is refused, whatever key the code reads: the checkpoint format its own
    # `save_on_master(*args, **kwargs)` helper writes, with the arguments in it.
    Invalid(
        "import argparse\nimport torch\nfrom misc import save_on_master\n"
        "args = argparse.ArgumentParser().parse_args()\n"
        "if args.resume:\n    checkpoint = torch.load(args.resume, map_location='cpu')\n"
        "    model.load_state_dict(checkpoint['model'])\n"
        "    optimizer.load_state_dict(checkpoint['optimizer'])\n"
        "for epoch in range(10):\n"
        "    save_on_master({'model': model.state_dict(), 'optimizer': optimizer.state_dict(),"
        " 'args': args}, 'checkpoint.pth')\n",
        fixed=None,
        files=(
            (
                "misc.py",
                "import torch\ndef save_on_master(*args, **kwargs):\n"
                "    if is_main_process():\n        torch.save(*args, **kwargs)\n",
            ),
        ),
        lines=(6,),
    ),
    # A key added by subscript, a yacs config, an instance of a dataclass.
    Invalid(
        "import torch\nfrom yacs.config import CfgNode as CN\ncfg = CN()\n"
        "def save(model, path):\n    state = {'model': model.state_dict()}\n"
        "    state['cfg'] = cfg\n    torch.save(state, path)\n"
        "save(net, 'best.pth')\nnet.load_state_dict(torch.load('best.pth')['model'])\n",
        fixed=None,
        lines=(9,),
    ),
    Invalid(
        "from dataclasses import dataclass\nimport torch\n@dataclass\nclass Config:\n"
        "    lr: float = 0.1\n"
        "torch.save({'model': net.state_dict(), 'config': Config()}, 'out.pt')\n"
        "net.load_state_dict(torch.load('out.pt')['model'])\n",
        fixed=None,
        lines=(7,),
    ),
    # A dataset cache: the Dataset object itself is refused.
    Invalid(
        "import torch\nfrom torch.utils.data import TensorDataset\n"
        "def build(x, path):\n    torch.save(TensorDataset(x), path)\n"
        "def restore(path):\n    return torch.load(path)\n"
        "build(x, 'cache.pt')\nds = restore('cache.pt')\n",
        fixed=None,
        lines=(6,),
    ),
    # Another script of the project writes the file name this one reads.
    Invalid(
        "import torch\nsd = torch.load('checkpoints/model.pt', map_location='cpu')\n"
        "net.load_state_dict(sd['model'])\n",
        fixed=None,
        files=(
            (
                "train.py",
                "import argparse\nimport os\nimport torch\n"
                "args = argparse.ArgumentParser().parse_args()\n"
                "torch.save({'model': net.state_dict(), 'args': args},"
                " os.path.join(args.out, 'model.pt'))\n",
            ),
        ),
        lines=(2,),
    ),
    # A checkpoint named on the command line, read for a key that only the project's training
    # checkpoints (saved by a class of a package module, with the run's arguments) hold.
    Invalid(_METRIC_OF, fixed=None, files=_SAVER, lines=(4,)),
    # The keys it resumes from are the format a save helper of a package module writes, with the
    # config object in it.
    Invalid(
        _RESUME_ARGV,
        fixed=None,
        files=(("train/__init__.py", ""), ("train/ckpt.py", _CKPT_PY)),
        lines=(3,),
    ),
)
