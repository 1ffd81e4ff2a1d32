"""Reading a file for checking: size limit, binary files, encodings — one clear error each."""

from __future__ import annotations

import codecs
import io
import os
import tokenize
from pathlib import Path

from .model import FileError

MAX_BYTES = 10 * 1024 * 1024


def real_path(path: Path) -> Path:
    """``path.resolve()``, or its absolute path where links cannot be resolved (a symlink loop:
    reading the file then reports it)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))


def read_source(path: Path) -> tuple[str | None, FileError | None]:
    text, error, _encoding = read_encoded(path)
    return text, error


def read_encoded(path: Path) -> tuple[str | None, FileError | None, str]:
    """The text of a file, or why it cannot be checked, and the encoding to write it back in
    (``utf-8-sig`` when it starts with a byte order mark, which is then kept)."""
    name = str(path)
    encoding = "utf-8"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None, FileError(name, "no such file or folder"), encoding
    except OSError as exc:
        return None, FileError(name, f"cannot read: {exc.strerror or exc}"), encoding
    if size > MAX_BYTES:
        return (
            None,
            FileError(name, f"file too large to check ({size // 1024 // 1024} MiB > 10 MiB)"),
            encoding,
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, FileError(name, f"cannot read: {exc.strerror or exc}"), encoding
    text, error = decode(data, name)
    return text, error, source_encoding(data, name)


def source_encoding(data: bytes, name: str) -> str:
    """The encoding a file's bytes are in: its PEP 263 cookie (or BOM) for Python, UTF-8 for
    notebooks (``utf-8-sig`` when the file starts with a byte order mark)."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if name.endswith(".ipynb"):
        return "utf-8"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return "utf-8"
    return encoding


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
