"""Reading a file for checking: size limit, binary files, encodings — one clear error each."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from .model import FileError

MAX_BYTES = 10 * 1024 * 1024


def read_source(path: Path) -> tuple[str | None, FileError | None]:
    name = str(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None, FileError(name, "no such file or folder")
    except OSError as exc:
        return None, FileError(name, f"cannot read: {exc.strerror or exc}")
    if size > MAX_BYTES:
        return None, FileError(
            name, f"file too large to check ({size // 1024 // 1024} MiB > 10 MiB)"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, FileError(name, f"cannot read: {exc.strerror or exc}")
    return decode(data, name)


def decode(data: bytes, name: str) -> tuple[str | None, FileError | None]:
    if b"\x00" in data[:8192]:
        return None, FileError(name, "binary file (contains NUL bytes); not checked")
    if name.endswith(".ipynb"):
        encoding = "utf-8-sig"
    else:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:
            return None, FileError(name, f"cannot decode: {exc}")
    try:
        return data.decode(encoding), None
    except (UnicodeDecodeError, LookupError) as exc:
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
        row = data[: getattr(exc, "start", 0)].count(b"\n") + 1
        return None, FileError(name, f"cannot decode as {encoding}: {reason}", row)
