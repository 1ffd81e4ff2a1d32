"""The kernel bridge's error type."""

from __future__ import annotations


class BridgeError(Exception):
    """A problem talking to a kernel, worded for one line of output."""
