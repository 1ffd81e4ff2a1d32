"""Memory that autograd keeps for backward, measured on any device (used by the cpu_* scripts).

CPU PyTorch has no allocator statistics, so this counts what the graph holds directly: a
``saved_tensors_hooks`` pair sees every tensor saved for backward, and ``nbytes()`` adds up the
distinct storages still alive.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterable
from types import TracebackType

import torch


class _Saved:
    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


class SavedTensors:
    """``with SavedTensors(exclude=model.parameters()) as saved: out = model(x)``, then
    ``saved.nbytes()`` while ``out`` (and so its graph) is alive. No backward may run inside."""

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self._exclude = {t.untyped_storage().data_ptr() for t in exclude}
        self._live: weakref.WeakSet[_Saved] = weakref.WeakSet()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _pack(self, tensor: torch.Tensor) -> _Saved:
        # A detached alias (same storage): holding ``tensor`` itself would tie an output saved by
        # its own node into a reference cycle that outlives the graph.
        saved = _Saved(tensor.detach())
        self._live.add(saved)
        return saved

    @staticmethod
    def _unpack(saved: _Saved) -> torch.Tensor:
        return saved.tensor

    def __enter__(self) -> SavedTensors:
        self._hooks.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._hooks.__exit__(kind, value, tb)

    def nbytes(self) -> int:
        """Bytes of the distinct storages the graphs recorded inside still hold."""
        gc.collect()
        storages = {}
        for saved in list(self._live):
            storage = saved.tensor.untyped_storage()
            if storage.data_ptr() not in self._exclude:
                storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())
