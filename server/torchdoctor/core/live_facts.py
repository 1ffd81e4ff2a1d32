"""Kernel facts as plain data: what to ask a kernel about live tensors and modules, and what it
answered. The live rules read them from the analysis context; the kernel bridge fills them.

Nothing here imports ``jupyter_client`` or torch.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INDEX = re.compile(r"[0-9]+\Z")
MAX_NAME_LENGTH = 200
MAX_VIEW_DIMS = 16

# One element of a view shape: a literal size, or "size ``dim`` of tensor ``name``".
ViewItem = int | tuple[str, int]
FactDict = Mapping[str, Any]


def is_valid_name(name: object) -> bool:
    """A dotted name of plain identifiers (``x``, ``model.fc.weight``), where the parts after the
    first may also be indices, as ``named_parameters()`` and ``state_dict()`` spell them
    (``model.0.weight``); never executed, but checked so that nothing else can be sent."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        return False
    first, *rest = name.split(".")
    return _is_identifier(first) and all(_is_identifier(p) or _INDEX.match(p) for p in rest)


def _is_identifier(part: str) -> bool:
    return bool(_IDENT.match(part)) and part.isascii() and not keyword.iskeyword(part)


def is_complete_module(facts: FactDict) -> bool:
    """Whether a module's facts cover every parameter and buffer of its tree."""
    return not (
        facts.get("unreadable_parameters")
        or facts.get("unreadable_buffers")
        or facts.get("truncated")
    )


def validate_name(name: str) -> str:
    if not is_valid_name(name):
        raise ValueError(f"not a dotted identifier: {name!r}")
    return name


def parse_view_shape(text: str) -> tuple[int, ...]:
    """``"8,-1"`` -> ``(8, -1)``; ``"(2, 3)"`` and ``"[6]"`` are accepted too."""
    body = text.strip().strip("()[]").strip()
    if not body:
        raise ValueError(f"empty view shape: {text!r}")
    items = [p.strip() for p in body.split(",") if p.strip()]
    try:
        shape = tuple(int(p) for p in items)
    except ValueError:
        raise ValueError(f"view shape must be integers separated by commas: {text!r}") from None
    _check_shape(shape)
    return shape


def _check_shape(shape: Sequence[object]) -> None:
    if not 0 < len(shape) <= MAX_VIEW_DIMS:
        raise ValueError(f"a view shape has 1 to {MAX_VIEW_DIMS} dimensions")
    for item in shape:
        if isinstance(item, bool):
            raise ValueError("view sizes are integers")
        if isinstance(item, int):
            if item < -1 or item > 2**62:
                raise ValueError(f"view size out of range: {item}")
        elif isinstance(item, tuple) and len(item) == 2:
            name, dim = item
            validate_name(name)
            if not isinstance(dim, int) or isinstance(dim, bool) or not -64 <= dim < 64:
                raise ValueError(f"bad dimension index: {dim!r}")
        else:
            raise ValueError(f"bad view size: {item!r}")


def view_key(spec: Sequence[ViewItem]) -> str:
    """The key a view check's result is stored under (the JSON of its spec)."""
    return json.dumps([list(i) if isinstance(i, tuple) else i for i in spec])


