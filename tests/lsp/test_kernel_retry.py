"""The language server's kernel bridge tries a failed probe again by itself: a kernel that was
too slow to answer right after a cell finished (a loaded machine) reports no second "cell
finished", so without a retry the live findings would wait for the next edit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from torchdoctor.bridge.client import KernelBusy
from torchdoctor.core.live_facts import LiveFacts, ProbeRequest
from torchdoctor.lsp import kernels

B = {"kind": "tensor", "shape": [6, 4], "stride": [1, 6]}


class FlakyBridge:
    """A bridge whose first ``failures`` probes time out."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def probe(self, request: ProbeRequest, timeout: float | None = None) -> LiveFacts:
        self.calls += 1
        if self.calls <= self.failures:
            raise KernelBusy("kernel busy: no answer within 1 s")
        return LiveFacts({"b": B}, execution_count=2)

    def close(self) -> None:
        pass


class Watcher:
    def close(self) -> None:
        pass


async def _run(tmp_path: Path, bridge: FlakyBridge, wait: float) -> tuple[Any, list[str]]:
    connection = tmp_path / "kernel-1.json"
    connection.write_text("{}")
    scheduled: list[str] = []
    manager = kernels.LiveManager(schedule=scheduled.append, log=lambda level, text: None)
    kernel = kernels.Kernel(str(connection), bridge, Watcher())
    manager.kernels[str(connection)] = kernel
    state = manager.units.setdefault("nb", kernels.UnitLive())
    state.kernel, state.wanted = kernel, ProbeRequest.of(["b"])
    kernel.units.add("nb")
    manager._executed(str(connection))  # the user's cell finished
    await asyncio.sleep(wait)
    await manager.shutdown()
    return state, scheduled


@pytest.mark.asyncio
async def test_a_failed_probe_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "RETRY_S", 0.05)
    bridge = FlakyBridge(failures=2)
    state, scheduled = await _run(tmp_path, bridge, 1.0)
    assert bridge.calls == 3
    assert state.facts is not None and state.facts.get("b") == B
    assert state.failures == 0
    assert scheduled == ["nb"]  # analysed again once the facts arrived


@pytest.mark.asyncio
async def test_retries_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "RETRY_S", 0.02)
    bridge = FlakyBridge(failures=1000)
    state, scheduled = await _run(tmp_path, bridge, 1.0)
    assert bridge.calls == 1 + kernels.PROBE_RETRIES
    assert state.facts is None and scheduled == []
