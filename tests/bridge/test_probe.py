"""Facts read from a real kernel: every kind of tensor, modules, views, dotted names, and the
user's state left untouched."""

from __future__ import annotations

import json

import pytest

from torchdoctor.bridge.client import KernelBridge, parse_expression_reply
from torchdoctor.bridge.errors import BridgeError
from torchdoctor.core.live_facts import LiveFacts, ProbeRequest

SETUP = """
import torch
from torch import nn
a = torch.randn(4, 6, requires_grad=True)
b = a.t()
c = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
s = torch.randn(10, 10)[:, ::2]
big = torch.empty(2**28)
with torch.inference_mode():
    inf = torch.ones(3)
offset = torch.arange(10.0)[3:7]
half = torch.zeros(2, 2, dtype=torch.float16)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
    def forward(self, x):
        return self.bn(self.fc(x))
net = Net().eval()
net.fc.weight.requires_grad_(False)
class Holder:
    pass
holder = Holder()
holder.inner = Holder()
holder.inner.t = torch.ones(5)
number = 3
def view_error(fn):
    try:
        fn()
    except RuntimeError as exc:
        return str(exc)
b_error = view_error(lambda: b.view(-1))
c_error = view_error(lambda: c.view(8, -1))
"""


@pytest.fixture(scope="module")
def facts(kernel, bridge) -> LiveFacts:
    kernel.run(SETUP)
    request = ProbeRequest.of(
        ["a", "b", "c", "s", "big", "inf", "offset", "half", "net", "net.fc.weight",
         "holder.inner.t", "number", "nothing", "net.nothing", "holder.nothing.t"],
        [("b", (-1,)), ("c", (8, -1)), ("s", (50,)), ("s", (5, 2, 5)), ("c", (("c", 0), -1)),
         ("a", (("b", 0), -1))],
    )  # fmt: skip
    return bridge.probe(request)


def _kernel_value(bridge: KernelBridge, name: str) -> object:
    """Read a plain value from the kernel with a silent user expression (test helper)."""
    content = bridge._execute({"v": f"__import__('json').dumps({name})"}, 10)
    return parse_expression_reply(content["user_expressions"]["v"])


def test_transposed_leaf_and_non_leaf(facts: LiveFacts) -> None:
    a, b = facts.tensor("a"), facts.tensor("b")
    assert a is not None and b is not None
    assert a["shape"] == [4, 6] and a["stride"] == [6, 1] and a["is_contiguous"] is True
    assert a["requires_grad"] is True and a["is_leaf"] is True and a["grad_fn"] is None
    assert a["has_grad"] is False and a["is_view"] is False
    assert b["shape"] == [6, 4] and b["stride"] == [1, 6] and b["is_contiguous"] is False
    assert b["is_leaf"] is False and b["grad_fn"] == "TBackward0" and b["is_view"] is True
    assert b["dtype"] == "torch.float32" and b["device"] == "cpu" and b["layout"] == "torch.strided"
    assert b["nbytes"] == b["storage_nbytes"] == 96
    assert b["has_grad"] is None  # .grad is not read on non-leaves


def test_channels_last(facts: LiveFacts) -> None:
    c = facts.tensor("c")
    assert c is not None
    assert c["stride"] == [60, 1, 15, 3]
    assert c["channels_last"] is True and c["is_contiguous"] is False
    assert facts.tensor("a")["channels_last"] is None  # type: ignore[index]  # 2-D


def test_strided_slice_offset_and_bytes(facts: LiveFacts) -> None:
    s = facts.tensor("s")
    assert s is not None
    assert s["stride"] == [10, 2] and s["is_view"] is True
    assert s["nbytes"] == 200 and s["storage_nbytes"] == 400
    off = facts.tensor("offset")
    assert off is not None and off["storage_offset"] == 3 and off["shape"] == [4]
    assert facts.tensor("half")["dtype"] == "torch.float16"  # type: ignore[index]


