"""What ``torchdoctor run`` executes inside the user's own process (standard library and torch only).

The parent starts ``python -c LOADER script.py ARGS``; the loader executes this file as the
module ``_torchdoctor_run`` and calls :func:`main`, which makes ``sys.argv``, ``sys.path[0]`` and
``__main__`` what ``python script.py ARGS`` would have made them, then runs the script. When the
script imports torch, a few hooks are installed (global module call, ``torch.autograd.backward``,
global optimizer step hooks, the DataLoader iterator, ``Tensor.item`` and the like). None of them
changes a value the script computes: they time calls, count them, note which graphs are
backpropagated, and read the bytes autograd saves (a pack hook that returns the tensor itself).

At the end (the script returns or exits, ``--steps`` or ``--seconds`` is reached, SIGTERM) the
measurements are written as JSON to ``$TORCHDOCTOR_RUN_OUT``; the parent turns them into findings.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback
import weakref
from typing import Any

OUT_ENV = "TORCHDOCTOR_RUN_OUT"
STEPS_ENV = "TORCHDOCTOR_RUN_STEPS"
SECONDS_ENV = "TORCHDOCTOR_RUN_SECONDS"
PROFILE_ENV = "TORCHDOCTOR_RUN_PROFILE"  # steps to run under torch.profiler (--profile)
PROFILE_WARMUP = 2  # optimizer steps before the profiled ones
_HERE = os.path.abspath(__file__)
_MAX_TIMELINE = 5000
_MAX_ROOTS = 4096
_MARK_EVERY = 4  # after the first 8 steps, graphs of one step in 4 are marked (TDR103)
_PROBE_EVERY = 16  # forwards known to be backpropagated: one call in 16 is checked (TDR105)
# The memory in use is read at the end of each of the first _MEMORY_ALL steps, then of one step
# in _MEMORY_EVERY (reading it costs more than the rest of a step's bookkeeping together).
_MEMORY_ALL, _MEMORY_EVERY = 16, 4
_DATA, _FORWARD, _BACKWARD, _OPTIMIZER = 0, 1, 2, 3  # the parts of S.cur


class StopRun(BaseException):
    """Raised at a step boundary (or from a signal handler) to end the script early; a
    ``BaseException`` so that the script's ``except Exception`` does not swallow it."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Mark:
    """Stored in the metadata of a backpropagated graph's root node: alive while the node is."""

    __slots__ = ("__weakref__",)


class _Site:
    __slots__ = (
        "backpropagated",
        "bytes_pending",
        "bytes_total",
        "calls",
        "grad_calls",
        "inference_calls",
        "key",
        "measured_calls",
        "nograd_calls",
        "nograd_seconds",
        "seen",
    )

    def __init__(self, key: tuple[str, int, int, int, int]) -> None:
        self.key = key
        self.calls = self.grad_calls = self.backpropagated = 0
        self.nograd_calls = self.inference_calls = 0
        self.bytes_pending = self.bytes_total = self.measured_calls = self.seen = 0
        self.nograd_seconds = 0.0


class _State:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.started = time.time()
        self.max_steps = int(os.environ.get(STEPS_ENV) or 0)
        self.max_seconds = float(os.environ.get(SECONDS_ENV) or 0)
        self.main_thread = threading.get_ident()
        self.pid = os.getpid()
        self.torch: Any = None
        self.steps = 0
        self.stopped = "exit"
        self.exit_code = 0
        self.stopping = False  # set once the run is ending: later stop requests are ignored
        self.error: str | None = None
        # current step
        self.step_t0 = self.t0
        self.loop_started = False
        self.cur = [0.0, 0.0, 0.0, 0.0]  # data, forward, backward, optimizer seconds
        # (step, data_s, forward_s, backward_s, optimizer_s, total_s, memory_bytes or -1)
        self.timeline: list[tuple[int, float, float, float, float, float, int]] = []
        self.opt_t0 = 0.0
        # forwards
        self.depth = 0
        self.sites: dict[tuple[str, int, int, int, int], _Site] = {}
        self.pack_seen: set[int] = set()
        self.pack_bytes = 0
        # graphs kept across steps (TDR103)
        self.roots: list[tuple[weakref.ref[_Mark], int, int]] = []  # (mark, step, weight)
        self.kept_series: list[int] = []
        self.kept_where: dict[str, Any] | None = None
        self.kept_max = 0
        # gradients wiped before a step (TDR107)
        self.grads_pending = False
        self.wiped: dict[tuple[str, int, int, int, int], int] = {}
        self.backwards = 0
        # synchronisations
        self.sync_originals: dict[str, tuple[Any, bool]] = {}
        self.syncs_off = False
        self.cuda_syncs = False  # counted from CUDA's own sync debug warnings
        self.cuda_watch_tried = False
        self.compile_sites: list[tuple[str, int, int, int, int]] = []
        self.syncs: dict[tuple[str, int, int, int, int], dict[str, int]] = {}
        # data loading
        self.loaders: dict[tuple[str, int, int, int, int], dict[str, Any]] = {}
        self.samplers: dict[int, dict[str, Any]] = {}
        self.sampler_repeats: dict[int, dict[str, Any]] = {}
        # schedulers (TDR703)
        self.schedulers: dict[int, dict[str, Any]] = {}
        self.opt_steps: dict[int, int] = {}
        self.max_batches_per_epoch = 0
        # memory
        self.peak: dict[str, Any] = {"bytes": 0, "path": None, "row": None}
        self.last_site: tuple[str, int, int, int, int] | None = None
        self.device = "cpu"
        # --profile: steps PROFILE_WARMUP + 1 .. PROFILE_WARMUP + profile_steps under the profiler
        self.profile_steps = int(os.environ.get(PROFILE_ENV) or 0)
        self.profile_start = 0
        self.profiler: Any = None
        self.profile_module: dict[str, Any] | None = None
        self.profile_result: dict[str, Any] | None = None


