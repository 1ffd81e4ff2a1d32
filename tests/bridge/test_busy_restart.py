"""A busy kernel never blocks a probe beyond its timeout; a restart is survived; IOPub events."""

from __future__ import annotations

import pytest

from torchdoctor.bridge.client import KernelBridge, KernelBusy, KernelDead
from torchdoctor.bridge.events import IdleWatcher
from torchdoctor.core.live_facts import ProbeRequest


def test_subshell_answers_while_a_cell_runs(kernel, bridge: KernelBridge) -> None:
    assert bridge.uses_subshell  # ipykernel >= 7 advertises "kernel subshells"
    kernel.run("import torch\nw = torch.ones(2, 3)")
    msg_id = kernel.start("import time\ntime.sleep(3)\nfinished = True")
    try:
        facts = bridge.probe(ProbeRequest.of(["w", "finished"]), timeout=2.5)
        assert facts.tensor("w")["shape"] == [2, 3]  # type: ignore[index]
        assert facts.get("finished") == {"kind": "missing"}  # answered before the cell ended
    finally:
        kernel.wait_idle(msg_id)
    assert bridge.probe(["finished"]).get("finished") == {"kind": "other", "type": "bool"}


def test_main_shell_reports_busy_instead_of_blocking(kernel) -> None:
    with KernelBridge(kernel.connection_file, timeout=10, use_subshell=False) as main:
        assert not main.uses_subshell
        assert main.probe(["w"]).tensor("w") is not None
        msg_id = kernel.start("import time\ntime.sleep(2)\nlater = 1")
        try:
            with pytest.raises(KernelBusy):
                main.probe(["w"], timeout=0.3)
            # The first probe is still queued: a second one is refused, not queued behind it.
            with pytest.raises(KernelBusy, match="previous probe"):
                main.probe(["w"], timeout=0.3)
        finally:
            kernel.wait_idle(msg_id)
        facts = main.probe(["later"], timeout=10)
        assert facts.get("later") == {"kind": "other", "type": "int"}


def test_iopub_reports_user_executions_not_probes(kernel, bridge: KernelBridge) -> None:
    with IdleWatcher(kernel.connection_file) as watcher:
        watcher.poll(0.5)  # let the subscription settle
        for _ in range(5):
            bridge.probe(["w"])
        assert watcher.poll(0.5) == []
        count = kernel.run("y = 2")["execution_count"]
        events = []
        for _ in range(20):
            events += watcher.poll(0.2)
            if events:
                break
        assert [e.execution_count for e in events] == [count]


def test_restart_is_survived(kernel, bridge: KernelBridge) -> None:
    kernel.run("import torch\nbefore = torch.ones(1)")
    assert bridge.probe(["before"]).tensor("before") is not None
    kernel.restart()
    kernel.run("import torch\nafter = torch.zeros(3, 3)")
    facts = bridge.probe(ProbeRequest.of(["before", "after"]), timeout=10)
    assert facts.get("before") == {"kind": "missing"}
    assert facts.tensor("after")["shape"] == [3, 3]  # type: ignore[index]
    assert bridge.probe(["after"]).tensor("after") is not None


def test_dead_kernel_is_reported_as_dead(new_kernel) -> None:
    k = new_kernel()
    bridge = KernelBridge(k.connection_file, timeout=1)
    try:
        assert bridge.probe(["anything"]).get("anything") == {"kind": "missing"}
        k.close()
        with pytest.raises(KernelDead):
            bridge.probe(["anything"])
        assert not bridge.is_alive(timeout=0.3)
    finally:
        bridge.close()
