"""A probe never holds the kernel: a sleeping property is not run, the probe's own work stops at
its time budget, and a bridge closed beside a probe still running leaves the control channel
free for the other clients (interrupts, other frontends)."""

from __future__ import annotations

import time

import pytest

from torchdoctor.bridge.client import KernelBridge, KernelBusy
from torchdoctor.core.live_facts import ProbeRequest

HUGE = 200_000


def control_answers(kernel, timeout: float = 0.5) -> float:
    """Seconds the kernel's control channel took to answer the user's client."""
    client = kernel.client
    while client.control_channel.msg_ready():
        client.control_channel.get_msg(timeout=0.1)
    msg = client.session.msg("kernel_info_request", {})
    start = time.monotonic()
    client.control_channel.send(msg)
    while True:
        left = timeout - (time.monotonic() - start)
        assert left > 0, f"control channel did not answer within {timeout} s"
        try:
            reply = client.control_channel.get_msg(timeout=left)
        except Exception:
            continue
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return time.monotonic() - start


def test_a_sleeping_property_blocks_nothing(kernel, bridge: KernelBridge) -> None:
    kernel.run(
        "import torch, time\n"
        "class Slow(torch.Tensor):\n"
        "    @property\n"
        "    def shape(self):\n"
        "        time.sleep(5)\n"
        "        return torch.Size([1])\n"
        "slow = torch.ones(2).as_subclass(Slow)\n"
        "quick = torch.ones(3)"
    )
    start = time.monotonic()
    facts = bridge.probe(["slow"], timeout=1)
    assert time.monotonic() - start < 1
    assert facts.tensor("slow")["shape"] == [2]  # type: ignore[index]
    control_answers(kernel)
    with KernelBridge(kernel.connection_file, timeout=1) as other:
        assert other.probe(["quick"]).tensor("quick")["shape"] == [3]  # type: ignore[index]


def test_the_probe_bounds_its_own_work(kernel, bridge: KernelBridge) -> None:
    kernel.run(
        "import torch\nhuge = torch.nn.Module()\n"
        f"huge._parameters.update((f'p{{i}}', torch.nn.Parameter(torch.empty(1))) "
        f"for i in range({HUGE}))\n"
        "quick = torch.ones(3)"
    )
    full = bridge.probe(["huge"], timeout=30).module("huge")  # with time enough: complete
    assert full is not None and full["num_parameters"] == HUGE and "truncated" not in full
    start = time.monotonic()
    facts = bridge.probe(ProbeRequest.of(["huge", "quick"], [("quick", (-1,))]), timeout=0.5)
    assert time.monotonic() - start < 0.5
    huge = facts.get("huge")
    assert huge is not None and huge["kind"] == "module" and huge["truncated"] is True
    assert 0 < huge["num_parameters"] < HUGE
    assert facts.module("huge") is None  # partial: no rule reads it
    assert facts.get("quick") == {"kind": "error", "error": "time limit"}
    control_answers(kernel)
    assert bridge.probe(["quick"], timeout=0.5).tensor("quick") is not None
    kernel.run("del huge")


def test_closing_beside_a_running_probe_keeps_the_control_channel(kernel) -> None:
    kernel.run("import torch\nquick = torch.ones(3)")
    bridge = KernelBridge(kernel.connection_file, timeout=5)
    try:
        # Something in the kernel keeps the bridge's subshell busy past the client's timeout.
        with pytest.raises(KernelBusy):
            bridge._execute({"t": "__import__('time').sleep(4)"}, 0.3)
        with pytest.raises(KernelBusy, match="previous probe"):
            bridge.probe(["quick"], timeout=0.3)  # not queued behind it
    finally:
        start = time.monotonic()
        bridge.close()
        assert time.monotonic() - start < 1
    control_answers(kernel)
    with KernelBridge(kernel.connection_file, timeout=1) as other:
        assert other.probe(["quick"]).tensor("quick") is not None
