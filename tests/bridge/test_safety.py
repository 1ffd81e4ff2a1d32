"""Hostile objects are never touched; a kernel without torch imports nothing."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.bridge.client import KernelBridge
from torchdoctor.core.live_facts import ProbeRequest

HOSTILE = """
import torch
from pathlib import Path
MARKER = Path({marker!r})
def _touch(what):
    with MARKER.open("a") as f:
        f.write(what + "\\n")
class Hostile:
    def __init__(self):
        object.__setattr__(self, "inner", 1)
    def __getattr__(self, name):
        _touch("getattr " + name)
        return 1
    def __getattribute__(self, name):
        _touch("getattribute " + name)
        return object.__getattribute__(self, name)
    def __repr__(self):
        _touch("repr")
        return "hostile"
    def __str__(self):
        _touch("str")
        return "hostile"
    def __len__(self):
        _touch("len")
        return 0
    def __bool__(self):
        _touch("bool")
        return True
    def __eq__(self, other):
        _touch("eq")
        return False
    __hash__ = object.__hash__
    @property
    def __class__(self):
        _touch("class")
        return torch.Tensor
    @property
    def __dict__(self):
        _touch("dict")
        return {{"x": 1}}
class Sneaky(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _touch("torch_function")
        return super().__torch_function__(func, types, args, kwargs or {{}})
class SneakyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)
    def __getattr__(self, name):
        _touch("module getattr " + name)
        return super().__getattr__(name)
    def parameters(self, recurse=True):
        _touch("parameters")
        return super().parameters(recurse)
    def __repr__(self):
        _touch("module repr")
        return "m"
class Meta(type):
    def __getattribute__(cls, name):
        _touch("meta " + name)
        return type.__getattribute__(cls, name)
class WithMeta(metaclass=Meta):
    pass
h = Hostile()
sneaky = torch.randn(3, 4).as_subclass(Sneaky)
sm = SneakyModule()
wm = WithMeta()
"""


def test_hostile_objects_are_never_touched(kernel, bridge: KernelBridge, tmp_path: Path) -> None:
    marker = tmp_path / "touched.txt"
    kernel.run(HOSTILE.format(marker=str(marker)))
    assert not marker.exists()
    request = ProbeRequest.of(
        ["h", "h.inner", "h.x", "h.a.b", "sneaky", "sm", "sm.fc", "sm.fc.weight", "sm.nope", "wm",
         "wm.x"],
        [("sneaky", (-1,)), ("sneaky", (("sneaky", 0), -1))],
    )  # fmt: skip
    facts = bridge.probe(request)
    for _ in range(3):
        bridge.probe(request)
    assert not marker.exists(), marker.read_text()
    # The hostile object is reported by its real type, and nothing behind it is read.
    assert facts.get("h") == {"kind": "other", "type": "Hostile"}
    assert facts.get("h.x") == {"kind": "missing"}
    assert facts.get("h.inner") == {"kind": "missing"}  # its class overrides __dict__: not read
    sneaky = facts.tensor("sneaky")
    assert sneaky is not None and sneaky["shape"] == [3, 4] and sneaky["type"] == "Sneaky"
    assert facts.view("sneaky", (-1,))["ok"] is True  # type: ignore[index]
    module = facts.module("sm")
    assert module is not None and module["num_parameters"] == 6
    assert facts.module("sm.fc") is not None
    assert facts.tensor("sm.fc.weight") is not None
    assert facts.get("sm.nope") == {"kind": "missing"}
    assert facts.get("wm") == {"kind": "other", "type": "WithMeta"}
    assert not marker.exists()


def test_a_kernel_without_torch_imports_nothing(new_kernel, tmp_path: Path) -> None:
    marker = tmp_path / "touched.txt"
    k = new_kernel()
    try:
        k.run("x = [1, 2, 3]")
        # A key of sys.modules with its own __eq__, where the probe looks for torch.
        k.run(
            "import sys\n"
            "class Key(str):\n"
            "    __hash__ = str.__hash__\n"
            "    def __eq__(self, other):\n"
            f"        open({str(marker)!r}, 'a').write('eq')\n"
            "        return False\n"
            "sys.modules[Key('torch')] = None"
        )
        with KernelBridge(k.connection_file, timeout=10) as bridge:
            facts = bridge.probe(ProbeRequest.of(["x", "y"]))
            assert facts.get("x") == {"kind": "no-torch"}
            assert facts.get("y") == {"kind": "missing"}
            assert facts.kernel["torch"] is None
            assert not marker.exists()
            content = bridge._execute({"t": "'torch' in __import__('sys').modules"}, 10)
            assert content["user_expressions"]["t"]["data"]["text/plain"] == "False"
    finally:
        k.close()
