"""The kernel bridge's error type."""

from __future__ import annotations

INSTALL_HINT = "pip install 'torchdoctor[bridge]'"


class BridgeError(Exception):
    """A problem talking to a kernel, worded for one line of output."""


def missing_jupyter_client() -> BridgeError:
    """jupyter-client is not installed: the error names the fix."""
    return BridgeError(f"the kernel bridge needs jupyter-client: {INSTALL_HINT}")
