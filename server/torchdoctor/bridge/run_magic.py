"""``%torchdoctor run``: measure a notebook cell while it runs, in the user's own kernel.

Load it with ``%load_ext torchdoctor.bridge.run_magic``; then::

    %%torchdoctor run [--steps N] [--notebook PATH] [--no-report]
    <the cell>

or ``%torchdoctor run [options] <statement>`` for one statement. The cell runs as it would
(in the notebook's namespace: it is the user's own action, typed by them; torchdoctor never
runs code in a kernel on its own), with these measurements on:

- the activations autograd saves for a backward pass (``saved_tensors_hooks``), per source
  line of the cell (or of a project file it calls): what was saved by forward calls of an
  ``nn.Module`` and never used by a backward pass while the cell ran is reported as TDR105
  ("2.1 GB of activations over 157 forward calls");
- optimizer steps: with ``--steps N`` the cell stops after the N-th step.

The findings are printed, and written to the notebook's report
(``<project root>/.torchdoctor_cache/runs/<key>.json``, the file ``torchdoctor run`` writes for
a script), where the language server reads them: the hover of a finding of the notebook shows
what was measured. The notebook's path is ``--notebook``, else the one Jupyter gives the kernel
(``__session__``); without one nothing is written.

Self-contained: the standard library, IPython and torch (imported when the magic runs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import linecache
import os
import re
import shlex
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from .. import __version__

CODE = "TDR105"
MIN_CALLS = 2  # a single forward's graph lives only until its output is dropped
_counter = [0]


class _Stop(BaseException):  # not caught by the cell's own ``except Exception``
    """Raised from the optimizer step hook once ``--steps`` steps ran."""


@dataclass
class _Line:
    saved: int = 0  # bytes saved for backward by the forwards of this line
    unused: list[list[int]] = field(default_factory=list)  # [bytes, used] per saved tensor
    calls: int = 0  # top-level module forwards with gradients on


class _Saved:
    """What autograd keeps in place of a saved tensor: the tensor and its record."""

    __slots__ = ("live", "ptr", "record", "tensor")

    def __init__(self, tensor: Any, record: list[int], ptr: int, live: dict[int, int]) -> None:
        self.tensor = tensor
        self.record = record
        self.ptr = ptr
        self.live = live

    def __del__(self) -> None:
        count = self.live.get(self.ptr, 0) - 1
        if count > 0:
            self.live[self.ptr] = count
        else:
            self.live.pop(self.ptr, None)


class Measure:
    """The hooks of one measured run; ``lines`` maps (file, row) to what was measured there."""

    def __init__(self, cell_file: str, steps: int | None) -> None:
        import torch

        self.torch = torch
        self.cell_file = cell_file
        self.steps = steps
        self.seen_steps = 0
        self.lines: dict[tuple[str, int], _Line] = {}
        self.live: dict[int, int] = {}  # storage pointer -> saved tensors holding it
        self.depth = 0
        self.device = ""
        self._user: dict[str, bool] = {}
        paths = sysconfig.get_paths()
        skip = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        skip |= {os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__))}
        self._skip = tuple(os.path.join(p, "") for p in skip if p)

    # -- where ---------------------------------------------------------------------------------
    def _is_user(self, filename: str) -> bool:
        known = self._user.get(filename)
        if known is None:
            known = filename == self.cell_file or (
                os.path.isfile(filename)
                and not os.path.abspath(filename).startswith(self._skip)
                and filename != __file__
            )
            self._user[filename] = known
        return known

    def _where(self) -> tuple[str, int] | None:
        """The innermost line of the cell, or of a file of the user's (not of the standard
        library, site-packages or torch), running now."""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if self._is_user(frame.f_code.co_filename):
                return frame.f_code.co_filename, frame.f_lineno
            frame = frame.f_back
        return None

    # -- hooks ---------------------------------------------------------------------------------
    def pack(self, tensor: Any) -> Any:
        where = self._where()
        base = tensor._base
        if where is None or tensor.is_leaf or (base is not None and base.is_leaf):
            return tensor  # parameters, views of them and inputs: not activations
        try:
            storage = tensor.untyped_storage()
            ptr, size = storage.data_ptr(), storage.nbytes()
        except Exception:
            ptr, size = id(tensor), tensor.numel() * tensor.element_size()
        if not self.device:
            self.device = str(tensor.device)
        counted = 0 if ptr in self.live else size
        self.live[ptr] = self.live.get(ptr, 0) + 1
        line = self.lines.setdefault(where, _Line())
        line.saved += counted
        record = [counted, 0]
        line.unused.append(record)
        return _Saved(tensor, record, ptr, self.live)

    @staticmethod
    def unpack(saved: Any) -> Any:
        if isinstance(saved, _Saved):
            saved.record[1] = 1
            return saved.tensor
        return saved

    def before_forward(self, module: Any, args: Any) -> None:
        self.depth += 1
        if self.depth == 1 and self.torch.is_grad_enabled():
            where = self._where()
            if where is not None:
                self.lines.setdefault(where, _Line()).calls += 1

    def after_forward(self, module: Any, args: Any, output: Any) -> None:
        self.depth = max(self.depth - 1, 0)

    def after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.seen_steps += 1
        if self.steps is not None and self.seen_steps >= self.steps:
            raise _Stop

    def run(self, code: Any, namespace: dict[str, Any]) -> None:
        torch = self.torch
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        handles = [
            nn_module.register_module_forward_pre_hook(self.before_forward),
            nn_module.register_module_forward_hook(self.after_forward, always_call=True),
            optim.register_optimizer_step_post_hook(self.after_step),
        ]
        try:
            with torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack):
                exec(code, namespace)
        finally:
            for handle in handles:
                handle.remove()

    # -- findings ------------------------------------------------------------------------------
    def findings(self) -> list[dict[str, Any]]:
        """Lines whose forwards saved activations that no backward used (TDR105)."""
        out = []
        for (filename, row), line in sorted(self.lines.items()):
            unused = sum(size for size, used in line.unused if not used)
            if line.calls < MIN_CALLS or unused <= 0 or unused * 2 < line.saved:
                continue
            size = human_bytes(unused)
            calls = line.calls
            text = linecache.getline(filename, row)
            col = len(text) - len(text.lstrip()) + 1 if text.strip() else 1
            out.append(
                {
                    "code": CODE,
                    "file": filename,
                    "row": row,
                    "col": col,
                    "message": (
                        f"{calls} forward calls with gradients on saved {size} of activations "
                        "for a backward pass that never came; run them under torch.no_grad() "
                        "or torch.inference_mode()"
                    ),
                    "message_zh": (
                        f"{calls} 次开启梯度的前向调用为从未进行的反向传播保存了 {size} 激活值；"
                        "请在 torch.no_grad() 或 torch.inference_mode() 下运行"
                    ),
                    "measured": {
                        "bytes": unused,
                        "calls": calls,
                        "count": calls,
                        "share": round(unused / line.saved, 3) if line.saved else 0.0,
                    },
                    "summary": f"{size} of activations over {calls} forward calls",
                    "summary_zh": f"{calls} 次前向调用共 {size} 激活值",
                }
            )
        return out


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # not reached


# ---- the report -----------------------------------------------------------------------------
def project_root(path: str) -> str:
    """The folder holding ``pyproject.toml`` or ``.git`` above ``path``; else its folder."""
    start = here = os.path.dirname(os.path.abspath(path))
    while True:
        if any(os.path.exists(os.path.join(here, n)) for n in ("pyproject.toml", ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return start
        here = parent


def report_path(script: str) -> str:
    resolved = os.path.realpath(os.path.abspath(script))
    key = hashlib.sha256(resolved.encode()).hexdigest()[:16]
    return os.path.join(project_root(resolved), ".torchdoctor_cache", "runs", f"{key}.json")


def cell_key(body: str) -> str:
    """What names a cell's code in its findings (``"cell"``): it lets an editor find the cell."""
    text = body.replace("\r\n", "\n").replace("\r", "\n").strip()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_report(notebook: str, cell: str, findings: list[dict[str, Any]], run: dict) -> str:
    """Write (or update) the notebook's report: this cell's findings replace those it had."""
    target = report_path(notebook)
    kept: list[dict[str, Any]] = []
    try:
        with open(target, encoding="utf-8") as f:
            old = json.load(f)
        if isinstance(old, dict) and old.get("version") == 1:
            kept = [
                x
                for x in old.get("findings") or []
                if isinstance(x, dict) and x.get("cell") != cell
            ]
    except (OSError, ValueError):
        pass
    data = {
        "version": 1,
        "torchdoctor": __version__,
        "script": os.path.realpath(os.path.abspath(notebook)),
        "argv": [],
        **run,
        "findings": kept + findings,
        "timeline": [],
    }
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
    os.replace(tmp, target)
    return target