S = _State()

# ---------------------------------------------------------------------------------------------
# Where a call comes from: the first frame of the user's code (not torch, not an installed
# package, not the standard library, not this file).

_SKIP_PREFIXES: tuple[str, ...] = ()
_USER_CACHE: dict[str, bool] = {}


def _init_skip() -> None:
    global _SKIP_PREFIXES
    paths = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            p = sysconfig.get_paths().get(name)
        except Exception:  # pragma: no cover - odd installations
            p = None
        if p:
            paths.add(os.path.realpath(p))
            paths.add(os.path.abspath(p))
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p):
            paths.add(os.path.abspath(p))
    paths.add(os.path.dirname(_HERE))
    _SKIP_PREFIXES = tuple(sorted(q.rstrip(os.sep) + os.sep for q in paths))


def _is_user(filename: str) -> bool:
    known = _USER_CACHE.get(filename)
    if known is None:
        if filename.startswith("<") or filename == _HERE:
            known = False
        else:
            absolute = os.path.abspath(filename)
            known = not absolute.startswith(_SKIP_PREFIXES) and "site-packages" not in absolute
        _USER_CACHE[filename] = known
    return known


# (id(code), f_lasti) -> (code, key): keyed by identity, as hashing a code object hashes its
# constants (a module's: every function in it) on each lookup; the code is kept so that its id
# is not reused.
_KEYS: dict[tuple[int, int], tuple[Any, tuple[str, int, int, int, int]]] = {}