def test_big_untouched_tensor(facts: LiveFacts) -> None:
    big = facts.tensor("big")
    assert big is not None
    assert big["shape"] == [2**28] and big["nbytes"] == 2**30 and big["storage_nbytes"] == 2**30


def test_inference_and_pinned(facts: LiveFacts) -> None:
    inf = facts.tensor("inf")
    assert inf is not None and inf["is_inference"] is True
    assert facts.tensor("a")["is_inference"] is False  # type: ignore[index]
    assert inf["is_pinned"] is False


def test_module(facts: LiveFacts) -> None:
    net = facts.module("net")
    assert net is not None
    assert net["num_parameters"] == 3 * 4 + 4 + 4 + 4
    assert net["trainable_parameters"] == 4 + 4 + 4
    assert net["devices"] == ["cpu"] and net["dtypes"] == ["torch.float32"]
    assert net["training"] is False
    assert net["first_device"] == "cpu" and net["type"] == "Net"
    assert net["num_buffers"] == 3  # running_mean, running_var, num_batches_tracked


def test_dotted_names(facts: LiveFacts) -> None:
    w = facts.tensor("net.fc.weight")
    assert w is not None and w["shape"] == [4, 3] and w["type"] == "torch.nn.parameter.Parameter"
    assert w["requires_grad"] is False
    t = facts.tensor("holder.inner.t")
    assert t is not None and t["shape"] == [5]
    assert facts.get("number") == {"kind": "other", "type": "int"}
    for name in ("nothing", "net.nothing", "holder.nothing.t"):
        assert facts.get(name) == {"kind": "missing"}


def test_views_replayed_on_meta(bridge: KernelBridge, facts: LiveFacts) -> None:
    b_error = _kernel_value(bridge, "b_error")
    c_error = _kernel_value(bridge, "c_error")
    assert isinstance(b_error, str) and "view size is not compatible" in b_error
    assert facts.view("b", (-1,)) == {"spec": [-1], "shape": [-1], "ok": False, "error": b_error}
    assert facts.view("c", (8, -1))["error"] == c_error  # type: ignore[index]
    assert facts.view("s", (50,))["ok"] is True  # type: ignore[index]
    assert facts.view("s", (5, 2, 5))["ok"] is True  # type: ignore[index]
    by_size = facts.view("c", (("c", 0), -1))
    assert by_size is not None and by_size["shape"] == [2, -1] and by_size["ok"] is False
    assert facts.view("a", (("b", 0), -1))["shape"] == [6, -1]  # type: ignore[index]
    assert facts.view("a", (("b", 0), -1))["ok"] is True  # type: ignore[index]


def test_kernel_facts_and_execution_count(kernel, bridge: KernelBridge, facts: LiveFacts) -> None:
    assert facts.kernel["torch"].startswith("2.")
    assert facts.kernel["cuda_initialized"] is False
    assert facts.kernel["start_method"] in ("fork", "spawn", "forkserver")
    count = kernel.run("x_count = 1")["execution_count"]
    assert bridge.probe(["x_count"]).execution_count == count


def test_user_state_unchanged_by_many_probes(kernel, bridge: KernelBridge) -> None:
    kernel.run("marker_value = 41")
    kernel.run("marker_value + 1")  # sets Out and _
    state = (
        "__import__('json').dumps([len(In), sorted(Out), repr(_), "
        "sorted(k for k in globals()), "
        "list(get_ipython().history_manager.get_range(output=False))[-1][1]])"
    )
    before_count = kernel.run("pass")["execution_count"]
    before = parse_expression_reply(bridge._execute({"s": state}, 10)["user_expressions"]["s"])
    request = ProbeRequest.of(["marker_value", "a", "b", "net", "missing_name"], [("b", (-1,))])
    for _ in range(60):
        bridge.probe(request)
    after = parse_expression_reply(bridge._execute({"s": state}, 10)["user_expressions"]["s"])
    assert after == before
    assert kernel.run("pass")["execution_count"] == before_count + 1
    assert "_torchdoctor" not in json.dumps(after[3])


