"""Careful reading of input files: one clear diagnostic per problem, never a traceback.

Profiler and IR files come from other machines (and sometimes from Windows), get
truncated by full disks and copied through tools that mangle encodings. Every
reader in the product goes through these helpers, which check, in order: the
path exists and is a regular file (not a directory, not a dangling or looping
symlink), it can be opened, it is not empty, it is text (no NUL bytes), and it
decodes as UTF-8. Inputs are only ever opened for reading.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from advisor_core.diagnostics import DiagnosticSink

_SNIFF_BYTES = 64 * 1024
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class FileProbe:
    """What was learnt about a file without reading it all."""

    path: Path
    size: int
    has_bom: bool


def probe_file(path: Path, sink: DiagnosticSink, *, what: str = "file") -> FileProbe | None:
    """Check that ``path`` is a readable, non-empty text file.

    Returns ``None`` after adding exactly one error diagnostic when it is not.
    ``what`` names the artifact in messages ("kernel table", "IR dump").
    """
    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            sink.error("symlink-loop", f"{what} is a symbolic link that points back to itself (loop)", path)
        elif exc.errno == errno.ENOENT:
            if path.is_symlink():
                sink.error("dangling-symlink", f"{what} is a symbolic link to a missing target", path)
            else:
                sink.error("missing-file", f"{what} does not exist", path)
        elif exc.errno == errno.EACCES:
            sink.error("unreadable", f"{what} cannot be read: permission denied", path)
        else:
            sink.error("unreadable", f"{what} cannot be read: {exc.strerror or exc}", path)
        return None
    if not path.is_file():
        sink.error("not-a-file", f"{what} is a directory or special file, not a regular file", path)
        return None
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        reason = "permission denied" if exc.errno == errno.EACCES else (exc.strerror or str(exc))
        sink.error("unreadable", f"{what} cannot be read: {reason}", path)
        return None
    if st.st_size == 0 or not head:
        sink.error("empty-file", f"{what} is empty (0 bytes)", path)
        return None
    has_bom = head.startswith(_UTF8_BOM)
    body = head[len(_UTF8_BOM):] if has_bom else head
    if b"\x00" in body:
        # UTF-16 files are full of NULs too; name that case, it is a common export mistake.
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            sink.error("wrong-encoding", f"{what} is UTF-16 encoded; expected UTF-8", path)
        else:
            sink.error("binary-file", f"{what} is binary (contains NUL bytes), not text", path)
        return None
    if not body.strip():
        sink.error("empty-file", f"{what} contains only whitespace", path)
        return None
    return FileProbe(path=path, size=st.st_size, has_bom=has_bom)


def _line_of_offset(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def decode_utf8(data: bytes, path: Path, sink: DiagnosticSink, *, what: str = "file") -> str:
    """Decode bytes as UTF-8; on bad bytes warn once (with the line) and replace them."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = _line_of_offset(data, exc.start)
        bad = data[exc.start : exc.start + 1].hex()
        sink.warning(
            "not-utf8",
            f"{what} is not valid UTF-8 (byte 0x{bad} at offset {exc.start}); "
            "undecodable bytes were replaced with U+FFFD",
            path,
            line=line,
        )
        return data.decode("utf-8", errors="replace")


def read_text(path: Path, sink: DiagnosticSink, *, what: str = "file") -> str | None:
    """Read a whole text file (see module docstring for the checks)."""
    if probe_file(path, sink, what=what) is None:
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        sink.error("unreadable", f"{what} cannot be read: {exc.strerror or exc}", path)
        return None
    return decode_utf8(data, path, sink, what=what)


def parse_json_text(
    text: str,
    path: Path,
    sink: DiagnosticSink,
    *,
    what: str = "JSON file",
    parse_float: Callable[[str], Any] | None = None,
) -> Any | None:
    """Parse JSON; a syntax error becomes one diagnostic with line and column."""
    try:
        return json.loads(text, parse_float=parse_float)
    except json.JSONDecodeError as exc:
        stripped_end = len(text.rstrip())
        # EOF inside a string or before the closing brackets: the file was cut short.
        if exc.pos >= stripped_end or exc.msg.startswith("Unterminated string"):
            msg = f"{what} is truncated: the JSON ends before it is complete ({exc.msg})"
            code = "truncated"
        else:
            msg = f"{what} is not valid JSON: {exc.msg}"
            code = "bad-json"
        sink.error(code, msg, path, line=exc.lineno, column=exc.colno)
        return None
    except RecursionError:
        sink.error("bad-json", f"{what} nests too deeply to parse", path)
        return None


def read_json(
    path: Path,
    sink: DiagnosticSink,
    *,
    what: str = "JSON file",
    parse_float: Callable[[str], Any] | None = None,
) -> Any | None:
    """Read and parse a JSON file; ``None`` (with a diagnostic) when it cannot be used."""
    text = read_text(path, sink, what=what)
    if text is None:
        return None
    return parse_json_text(text, path, sink, what=what, parse_float=parse_float)


def is_dir_safe(path: Path) -> bool:
    """``Path.is_dir`` that never raises (loops, permissions)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def list_dir(path: Path, sink: DiagnosticSink | None = None) -> list[Path]:
    """Sorted directory entries; an unreadable directory yields ``[]`` and a diagnostic."""
    try:
        return sorted(path.iterdir())
    except OSError as exc:
        if sink is not None:
            if exc.errno == errno.ELOOP:
                sink.error("symlink-loop", "directory is a symbolic link loop", path)
            else:
                sink.error("unreadable", f"directory cannot be listed: {exc.strerror or exc}", path)
        return []


def real_path(path: Path) -> str | None:
    """``os.path.realpath`` or ``None`` when the path loops."""
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return None