# ---- the magic ------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="%torchdoctor run", add_help=False)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--notebook", default=None)
    parser.add_argument("--no-report", action="store_true")
    return parser


USAGE = (
    "usage: %torchdoctor run [--steps N] [--notebook PATH] [--no-report] <statement>\n"
    "       %%torchdoctor run [--steps N] [--notebook PATH] [--no-report]  (then the cell)"
)


_OPTION = re.compile(r"\s*(--steps\s+\S+|--notebook\s+\S+|--no-report)(?=\s|$)")


def torchdoctor_magic(shell: Any, line: str, cell: str | None = None) -> None:
    words = shlex.split(line, posix=True)
    if not words or words[0] != "run":
        print(USAGE)
        return
    if cell is None:
        # The line magic: options, then the statement.
        rest = line.strip()[len("run") :]
        opts: list[str] = []
        while True:
            m = _OPTION.match(rest)
            if m is None:
                break
            opts += m.group(1).split()
            rest = rest[m.end() :]
        body = rest.strip()
        args = _parser().parse_args(opts)
    else:
        args = _parser().parse_args(words[1:])
        body = cell
    if not body.strip():
        print(USAGE)
        return
    measure_cell(shell, body, args)


def measure_cell(shell: Any, body: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    _counter[0] += 1
    filename = f"<torchdoctor-run-{_counter[0]}>"
    source = shell.transform_cell(body) if hasattr(shell, "transform_cell") else body
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    measure = Measure(filename, args.steps)
    started = time.time()
    stopped, exit_code = "exit", 0
    error: BaseException | None = None
    try:
        measure.run(code, shell.user_ns)
    except _Stop:
        stopped = "steps"
    except KeyboardInterrupt as exc:
        stopped, exit_code, error = "interrupted", 130, exc
    except BaseException as exc:
        stopped, exit_code, error = "error", 1, exc
    found = measure.findings()
    notebook = args.notebook or shell.user_ns.get("__session__") or ""
    if not str(notebook).endswith(".ipynb"):
        notebook = ""
    key = cell_key(body)
    shown = []
    for f in found:
        name = f.pop("file")
        f["cell"] = key
        in_cell = name == filename
        f["path"] = name if not in_cell else os.path.realpath(notebook) if notebook else ""
        shown.append((f"line {f['row']}" if in_cell else f"{name}:{f['row']}", f))
    _print(shown, measure.seen_steps, time.time() - started, stopped)
    if notebook and not args.no_report:
        run = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "duration_s": round(time.time() - started, 3),
            "torch": str(measure.torch.__version__),
            "device": measure.device or "cpu",
            "steps": measure.seen_steps,
            "stopped": stopped,
            "exit_code": exit_code,
        }
        try:
            target = write_report(str(notebook), key, found, run)
            print(f"report: {target}")
        except OSError as exc:
            print(f"torchdoctor run: could not write the report: {exc}")
    if error is not None:
        raise error
    return found


def _print(found: list[tuple[str, dict[str, Any]]], steps: int, spent: float, how: str) -> None:
    head = f"torchdoctor run: {spent:.1f} s, {steps} optimizer steps"
    if how == "steps":
        head += " (stopped at --steps)"
    print(f"{head}; {len(found)} finding{'s' if len(found) != 1 else ''}")
    for where, f in found:
        print(f"  {where}: {f['code']} {f['message']}")


def load_ipython_extension(ipython: Any) -> None:
    def magic(line: str, cell: str | None = None) -> None:
        torchdoctor_magic(ipython, line, cell)

    ipython.register_magic_function(magic, "line_cell", "torchdoctor")


def unload_ipython_extension(ipython: Any) -> None:
    ipython.magics_manager.magics["line"].pop("torchdoctor", None)
    ipython.magics_manager.magics["cell"].pop("torchdoctor", None)
