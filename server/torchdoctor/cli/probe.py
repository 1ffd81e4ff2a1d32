"""``torchdoctor probe --connection-file FILE NAME [NAME ...] [--view NAME=SHAPE ...]``.

Prints one JSON object keyed by name. Errors (missing or unreadable connection file, a kernel
that does not answer) are one line on stderr and exit code 2. The connection file's key is
never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ..bridge.errors import BridgeError
from ..core.live_facts import ProbeRequest, is_valid_name, parse_view_shape

EXIT_OK, EXIT_ERROR = 0, 2

TENSOR_KEYS = (
    "kind", "shape", "dtype", "device", "layout", "stride", "storage_offset", "is_contiguous",
    "channels_last", "is_view", "nbytes", "storage_nbytes", "requires_grad", "is_leaf",
    "grad_fn", "is_inference", "is_pinned",
)  # fmt: skip
MODULE_KEYS = ("kind", "num_parameters", "devices", "dtypes", "training")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise BridgeError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="torchdoctor probe",
        description="Read metadata of live tensors and modules in a running Jupyter kernel "
        "(never their data).",
    )
    p.add_argument(
        "--connection-file",
        "-f",
        required=True,
        metavar="FILE",
        help="The kernel's connection file (a path, or a name in the runtime dir).",
    )
    p.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help="Names to read (dotted: model.fc.weight, or as state_dict() spells them: "
        "model.0.weight).",
    )
    p.add_argument(
        "--view",
        action="append",
        default=[],
        metavar="NAME=SHAPE",
        help="Check whether NAME.view(SHAPE) would work (e.g. x=-1, y=8,-1).",
    )
    p.add_argument("--timeout", type=float, default=5.0, help="Seconds to wait for the kernel.")
    p.add_argument(
        "--all", action="store_true", help="Print every fact read, not only the main keys."
    )
    return p  # fmt: skip


def _shape(facts: dict[str, Any], full: bool) -> dict[str, Any]:
    kind = facts.get("kind")
    if full or kind not in ("tensor", "module") or facts.get("unreadable"):
        out = dict(facts)
    else:
        keys = TENSOR_KEYS if kind == "tensor" else MODULE_KEYS
        out = {k: facts.get(k) for k in keys}
        # Said only where they apply: a subclass's type, facts left unread or cut short.
        extra = ("type",) if kind == "tensor" else ()
        for key in (*extra, "unreadable_parameters", "unreadable_buffers", "truncated"):
            if facts.get(key):
                out[key] = facts[key]
    if kind == "tensor" and not full:
        out.pop("views", None)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(args_list)
        bad = [n for n in args.names if not is_valid_name(n)]
        views: list[tuple[str, tuple[int, ...]]] = []
        for item in args.view:
            name, sep, shape = item.partition("=")
            if not sep:
                raise BridgeError(f"--view expects NAME=SHAPE, got {item!r}")
            if not is_valid_name(name.strip()):
                bad.append(name.strip())
                continue
            try:
                views.append((name.strip(), parse_view_shape(shape)))
            except ValueError as exc:
                raise BridgeError(str(exc)) from None
        if bad:
            raise BridgeError(f"not a dotted identifier: {bad[0]!r}")
        request = ProbeRequest.of(args.names, views, kernel=False)

        from ..bridge.client import KernelBridge
        from ..bridge.discovery import resolve_connection_file

        path = resolve_connection_file(args.connection_file)
        with KernelBridge(path, timeout=args.timeout) as bridge:
            facts = bridge.probe(request)
    except BridgeError as exc:
        print(f"torchdoctor probe: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ERROR
    out: dict[str, Any] = {}
    for name in args.names:
        out[name] = _shape(dict(facts.names.get(name) or {"kind": "missing"}), args.all)
    for name, shape in views:
        target = out.setdefault(
            name, _shape(dict(facts.names.get(name) or {"kind": "missing"}), args.all)
        )
        result = facts.view(name, shape)
        if result is not None:
            target["view_ok"], target["view_error"] = result.get("ok"), result.get("error")
        elif target.get("kind") == "tensor":
            target["view_ok"], target["view_error"] = None, "not a strided tensor"
        else:
            target["view_ok"], target["view_error"] = None, f"{name} is not a tensor"
    print(json.dumps(out, indent=2))
    return EXIT_OK
