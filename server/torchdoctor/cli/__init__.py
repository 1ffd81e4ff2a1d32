"""The command line: ``torchdoctor check``, ``rule``, ``server``, ``probe``, ``docs`` and the
output formats."""

from .main import main

__all__ = ["main"]
