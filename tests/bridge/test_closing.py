"""``KernelBridge.close()`` beside a probe that is using the sockets: the probe stops at once with
"bridge is closed", and the sockets are closed only once the probe has let go of them."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from torchdoctor.bridge.client import KernelBridge
from torchdoctor.bridge.errors import BridgeError


@pytest.mark.parametrize("use_subshell", [False, True])
def test_close_while_a_probe_waits(kernel, use_subshell: bool) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the busy cell holds the GIL through libc's sleep")
    kernel.run("import torch\nquick = torch.ones(3)")
    bridge = KernelBridge(kernel.connection_file, timeout=10, use_subshell=use_subshell)
    assert bridge.probe(["quick"]).tensor("quick") is not None
    # The probe waits: behind the cell on the main shell; for the GIL, which the cell holds
    # through libc's sleep, in the subshell.
    cell = kernel.client.execute("import ctypes\nctypes.PyDLL(None).sleep(3)")
    time.sleep(0.5)  # (no execute_input to wait for: the cell holds the GIL)
    outcome: dict[str, object] = {}

    def waiting_probe() -> None:
        try:
            outcome["value"] = bridge.probe(["quick"], timeout=2.5)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=waiting_probe)
    thread.start()
    try:
        time.sleep(0.5)
        start = time.monotonic()
        bridge.close()
        closed_in = time.monotonic() - start
        thread.join(5)
        assert not thread.is_alive()
        error = outcome.get("error")
        assert isinstance(error, BridgeError) and "closed" in str(error), outcome
        assert closed_in < 1.0  # the probe let go at once, not at its timeout
        with pytest.raises(BridgeError, match="closed"):
            bridge.probe(["quick"])
    finally:
        kernel.wait_idle(cell)
    with KernelBridge(kernel.connection_file, timeout=5) as other:
        assert other.probe(["quick"]).tensor("quick") is not None
