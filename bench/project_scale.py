"""The cost of project-wide facts: a generated 200-file training project whose scripts use
loaders, models, optimizers and saving helpers from the project's own package.

Prints, for the CLI (``torchdoctor check --no-cache`` on the whole project, default jobs):
the time of the first check and the number of findings, next to the same files laid out so
that no import resolves (each file alone in its own folder: the cost without cross-module
facts). For the language server (a real stdio client, ``debounceMs: 0``): the time to the
first diagnostics of a script that imports the package (jedi's first queries included), and
the time from an edit of ``proj/data/loaders.py`` (a module 40 open scripts import) to the
new diagnostics of all of them.

    python bench/project_scale.py [--files 200] [--open 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types

from lsp_latency import open_doc, start, wait_publish

CHECK = (sys.executable, "-m", "torchdoctor", "check", "--no-cache", "--exit-zero")
CHECK += ("--output-format", "json")
LOADERS = """\
from torch.utils.data import DataLoader, DistributedSampler


def build_loader(dataset, batch_size, workers=4):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers)
    return loader, sampler
"""
MODEL = """\
from torch import nn


class Net{i}(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.bn = nn.BatchNorm1d(dim)

    def forward(self, x):
        return self.bn(self.fc(x))


def build_net{i}(dim):
    return Net{i}(dim)
"""
UTILS = """\
import torch
import torch.distributed as dist


def save_checkpoint(state, path):
    torch.save(state, path)


def save_on_master(state, path):
    if dist.get_rank() == 0:
        torch.save(state, path)


def build_optimizer(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr)
"""
SCRIPT = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from proj.data.loaders import build_loader
from proj.models.net{m} import build_net{m}
from proj.utils.io import build_optimizer, save_checkpoint, save_on_master


class Trainer:
    def __init__(self, dataset, val_loader, rank):
        self.model = build_net{m}(64).cuda(rank)
        self.optimizer = build_optimizer(self.model, 1e-3)
        self.val_loader = val_loader

    def validate(self):
        self.model.eval()
        for x, _ in self.val_loader:
            out = self.model(x.cuda())
        return out


def main(dataset, val_loader, rank, epochs):
    dist.init_process_group("nccl")
    trainer = Trainer(dataset, val_loader, rank)
    ddp = DDP(trainer.model, device_ids=[rank])
    loader, sampler = build_loader(dataset, 32)
    for epoch in range(epochs):
        for x, y in loader:
            loss = ddp(x.cuda()).sum()
            loss.backward()
            trainer.optimizer.step()
        save_checkpoint({{"model": trainer.model.state_dict(), "epoch": epoch}}, "last.pt")
        save_on_master({{"model": trainer.model.state_dict()}}, "best.pt")
        trainer.validate()


if __name__ == "__main__":
    main(None, None, 0, 3)
"""


def generate(root: Path, files: int) -> list[Path]:
    """``files`` Python files: the package (loaders, models, utils) and scripts using it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\nversion = '0'\n")
    pkg = root / "proj"
    for sub in ("", "data", "models", "utils"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "data" / "loaders.py").write_text(LOADERS)
    (pkg / "utils" / "io.py").write_text(UTILS)
    models = max(1, (files - 6) // 4)
    for i in range(models):
        (pkg / "models" / f"net{i}.py").write_text(MODEL.format(i=i))
    scripts = []
    (root / "scripts").mkdir(exist_ok=True)
    for i in range(files - 6 - models):
        path = root / "scripts" / f"train_{i}.py"
        path.write_text(SCRIPT.format(m=i % models))
        scripts.append(path)
    return scripts


def isolated(root: Path, into: Path) -> None:
    """The same files, each alone in a folder of its own (no import resolves)."""
    into.mkdir()
    for n, path in enumerate(sorted(root.rglob("*.py"))):
        (into / f"f{n}").mkdir()
        shutil.copy(path, into / f"f{n}" / "module.py")


def cli(target: Path) -> tuple[float, int]:
    start_t = time.perf_counter()
    proc = subprocess.run(
        [*CHECK, str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start_t, len(json.loads(proc.stdout))


async def lsp(root: Path, scripts: list[Path], opened: int) -> tuple[float, float, int]:
    session = await start([sys.executable, "-m", "torchdoctor", "server"], {"debounceMs": 0})
    first = scripts[0].as_uri()
    sent = time.perf_counter()
    open_doc(session, first, scripts[0].read_text())
    first_ms = (await wait_publish(session, first, 1, 0, timeout=120) - sent) * 1000
    uris = [s.as_uri() for s in scripts[:opened]]
    for path in scripts[1:opened]:
        open_doc(session, path.as_uri(), path.read_text())
    for uri in uris:
        await wait_publish(session, uri, 1, 0, timeout=120)
    loaders = root / "proj" / "data" / "loaders.py"
    data_uri = loaders.as_uri()
    open_doc(session, data_uri, LOADERS)
    await wait_publish(session, data_uri, 1, 0)
    since = {u: len(session.published.get(u, [])) for u in uris}
    sent = time.perf_counter()
    at = types.Position(4, len("    sampler = DistributedSampler(dataset"))
    session.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=data_uri, version=2),
            [
                types.TextDocumentContentChangePartial(
                    range=types.Range(at, at), text=", shuffle=False"
                )
            ],
        )
    )
    last = sent
    for uri in uris:
        last = max(last, await wait_publish(session, uri, 1, since[uri], timeout=120))
    await session.client.shutdown_async(None)
    session.client.exit(None)
    await session.client.stop()
    return first_ms, (last - sent) * 1000, len(uris)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--open", type=int, default=40, help="scripts open in the editor")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        scripts = generate(root, args.files)
        total = len(list(root.rglob("*.py")))
        seconds, found = cli(root)
        alone = Path(tmp) / "alone"
        isolated(root, alone)
        seconds_alone, found_alone = cli(alone)
        print(f"project: {total} files ({len(scripts)} scripts)")
        print(f"CLI first check: {seconds:.2f} s, {found} findings")
        print(f"  same files, no import resolvable: {seconds_alone:.2f} s, {found_alone} findings")
        first_ms, edit_ms, n = asyncio.run(lsp(root, scripts, min(args.open, len(scripts))))
        print(f"LSP first diagnostics of a script: {first_ms:.0f} ms")
        print(f"LSP edit of proj/data/loaders.py -> {n} importers re-published: {edit_ms:.0f} ms")


if __name__ == "__main__":
    main()
