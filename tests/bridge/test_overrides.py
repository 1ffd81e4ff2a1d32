"""Tensor subclasses that override facts in Python, ``__torch_dispatch__`` wrappers, Python modes
and namespace keys with their own ``__eq__``: the probe runs none of their code, reads the real
facts where C-level paths give them, and says so where they do not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.bridge.client import KernelBridge
from torchdoctor.bridge.markdown import hover_markdown
from torchdoctor.core.live_facts import ProbeRequest

OVERRIDES = """
import torch
from pathlib import Path
MARKER = Path({marker!r})
def _touch(what):
    with MARKER.open("a") as f:
        f.write(what + "\\n")
def _prop(name, value):
    def get(self):
        _touch("property " + name)
        return value
    return property(get)
def _meth(name, value):
    def call(self, *args, **kwargs):
        _touch("method " + name)
        return value
    return call
LIES = dict(
    shape=_prop("shape", torch.Size([99])), dtype=_prop("dtype", torch.int8),
    device=_prop("device", torch.device("meta")), layout=_prop("layout", torch.sparse_coo),
    requires_grad=_prop("requires_grad", True), is_leaf=_prop("is_leaf", False),
    grad_fn=_prop("grad_fn", None), retains_grad=_prop("retains_grad", True),
    grad=_prop("grad", None), is_quantized=_prop("is_quantized", True),
    is_nested=_prop("is_nested", True), stride=_meth("stride", (7,)),
    storage_offset=_meth("storage_offset", 5), is_contiguous=_meth("is_contiguous", False),
    dim=_meth("dim", 1), numel=_meth("numel", 99), element_size=_meth("element_size", 1),
    _is_view=_meth("_is_view", True), untyped_storage=_meth("untyped_storage", None),
    is_inference=_meth("is_inference", True), is_pinned=_meth("is_pinned", True),
    size=_meth("size", torch.Size([99])),
)
Liar = type("Liar", (torch.Tensor,), dict(LIES))
LyingParameter = type("LyingParameter", (torch.nn.Parameter,), dict(LIES))
liar = torch.ones(2, 3).as_subclass(Liar)
lying_param = LyingParameter(torch.ones(4, 5))
lm = torch.nn.Linear(5, 4)
lm.weight = LyingParameter(torch.ones(4, 5))

class Wrapper(torch.Tensor):
    @staticmethod
    def __new__(cls, elem, policy=None):
        return torch.Tensor._make_wrapper_subclass(
            cls, elem.shape, dtype=elem.dtype, device=elem.device,
            dispatch_sizes_strides_policy=policy,
        )
    def __init__(self, elem, policy=None):
        self.elem, self.policy = elem, policy
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        _touch("dispatch " + str(func))
        if func is torch.ops.aten.sym_size.default:
            return args[0].elem.shape
        if func is torch.ops.aten.sym_stride.default:
            return args[0].elem.stride()
        if func is torch.ops.aten.detach.default:
            return Wrapper(args[0].elem, args[0].policy)
        raise NotImplementedError(str(func))
wrapped = Wrapper(torch.ones(2, 3))
wrapped_sizes = Wrapper(torch.ones(2, 3), "sizes")
wm = torch.nn.Linear(3, 2)
wm.weight = torch.nn.Parameter(Wrapper(torch.ones(2, 3), "sizes"), requires_grad=False)

class EvilKey(str):
    __hash__ = str.__hash__
    def __eq__(self, other):
        _touch("key eq")
        return str.__eq__(self, other)
globals()[EvilKey("evil")] = torch.ones(1)
plain = torch.zeros(3)
holder = type("Holder", (), {{}})()
holder.__dict__[EvilKey("t")] = torch.ones(1)
holder.__dict__["u"] = torch.ones(2)
class LyingStorage(torch.UntypedStorage):
    def nbytes(self):
        _touch("storage nbytes")
        return 1