def test_helper_lives_in_sys_modules_only(bridge: KernelBridge) -> None:
    from torchdoctor.bridge.client import PROBE_MODULE

    bridge.probe(["a"])
    installed = _kernel_value(bridge, f"{PROBE_MODULE!r} in __import__('sys').modules")
    assert installed is True
    in_ns = _kernel_value(bridge, f"{PROBE_MODULE!r} in globals()")
    assert in_ns is False


def test_invalid_names_never_sent() -> None:
    for bad in ("a; import os", "a.b()", "__import__('os')", "1x", "a..b", "", "class", "a[0]"):
        with pytest.raises(ValueError):
            ProbeRequest.of([bad])


def test_reply_text_is_never_evaluated() -> None:
    entry = {"status": "ok", "data": {"text/plain": "__import__('os').getcwd()"}}
    with pytest.raises(BridgeError):
        parse_expression_reply(entry)


def _scan(bridge: KernelBridge, request: dict[str, object]) -> dict[str, object]:
    """A raw ``scan`` probe, as the JupyterLab panel sends it through the notebook's kernel."""
    from torchdoctor.bridge.client import PROBE_MODULE

    bridge.probe(["a"])  # installs the helper
    payload = json.dumps(request)
    expr = f'__import__("sys").modules[{PROBE_MODULE!r}].probe({payload!r})'
    content = bridge._execute({"r": expr}, 10)
    return parse_expression_reply(content["user_expressions"]["r"])


def test_scan_lists_the_namespace_tensors_and_modules(kernel, bridge: KernelBridge, facts) -> None:
    kernel.run("_hidden = torch.ones(1)\nlooks_like = type('T', (), {'shape': (1,)})()")
    reply = _scan(bridge, {"v": 1, "names": ["number"], "scan": True, "kernel": False})
    scanned = reply["scanned"]
    assert isinstance(scanned, list)
    # In the namespace's order; parameters inside modules are not listed, nor `_` names.
    expected = ["a", "b", "c", "s", "big", "inf", "offset", "half", "net"]
    assert [n for n in scanned if n in expected] == expected
    assert "_hidden" not in scanned and "looks_like" not in scanned and "number" not in scanned
    assert "Net" not in scanned and "nn" not in scanned and "torch" not in scanned
    names = reply["facts"]
    assert names["number"] == {"kind": "other", "type": "int"}
    assert names["b"]["stride"] == [1, 6] and names["net"]["training"] is False
    # Without `scan` the reply is as before.
    plain = _scan(bridge, {"v": 1, "names": ["a"], "kernel": False})
    assert "scanned" not in plain and list(plain["facts"]) == ["a"]


PARTIAL_TORCH = """
import torch
t = torch.ones(2, 3).t()
# As while `import torch` still runs: the module is in sys.modules, marked as initializing,
# its dtypes not set yet (a probe through a subshell can come in the middle of that).
_saved = {k: v for k, v in vars(torch).items() if isinstance(v, torch.dtype)}
for _k in _saved:
    delattr(torch, _k)
torch.__spec__._initializing = True
"""
TORCH_DONE = """
for _k, _v in _saved.items():
    setattr(torch, _k, _v)
torch.__spec__._initializing = False
"""


def test_a_probe_during_import_torch_says_no_torch_and_spoils_nothing(new_kernel) -> None:
    kernel = new_kernel()
    try:
        kernel.run(PARTIAL_TORCH)
        with KernelBridge(kernel.connection_file, timeout=10) as bridge:
            during = bridge.probe(ProbeRequest.of(["t"], [("t", (-1,))]))
            assert during.get("t") == {"kind": "no-torch"}
            assert during.kernel["torch"] is None
            kernel.run(TORCH_DONE)
            after = bridge.probe(ProbeRequest.of(["t"], [("t", (-1,))]))
            # The dtype table is read once torch is complete: the view replay still works.
            view = after.view("t", (-1,))
            assert view is not None and view["ok"] is False
            assert "view size is not compatible" in view["error"]
    finally:
        kernel.close()
