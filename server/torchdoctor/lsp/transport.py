"""The server's input over stdio, bounded: a message larger than the limit is read past (in
chunks, never held whole) and handed to pygls as a ``$/torchdoctor/rejected`` notification, which
:func:`rejected` reports; the server goes on with the next message. A header line is read at
most :data:`HEADER_LINE_LIMIT` bytes at a time."""

from __future__ import annotations

import json
import os
from typing import Any, BinaryIO

from lsprotocol import types

from .state import Doctor

#: Where a message over the limit is reported.
REJECTED = "$/torchdoctor/rejected"
#: Largest message body read (bytes); ``$TORCHDOCTOR_MAX_MESSAGE_BYTES`` overrides it. A 10 MB
#: notebook sent whole as JSON is well under it.
DEFAULT_LIMIT = 256 * 1024 * 1024
HEADER_LINE_LIMIT = 64 * 1024
_CHUNK = 1024 * 1024


def message_limit() -> int:
    given = os.environ.get("TORCHDOCTOR_MAX_MESSAGE_BYTES", "")
    return int(given) if given.isdigit() and int(given) > 0 else DEFAULT_LIMIT


class BoundedInput:
    """``stdin.buffer`` as pygls reads it (``readline``, ``read(n)``), with ``n`` bounded."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self.raw = raw
        self.limit = limit

    def readline(self) -> bytes:
        return self.raw.readline(HEADER_LINE_LIMIT)

    def read(self, n: int) -> bytes:
        if n <= self.limit:
            return self.raw.read(n)
        left = n
        while left > 0:
            chunk = self.raw.read(min(left, _CHUNK))
            if not chunk:
                return b""  # the input ended inside the message: pygls stops
            left -= len(chunk)
        notice = {"jsonrpc": "2.0", "method": REJECTED, "params": {"bytes": n, "limit": self.limit}}
        return json.dumps(notice).encode()


def rejected(doctor: Doctor, params: Any) -> None:
    """Tell the editor that a message was not read (it was larger than the limit)."""
    size = getattr(params, "bytes", None) or (params or {}).get("bytes", "?")
    limit = getattr(params, "limit", None) or (params or {}).get("limit", "?")
    message = (
        f"torchdoctor: a message of {size} bytes was rejected (the limit is {limit} bytes; "
        "set TORCHDOCTOR_MAX_MESSAGE_BYTES to change it)"
    )
    doctor.log("error", message)
    doctor.server.window_show_message(
        types.ShowMessageParams(type=types.MessageType.Error, message=message)
    )
