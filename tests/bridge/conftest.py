"""A real ipykernel per test module, started with jupyter_client's KernelManager."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")


class Kernel:
    """A kernel plus a "user" client that runs cells the way a notebook frontend does."""

    def __init__(self) -> None:
        from jupyter_client import KernelManager

        self.km = KernelManager(kernel_name="python3")
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        self.km.start_kernel(env=env, extra_arguments=["--HistoryManager.enabled=True"])
        self.client = self.km.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    @property
    def connection_file(self) -> str:
        return self.km.connection_file

    def run(self, code: str, timeout: float = 60) -> dict[str, Any]:
        """Run a cell (stored in history, counted); raise if it failed."""
        reply = self.client.execute_interactive(code, timeout=timeout, output_hook=lambda m: None)
        content = reply["content"]
        if content["status"] != "ok":
            raise AssertionError(f"cell failed: {content.get('ename')}: {content.get('evalue')}")
        return content

    def start(self, code: str, timeout: float = 60) -> str:
        """Send a cell and return once the kernel has begun running it."""
        msg_id = self.client.execute(code)
        while True:
            msg = self.client.get_iopub_msg(timeout=timeout)
            if (
                msg["header"]["msg_type"] == "execute_input"
                and msg["parent_header"].get("msg_id") == msg_id
            ):
                return msg_id

    def wait_idle(self, msg_id: str, timeout: float = 60) -> None:
        while True:
            msg = self.client.get_shell_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") == msg_id:
                return

    def restart(self) -> None:
        self.km.restart_kernel(now=True)
        self.client.wait_for_ready(timeout=60)

    def close(self) -> None:
        self.client.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel() -> Iterator[Kernel]:
    k = Kernel()
    try:
        yield k
    finally:
        k.close()


@pytest.fixture(scope="module")
def bridge(kernel: Kernel):
    from torchdoctor.bridge.client import KernelBridge

    b = KernelBridge(kernel.connection_file, timeout=10)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="session")
def new_kernel() -> type[Kernel]:
    """Start an extra kernel in a test (close it yourself)."""
    return Kernel