on_lying_storage = torch.empty(0).set_(LyingStorage(24), 0, (2, 3), (3, 1))
MARKER.unlink(missing_ok=True)  # Module.__setattr__ asked lying_param for its grad_fn
"""

NAMES = [
    "liar", "lying_param", "lm", "lm.weight", "wrapped", "wrapped_sizes", "wm", "wm.weight",
    "evil", "plain", "holder.t", "holder.u", "on_lying_storage",
]  # fmt: skip


def _check(facts, marker: Path) -> None:
    assert not marker.exists(), marker.read_text()
    for name, shape in (("liar", [2, 3]), ("lying_param", [4, 5]), ("lm.weight", [4, 5])):
        t = facts.tensor(name)
        assert t is not None, name
        assert t["shape"] == shape and t["dtype"] == "torch.float32" and t["device"] == "cpu"
        assert t["layout"] == "torch.strided" and t["is_contiguous"] is True, name
        assert t["stride"] == [shape[1], 1] and t["storage_offset"] == 0, name
        assert t["is_view"] is (name == "liar") and t["is_inference"] is False, name
        assert t["nbytes"] == 4 * shape[0] * shape[1] and t["is_pinned"] is False, name
        assert t["is_quantized"] is False and t["is_nested"] is False, name
    assert facts.tensor("liar")["type"] == "Liar"  # type: ignore[index]
    assert facts.tensor("liar")["is_view"] is True  # as_subclass makes an alias  # type: ignore[index]
    assert facts.tensor("lying_param")["requires_grad"] is True  # type: ignore[index]
    module = facts.module("lm")
    assert module is not None and module["num_parameters"] == 24
    assert module["devices"] == ["cpu"] and module["dtypes"] == ["torch.float32"]
    # Wrappers with __torch_dispatch__: their type, and a word that the rest was not read.
    for name in ("wrapped", "wrapped_sizes", "wm.weight"):
        value = facts.get(name)
        assert value is not None and value["kind"] == "tensor", name
        assert value["type"] == "Wrapper" and value["unreadable"] == "__torch_dispatch__", name
        assert "shape" not in value and "device" not in value, name
        assert facts.tensor(name) is None, name  # the live rules do not use it
    wm = facts.get("wm")
    assert wm is not None and wm["kind"] == "module" and wm["unreadable_parameters"] == 1
    assert wm["num_parameters"] == 2  # the bias only
    assert facts.module("wm") is None
    # Keys that are not plain strings are never compared (so they are not found).
    assert facts.get("evil") == {"kind": "missing"}
    assert facts.get("holder.t") == {"kind": "missing"}
    assert facts.tensor("plain")["shape"] == [3]  # type: ignore[index]
    assert facts.tensor("holder.u")["shape"] == [2]  # type: ignore[index]
    assert facts.module("lm")["training"] is True  # type: ignore[index]
    stored = facts.tensor("on_lying_storage")
    assert stored is not None and stored["shape"] == [2, 3] and stored["storage_nbytes"] == 24
    assert not marker.exists(), marker.read_text()


@pytest.fixture(scope="module")
def marker(kernel, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("overrides") / "touched.txt"
    kernel.run(OVERRIDES.format(marker=str(path)))
    assert not path.exists(), path.read_text()
    return path


def test_overrides_never_run(bridge: KernelBridge, marker: Path) -> None:
    request = ProbeRequest.of(NAMES, [("liar", (-1,)), ("wrapped", (-1,))])
    facts = bridge.probe(request)
    _check(facts, marker)
    assert facts.view("liar", (-1,))["ok"] is True  # type: ignore[index]
    assert facts.view("wrapped", (-1,)) is None


def test_python_modes_never_run(kernel, marker: Path) -> None:
    # Modes are per thread: on the main shell the probe runs where the user's modes are active.
    kernel.run(
        "from torch.overrides import TorchFunctionMode\n"
        "from torch.utils._python_dispatch import TorchDispatchMode\n"
        "class FnMode(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        _touch('function mode ' + str(func))\n"
        "        return func(*args, **(kwargs or {}))\n"
        "class DispatchMode(TorchDispatchMode):\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
        "        _touch('dispatch mode ' + str(func))\n"
        "        return func(*args, **(kwargs or {}))\n"
        "_fn_mode, _dispatch_mode = FnMode(), DispatchMode()\n"
        "_fn_mode.__enter__(); _dispatch_mode.__enter__()\n"
        "MARKER.unlink(missing_ok=True)"
    )
    try:
        with KernelBridge(kernel.connection_file, timeout=10, use_subshell=False) as main:
            facts = main.probe(ProbeRequest.of(NAMES, [("liar", (-1,)), ("plain", (3, 1))]))
        _check(facts, marker)
        assert facts.view("plain", (3, 1))["ok"] is True  # type: ignore[index]
    finally:
        kernel.run("_dispatch_mode.__exit__(None, None, None)\n_fn_mode.__exit__(None, None, None)")
        marker.unlink(missing_ok=True)


def test_hover_says_what_was_not_read(bridge: KernelBridge, marker: Path) -> None:
    facts = bridge.probe(["wrapped", "wm"])
    text = hover_markdown(facts.get("wrapped") or {}, "en", name="wrapped")
    assert "`Wrapper`" in text and "__torch_dispatch__" in text and "not read" in text
    assert "Tensor?" not in text
    zh = hover_markdown(facts.get("wrapped") or {}, "zh-cn", name="wrapped")
    assert "__torch_dispatch__" in zh and "未读取" in zh
    module_text = hover_markdown(facts.get("wm") or {}, "en", name="wm")
    assert "1 parameter tensor not read" in module_text
    assert not marker.exists(), marker.read_text()


def test_cli_reports_the_type_and_what_was_not_read(kernel, marker: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "probe", "-f", kernel.connection_file,
         "liar", "wrapped", "wm"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["liar"]["type"] == "Liar" and data["liar"]["shape"] == [2, 3]
    assert data["wrapped"] == {
        "kind": "tensor", "type": "Wrapper", "unreadable": "__torch_dispatch__",
        "dtype": "torch.float32", "requires_grad": False,
    }  # fmt: skip
    assert data["wm"]["unreadable_parameters"] == 1 and data["wm"]["num_parameters"] == 2
    assert not marker.exists(), marker.read_text()