@dataclass(frozen=True)
class ProbeRequest:
    """Names to read, and ``view`` shapes to replay on meta tensors."""

    names: tuple[str, ...]
    views: tuple[tuple[str, tuple[ViewItem, ...]], ...] = ()
    kernel: bool = True  # also report kernel facts (start method, notebook path...)

    def __post_init__(self) -> None:
        for name in self.names:
            validate_name(name)
        for name, shape in self.views:
            validate_name(name)
            _check_shape(shape)

    @classmethod
    def of(
        cls,
        names: Iterable[str],
        views: Iterable[tuple[str, Sequence[ViewItem]]] = (),
        kernel: bool = True,
    ) -> ProbeRequest:
        ordered: dict[str, None] = {}
        view_list: list[tuple[str, tuple[ViewItem, ...]]] = []
        for name in names:
            ordered.setdefault(name, None)
        for name, shape in views:
            ordered.setdefault(name, None)
            for item in shape:
                if isinstance(item, tuple):
                    ordered.setdefault(item[0], None)
            entry = (name, tuple(shape))
            if entry not in view_list:
                view_list.append(entry)
        return cls(tuple(ordered), tuple(view_list), kernel)

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": 1,
                "names": list(self.names),
                "views": [[n, json.loads(view_key(s))] for n, s in self.views],
                "kernel": self.kernel,
            },
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class LiveFacts:
    """What a kernel answered: facts per name, kernel facts, and the execution count they were
    read at (the count of the last cell the user ran)."""

    names: Mapping[str, FactDict] = field(default_factory=dict)
    execution_count: int | None = None
    kernel: FactDict = field(default_factory=dict)

    def get(self, name: str) -> FactDict | None:
        return self.names.get(name)

    def tensor(self, name: str) -> FactDict | None:
        """A tensor's facts; None where they were not read (``unreadable``: a subclass with
        ``__torch_dispatch__``), so that no rule acts on them."""
        facts = self.names.get(name)
        if facts is None or facts.get("kind") != "tensor" or facts.get("unreadable"):
            return None
        return facts

    def module(self, name: str) -> FactDict | None:
        """A module's facts; None where some of its tensors were not read or the walk over
        its tree stopped early (its devices and dtypes may be incomplete)."""
        facts = self.names.get(name)
        if facts is None or facts.get("kind") != "module" or not is_complete_module(facts):
            return None
        return facts

    def view(self, name: str, spec: Sequence[ViewItem]) -> FactDict | None:
        """The meta-tensor replay result of ``name.view(spec)``, when it was probed."""
        facts = self.tensor(name)
        if facts is None:
            return None
        views = facts.get("views")
        if not isinstance(views, Mapping):
            return None
        result = views.get(view_key(spec))
        return result if isinstance(result, Mapping) else None

    @property
    def torch_imported(self) -> bool:
        return bool(self.kernel.get("torch")) or any(
            f.get("kind") not in ("no-torch",) for f in self.names.values()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_count": self.execution_count,
            "kernel": dict(self.kernel),
            "facts": {k: dict(v) for k, v in self.names.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LiveFacts:
        facts = data.get("facts", {})
        return cls(
            names={str(k): dict(v) for k, v in facts.items() if isinstance(v, Mapping)},
            execution_count=data.get("execution_count"),
            kernel=dict(data.get("kernel") or {}),
        )


def tensor_facts(
    shape: Sequence[int],
    *,
    dtype: str = "torch.float32",
    device: str = "cpu",
    stride: Sequence[int] | None = None,
    views: Mapping[str, FactDict] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """Facts of a strided tensor as the probe reports them (for examples and tests)."""
    if stride is None:
        acc, out = 1, []
        for size in reversed(shape):
            out.append(acc)
            acc *= max(int(size), 1)
        stride = list(reversed(out))
    facts: dict[str, Any] = {
        "kind": "tensor",
        "shape": list(shape),
        "dtype": dtype,
        "device": device,
        "layout": "torch.strided",
        "stride": list(stride),
        "storage_offset": 0,
        "requires_grad": False,
        "is_leaf": True,
        "grad_fn": None,
    }
    facts.update(more)
    if views:
        facts["views"] = dict(views)
    return facts


def module_facts(devices: Sequence[str], dtypes: Sequence[str], **more: Any) -> dict[str, Any]:
    """Facts of an ``nn.Module`` as the probe reports them (for examples and tests)."""
    facts: dict[str, Any] = {
        "kind": "module",
        "type": "Module",
        "num_parameters": 0,
        "devices": list(devices),
        "dtypes": list(dtypes),
        "first_device": devices[0] if devices else None,
        "first_dtype": dtypes[0] if dtypes else None,
        "training": True,
    }
    facts.update(more)
    return facts


def view_result(
    spec: Sequence[ViewItem], error: str | None, shape: Sequence[int] | None = None
) -> dict[str, FactDict]:
    """One entry of a tensor's ``views`` facts (for examples and tests)."""
    return {
        view_key(spec): {
            "spec": json.loads(view_key(spec)),
            "shape": list(shape) if shape is not None else [i for i in spec if isinstance(i, int)],
            "ok": error is None,
            "error": error,
        }
    }