def _frame_key(frame: Any) -> tuple[str, int, int, int, int]:
    code = frame.f_code
    cached = _KEYS.get((id(code), frame.f_lasti))
    if cached is not None and cached[0] is code:
        return cached[1]
    row, end_row, col, end_col = frame.f_lineno, frame.f_lineno, 0, 0
    positions = getattr(code, "co_positions", None)
    if positions is not None and frame.f_lasti >= 0:
        try:
            pos = list(positions())[frame.f_lasti // 2]
            if pos[0] is not None:
                row, end_row = pos[0], pos[1] or pos[0]
                col, end_col = (pos[2] or 0), (pos[3] or 0)
        except (IndexError, ValueError):
            pass
    if end_row != row:  # a statement over several lines (a `for` loop): its first line only
        end_row, end_col = row, col
    key = (os.path.abspath(code.co_filename), row, col + 1, end_row, end_col + 1)
    _KEYS[(id(code), frame.f_lasti)] = (code, key)
    return key


def _user_frame(depth: int = 2) -> Any:
    frame: Any = sys._getframe(depth)
    while frame is not None and not _is_user(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _site_of(frame: Any) -> tuple[str, int, int, int, int] | None:
    """The user's site for a hooked call whose caller is ``frame``: the cached key when the
    caller is the user's code at a place seen before (the usual case), else found by walking
    up the stack."""
    code = frame.f_code
    hit = _KEYS.get((id(code), frame.f_lasti))
    if hit is not None and hit[0] is code:  # only user frames are ever keyed
        return hit[1]
    while frame is not None and not _is_user(frame.f_code.co_filename):
        frame = frame.f_back
    return None if frame is None else _frame_key(frame)


def _user_site(depth: int = 3) -> tuple[str, int, int, int, int] | None:
    frame = _user_frame(depth)
    return None if frame is None else _frame_key(frame)


# ---------------------------------------------------------------------------------------------
# Steps


def _end_step() -> None:
    """Close the step: one tuple in the timeline (made into a dict when written)."""
    now = time.perf_counter()
    cur = S.cur
    steps = S.steps
    memory = -1
    if steps <= _MEMORY_ALL or steps % _MEMORY_EVERY == 0:
        memory = _memory_now()
        _peak_check(memory)
    if len(S.timeline) < _MAX_TIMELINE:
        S.timeline.append((steps, cur[0], cur[1], cur[2], cur[3], now - S.step_t0, memory))
    S.step_t0 = now
    S.cur = [0.0, 0.0, 0.0, 0.0]


def _timeline() -> list[dict[str, Any]]:
    out = []
    for steps, data, forward, backward, optimizer, total, memory in S.timeline:
        entry: dict[str, Any] = {
            "step": steps,
            "data_s": round(data, 6),
            "forward_s": round(forward, 6),
            "backward_s": round(backward, 6),
            "optimizer_s": round(optimizer, 6),
            "other_s": round(max(0.0, total - data - forward - backward - optimizer), 6),
        }
        if memory >= 0:
            entry["memory_bytes"] = memory
        out.append(entry)
    return out


_STATM: list[int] = []  # an open descriptor of /proc/self/statm, read again at each step


def _memory_now() -> int:
    """Allocated CUDA memory once CUDA is in use, else the resident set size (Linux)."""
    torch = S.torch
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.memory_allocated())
    except Exception:
        pass
    try:
        if not _STATM:
            _STATM.append(os.open("/proc/self/statm", os.O_RDONLY))
            _STATM.append(os.sysconf("SC_PAGE_SIZE"))
        return int(os.pread(_STATM[0], 128, 0).split()[1]) * _STATM[1]
    except (OSError, ValueError, AttributeError, IndexError):
        return 0


def _peak_check(memory: int) -> None:
    if memory > S.peak["bytes"]:
        site = S.last_site
        S.peak = {
            "bytes": memory,
            "path": site[0] if site else None,
            "row": site[1] if site else None,
        }


def _opt_pre(optimizer: Any, args: Any, kwargs: Any) -> None:
    S.opt_t0 = time.perf_counter()


def _opt_post(optimizer: Any, args: Any, kwargs: Any) -> None:
    S.cur[_OPTIMIZER] += time.perf_counter() - S.opt_t0
    S.grads_pending = False
    S.steps += 1
    key = id(optimizer)
    S.opt_steps[key] = S.opt_steps.get(key, 0) + 1
    _end_step()
    if S.profile_steps and S.profile_result is None:
        _profile_tick()
    if not S.cuda_watch_tried and not S.syncs_off and S.torch.cuda.is_initialized():
        _watch_cuda_syncs()
    if S.steps & (S.steps - 1) == 0 or S.steps % 16 == 0:
        _check_kept_graphs()
    if S.max_steps and S.steps >= S.max_steps:
        _stop("steps")
    if S.max_seconds and time.perf_counter() - S.t0 >= S.max_seconds:
        _stop("seconds")


def _stop(why: str) -> None:
    """End the script with ``StopRun(why)``, once: a second request (the ``--seconds`` alarm
    arriving as a step's own time check stops the run, SIGTERM while the script unwinds) is
    ignored, so it cannot interrupt the ending of the run or replace the first reason."""
    if S.stopping:
        return
    S.stopping = True
    raise StopRun(why)


# ---------------------------------------------------------------------------------------------
# --profile: a few steps under torch.profiler, then PyTorch's anti-pattern matcher (_profile.py)


def _profile_tick() -> None:
    """At the end of an optimizer step: start the profiler after the warm-up (fewer warm-up
    steps when --steps leaves no room), stop it and match the patterns after the profiled
    steps."""
    warmup = min(PROFILE_WARMUP, S.max_steps - 1) if S.max_steps else PROFILE_WARMUP
    if S.profiler is None:
        if warmup >= 1 and S.steps == warmup:
            try:
                S.profile_module = _profile_module()
                S.profiler = S.profile_module["start"](S.torch)
                S.profile_start = S.steps
            except Exception as exc:
                S.profile_result = _profile_failed(exc)
            S.step_t0 = time.perf_counter()
    elif S.steps >= S.profile_start + S.profile_steps or (S.max_steps and S.steps >= S.max_steps):
        _profile_finish()
        S.step_t0 = time.perf_counter()


def _profile_module() -> dict[str, Any]:
    path = os.path.join(os.path.dirname(_HERE), "_profile.py")
    namespace: dict[str, Any] = {"__name__": "_torchdoctor_run_profile", "__file__": path}
    with open(path, "rb") as f:
        exec(compile(f.read(), path, "exec", dont_inherit=True), namespace)
    return namespace


def _profile_failed(exc: BaseException) -> dict[str, Any]:
    detail = f"{type(exc).__name__}: {exc}"[:300]
    return {"status": "unavailable", "detail": detail, "steps": 0, "patterns": [], "findings": []}


def _profile_finish() -> None:
    """Stop the profiler (if running) and match; when the run ends before the profiled steps,
    say so."""
    prof, module = S.profiler, S.profile_module
    S.profiler = None
    if prof is None or module is None:
        if S.profile_result is None:
            S.profile_result = {
                "status": "too-few-steps",
                "detail": "",
                "steps": 0,
                "patterns": [],
                "findings": [],
            }
        return
    steps = S.steps - S.profile_start
    try:
        module["stop"](prof)
        cuda = bool(S.torch.cuda.is_available() and S.torch.cuda.is_initialized())
        S.profile_result = module["analyse"](prof, S.torch, _is_user, cuda, steps)
    except Exception as exc:
        S.profile_result = _profile_failed(exc)


# ---------------------------------------------------------------------------------------------
# Forwards: module calls, the bytes autograd saves, whether their graph is backpropagated


def _pack(t: Any) -> Any:
    try:
        if not (t.requires_grad and t.is_leaf):  # parameters are not activations
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in S.pack_seen:
                S.pack_seen.add(ptr)
                S.pack_bytes += storage.nbytes()
    except Exception:
        pass
    return t


def _unpack(t: Any) -> Any:
    return t


def _graph_nodes(out: Any, found: list[Any], depth: int = 0) -> None:
    torch = S.torch
    if isinstance(out, torch.Tensor):
        fn = out.grad_fn
        if fn is not None and fn not in found:
            found.append(fn)
    elif depth < 3 and isinstance(out, (list, tuple)):
        for item in out[:64]:
            _graph_nodes(item, found, depth + 1)
    elif depth < 3 and isinstance(out, dict):
        for item in list(out.values())[:64]:
            _graph_nodes(item, found, depth + 1)


def _make_call(original: Any) -> Any:
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if S.depth or _compiling() or threading.get_ident() != S.main_thread or _tracing():
            return original(self, *args, **kwargs)
        torch = S.torch
        grad = torch.is_grad_enabled()
        key = _site_of(sys._getframe(1))
        site = S.sites.get(key) if key is not None else None
        if site is None and key is not None:
            site = S.sites[key] = _Site(key)
        hooks = None
        # The bytes matter for graphs that are not backpropagated; a call site whose graphs
        # always were is measured a few times, then estimated from its mean.
        measure = site is None or site.grad_calls < 3 or site.backpropagated < site.grad_calls
        if grad and measure and not _is_compiled(self):
            S.pack_seen = set()
            S.pack_bytes = 0
            try:
                hooks = torch.autograd.graph.saved_tensors_hooks(_pack, _unpack)
                hooks.__enter__()
            except Exception:
                hooks = None
        S.depth = 1
        t0 = time.perf_counter()
        if not S.loop_started:
            S.loop_started, S.step_t0 = True, t0
        try:
            out = original(self, *args, **kwargs)
        finally:
            if hooks is not None:
                hooks.__exit__(None, None, None)
            S.depth = 0
            elapsed = time.perf_counter() - t0
            S.cur[_FORWARD] += elapsed
        if site is None:
            return out
        site.calls += 1
        if grad:
            # Whether the graph gets backpropagated is checked on every call of a site until
            # its graphs always were, then on one call in _PROBE_EVERY (a hook on the graph
            # costs tens of microseconds).
            probe = (
                site.grad_calls < 4
                or site.backpropagated < site.grad_calls
                or site.seen % _PROBE_EVERY == 0
            )
            site.seen += 1
            nodes: list[Any] = []
            if probe:
                _graph_nodes(out, nodes)
            if nodes:
                if hooks is not None:
                    nbytes = S.pack_bytes
                    site.measured_calls += 1
                    site.bytes_total += nbytes
                else:
                    nbytes = site.bytes_total // max(1, site.measured_calls)
                site.grad_calls += 1
                site.bytes_pending += nbytes
                record = [False, nbytes, site]

                def fired(_grads: Any, record: list[Any] = record) -> None:
                    if not record[0]:
                        record[0] = True
                        record[2].backpropagated += 1
                        record[2].bytes_pending -= record[1]

                for node in nodes:
                    node.register_prehook(fired)
        elif torch.is_inference_mode_enabled():
            site.inference_calls += 1
        else:
            site.nograd_calls += 1
            site.nograd_seconds += elapsed
        S.last_site = key
        return out

    return __call__


def _not_compiling() -> bool:
    return False


_compiling = _not_compiling
_tracing = _not_compiling  # torch.jit.trace at work


def _is_compiled(module: Any) -> bool:
    return type(module).__name__ == "OptimizedModule"


# ---------------------------------------------------------------------------------------------
# Backward: timing, roots of backpropagated graphs (to see them kept across steps)


def _make_backward(original: Any) -> Any:
    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if S.depth or _compiling() or threading.get_ident() != S.main_thread:
            return original(tensors, *args, **kwargs)
        torch = S.torch
        # The site is where the memory is attributed when it is read at the end of this step.
        upcoming = S.steps + 1
        key = (
            _site_of(sys._getframe(1))
            if upcoming <= _MEMORY_ALL or upcoming % _MEMORY_EVERY == 0
            else None
        )
        # Marking a graph costs tens of microseconds: the first steps are all marked, then one
        # step in _MARK_EVERY, which then stands for that many.
        weight = 1 if S.steps < 8 else _MARK_EVERY if S.steps % _MARK_EVERY == 0 else 0
        roots = (
            ([tensors] if isinstance(tensors, torch.Tensor) else list(tensors or ()))
            if weight
            else ()
        )
        for root in roots[:8]:
            fn = getattr(root, "grad_fn", None)
            if fn is None or len(S.roots) >= _MAX_ROOTS:
                continue
            try:
                mark = _Mark()
                fn.metadata["_torchdoctor_run"] = (mark, S.steps)
                S.roots.append((weakref.ref(mark), S.steps, weight))
            except Exception:
                pass
        S.depth = 1
        t0 = time.perf_counter()
        try:
            return original(tensors, *args, **kwargs)
        finally:
            S.depth = 0
            S.cur[_BACKWARD] += time.perf_counter() - t0
            S.grads_pending = True
            S.backwards += 1
            if key is not None:
                S.last_site = key

    return backward


def _check_kept_graphs() -> None:
    """Count graphs of earlier steps that are still alive; the first time some are, find the
    variable that keeps them and the line that adds to it."""
    S.roots = [r for r in S.roots if r[0]() is not None]
    kept = sum(r[2] for r in S.roots if r[1] < S.steps - 1)
    S.kept_series.append(kept)
    S.kept_max = max(S.kept_max, kept)
    if kept >= 2 and S.kept_where is None:
        S.kept_where = _find_keeper() or {}


def _reaches_old_root(value: Any, budget: int = 20000) -> bool:
    torch = S.torch
    if not isinstance(value, torch.Tensor) or value.grad_fn is None:
        return False
    stack = [value.grad_fn]
    seen: set[int] = set()
    while stack and budget > 0:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        budget -= 1
        try:
            meta = node.metadata.get("_torchdoctor_run")
        except Exception:
            meta = None
        if meta is not None and meta[1] < S.steps - 1:
            return True
        for nxt, _ in getattr(node, "next_functions", ()):
            if nxt is not None:
                stack.append(nxt)
    return False


def _holds_old_graph(value: Any) -> bool:
    torch = S.torch
    if isinstance(value, torch.Tensor):
        return _reaches_old_root(value)
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        return any(_reaches_old_root(v, 200) for v in value[:2])
    if isinstance(value, dict) and len(value) >= 2:
        return any(_reaches_old_root(v, 200) for v in list(value.values())[:2])
    return False


def _find_keeper() -> dict[str, Any] | None:
    frame: Any = sys._getframe(2)
    while frame is not None:
        if _is_user(frame.f_code.co_filename):
            for name, value in list(frame.f_locals.items()):
                if _holds_old_graph(value):
                    where = _accumulation_line(frame, name)
                    if where is not None:
                        return where
        frame = frame.f_back
    return None


def _accumulation_line(frame: Any, name: str) -> dict[str, Any] | None:
    """Where ``name`` is added to in the frame's function: ``name += x``, ``name = name + x``,
    ``name.append(x)``."""
    path = os.path.abspath(frame.f_code.co_filename)
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    first = frame.f_code.co_firstlineno
    scope: Any = tree
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and frame.f_code.co_name == node.name
            and min([node.lineno, *(d.lineno for d in node.decorator_list)]) == first
        ):
            scope = node
            break
    for node in ast.walk(scope):
        hit: Any = None
        if (
            (isinstance(node, ast.AugAssign) and _is_name(node.target, name))
            or (
                isinstance(node, ast.Assign)
                and any(_is_name(t, name) for t in node.targets)
                and isinstance(node.value, ast.BinOp)
                and (_is_name(node.value.left, name) or _is_name(node.value.right, name))
            )
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "extend", "insert")
                and _is_name(node.func.value, name)
            )
        ):
            hit = node
        if hit is not None:
            return {
                "path": path,
                "row": hit.lineno,
                "col": hit.col_offset + 1,
                "end_row": getattr(hit, "end_lineno", None) or hit.lineno,
                "end_col": (getattr(hit, "end_col_offset", None) or hit.col_offset) + 1,
                "name": name,
            }
    return None


def _is_name(node: Any, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


# ---------------------------------------------------------------------------------------------
# zero_grad between accumulation steps (TDR107)


def _make_zero_grad(original: Any, kind: str) -> Any:
    def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        if S.grads_pending and threading.get_ident() == S.main_thread:
            params = self.parameters() if kind == "module" else _optimizer_params(self)
            if any(p.grad is not None for p in params):
                key = _user_site(2)
                if key is not None:
                    S.wiped[key] = S.wiped.get(key, 0) + 1
            S.grads_pending = False
        return original(self, *args, **kwargs)

    return zero_grad


def _optimizer_params(optimizer: Any) -> Any:
    for group in optimizer.param_groups:
        yield from group["params"]


# ---------------------------------------------------------------------------------------------
# Host-device synchronisations


def _make_sync(original: Any, what: str) -> Any:
    def synchronising(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _compiling():
            return original(self, *args, **kwargs)
        if not S.cuda_syncs and threading.get_ident() == S.main_thread:
            frame = sys._getframe(1)  # the direct caller only: the user's own call
            code = frame.f_code
            hit = _KEYS.get((id(code), frame.f_lasti))
            if hit is not None and hit[0] is code:
                _count_sync(hit[1], what, bool(getattr(self, "is_cuda", False)))
            elif _is_user(code.co_filename):
                _count_sync(_frame_key(frame), what, bool(getattr(self, "is_cuda", False)))
        return original(self, *args, **kwargs)

    synchronising.__name__ = getattr(original, "__name__", what)
    synchronising.__qualname__ = getattr(original, "__qualname__", what)
    synchronising.__doc__ = getattr(original, "__doc__", None)
    return synchronising


def _count_sync(key: tuple[str, int, int, int, int], what: str, cuda: bool) -> None:
    entry = S.syncs.get(key)
    if entry is None:
        entry = S.syncs[key] = {"count": 0, "cuda": 0, "first_step": S.steps}
        entry["what"] = what  # type: ignore[assignment]
    entry["count"] += 1
    entry["last_step"] = S.steps
    if cuda:
        entry["cuda"] += 1


_SYNC_WARNING = "called a synchronizing CUDA operation"


def _watch_cuda_syncs() -> None:
    """Once CUDA is in use: let CUDA report every synchronising operation
    (``torch.cuda.set_sync_debug_mode("warn")``) and count the warnings at the user's line,
    instead of counting the wrapped methods. The warnings are not shown; a script that set a
    sync debug mode itself keeps it, and its warnings."""
    S.cuda_watch_tried = True
    import warnings

    torch = S.torch
    try:
        if torch.cuda.get_sync_debug_mode() != 0:
            return
        previous = warnings.showwarning

        def showwarning(message: Any, category: Any, *args: Any, **kwargs: Any) -> Any:
            if _SYNC_WARNING in str(message):
                key = _user_site(2)
                if key is not None and threading.get_ident() == S.main_thread:
                    _count_sync(key, "cuda", True)
                return None
            return previous(message, category, *args, **kwargs)

        warnings.filterwarnings("always", message=".*" + _SYNC_WARNING)
        warnings.showwarning = showwarning
        torch.cuda.set_sync_debug_mode("warn")
        S.cuda_syncs = True
    except Exception:
        S.cuda_syncs = False


def _unpatch_syncs() -> None:
    """Give ``Tensor`` its own methods back. TorchDynamo would trace a wrapper and break the
    graph at the C method it calls (a break the script does not have), so once the script
    compiles, synchronisations are not counted."""
    tensor = S.torch.Tensor
    for name, (original, own) in S.sync_originals.items():
        if own:
            setattr(tensor, name, original)
        else:
            delattr(tensor, name)
    S.sync_originals.clear()
    S.syncs_off = True
    if S.cuda_syncs:  # the sync checker would stop at TorchDynamo's own syncs
        with contextlib.suppress(Exception):
            S.torch.cuda.set_sync_debug_mode(0)
        S.cuda_syncs = False


# ---------------------------------------------------------------------------------------------
# torch.compile: where it is called; its graph breaks are read from dynamo's counters at the end


def _make_compile(original: Any) -> Any:
    def compile(*args: Any, **kwargs: Any) -> Any:
        if not _compiling():
            key = _user_site(2)
            if key is not None and key not in S.compile_sites:
                S.compile_sites.append(key)
            if S.sync_originals:
                _unpatch_syncs()
        return original(*args, **kwargs)

    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(compile, attr, getattr(original, attr))
    compile.__wrapped__ = original  # type: ignore[attr-defined]
    return compile


def _graph_breaks() -> dict[str, Any] | None:
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if not counters:
        return None
    breaks = dict(counters.get("graph_break") or {})
    stats = dict(counters.get("stats") or {})
    recompiles = dict(counters.get("recompiles") or {})
    reasons: dict[str, int] = {}
    for reason, count in breaks.items():
        first = str(reason).strip().splitlines()[0][:160] if str(reason).strip() else "?"
        reasons[first] = reasons.get(first, 0) + int(count)
    return {
        "count": sum(reasons.values()),
        "reasons": sorted(reasons.items(), key=lambda kv: -kv[1])[:5],
        "graphs": int(stats.get("unique_graphs", 0) or 0),
        "recompiles": sum(int(v) for v in recompiles.values()),
    }


# ---------------------------------------------------------------------------------------------
# Data loading


def _make_next(original: Any) -> Any:
    def __next__(self: Any) -> Any:
        if threading.get_ident() != S.main_thread:
            return original(self)
        t0 = time.perf_counter()
        if not S.loop_started:
            S.loop_started, S.step_t0 = True, t0
        ended = True
        try:
            batch = original(self)
            ended = False
            return batch
        finally:
            elapsed = time.perf_counter() - t0
            S.cur[_DATA] += elapsed
            key = _site_of(sys._getframe(1))
            if key is not None:
                entry = S.loaders.get(key)
                if entry is None:
                    entry = S.loaders[key] = {
                        "batches": 0,
                        "seconds": 0.0,
                        "num_workers": int(getattr(self, "_num_workers", 0) or 0),
                        "pin_memory": bool(getattr(self, "_pin_memory", False)),
                        "epochs": 0,
                    }
                entry["batches"] += 0 if ended else 1
                entry["seconds"] += elapsed
                count = int(getattr(self, "_num_yielded", 0) or 0)
                if count > S.max_batches_per_epoch:
                    S.max_batches_per_epoch = count
                if id(self) != entry.get("_last_iter"):
                    entry["_last_iter"] = id(self)
                    entry["epochs"] += 1

    return __next__


def _make_sampler_iter(original: Any) -> Any:
    def __iter__(self: Any) -> Any:
        indices = list(original(self))
        if getattr(self, "shuffle", False) and len(indices) > 1:
            digest = hashlib.sha256(repr(indices).encode()).hexdigest()
            seen = S.samplers.get(id(self))
            if seen is None:  # where it is first iterated: the training loop, usually
                seen = S.samplers[id(self)] = {"digests": [], "where": _user_site(2)}
            if digest in seen["digests"] and seen["where"] is not None:
                entry = S.sampler_repeats.get(id(self))
                if entry is None:
                    entry = S.sampler_repeats[id(self)] = {"count": 1, "where": seen["where"]}
                if entry is not None:
                    entry["count"] += 1
                    entry["samples"] = len(indices)
            seen["digests"].append(digest)
        return iter(indices)

    return __iter__


# ---------------------------------------------------------------------------------------------
# Schedulers (TDR703)


def _counts_iterations(scheduler: Any) -> bool:
    try:
        sizes = [int(getattr(scheduler, "step_size", 0) or 0)]
        sizes += [int(m) for m in (getattr(scheduler, "milestones", None) or ())]
        return max(sizes) >= 1000
    except (TypeError, ValueError):
        return False


def _make_scheduler_step(original: Any) -> Any:
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if _is_user(frame.f_code.co_filename):
            entry = S.schedulers.get(id(self))
            if entry is None:
                entry = S.schedulers[id(self)] = {
                    "kind": type(self).__name__,
                    "steps": 0,
                    "optimizer": id(getattr(self, "optimizer", None)),
                    "where": _frame_key(frame),
                    # step sizes of 1,000 and more count iterations, not epochs
                    "iterations": _counts_iterations(self),
                }
            entry["steps"] += 1
        return original(self, *args, **kwargs)

    return step


# ---------------------------------------------------------------------------------------------
# Installing the hooks when the script imports torch


def _install(torch: Any) -> None:
    global _compiling, _tracing
    S.torch = torch
    compiler = getattr(torch, "compiler", None)
    _compiling = getattr(compiler, "is_compiling", None) or _not_compiling
    _tracing = getattr(torch._C, "_is_tracing", None) or _not_compiling
    _init_skip()
    import importlib

    optim = importlib.import_module("torch.optim.optimizer")
    lrs = importlib.import_module("torch.optim.lr_scheduler")
    dl = importlib.import_module("torch.utils.data.dataloader")
    dd = importlib.import_module("torch.utils.data.distributed")
    nn = torch.nn
    nn.Module.__call__ = _make_call(nn.Module.__call__)
    torch.autograd.backward = _make_backward(torch.autograd.backward)
    optim.register_optimizer_step_pre_hook(_opt_pre)
    optim.register_optimizer_step_post_hook(_opt_post)
    torch.optim.Optimizer.zero_grad = _make_zero_grad(torch.optim.Optimizer.zero_grad, "optimizer")
    nn.Module.zero_grad = _make_zero_grad(nn.Module.zero_grad, "module")
    tensor = torch.Tensor
    for name in ("item", "tolist", "cpu", "numpy", "__format__", "__repr__", "__bool__"):
        original = getattr(tensor, name, None)
        if original is not None:
            S.sync_originals[name] = (original, name in tensor.__dict__)
            setattr(tensor, name, _make_sync(original, name))
    for owner, attr in ((torch, "compile"), (getattr(torch, "export", None), "export")):
        if owner is not None and callable(getattr(owner, attr, None)):
            setattr(owner, attr, _make_compile(getattr(owner, attr)))
    dl._BaseDataLoaderIter.__next__ = _make_next(dl._BaseDataLoaderIter.__next__)
    dd.DistributedSampler.__iter__ = _make_sampler_iter(dd.DistributedSampler.__iter__)
    for cls_name in dir(lrs):
        cls = getattr(lrs, cls_name)
        if isinstance(cls, type) and "step" in cls.__dict__ and cls_name != "LRScheduler":
            if cls_name.endswith("LR") or cls_name == "ReduceLROnPlateau":
                cls.step = _make_scheduler_step(cls.step)  # type: ignore[attr-defined]
    if "step" in lrs.LRScheduler.__dict__:
        lrs.LRScheduler.step = _make_scheduler_step(lrs.LRScheduler.step)


class _TorchFinder:
    """On the script's first ``import torch``, lets torch load, then installs the hooks (so a
    script that sets environment variables before importing torch still can)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            try:
                _install(module)
            except Exception:
                S.error = "instrumentation: " + traceback.format_exc(limit=3)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


# ---------------------------------------------------------------------------------------------
# Results


def _findings() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def at(key: tuple[str, int, int, int, int]) -> dict[str, Any]:
        return {"path": key[0], "row": key[1], "col": key[2], "end_row": key[3], "end_col": key[4]}

    for site in S.sites.values():
        unused = site.grad_calls - site.backpropagated
        # A forward whose backward had not run yet when the run stopped is not one.
        # One small forward (a tracing example, a shape probe) is not worth a finding.
        worth = unused >= 2 or site.bytes_pending >= 1 << 20
        if (
            site.bytes_pending > 0
            and worth
            and (site.backpropagated == 0 or unused >= max(2, site.grad_calls // 10))
        ):
            out.append(
                {
                    "kind": "forward-not-backpropagated",
                    **at(site.key),
                    "measured": {
                        "bytes": site.bytes_pending,
                        "calls": unused,
                        "count": site.calls,
                    },
                }
            )
        elif site.nograd_calls >= 2 and not site.grad_calls and not site.inference_calls:
            out.append(
                {
                    "kind": "forward-under-no-grad",
                    **at(site.key),
                    "measured": {"calls": site.nograd_calls, "seconds": site.nograd_seconds},
                }
            )
    if S.kept_max >= 2 and S.kept_where:
        where = dict(S.kept_where)
        name = where.pop("name", "")
        out.append(
            {
                "kind": "graph-kept",
                **where,
                "name": name,
                "measured": {"count": S.kept_max, "steps": S.steps},
            }
        )
    for key, count in S.wiped.items():
        out.append({"kind": "gradients-wiped", **at(key), "measured": {"count": count}})
    if S.steps >= 2:
        for key, entry in S.syncs.items():
            in_loop = entry.get("last_step", 0) - entry["first_step"] + 1
            if entry["count"] >= 2 and in_loop >= 2:
                out.append(
                    {
                        "kind": "sync",
                        **at(key),
                        "what": entry["what"],
                        "measured": {
                            "count": entry["count"],
                            "cuda": entry["cuda"],
                            "per_step": round(entry["count"] / max(1, S.steps), 3),
                        },
                    }
                )
    breaks = _graph_breaks() if S.compile_sites else None
    if breaks and (breaks["count"] or breaks["recompiles"]):
        out.append(
            {
                "kind": "graph-breaks",
                **at(S.compile_sites[0]),
                "reasons": breaks["reasons"],
                "measured": {
                    "count": breaks["count"],
                    "graphs": breaks["graphs"],
                    "recompiles": breaks["recompiles"],
                },
            }
        )
    loop_seconds = sum(e[5] for e in S.timeline) or (time.perf_counter() - S.t0)
    for key, entry in S.loaders.items():
        share = entry["seconds"] / loop_seconds if loop_seconds else 0.0
        if entry["batches"] >= 2 and share >= 0.25 and entry["seconds"] >= 0.2:
            out.append(
                {
                    "kind": "data-stall",
                    **at(key),
                    "device": S.device,
                    "num_workers": entry["num_workers"],
                    "pin_memory": entry["pin_memory"],
                    "measured": {
                        "seconds": round(entry["seconds"], 6),
                        "share": round(share, 4),
                        "count": entry["batches"],
                    },
                }
            )
    for repeat in S.sampler_repeats.values():
        out.append(
            {
                "kind": "sampler-repeats",
                **at(repeat["where"]),
                "measured": {"count": repeat["count"], "samples": repeat.get("samples", 0)},
            }
        )
    for sched in S.schedulers.values():
        opt_steps = S.opt_steps.get(sched["optimizer"], 0)
        ratio = sched["steps"] / opt_steps if opt_steps else 0.0
        per_iteration = sched["kind"] in ("OneCycleLR", "CyclicLR")
        wrong = (per_iteration and opt_steps >= 4 and ratio <= 0.5) or (
            sched["kind"] in ("StepLR", "MultiStepLR", "ExponentialLR", "ReduceLROnPlateau")
            and not sched["iterations"]
            and opt_steps >= 4
            and sched["steps"] >= 4
            and ratio >= 0.9
            and S.max_batches_per_epoch >= 2
        )
        if wrong:
            out.append(
                {
                    "kind": "scheduler-granularity",
                    **at(sched["where"]),
                    "scheduler": sched["kind"],
                    "per_iteration": per_iteration,
                    "measured": {
                        "count": sched["steps"],
                        "steps": opt_steps,
                        "share": round(ratio, 4),
                    },
                }
            )
    return out


def _write() -> None:
    path = os.environ.get(OUT_ENV)
    if not path:
        return
    torch = S.torch
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            S.device = f"cuda:{torch.cuda.current_device()}"
            peak = int(torch.cuda.max_memory_allocated())
            if peak > S.peak["bytes"]:
                S.peak["bytes"] = peak
    except Exception:
        pass
    if S.device == "cpu":
        try:
            import resource

            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            S.peak["bytes"] = max(S.peak["bytes"], rss)
        except (ImportError, OSError):
            pass
    if S.profile_steps and S.profile_result is None:
        _profile_finish()
    try:
        findings = _findings()
        if S.profile_result is not None:
            findings.extend(S.profile_result.pop("findings", []))
    except Exception:
        findings = []
        S.error = (S.error or "") + "measurement: " + traceback.format_exc(limit=3)
    data = {
        "steps": S.steps,
        "stopped": S.stopped,
        "exit_code": S.exit_code,
        "torch": getattr(torch, "__version__", None) if torch is not None else None,
        "device": S.device,
        "duration_s": round(time.perf_counter() - S.t0, 6),
        "started": S.started,
        "timeline": _timeline(),
        "peak_memory": S.peak,
        "findings": findings,
        "kept_series": S.kept_series[-64:],
        "profile": S.profile_result,
        "error": S.error,
    }
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, default=str)
    os.replace(tmp, path)


def _on_signal(signum: int, frame: Any) -> None:
    if os.getpid() != S.pid:  # a forked worker: behave as if no handler were set
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _stop("seconds" if signum == getattr(signal, "SIGALRM", -1) else "interrupted")


def main() -> None:
    """Run ``sys.argv[1:]`` as ``python script.py ARGS`` would, instrumented."""
    script = sys.argv[1]
    sys.argv[:] = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
    sys.meta_path.insert(0, _TorchFinder())
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _on_signal)
    if S.max_seconds and hasattr(signal, "setitimer"):
        signal.signal(signal.SIGALRM, _on_signal)
        signal.setitimer(signal.ITIMER_REAL, S.max_seconds)
    main_module = sys.modules["__main__"]
    namespace = main_module.__dict__
    for name in list(namespace):
        if name not in ("__builtins__", "__name__"):
            del namespace[name]
    namespace.update({"__file__": script, "__cached__": None, "__loader__": None})
    namespace["__spec__"] = None
    namespace["__package__"] = None
    namespace["__doc__"] = None
    try:
        with open(script, "rb") as f:
            code = compile(f.read(), script, "exec", dont_inherit=True)
        exec(code, namespace)
    except StopRun as stop:
        S.stopped = stop.why
    except SystemExit as exc:
        S.stopping = True
        S.exit_code = _exit_status(exc.code)
        S.stopped = "exit" if S.exit_code == 0 else "error"
    except KeyboardInterrupt:
        S.stopping = True
        S.stopped = "interrupted"
        S.exit_code = 130
    except BaseException as exc:
        S.stopping = True
        S.stopped = "error"
        S.exit_code = 1
        # As Python prints it: from the script's frames on, without this function's.
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        traceback.print_exception(type(exc), exc, tb)
    finally:
        S.stopping = True  # an alarm or SIGTERM from here on must not interrupt the report
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
        if hasattr(signal, "SIGTERM"):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            _write()
        except Exception:
            traceback.print_exc()
    sys.stdout.flush()
    sys.exit(S.exit_code)


def _exit_status(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
